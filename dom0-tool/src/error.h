/* SPDX-License-Identifier: GPL-2.0-only */
// Errors at the OS / libxen boundary become SystemError{what, errno}.
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

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

} // namespace busprof
