/* SPDX-License-Identifier: MIT */
/* What a trace's MAC covers, and the one write that stores it.
 *
 * `tinytrace record` signs the traces it makes with its user's key, so that `tinytrace replay`
 * runs a recorded command line only from a trace this user recorded on this machine. The MAC
 * itself (HMAC-SHA256) is computed by the tool, which holds the key: the library and the
 * traced program never see it. The library says which bytes count and stores the result:
 *   - the manifest's 512 bytes with the MAC field (bytes 400-431) and the checksum (504-511)
 *     taken as zero: every count, offset, flag and the caller string;
 *   - the object table chunk, header and body: the recorded command line, working directory
 *     and environment summary are META objects there, with every other name.
 * The event data is not covered: it is what the program reads, not what runs. A trace whose
 * events were edited replays other inputs into the recorded command, which the user chose
 * to run when it was recorded.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"

int tt_trace_auth_input(const tt_source *src, tt_auth_visit_fn fn, void *ctx,
                        tt_error_info *err)
{
    uint8_t m[TT_MANIFEST_SIZE];
    tt_manifest man;
    int rc = tt_src_read(src, 0, m, sizeof m, "the manifest", err);
    if (rc != TT_OK)
        return rc;
    if ((rc = tt_manifest_decode(m, src->size, &man, err)) != TT_OK)
        return rc;
    memset(m + TT_M_AUTH, 0, TT_AUTH_LEN);
    memset(m + TT_M_CHECKSUM, 0, 8);
    if (fn(ctx, m, sizeof m) != 0)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "the MAC's visitor stopped");
    /* the object table, in pieces of a bounded buffer (its size is the file's to say) */
    uint8_t buf[16384];
    uint64_t off = man.objects_offset, left = man.objects_length;
    if (off > src->size || left > src->size - off)
        return tt_fail(err, TT_E_CORRUPT, 0, TT_M_OBJ_OFF, "%s: the object table at %" PRIu64
                       " (%" PRIu64 " bytes) is not inside the file", src->name, off, left);
    while (left) {
        size_t n = left < sizeof buf ? (size_t)left : sizeof buf;
        if ((rc = tt_src_read(src, off, buf, n, "the object table", err)) != TT_OK)
            return rc;
        if (fn(ctx, buf, n) != 0)
            return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "the MAC's visitor stopped");
        off += n;
        left -= n;
    }
    return TT_OK;
}

int tt_trace_auth_set(const char *path, const uint8_t mac[TT_AUTH_LEN], tt_error_info *err)
{
    return tt_trace_auth_store(path, mac, 1, err);
}

int tt_trace_auth_store(const char *path, const uint8_t mac[TT_AUTH_LEN], int sync,
                        tt_error_info *err)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        return tt_fail(err, TT_E_IO, e, UINT64_MAX, "%s: %s", path, strerror(e));
    }
    struct stat st;
    uint8_t m[TT_MANIFEST_SIZE];
    tt_manifest man;
    int rc = TT_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = tt_fail(err, TT_E_IO, errno, UINT64_MAX, "%s: not a regular file", path);
    } else if (pread(fd, m, sizeof m, 0) != (ssize_t)sizeof m) {
        rc = tt_fail(err, TT_E_TRUNCATED, errno, 0, "%s: cannot read its manifest", path);
    } else if ((rc = tt_manifest_decode(m, (uint64_t)st.st_size, &man, err)) == TT_OK) {
        if (man.version < 2) {
            rc = tt_fail(err, TT_E_VERSION, 0, TT_M_VERSION, "%s: a version %u file has no room "
                         "for a MAC", path, man.version);
        } else {
            memcpy(m + TT_M_AUTH, mac, TT_AUTH_LEN);
            tt_put64(m + TT_M_CHECKSUM, tt_hash64(m, TT_M_CHECKSUM, 0));
            if (pwrite(fd, m, sizeof m, 0) != (ssize_t)sizeof m || (sync && fdatasync(fd) != 0))
                rc = tt_fail(err, TT_E_IO, errno, 0, "%s: cannot write its manifest: %s", path,
                             strerror(errno));
        }
    }
    close(fd);
    return rc;
}
