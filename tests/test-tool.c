/* SPDX-License-Identifier: MIT */
/* The tool's number formatting against the slow, obviously right versions: tool_ns_conv (ticks
 * to nanoseconds through a reciprocal) against tool_ticks_to_ns's 128-bit division, and
 * tool_fmt_u64 against printf. A dump prints both for every event, so an error here would be in
 * every line of its output. */
#include "harness.h"
#include "../tools/debuginfo.h"
#include "../tools/tool.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tool);

/* xorshift64*: each case gets its own value */
static uint64_t next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717u;
}

static void check_rate(uint64_t tps, uint64_t *seed)
{
    tool_ns_conv c;
    tool_ns_conv_init(&c, tps);
    static const uint64_t edges[] = {
        0, 1, 2, 999999999, 1000000000, 1000000001, UINT32_MAX, (uint64_t)UINT32_MAX + 1,
        UINT64_MAX / 1000000000u, UINT64_MAX / 2, UINT64_MAX - 1, UINT64_MAX,
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        uint64_t t = edges[i];
        cr_assert_eq(tool_ns_conv_ns(&c, t), tool_ticks_to_ns(t, tps),
                     "rate %" PRIu64 ", %" PRIu64 " ticks", tps, t);
    }
    /* multiples of the rate and their neighbours, where a quotient one off shows */
    for (uint64_t k = 0; k < 2000; k++) {
        for (int d = -1; d <= 1; d++) {
            uint64_t t = k * tps + (uint64_t)(int64_t)d;
            cr_assert_eq(tool_ns_conv_ns(&c, t), tool_ticks_to_ns(t, tps),
                         "rate %" PRIu64 ", %" PRIu64 " ticks", tps, t);
        }
    }
    for (int i = 0; i < 200000; i++) {
        uint64_t v = next(seed);
        uint64_t t = v >> (v & 63); /* every magnitude */
        cr_assert_eq(tool_ns_conv_ns(&c, t), tool_ticks_to_ns(t, tps),
                     "rate %" PRIu64 ", %" PRIu64 " ticks", tps, t);
    }
}

Test(tool, ns_conv_is_exact_at_every_rate_and_magnitude)
{
    uint64_t seed = 0x9e3779b97f4a7c15u;
    static const uint64_t rates[] = {
        0, 1, 2, 3, 7, 1000, 999999999, 1000000000, 1000000001, 2100000000, 2899999777,
        3000000000, UINT32_MAX, 10000000007, UINT64_MAX / 1000000000u,
        UINT64_MAX / 1000000000u + 1, UINT64_MAX,
    };
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        check_rate(rates[i], &seed);
    for (int i = 0; i < 20; i++)
        check_rate(next(&seed) % 20000000000u + 1, &seed);
}

Test(tool, fmt_u64_prints_what_printf_prints)
{
    uint64_t seed = 12345;
    char want[32], got[32];
    for (int i = 0; i < 500000; i++) {
        uint64_t v = next(&seed);
        v >>= v & 63;
        if (i < 64) /* 0..19, then UINT64_MAX and its right shifts by 1..43 */
            v = i < 20 ? (uint64_t)i : UINT64_MAX >> (i - 20);
        snprintf(want, sizeof want, "%" PRIu64, v);
        *tool_fmt_u64(got, v) = '\0';
        cr_assert_str_eq(got, want);
    }
    for (uint64_t p = 1, k = 0; k < 20; k++, p *= 10) { /* 10^k and its neighbours */
        for (uint64_t v = p - 1; v <= p + 1; v++) {
            snprintf(want, sizeof want, "%" PRIu64, v);
            *tool_fmt_u64(got, v) = '\0';
            cr_assert_str_eq(got, want);
        }
    }
}

/* Every value below 10^8 (each 8-digit part of a larger number is one of them), against a
 * decimal counter incremented by hand. */
