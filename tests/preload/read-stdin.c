/* SPDX-License-Identifier: MIT */
/* preload-read-stdin: numbers the lines of its stdin, read with stdio (fgets), and counts them.
 * Under the preload library stdio's reads reach the interposed read: a replay fed other input
 * prints what the recorded input made it print. */
#include <stdio.h>
#include <string.h>

int main(void)
{
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        printf("line %d: %s\n", ++n, line);
    }
    printf("%d lines\n", n);
    return 0;
}
