/* SPDX-License-Identifier: MIT */
/* mkmeta [--incomplete] FILE [NAME...] — records a trace whose META objects are the NAMEs
 * ("argc=2", "argv[0]=./prog", "cwd=/tmp", or damaged ones), so that the test can check how
 * `tinytrace replay` reads the recorded command line without depending on the runtime.
 *
 * --incomplete: every write but the manifest's fails with ENOSPC, so the manifest marks the file
 * incomplete (replay must refuse it with exit 7).
 *
 * Exit status 0 on success (with --incomplete: when close reported the write error), else 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tinytrace/tinytrace.h>

static int fd = -1;

static int failing_write(void *ctx, uint64_t offset, const void *data, size_t len)
{
    (void)ctx;
    if (offset != 0)
        return ENOSPC;
    return pwrite(fd, data, len, (off_t)offset) == (ssize_t)len ? 0 : errno;
}

int main(int argc, char **argv)
{
    int incomplete = 0, first = 1, rc;
    tt_config cfg;
    tt_error_info err;
    tt_session *s;
    uint32_t id;

    if (argc > 1 && strcmp(argv[1], "--incomplete") == 0) {
        incomplete = 1;
        first = 2;
    }
    if (argc <= first) {
        fprintf(stderr, "usage: mkmeta [--incomplete] FILE [NAME...]\n");
        return 1;
    }
    memset(&err, 0, sizeof err);
    tt_config_init(&cfg);
    if (tt_config_set(&cfg, TT_PARAM_MODE, TT_MODE_RECORD, &err) != TT_OK ||
        tt_config_set_str(&cfg, TT_PARAM_FILE, argv[first], &err) != TT_OK) {
        fprintf(stderr, "mkmeta: %s\n", err.message);
        return 1;
    }
    if (incomplete) {
        fd = open(argv[first], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            perror(argv[first]);
            return 1;
        }
        tt_config_set_callback_sink(&cfg, failing_write, NULL);
    }
    if (tt_session_open(&cfg, &s, &err) != TT_OK) {
        fprintf(stderr, "mkmeta: %s\n", err.message);
        return 1;
    }
    for (int i = first + 1; i < argc; i++)
        if (tt_intern(s, TT_OBJ_META, argv[i], &id) != TT_OK) {
            fprintf(stderr, "mkmeta: cannot intern '%s'\n", argv[i]);
            return 1;
        }
    tt_safepoint(s, 0, 0);
    rc = tt_session_close(s, &err);
    if (fd >= 0)
        close(fd);
    if (incomplete)
        return rc == TT_E_IO ? 0 : 1;
    if (rc != TT_OK) {
        fprintf(stderr, "mkmeta: %s\n", err.message);
        return 1;
    }
    return 0;
}
