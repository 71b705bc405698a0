/* SPDX-License-Identifier: MIT */
/* The user's key, and the MAC that tells this user's traces from anyone else's.
 *
 * `tinytrace replay` runs the command line a trace names. A trace is data from elsewhere until
 * proven otherwise: edited and re-checksummed, it verifies clean and names any command. So
 * `tinytrace record` signs each trace it makes: HMAC-SHA256, with a key of this user's, over the
 * bytes the library says a MAC covers (tt_trace_auth_input: the manifest and the object table,
 * where the command line, the working directory and the environment summary are), stored in the
 * manifest (tt_trace_auth_store). `replay` runs a recorded command only when the MAC is this key's.
 *
 * The key is 32 random bytes in $XDG_DATA_HOME/tinytrace/key (~/.local/share/tinytrace/key),
 * made at first use with mode 0600 in a directory of mode 0700. A key file that someone else
 * owns, or that others may read or write, is not used: a trace signed with it would prove
 * nothing. nettle (Debian's nettle-dev) does the HMAC; only the tool links it.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#define KEY_LEN TOOL_KEY_LEN

/* $XDG_DATA_HOME/tinytrace (or ~/.local/share/tinytrace) into @dir. */
static int key_dir(char *dir, size_t cap)
{
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int n;
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(dir, cap, "%s/tinytrace", xdg);
    else if (home != NULL && home[0] == '/')
        n = snprintf(dir, cap, "%s/.local/share/tinytrace", home);
    else
        return ENOENT;
    return n < 0 || (size_t)n >= cap ? ENAMETOOLONG : 0;
}

/* mkdir -p of @path, the last component with @mode. */
static int make_dirs(char *path, mode_t mode)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int r = mkdir(path, 0755);
        *p = '/';
        if (r != 0 && errno != EEXIST)
            return errno;
    }
    if (mkdir(path, mode) != 0 && errno != EEXIST)
        return errno;
    return 0;
}

/* Reads the key, or makes it when @create and there is none. 0, or an errno with @why set. */
static int key_load(uint8_t key[KEY_LEN], int create, char *why, size_t cap)
{
    char dir[PATH_MAX], path[PATH_MAX + 8];
    int e = key_dir(dir, sizeof dir);
    if (e != 0) {
        snprintf(why, cap, "no key: neither XDG_DATA_HOME nor HOME is an absolute path");
        return e;
    }
    snprintf(path, sizeof path, "%s/key", dir);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        if ((e = make_dirs(dir, 0700)) != 0) {
            snprintf(why, cap, "cannot make %s: %s", dir, strerror(e));
            return e;
        }
        uint8_t fresh[KEY_LEN];
        if (getrandom(fresh, sizeof fresh, 0) != (ssize_t)sizeof fresh) {
            snprintf(why, cap, "no random bytes for a key: %s", strerror(errno));
            return EIO;
        }
        char tmp[PATH_MAX + 32];
        snprintf(tmp, sizeof tmp, "%s/key.%ld.new", dir, (long)getpid());
        int w = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (w < 0 || write(w, fresh, sizeof fresh) != (ssize_t)sizeof fresh || fsync(w) != 0) {
            e = errno;
            if (w >= 0)
                close(w);
            unlink(tmp);
            snprintf(why, cap, "cannot write a key at %s: %s", tmp, strerror(e));
            return e;
        }
        close(w);
        /* two first uses at once: the first link wins, the other reads it */
        if (link(tmp, path) != 0 && errno != EEXIST) {
            e = errno;
            unlink(tmp);
            snprintf(why, cap, "cannot make the key %s: %s", path, strerror(e));
            return e;
        }
        unlink(tmp);
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
        e = errno;
        snprintf(why, cap, e == ENOENT ? "this user has no key (%s): no trace was signed here"
                                       : "cannot read the key %s: %s", path, strerror(e));
        return e;
    }
    struct stat st;
    e = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 077) != 0 || st.st_size != KEY_LEN) {
        snprintf(why, cap, "the key %s is not a %d-byte file of this user's that only it can "
                 "read: not used", path, KEY_LEN);
        e = EPERM;
    } else if (pread(fd, key, KEY_LEN, 0) != KEY_LEN) {
        snprintf(why, cap, "cannot read the key %s", path);
        e = EIO;
    }
    close(fd);
    return e;
}

