/* SPDX-License-Identifier: MIT */
/* prog-bigrand N STATUS — reads N times 4 KiB of random bytes (each read is an io event of
 * 4 KiB under `tinytrace record`), prints how many reads it made and a digest of the bytes, and
 * exits with STATUS: a program whose trace outgrows a small disk, and whose own exit status the
 * test can tell from the tool's codes. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

int main(int argc, char **argv)
{
    static unsigned char buf[4096];
    if (argc != 3) {
        fprintf(stderr, "usage: prog-bigrand N STATUS\n");
        return 64;
    }
    long n = atol(argv[1]);
    unsigned long long digest = 0;
    for (long i = 0; i < n; i++) {
        size_t got = 0;
        while (got < sizeof buf) {
            ssize_t k = getrandom(buf + got, sizeof buf - got, 0);
            if (k <= 0)
                return 65;
            got += (size_t)k;
        }
        for (size_t j = 0; j < sizeof buf; j += 4096)
            digest = digest * 31 + buf[j];
    }
    printf("reads=%ld digest=%llx\n", n, digest);
    return atoi(argv[2]);
}
