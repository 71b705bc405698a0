/* Prints what a process learns of itself, section by section (the arguments):
 *   ids    its pid, ppid and tids (through libc and through syscall()), and whether signals
 *          sent to those ids reach it, its parent and its second thread.
 * Under `tinytrace replay` every line must be the recorded one; a live run prints others. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int with_ids = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "ids")) {
            ids();
            with_ids = 1;
        } else {
            fprintf(stderr, "probe-identity: unknown section %s\n", argv[i]);
            return 2;
        }
    }
    if (with_ids)
        ids_end();
    return 0;
}
