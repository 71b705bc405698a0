/* SPDX-License-Identifier: MIT */
// A C++ program built with -finstrument-functions for tests/names/test-names.py: functions in a
// namespace, a class, an overload and a template, whose names the runtime records mangled and
// the tool shows demangled. Built twice: with -DEXTRA_CALL, Cart::add calls Cart::audit first,
// so that a replay of the plain build's recording diverges at a C++ function.
#include <cstdio>
#include <cstdlib>

namespace shop {

class Cart {
public:
    __attribute__((noinline)) int add(int n);
    __attribute__((noinline)) int add(int n, int times);
    __attribute__((noinline)) int audit();

private:
    int total_ = 0;
};

int Cart::audit()
{
    return total_ % 7;
}

int Cart::add(int n)
{
#ifdef EXTRA_CALL
    total_ += audit();
#endif
    total_ += n;
    return total_;
}

int Cart::add(int n, int times)
{
    for (int i = 0; i < times; i++)
        add(n + i);
    return total_;
}

template <typename T> __attribute__((noinline)) T twice(T v)
{
    return v + v;
}

} // namespace shop

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
    shop::Cart cart;
    long sum = 0;
    for (int r = 0; r < rounds; r++)
        sum += cart.add(r, 4) + shop::twice<long>(r);
    std::printf("%ld\n", sum);
    return 0;
}
