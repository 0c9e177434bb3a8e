/* SPDX-License-Identifier: GPL-2.0-only */
// busprof's one error idiom for dom0 code:
//  - UserError: a mistake the user can fix; printed as "busprof: error:"
//    plus a hint, exit 1.
//  - SystemError: a failure at the OS / libxen boundary that the caller
//    cannot act on; thrown with its errno.
//  - Result<T>: a call whose errno the caller acts on (a busprof_op the
//    hypervisor refused: which errno decides the hint, a retry or a
//    warning).  It holds the value or an Errno; nothing formats an errno by
//    hand.
// A full queue is backpressure, not an error: those calls return bool.
#pragma once

#include <cassert>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace busprof {

class SystemError : public std::runtime_error {
  public:
    SystemError(const std::string& what, int err)
        : std::runtime_error(what + ": " + std::strerror(err)), err_(err) {}
    int err() const { return err_; }

  private:
    int err_;
};

// Throws SystemError with the current errno.
[[noreturn]] inline void throw_errno(const std::string& what) {
    throw SystemError(what, errno);
}

// A user mistake: printed as "busprof: error: <what>" plus a hint, exit 1.
class UserError : public std::runtime_error {
  public:
    UserError(const std::string& what, std::string hint = {})
        : std::runtime_error(what), hint_(std::move(hint)) {}
    const std::string& hint() const { return hint_; }

  private:
    std::string hint_;
};

// An errno value (positive) that a call failed with.
class Errno {
  public:
    explicit Errno(int e) : e_(e) {}
    int value() const { return e_; }
    bool operator==(int e) const { return e_ == e; }
    // "Operation not permitted (EPERM)", glibc's own names.
    std::string message() const {
        const char* name = ::strerrorname_np(e_);
        std::string m = std::strerror(e_);
        return name ? m + " (" + name + ")" : m;
    }

  private:
    int e_;
};

// The value of a call, or the Errno it failed with.
template <class T> class [[nodiscard]] Result {
  public:
    Result(T v) : v_(std::move(v)) {}
    Result(Errno e) : v_(e) {}
    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    Errno error() const {
        assert(!ok());
        return std::get<1>(v_);
    }
    const T& value() const& {
        assert(ok());
        return std::get<0>(v_);
    }
    T& value() & {
        assert(ok());
        return std::get<0>(v_);
    }
    const T* operator->() const { return &value(); }
    // The value, or UserError("<what>: <errno message>", hint).
    T value_or_throw(const std::string& what, std::string hint = {}) && {
        if (!ok())
            throw UserError(what + ": " + error().message(), std::move(hint));
        return std::move(std::get<0>(v_));
    }

  private:
    std::variant<T, Errno> v_;
};

// A call that returns nothing but may fail.
struct Ok {};
using Status = Result<Ok>;

// 0 or a negative errno value (the hypercall convention) as a Status.
inline Status status_of(long rc) {
    if (rc < 0)
        return Errno(static_cast<int>(-rc));
    return Ok{};
}

} // namespace busprof
