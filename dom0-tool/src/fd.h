/* SPDX-License-Identifier: GPL-2.0-only */
// Move-only owner of a file descriptor.
#pragma once

#include <unistd.h>
#include <utility>

namespace busprof {

class FD {
  public:
    FD() = default;
    explicit FD(int fd) : fd_(fd) {}
    FD(FD&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    FD& operator=(FD&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    FD(const FD&) = delete;
    FD& operator=(const FD&) = delete;
    ~FD() { reset(); }

    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    int release() { return std::exchange(fd_, -1); }
    void reset() {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = -1;
    }

  private:
    int fd_ = -1;
};

} // namespace busprof