Test(tool, fmt_u64_is_right_for_every_value_below_10_8, .timeout = 60)
{
    char want[24] = "0", got[24];
    size_t len = 1;
    for (uint32_t v = 0; v < 100000000u; v++) {
        size_t n = (size_t)(tool_fmt_u64(got, v) - got);
        if (n != len || memcmp(got, want, len) != 0) {
            got[n < sizeof got ? n : sizeof got - 1] = '\0';
            want[len] = '\0';
            cr_assert_fail("%" PRIu32 ": got \"%s\", want \"%s\"", v, got, want);
        }
        size_t i = len; /* want += 1 */
        while (i > 0 && want[i - 1] == '9')
            want[--i] = '0';
        if (i == 0) {
            memmove(want + 1, want, len++);
            want[0] = '1';
        } else {
            want[i - 1]++;
        }
    }
}

/* tool_esc is tool_print_text into a buffer: the same bytes, and a cut that is marked and never
 * splits an escape or a UTF-8 sequence. */
Test(tool, esc_escapes_as_print_text_does_and_cuts_between_characters)
{
    static const char *const texts[] = {
        "", "plain", "a\\b", "\x1b]0;title\x07", "\x1b[2J", "caf\xc3\xa9", "\xc2\x9b" "31m",
        "bad \xff\xfe utf-8", "\xe2\x82", "tab\there\nnewline\x7f",
    };
    char buf[256], *printed;
    size_t len;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        FILE *m = open_memstream(&printed, &len);
        tool_print_text(m, texts[i], strlen(texts[i]));
        fclose(m);
        cr_assert_str_eq(tool_esc(buf, sizeof buf, texts[i]), printed, "text %zu", i);
        cr_assert(strchr(buf, '\x1b') == NULL && strstr(buf, "\xc2\x9b") == NULL);
        cr_assert_eq(tool_text_is_plain(texts[i], strlen(texts[i])),
                     strcmp(texts[i], "") == 0 || strcmp(texts[i], "plain") == 0 ||
                         strcmp(texts[i], "a\\b") == 0 || strcmp(texts[i], "caf\xc3\xa9") == 0,
                     "text %zu", i);
        free(printed);
    }
    /* what fits is whole; what does not ends in "..." at a character's end */
    cr_assert_str_eq(tool_esc(buf, 6, "abcde"), "abcde");
    cr_assert_str_eq(tool_esc(buf, 6, "abcdef"), "ab...");
    cr_assert_str_eq(tool_esc(buf, 8, "a\x1b" "bcdef"), "a...");
    cr_assert_str_eq(tool_esc(buf, 9, "a\x1b" "bcdef"), "a\\x1b...");
    cr_assert_str_eq(tool_esc(buf, 7, "\xc3\xa9\xc3\xa9\xc3\xa9x"), "\xc3\xa9...");
    cr_assert_str_eq(tool_esc(buf, 3, "abcdef"), "..");
    cr_assert_str_eq(tool_esc(buf, 1, "abcdef"), "");
}

/* The names the runtime gives a function without a symbol, which the tool looks up in the
 * program's debug file: "MODULE+0xHEX", with or without "@BUILDID"; anything else is a name. */
Test(tool, parse_offset_reads_a_module_offset_and_refuses_other_names)
{
    const char *mod;
    size_t mod_len;
    uint64_t off;
    const char *a = "prog-debug+0x119c@5f0c11aa";
    cr_assert_eq(tool_dbg_parse_offset(a, strlen(a), &mod, &mod_len, &off), 0);
    cr_assert_eq(mod_len, strlen("prog-debug"));
    cr_assert_eq(memcmp(mod, "prog-debug", mod_len), 0);
    cr_assert_eq(off, 0x119c);
    const char *b = "a+b+0xdeadbeef";
    cr_assert_eq(tool_dbg_parse_offset(b, strlen(b), &mod, &mod_len, &off), 0);
    cr_assert_eq(mod_len, 3);
    cr_assert_eq(off, 0xdeadbeef);
    static const char *const not_offsets[] = {
        "leaf", "+0x10", "prog+0x", "prog+0x12g", "prog+12", "operator+", "prog+0x11111111111111111",
    };
    for (size_t i = 0; i < sizeof not_offsets / sizeof not_offsets[0]; i++)
        cr_assert_eq(tool_dbg_parse_offset(not_offsets[i], strlen(not_offsets[i]), &mod,
                                           &mod_len, &off),
                     -1, "%s", not_offsets[i]);
}
