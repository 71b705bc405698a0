/* SPDX-License-Identifier: MIT
 *
 * The tool's two readers of outside input: the replay report's JSON (tools/json-read.c, on
 * jansson) and the build-id of a program file (tools/elf-buildid.c, on libelf). The report
 * comes from another process and the program file from anywhere, so each is checked on what it
 * must accept and on what it must refuse.
 */
#include "harness.h"
#include "../tools/tool.h"
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(json);
TestSuite(elf);

static int parse(tool_jdoc *d, const char *text, char *why, size_t cap)
{
    return tool_json_parse(d, text, strlen(text), why, cap);
}

Test(json, reads_a_report_with_every_kind_of_value)
{
    tool_jdoc d;
    char why[128];
    const char *text = "{\"status\": \"diverged\", \"divergences\": 3, \"seq\": 18446744073709551,"
                       " \"ok\": true, \"error\": null, \"ratio\": 1.0,"
                       " \"history\": [{\"kind\": \"enter\"}, {\"kind\": \"exit\"}],"
                       " \"message\": \"caf\\u00e9 \\ud83d\\ude00 tab\\t\"}";
    cr_assert_eq(parse(&d, text, why, sizeof why), 0, "%s", why);
    const tool_jvalue *root = tool_json_root(&d);
    cr_assert_eq(root->type, TOOL_J_OBJECT);
    uint64_t v;
    cr_assert_eq(tool_json_u64(tool_json_member(&d, root, "divergences"), &v), 0);
    cr_assert_eq(v, 3);
    cr_assert_eq(tool_json_u64(tool_json_member(&d, root, "seq"), &v), 0);
    cr_assert_eq(v, 18446744073709551u);
    /* a real is not an integer, even when it has no fraction */
    cr_assert_eq(tool_json_u64(tool_json_member(&d, root, "ratio"), &v), -1);
    cr_assert_eq(tool_json_member(&d, root, "ok")->type, TOOL_J_BOOL);
    cr_assert_eq(tool_json_member(&d, root, "ok")->boolean, 1);
    cr_assert_eq(tool_json_member(&d, root, "error")->type, TOOL_J_NULL);
    cr_assert_str_eq(tool_json_str(&d, root, "status", NULL), "diverged");
    size_t len;
    const char *msg = tool_json_str(&d, root, "message", &len);
    cr_assert_str_eq(msg, "caf\xc3\xa9 \xf0\x9f\x98\x80 tab\t", "escapes and a surrogate pair");
    cr_assert_eq(len, strlen(msg));
    /* the array's elements in order */
    const tool_jvalue *h = tool_json_member(&d, root, "history");
    const tool_jvalue *e0 = tool_json_first(&d, h), *e1 = tool_json_next(&d, e0);
    cr_assert_str_eq(tool_json_str(&d, e0, "kind", NULL), "enter");
    cr_assert_str_eq(tool_json_str(&d, e1, "kind", NULL), "exit");
    cr_assert_null(tool_json_next(&d, e1));
    cr_assert_null(tool_json_member(&d, root, "missing"));
    tool_json_free(&d);
}

Test(json, keeps_a_nul_inside_a_string_with_its_length)
{
    tool_jdoc d;
    char why[128];
    cr_assert_eq(parse(&d, "{\"s\": \"a\\u0000b\"}", why, sizeof why), 0, "%s", why);
    size_t len;
    const char *s = tool_json_str(&d, tool_json_root(&d), "s", &len);
    cr_assert_eq(len, 3);
    cr_assert_eq(memcmp(s, "a\0b", 4), 0);
    tool_json_free(&d);
}

