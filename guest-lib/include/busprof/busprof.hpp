// SPDX-License-Identifier: LGPL-2.1-only
// Header-only C++ wrapper of libbusprof: a Handle and a TrapScope that
// traps a port range for exactly its lifetime.
//
//     busprof::Handle bp;
//     {
//         busprof::TrapScope trap(bp, 0x3f8, 0x3ff);
//         ... driver code ...
//     }
//     auto records = bp.extract(0x3f8, 0x3ff);
#pragma once

#include <busprof/busprof.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace busprof {

[[noreturn]] inline void throw_bp_error(const char* what) {
    throw std::system_error(errno, std::generic_category(), what);
}

class Handle {
  public:
    explicit Handle(unsigned flags = 0) : h_(bp_open(flags)) {
        if (!h_)
            throw_bp_error("bp_open");
    }
    Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    Handle& operator=(Handle&& o) noexcept {
        if (this != &o) {
            bp_close(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { bp_close(h_); }

    bp_handle* get() const { return h_; }

    // All records of [first, last], growing the buffer as the profiler asks.
    std::vector<bp_record> extract(unsigned first, unsigned last) const {
        std::vector<bp_record> out(256);
        for (;;) {
            size_t needed = 0;
            ssize_t n = bp_extract(h_, first, last, out.data(), out.size(), &needed);
            if (n >= 0) {
                out.resize(static_cast<size_t>(n));
                return out;
            }
            if (errno != ENOBUFS)
                throw_bp_error("bp_extract");
            out.resize(needed);
        }
    }

    void pause() const {
        if (bp_pause(h_) < 0)
            throw_bp_error("bp_pause");
    }
    void resume() const {
        if (bp_resume(h_) < 0)
            throw_bp_error("bp_resume");
    }

  private:
    bp_handle* h_;
};

class TrapScope {
  public:
    TrapScope(const Handle& h, unsigned first, unsigned last)
        : h_(h.get()), first_(first), last_(last) {
        if (bp_start_trap(h_, first_, last_) < 0)
            throw_bp_error("bp_start_trap");
    }
    TrapScope(const TrapScope&) = delete;
    TrapScope& operator=(const TrapScope&) = delete;
    // Errors on the way out cannot be thrown; the trap is gone either way
    // once the profiler detaches.
    ~TrapScope() { bp_stop_trap(h_, first_, last_); }

  private:
    bp_handle* h_;
    unsigned first_, last_;
};

} // namespace busprof
