// SPDX-License-Identifier: LGPL-2.1-only
// Header-only C++ wrapper of libbusprof: a Handle and a TrapScope that
// traps a port range, or a memory-mapped span (MmioSpan), for exactly its
// lifetime.
//
//     busprof::Handle bp;
//     {
//         busprof::TrapScope trap(bp, 0x3f8, 0x3ff);
//         ... driver code ...
//     }
//     auto records = bp.extract(0x3f8, 0x3ff);
//
//     {
//         busprof::TrapScope trap(bp, busprof::MmioSpan{0xfebf0000, 0xfebf0fff});
//         ... loads and stores of the BAR ...
//     }
//     auto wide = bp.extract_mmio(0xfebf0000, 0xfebf0fff);
#pragma once

#include <busprof/busprof.h>

#include <cerrno>
#include <cstdint>
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

    // All memory-mapped records of [first, last], as extract() does.
    std::vector<bp_record_wide> extract_mmio(uint64_t first, uint64_t last) const {
        std::vector<bp_record_wide> out(256);
        for (;;) {
            size_t needed = 0;
            ssize_t n = bp_extract_mmio(h_, first, last, out.data(), out.size(), &needed);
            if (n >= 0) {
                out.resize(static_cast<size_t>(n));
                return out;
            }
            if (errno != ENOBUFS)
                throw_bp_error("bp_extract_mmio");
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

// A span of guest-physical memory, whole 4 KiB pages: [first, last].
struct MmioSpan {
    uint64_t first, last;
};

class TrapScope {
  public:
    TrapScope(const Handle& h, unsigned first, unsigned last)
        : h_(h.get()), first_(first), last_(last), mmio_(false) {
        if (bp_start_trap(h_, static_cast<unsigned>(first_), static_cast<unsigned>(last_)) < 0)
            throw_bp_error("bp_start_trap");
    }
    TrapScope(const Handle& h, MmioSpan span)
        : h_(h.get()), first_(span.first), last_(span.last), mmio_(true) {
        if (bp_start_trap_mmio(h_, first_, last_) < 0)
            throw_bp_error("bp_start_trap_mmio");
    }
    TrapScope(const TrapScope&) = delete;
    TrapScope& operator=(const TrapScope&) = delete;
    // Errors on the way out cannot be thrown; the trap is gone either way
    // once the profiler detaches.
    ~TrapScope() {
        if (mmio_)
            bp_stop_trap_mmio(h_, first_, last_);
        else
            bp_stop_trap(h_, static_cast<unsigned>(first_), static_cast<unsigned>(last_));
    }

  private:
    bp_handle* h_;
    uint64_t first_, last_;
    bool mmio_;
};

} // namespace busprof
