/* Prints what a process learns of itself, section by section (the arguments: ids, usage, proc):
 *   ids    its pid, ppid and tids (through libc and through syscall()), the CPU it runs on, and
 *          whether signals sent to those ids reach it, its parent and its second thread;
 *   usage  getrusage, times, sysinfo, getloadavg and clock_getres;
 *   proc   pseudo-files read by read, pread, stdio and getline, and /proc/<its ids>/ paths.
 * Under `tinytrace replay` every line must be the recorded one; a live run prints others. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got_self;
static volatile sig_atomic_t got_thread;
static pthread_t worker_thread;

static sem_t tid_known, worker_go, worker_done;
static pid_t worker_tid;

static void on_usr1(int sig)
{
    (void)sig;
    /* no call tinytrace sees: the handler runs where the signal lands */
    if (pthread_equal(pthread_self(), worker_thread))
        got_thread = 1;
    else
        got_self = 1;
}

static const char *res(int rc)
{
    static char buf[64];
    if (rc == 0)
        return "0";
    snprintf(buf, sizeof buf, "-1 (%s)", strerror(errno));
    return buf;
}

/* The second thread: says its tid, then waits for SIGUSR1 (blocked until sigsuspend). */
static void *worker(void *arg)
{
    (void)arg;
    worker_tid = gettid();
    sem_post(&tid_known);
    sigset_t none;
    sigemptyset(&none);
    while (!got_thread)
        sigsuspend(&none);
    sem_wait(&worker_go); /* stay alive until the main thread has looked at /proc/<tid> */
    sem_post(&worker_done);
    return NULL;
}

static void ids(void)
{
    pid_t pid = getpid(), ppid = getppid(), tid = gettid();
    printf("pid %d ppid %d tid %d\n", (int)pid, (int)ppid, (int)tid);
    printf("syscall: pid %ld ppid %ld tid %ld\n", syscall(SYS_getpid), syscall(SYS_getppid),
           syscall(SYS_gettid));
    printf("main thread's tid %s the pid\n", tid == pid ? "is" : "is not");
    unsigned cpu = 0, node = 0;
    int c = sched_getcpu();
    int g = getcpu(&cpu, &node);
    printf("sched_getcpu %d getcpu %d cpu %u node %u\n", c, g, cpu, node);

    /* signals to the ids it learned */
    printf("kill(pid, 0) %s\n", res(kill(pid, 0)));
    printf("kill(ppid, 0) %s\n", res(kill(ppid, 0)));
    printf("tgkill(pid, tid, 0) %s\n", res(tgkill(pid, tid, 0)));
    printf("syscall(SYS_kill, pid, 0) %s\n", res((int)syscall(SYS_kill, pid, 0)));
    printf("syscall(SYS_tkill, tid, 0) %s\n", res((int)syscall(SYS_tkill, tid, 0)));
    signal(SIGUSR1, on_usr1);
    int rc = kill(pid, SIGUSR1);
    printf("kill(pid, SIGUSR1) %s, delivered %d\n", res(rc), (int)got_self);

    /* a second thread: its tid is not the pid, and tgkill of it reaches it */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    sem_init(&tid_known, 0, 0);
    sem_init(&worker_go, 0, 0);
    sem_init(&worker_done, 0, 0);
    pthread_create(&worker_thread, NULL, worker, NULL);
    sem_wait(&tid_known);
    printf("worker tid %d, %s the pid\n", (int)worker_tid, worker_tid == pid ? "is" : "is not");
    printf("syscall(SYS_tkill, worker, 0) %s\n", res((int)syscall(SYS_tkill, worker_tid, 0)));
    rc = tgkill(pid, worker_tid, SIGUSR1);
    printf("tgkill(pid, worker, SIGUSR1) %s\n", res(rc));
}

static void ids_end(void)
{
    sem_post(&worker_go);
    sem_wait(&worker_done);
    pthread_join(worker_thread, NULL);
    printf("the worker got SIGUSR1: %d\n", (int)got_thread);
}

static void usage(void)
{
    struct rusage ru;
    int rc = getrusage(RUSAGE_SELF, &ru);
    printf("getrusage %d: utime %ld.%06ld stime %ld.%06ld maxrss %ld minflt %ld nvcsw %ld\n", rc,
           (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec, (long)ru.ru_stime.tv_sec,
           (long)ru.ru_stime.tv_usec, ru.ru_maxrss, ru.ru_minflt, ru.ru_nvcsw);
    struct tms t;
    clock_t ticks = times(&t);
    printf("times %ld: utime %ld stime %ld\n", (long)ticks, (long)t.tms_utime, (long)t.tms_stime);
    printf("times(NULL) %ld\n", (long)times(NULL));
    struct sysinfo si;
    rc = sysinfo(&si);
    printf("sysinfo %d: uptime %ld freeram %lu procs %u loads %lu\n", rc, si.uptime, si.freeram,
           (unsigned)si.procs, si.loads[0]);
    double avg[3] = { 0 };
    int n = getloadavg(avg, 3);
    printf("getloadavg %d: %.17g %.17g %.17g\n", n, avg[0], avg[1], avg[2]);
    static const struct {
        clockid_t id;
        const char *name;
    } clocks[] = { { CLOCK_REALTIME, "REALTIME" }, { CLOCK_MONOTONIC, "MONOTONIC" },
                   { CLOCK_PROCESS_CPUTIME_ID, "PROCESS_CPUTIME_ID" },
                   { CLOCK_MONOTONIC_COARSE, "MONOTONIC_COARSE" } };
    for (size_t i = 0; i < sizeof clocks / sizeof clocks[0]; i++) {
        struct timespec r = { 0, 0 };
        rc = clock_getres(clocks[i].id, &r);
        printf("clock_getres(%s) %d: %ld.%09ld\n", clocks[i].name, rc, (long)r.tv_sec,
               r.tv_nsec);
    }
    printf("clock_getres(REALTIME, NULL) %d\n", clock_getres(CLOCK_REALTIME, NULL));
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int with_ids = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "ids")) {
            ids();
            with_ids = 1;
        } else if (!strcmp(argv[i], "usage")) {
            usage();
        } else {
            fprintf(stderr, "probe-identity: unknown section %s\n", argv[i]);
            return 2;
        }
    }
    if (with_ids)
        ids_end();
    return 0;
}