static int mac_visit(void *ctx, const void *data, size_t len)
{
    hmac_sha256_update(ctx, len, data);
    return 0;
}

/* The MAC of the trace in @src under @key. */
static int mac_of(const tt_source *src, const uint8_t key[KEY_LEN], uint8_t mac[TT_AUTH_LEN],
                  tt_error_info *err)
{
    struct hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, KEY_LEN, key);
    int rc = tt_trace_auth_input(src, mac_visit, &ctx, err);
    if (rc == TT_OK)
        hmac_sha256_digest(&ctx, TT_AUTH_LEN, mac);
    return rc;
}

int tool_signer_open(tool_signer *sg)
{
    sg->ok = key_load(sg->key, 1, sg->why, sizeof sg->why) == 0;
    return sg->ok ? TOOL_EXIT_OK : TOOL_EXIT_SYSTEM;
}

int tool_signer_sign(tool_signer *sg, const char *path)
{
    uint8_t mac[TT_AUTH_LEN];
    tt_error_info err;
    tt_source src;
    if (!sg->ok)
        return TOOL_EXIT_SYSTEM;
    tool_error_info_init(&err);
    int rc = tt_source_file(&src, path, &err);
    if (rc == TT_OK) {
        rc = mac_of(&src, sg->key, mac, &err);
        tt_source_close(&src);
    }
    if (rc == TT_OK)
        rc = tt_trace_auth_store(path, mac, 0, &err);
    if (rc != TT_OK)
        return tool_report(path, "signing the trace", rc, &err);
    return TOOL_EXIT_OK;
}

void tool_signer_close(tool_signer *sg)
{
    nettle_memxor(sg->key, sg->key, KEY_LEN); /* the key does not outlive its use */
    sg->ok = false;
}

void tool_signer_warn(const tool_signer *sg, size_t n)
{
    tool_error("warning: %s not signed, so only `replay -- PROG` or `replay --trust` will run "
               "%s: %s", n == 1 ? "the trace is" : "the traces are",
               n == 1 ? "its command" : "their commands", sg->why);
}

int tool_auth_sign(const char *path)
{
    tool_signer sg;
    if (tool_signer_open(&sg) != TOOL_EXIT_OK) {
        tool_signer_warn(&sg, 1);
        return TOOL_EXIT_SYSTEM;
    }
    int rc = tool_signer_sign(&sg, path);
    tool_signer_close(&sg);
    return rc;
}

int tool_auth_check(const tt_source *src, const tt_manifest *m, char *why, size_t cap)
{
    static const uint8_t none[TT_AUTH_LEN];
    uint8_t key[KEY_LEN], mac[TT_AUTH_LEN];
    tt_error_info err;
    tool_error_info_init(&err);
    if (memcmp(m->auth, none, TT_AUTH_LEN) == 0) {
        snprintf(why, cap, "it carries no signature (it was not recorded by `tinytrace record`, "
                 "or by a version that did not sign)");
        return 0;
    }
    if (key_load(key, 0, why, cap) != 0)
        return 0;
    int rc = mac_of(src, key, mac, &err);
    nettle_memxor(key, key, KEY_LEN);
    if (rc != TT_OK) {
        snprintf(why, cap, "its signed part cannot be read: %s", err.message);
        return 0;
    }
    if (!memeql_sec(mac, m->auth, TT_AUTH_LEN)) {
        snprintf(why, cap, "its signature is not this user's key's: it was recorded by another "
                 "user or on another machine, or edited since");
        return 0;
    }
    return 1;
}
