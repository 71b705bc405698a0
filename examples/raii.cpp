// SPDX-License-Identifier: MIT
//
// raii FILE — the C API through the C++ wrapper of tinytrace.hpp: sessions, frames and readers
// as objects that release what they hold, errors as exceptions.
//
// greet() is the program: it takes a name as input (tt_io in) and prints a greeting (tt_io
// out) inside a scope per function. It runs once recording into FILE, then FILE is read back
// with tinytrace::reader and its events counted, then greet() runs again replaying FILE with
// another name as input: the recorded one comes back, so the greeting is the same, and every
// call matches. A third run replays with a greeting that differs: the exception carries
// TT_E_DIVERGED, and the scopes' destructors still run as the exception unwinds them.
//
// Exits 0 when the three runs went as described, 1 otherwise. Build:
//     c++ raii.cpp $(pkg-config --cflags --libs tinytrace) -o raii
#include "tinytrace.hpp"

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

namespace {

enum { CH_NAME = 1, CH_STDOUT = 2 };

std::string greet(tinytrace::session &s, const std::string &input, const char *greeting)
{
    tinytrace::scope f(s, s.intern(TT_OBJ_FUNCTION, "greet"));
    char name[32] = {0};
    std::strncpy(name, input.c_str(), sizeof name - 1);
    size_t len = s.io_in(CH_NAME, name, std::strlen(name));
    std::string line;
    {
        tinytrace::scope g(s, s.intern(TT_OBJ_FUNCTION, "format"));
        line = std::string(greeting) + ", " + std::string(name, len) + "!\n";
    }
    s.io_out(CH_STDOUT, line.data(), line.size());
    return line;
}

tinytrace::config cfg(tt_mode mode, const char *path)
{
    tinytrace::config c;
    c.set(TT_PARAM_MODE, mode).set(TT_PARAM_FILE, path);
    return c;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::cerr << "usage: raii FILE\n";
        return 2;
    }
    const char *path = argv[1];
    try {
        std::string recorded, replayed;
        {
            tinytrace::session s(cfg(TT_MODE_RECORD, path));
            recorded = greet(s, "Ada", "Hello");
            s.close();
        }
        std::cout << "recorded: " << recorded;

        uint64_t events = 0, enters = 0, ios = 0;
        {
            tinytrace::reader r(path);
            tt_event ev;
            while (r.next(ev)) {
                events++;
                enters += ev.kind == TT_EV_ENTER;
                ios += ev.kind == TT_EV_IO;
            }
            if (events != r.manifest().event_count)
                throw std::runtime_error("the reader saw another number of events");
        }
        std::cout << "read back: " << events << " events, " << enters << " calls, " << ios
                  << " io\n";

        {
            tinytrace::session s(cfg(TT_MODE_REPLAY, path));
            replayed = greet(s, "Bob", "Hello"); // "Ada" comes back from the recording
            s.close();
        }
        std::cout << "replayed: " << replayed;
        if (replayed != recorded)
            throw std::runtime_error("the replay greeted someone else");

        try {
            tinytrace::session s(cfg(TT_MODE_REPLAY, path));
            greet(s, "Ada", "Goodbye");
            std::cerr << "raii: a different greeting replayed without a divergence\n";
            return 1;
        } catch (const tinytrace::error &e) {
            if (e.code() != TT_E_DIVERGED)
                throw;
            std::cout << "a different greeting diverged, as it should: " << e.what() << "\n";
        }
    } catch (const std::exception &e) {
        std::cerr << "raii: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
