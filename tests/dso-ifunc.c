/* SPDX-License-Identifier: MIT */
/* libdso-ifunc: one IFUNC whose resolver counts its calls, for tests/test-dso.c (base/dso.c
 * runs a resolver only where it needs the address, never to learn that an object defines a
 * name). */
unsigned tt_test_ifunc_resolved;

static int plus_one(int x)
{
    return x + 1;
}

typedef int (*plus_fn)(int);

static plus_fn resolve_plus(void)
{
    tt_test_ifunc_resolved++;
    return plus_one;
}

int tt_test_ifunc(int x) __attribute__((ifunc("resolve_plus")));