Test(json, refuses_what_is_not_one_whole_json_value)
{
    static const char *const bad[] = {
        "",                                /* nothing */
        "{\"a\": 1} x",                    /* text after the value */
        "{\"a\": 1}{}",                    /* two values */
        "{\"a\": 1,}",                     /* a trailing comma */
        "{'a': 1}",                        /* single quotes */
        "{\"a\": \"tab\there\"}",          /* a control character in a string */
        "{\"a\": \"\xff\"}",               /* not UTF-8: the runtime escapes such bytes */
        "{\"a\": 01}",                     /* a leading zero */
        "{\"a\": tru}",                    /* a bad literal */
        "{\"a\": \"unterminated}",         /* the report cut short */
        "{\"a\": [1, 2",                   /* the same, in an array */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tool_jdoc d;
        char why[128] = "";
        cr_assert_eq(parse(&d, bad[i], why, sizeof why), -1, "accepted: %s", bad[i]);
        cr_assert(why[0] != '\0', "no reason given for: %s", bad[i]);
        tool_json_free(&d);
    }
}

Test(json, refuses_nesting_deeper_than_64_levels)
{
    char text[512];
    tool_jdoc d;
    char why[128];
    for (int depth = 64; depth <= 66; depth++) {
        size_t n = 0;
        for (int i = 0; i < depth; i++)
            text[n++] = '[';
        for (int i = 0; i < depth; i++)
            text[n++] = ']';
        text[n] = '\0';
        /* D brackets nest D arrays, the outermost at level 0: levels up to 64 are read */
        int rc = parse(&d, text, why, sizeof why);
        cr_assert_eq(rc, depth <= 65 ? 0 : -1, "depth %d: %s", depth, why);
        tool_json_free(&d);
    }
}

Test(elf, finds_the_build_id_the_running_program_has)
{
    tool_elf_info info;
    uint8_t self[64];
    size_t n = tt_build_id_self(self, sizeof self);
    cr_assert(n > 0, "this test is built with a build-id");
    cr_assert_eq(tool_elf_read("/proc/self/exe", &info), 0);
    cr_assert(info.is_elf && info.is_elf64 && info.has_interp);
    cr_assert_eq(info.build_id_len, n, "%s", info.problem);
    cr_assert_eq(memcmp(info.build_id, self, n), 0);
}

static char *temp_file(const void *data, size_t len)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tt-elf-test-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
    return path;
}

Test(elf, says_what_a_file_that_is_not_an_elf_program_is)
{
    tool_elf_info info;
    char *p = temp_file("#!/bin/sh -e\necho hi\n", 21);
    cr_assert_eq(tool_elf_read(p, &info), 0);
    cr_assert(info.is_script && !info.is_elf);
    cr_assert_str_eq(info.interp, "/bin/sh");
    cr_assert_str_eq(info.interp_arg, "-e");
    unlink(p);

    p = temp_file("plain text", 10);
    cr_assert_eq(tool_elf_read(p, &info), 0);
    cr_assert(!info.is_elf && strstr(info.problem, "not an ELF") != NULL, "%s", info.problem);
    unlink(p);

    cr_assert_eq(tool_elf_read("/nonexistent/program", &info), ENOENT);
}

Test(elf, survives_every_truncation_of_a_real_program)
{
    /* the test program itself, cut at every 97th byte of its first 64 KiB and at its halves:
     * each read gives a verdict, and a build-id only when the note is there whole */
    int fd = open("/proc/self/exe", O_RDONLY);
    cr_assert(fd >= 0);
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = malloc(cap);
    ssize_t r;
    while (len < cap && (r = read(fd, buf + len, cap - len)) > 0)
        len += (size_t)r;
    close(fd);
    tool_elf_info full;
    cr_assert_eq(tool_elf_read("/proc/self/exe", &full), 0);
    for (size_t cut = 0; cut < len && cut < 65536; cut += 97) {
        tool_elf_info info;
        char *p = temp_file(buf, cut);
        cr_assert_eq(tool_elf_read(p, &info), 0, "cut at %zu", cut);
        if (info.build_id_len != 0)
            cr_assert(info.build_id_len == full.build_id_len &&
                          memcmp(info.build_id, full.build_id, full.build_id_len) == 0,
                      "cut at %zu: a build-id that is not the program's", cut);
        else
            cr_assert(info.problem[0] != '\0', "cut at %zu: no build-id and no reason", cut);
        unlink(p);
    }
    free(buf);
}
