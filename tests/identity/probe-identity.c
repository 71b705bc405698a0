/* SPDX-License-Identifier: MIT */
/* Prints what a process learns of itself, section by section (the arguments: ids, usage, proc):
 *   ids    its pid, ppid and tids (through libc and through syscall()), the CPU it runs on, and
 *          whether signals sent to those ids reach it, its parent and its second thread;
 *   usage  getrusage, times, sysinfo, getloadavg and clock_getres;
 *   proc   pseudo-files read by read, pread, stdio and getline, and /proc/<its ids>/ paths.
 * Under `tinytrace replay` every line must be the recorded one; a live run prints others. */
#include <errno.h>
#include <fcntl.h>
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

static void first_line(const char *what, const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512] = "";
    if (!f) {
        printf("%s: fopen: %s\n", what, strerror(errno));
        return;
    }
    if (!fgets(line, sizeof line, f))
        strcpy(line, "(nothing)\n");
    printf("%s: %s", what, line);
    fclose(f);
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

/* Reads @path with open and one read, prints the lines that start with one of @keys (all of
 * them when @keys is NULL). */
static void read_lines(const char *what, const char *path, const char *const *keys)
{
    char buf[8192];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        printf("%s: open: %s\n", what, strerror(errno));
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) {
        printf("%s: read: %s\n", what, strerror(errno));
        return;
    }
    buf[n] = '\0';
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        for (const char *const *k = keys; !keys || *k; k++) {
            if (!keys || !strncmp(line, *k, strlen(*k))) {
                printf("%s: %s\n", what, line);
                break;
            }
        }
}

static void proc(void)
{
    pid_t pid = getpid(), tid = gettid();
    char path[128], buf[4096];

    first_line("/proc/self/stat by fgets", "/proc/self/stat");
    static const char *const status_keys[] = { "Pid:", "PPid:", "Tgid:", "VmRSS:",
                                               "voluntary_ctxt_switches:", NULL };
    read_lines("/proc/self/status by read", "/proc/self/status", status_keys);

    FILE *f = fopen("/proc/uptime", "re");
    double up = 0, idle = 0;
    int got = f ? fscanf(f, "%lf %lf", &up, &idle) : -1;
    printf("/proc/uptime by fscanf: %d %.2f %.2f, ftell %ld\n", got, up, idle, f ? ftell(f) : -1L);
    if (f)
        fclose(f);

    int fd = open("/proc/loadavg", O_RDONLY);
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    printf("/proc/loadavg by pread: %zd %s", n, buf);
    n = pread(fd, buf, 8, 5);
    buf[n > 0 ? n : 0] = '\0';
    printf("/proc/loadavg by pread at 5: %zd [%s]\n", n, buf);
    close(fd);

    f = fopen("/proc/meminfo", "r");
    char *line = NULL;
    size_t cap = 0;
    for (int i = 0; f && i < 3 && getline(&line, &cap, f) > 0; i++)
        printf("/proc/meminfo by getline: %s", line);
    free(line);
    if (f)
        fclose(f);

    f = fopen("/proc/stat", "r");
    size_t r = f ? fread(buf, 1, 64, f) : 0;
    printf("/proc/stat by fread: %zu [%.*s]\n", r, (int)r, buf);
    if (f)
        fclose(f);

    fd = open("/proc/self/stat", O_RDONLY);
    f = fd >= 0 ? fdopen(fd, "r") : NULL;
    printf("/proc/self/stat by fdopen and fgets: %s", f && fgets(buf, sizeof buf, f) ? buf : "-\n");
    if (f)
        fclose(f);

    /* seeks: in a replay the fd is never read, the offsets are the recorded ones */
    fd = open("/proc/uptime", O_RDONLY);
    n = read(fd, buf, sizeof buf);
    long cur = (long)lseek(fd, 0, SEEK_CUR), set = (long)lseek(fd, 0, SEEK_SET);
    ssize_t again = read(fd, buf, sizeof buf);
    printf("/proc/uptime read %zd, SEEK_CUR %ld, SEEK_SET %ld, read again %zd\n", n, cur, set,
           again);
    close(fd);

    /* relative to a directory fd of /proc */
    int dir = open("/proc/self", O_RDONLY | O_DIRECTORY);
    fd = openat(dir, "stat", O_RDONLY);
    n = read(fd, buf, 40);
    printf("openat(/proc/self, stat): %.*s\n", (int)(n > 0 ? n : 0), buf);
    close(fd);
    close(dir);

    /* a file of /sys that changes, where there is one */
    static const char *const sys_files[] = { "/sys/fs/cgroup/memory.current",
                                             "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                                             "/sys/kernel/mm/transparent_hugepage/enabled" };
    for (size_t i = 0; i < sizeof sys_files / sizeof sys_files[0]; i++)
        if (access(sys_files[i], R_OK) == 0) {
            first_line(sys_files[i], sys_files[i]);
            break;
        }

    /* /proc/<the ids it learned>/: the live process's and threads' files */
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    read_lines("/proc/<pid>/stat", path, NULL);
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    read_lines("/proc/<pid>/task/<tid>/stat", path, NULL);
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    n = readlink(path, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    printf("readlink(/proc/<pid>/exe): %s\n", n > 0 ? strrchr(buf, '/') + 1 : strerror(errno));
    snprintf(path, sizeof path, "/proc/%d/status", (int)getppid());
    static const char *const name_key[] = { "Name:", NULL };
    read_lines("/proc/<ppid>/status", path, name_key);
    if (worker_tid) {
        snprintf(path, sizeof path, "/proc/%d/comm", (int)worker_tid);
        fd = open(path, O_WRONLY);
        ssize_t w = fd >= 0 ? write(fd, "renamed", 7) : -1;
        if (fd >= 0)
            close(fd);
        char name[32] = "";
        pthread_getname_np(worker_thread, name, sizeof name); /* glibc reads it live */
        printf("the worker's comm written through /proc/<tid>: %zd, its name now %s\n", w,
               name);
        snprintf(path, sizeof path, "/proc/%d/stat", (int)worker_tid);
        read_lines("/proc/<worker tid>/stat", path, NULL);
    }
}

/* /proc/<pid>/stat of a process that is gone when the replay runs: a stand-in opens instead. */
static void gone(const char *pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    read_lines("/proc/<gone pid>/stat", path, NULL);
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
        } else if (!strcmp(argv[i], "proc")) {
            proc();
        } else if (!strcmp(argv[i], "gone") && i + 1 < argc) {
            gone(argv[++i]);
        } else {
            fprintf(stderr, "probe-identity: unknown section %s\n", argv[i]);
            return 2;
        }
    }
    if (with_ids)
        ids_end();
    return 0;
}
