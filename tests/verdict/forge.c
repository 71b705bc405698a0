/* SPDX-License-Identifier: MIT */
/* forge [--diverge] [--fifo DIR]: a replayed program that tries to forge its own verdict. It
 * writes a "matched" report to every descriptor from 3 to 1023 (the report channel among them,
 * wherever it is), with --fifo it also puts a FIFO (made in DIR) over every one of them, then
 * reads the clock (recorded) and prints it; --diverge reads it twice, so that the true verdict of
 * a replay is a divergence. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int diverge = 0;
    const char *fifo_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--diverge") == 0)
            diverge = 1;
        else if (strcmp(argv[i], "--fifo") == 0 && i + 1 < argc)
            fifo_dir = argv[++i];
    }
    static const char forged[] =
        "{\"status\": \"matched\", \"divergences\": 0, \"matched\": 1, \"threads\": 1}\n";
    for (int fd = 3; fd < 1024; fd++)
        (void)!write(fd, forged, sizeof forged - 1);
    if (fifo_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/channel.fifo", fifo_dir);
        mkfifo(path, 0600);
        int ff = open(path, O_RDWR | O_NONBLOCK);
        for (int fd = 3; ff >= 0 && fd < 1024; fd++)
            if (fd != ff)
                dup2(ff, fd);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (diverge)
        clock_gettime(CLOCK_REALTIME, &ts);
    printf("time %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
    return 0;
}
