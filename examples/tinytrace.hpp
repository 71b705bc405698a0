// SPDX-License-Identifier: MIT
//
// tinytrace.hpp — a small C++11 wrapper over libtinytrace's C API, for examples/raii.cpp and
// for C++ programs that want the same: every resource owned by an object whose destructor
// releases it, every error a tinytrace::error exception carrying the code and the message.
//
//   tinytrace::config cfg;                           // tt_config_init
//   cfg.set(TT_PARAM_MODE, TT_MODE_RECORD).set(TT_PARAM_FILE, "run.tt");
//   tinytrace::session s(cfg);                       // tt_session_open
//   { tinytrace::scope f(s, s.intern(TT_OBJ_FUNCTION, "work"));   // tt_enter ... tt_exit
//     s.io_out(1, "hello\n", 6); }
//   s.close();                                       // tt_session_close; the destructor
//                                                    // closes too, without throwing
//   tinytrace::reader r("run.tt");                   // probe, storage, open
//   tt_event ev; while (r.next(ev)) ...
//
// It is header-only and holds no tinytrace type but the C API's own, so it works with any
// build of the library. Not thread-safe beyond what the C calls are (session.h, event.h).
#ifndef TINYTRACE_EXAMPLES_TINYTRACE_HPP
#define TINYTRACE_EXAMPLES_TINYTRACE_HPP

#include <tinytrace/tinytrace.h>

#include <stdlib.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

namespace tinytrace {

// A failed call: code() is the tt_error, what() the message (tt_error_info) or tt_strerror.
class error : public std::runtime_error {
public:
    error(int code, const std::string &what) : std::runtime_error(what), code_(code) {}
    int code() const { return code_; }

private:
    int code_;
};

inline void check(int rc, const tt_error_info *err = nullptr)
{
    if (rc != TT_OK)
        throw error(rc, std::string(tt_error_name(rc)) + ": " +
                            (err && err->message[0] ? err->message : tt_strerror(rc)));
}

class config {
public:
    config() { tt_config_init(&cfg_); }
    config &set(tt_param p, uint64_t v)
    {
        tt_error_info err;
        check(tt_config_set(&cfg_, p, v, &err), &err);
        return *this;
    }
    config &set(tt_param_str p, const std::string &v)
    {
        tt_error_info err;
        check(tt_config_set_str(&cfg_, p, v.c_str(), &err), &err);
        return *this;
    }
    config &from_env()
    {
        tt_error_info err;
        check(tt_config_from_env(&cfg_, &err), &err);
        return *this;
    }
    const tt_config *get() const { return &cfg_; }

private:
    tt_config cfg_;
};

// A session: open in the constructor, closed by close() (which throws on failure) or, if not
// yet, by the destructor (which cannot report it). Movable, not copyable.
class session {
public:
    explicit session(const config &cfg)
    {
        tt_error_info err;
        check(tt_session_open(cfg.get(), &s_, &err), &err);
    }
    session(session &&o) noexcept : s_(o.s_) { o.s_ = nullptr; }
    session &operator=(session &&o) noexcept
    {
        std::swap(s_, o.s_);
        return *this;
    }
    session(const session &) = delete;
    session &operator=(const session &) = delete;
    ~session()
    {
        if (s_)
            tt_session_close(s_, nullptr);
    }

    void close()
    {
        tt_error_info err;
        tt_session *s = s_;
        if (!s)
            return;
        s_ = nullptr;
        check(tt_session_close(s, &err), &err);
    }
    uint32_t intern(tt_object_kind kind, const std::string &name)
    {
        uint32_t id;
        check(tt_intern(s_, kind, name.c_str(), &id));
        return id;
    }
    // Bytes the program received: recorded, or (replay) replaced by the recorded ones.
    size_t io_in(uint32_t channel, void *buf, size_t len)
    {
        size_t got = len;
        check(tt_io(s_, TT_IO_IN, channel, buf, len, &got));
        return got;
    }
    // Bytes the program produced: recorded, or (replay) compared.
    void io_out(uint32_t channel, const void *buf, size_t len)
    {
        check(tt_io(s_, TT_IO_OUT, channel, const_cast<void *>(buf), len, nullptr));
    }
    tt_session *get() const { return s_; }

private:
    tt_session *s_ = nullptr;
};

// A function's frame: enter in the constructor, exit in the destructor, so an exception that
// leaves the scope still records (or, in replay, expects) the exit.
class scope {
public:
    scope(session &s, uint32_t function) : s_(s.get()), fn_(function)
    {
        check(tt_enter(s_, fn_));
    }
    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;
    ~scope() { tt_exit(s_, fn_); }

private:
    tt_session *s_;
    uint32_t fn_;
};

// A trace file opened for reading: the source, the storage the probe asks for, the reader.
class reader {
public:
    explicit reader(const std::string &path, tt_cursor_mode mode = TT_CURSORS_SEQUENTIAL)
    {
        tt_error_info err;
        tt_reader_limits lim;
        tt_reader_capacity cap;
        check(tt_source_file(&src_, path.c_str(), &err), &err);
        tt_reader_limits_default(&lim);
        int rc = tt_reader_probe(&src_, &lim, mode, &m_, &cap, &err);
        // the reader's storage must be 16-byte aligned (store.h)
        if (rc == TT_OK && posix_memalign(&mem_, 16, cap.total) != 0)
            rc = TT_E_NOMEM;
        if (rc == TT_OK)
            rc = tt_reader_open(&src_, &lim, mode, mem_, cap.total, &r_, &err);
        if (rc != TT_OK) {
            std::free(mem_);
            tt_source_close(&src_);
            check(rc, &err);
        }
    }
    reader(const reader &) = delete;
    reader &operator=(const reader &) = delete;
    ~reader()
    {
        tt_reader_close(r_);
        std::free(mem_);
        tt_source_close(&src_);
    }

    const tt_manifest &manifest() const { return m_; }
    // The next event of @cursor into @ev: true, or false at the end; throws on a damaged file.
    // @ev.payload is valid until the next call.
    bool next(tt_event &ev, uint32_t cursor = 0)
    {
        tt_error_info err;
        int rc = tt_reader_next(r_, cursor, &ev, &err);
        if (rc == TT_E_END)
            return false;
        check(rc, &err);
        return true;
    }
    std::string object_name(uint32_t id) const
    {
        tt_object_entry o;
        if (id == 0 || tt_reader_object(r_, id, &o) != TT_OK)
            return std::string();
        return std::string(o.name, o.name_len);
    }
    tt_reader *get() const { return r_; }

private:
    tt_source src_;
    tt_manifest m_;
    void *mem_ = nullptr;
    tt_reader *r_ = nullptr;
};

} // namespace tinytrace

#endif
