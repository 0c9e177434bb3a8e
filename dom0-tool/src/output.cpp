// SPDX-License-Identifier: GPL-2.0-only
#include "output.h"

#include "error.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <streambuf>
#include <sys/stat.h>
#include <unistd.h>

namespace busprof {

namespace {

const char* hint_for(int err) {
    switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return "free some space where it goes, or write it elsewhere";
    case EPIPE:
        return "the program reading it exited before the end";
    case EACCES:
    case EPERM:
    case EROFS:
        return "choose a path you may write, or fix its permissions";
    case ENOENT:
    case ENOTDIR:
        return "check that its directory exists";
    default:
        return "-o takes a file to write, a device such as /dev/null, or - for standard output";
    }
}

[[noreturn]] void cannot_write(const std::string& what, int err) {
    throw UserError("cannot write " + what + ": " + std::strerror(err), hint_for(err));
}

std::string shown(const std::string& path) {
    return path == "-" ? "standard output" : path;
}

} // namespace

// A buffer that writes to a file descriptor and throws at the first write
// that fails; the stream over it (badbit in its exceptions) passes that on.
class Output::Buf : public std::streambuf {
  public:
    Buf(int fd, std::string what) : fd_(fd), what_(std::move(what)) {
        setp(buf_, buf_ + sizeof(buf_));
    }
    void drain() {
        const char* p = pbase();
        const char* end = pptr();
        setp(buf_, buf_ + sizeof(buf_)); // what failed is not written twice
        while (p < end) {
            ssize_t n = ::write(fd_, p, static_cast<size_t>(end - p));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                cannot_write(what_, errno);
            p += n;
        }
    }

  protected:
    int_type overflow(int_type c) override {
        drain();
        if (!traits_type::eq_int_type(c, traits_type::eof())) {
            *pptr() = traits_type::to_char_type(c);
            pbump(1);
        }
        return traits_type::not_eof(c);
    }
    int sync() override {
        drain();
        return 0;
    }

  private:
    int fd_;
    std::string what_;
    char buf_[64 * 1024];
};

Output::Output(const std::string& path) : path_(path) {
    int fd = STDOUT_FILENO;
    if (path != "-") {
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0) {
            if (S_ISDIR(st.st_mode))
                throw UserError(path + " is a directory", "give -o the path of a file in it");
            if (S_ISREG(st.st_mode)) {
                // Through a symlink: its file is replaced, the link stays.
                char* real = ::realpath(path.c_str(), nullptr);
                if (!real)
                    cannot_write(path, errno);
                target_ = real;
                std::free(real);
            }
        } else if (errno == ENOENT) {
            if (::lstat(path.c_str(), &st) == 0)
                throw UserError(path + " is a symlink to nothing",
                                "busprof creates no file through a dangling symlink; remove it "
                                "or choose another -o");
            target_ = path;
            st.st_mode = 0;
        } else {
            cannot_write(path, errno);
        }
        if (target_.empty()) {
            // Not created if absent, never truncated: a device or a pipe.
            fd_ = FD(::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC));
            if (!fd_)
                cannot_write(path, errno);
            if (::fstat(fd_.get(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
                throw UserError(path + " changed while it was opened", "run the command again");
        } else {
            size_t slash = target_.rfind('/');
            std::string dir = slash == std::string::npos ? "." : target_.substr(0, slash + 1);
            std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
            tmp_ = (slash == std::string::npos ? "" : dir) + "." + base + ".XXXXXX";
            fd_ = FD(::mkostemp(tmp_.data(), O_CLOEXEC));
            if (!fd_) {
                int err = errno;
                tmp_.clear();
                cannot_write(path, err);
            }
            // mkostemp's 0600 would make a report unreadable to others: a
            // new file gets the mode any program's would, a replaced one
            // keeps its own.
            mode_t mode = st.st_mode & 0777;
            if (!S_ISREG(st.st_mode)) {
                mode_t mask = ::umask(0);
                ::umask(mask);
                mode = 0666 & ~mask;
            }
            if (::fchmod(fd_.get(), mode) != 0) {
                int err = errno;
                ::unlink(tmp_.c_str()); // no destructor runs for a constructor that throws
                cannot_write(path, err);
            }
        }
        fd = fd_.get();
    } else {
        std::fflush(stdout); // anything printf wrote comes first
    }
    buf_ = std::make_unique<Buf>(fd, shown(path));
    stream_ = std::make_unique<std::ostream>(buf_.get());
    stream_->exceptions(std::ios::badbit);
}

Output::~Output() {
    if (is_stdout()) {
        // A command that failed: what it wrote so far, as far as it goes.
        try {
            buf_->drain();
        } catch (const UserError&) {
        }
    }
    if (!tmp_.empty())
        ::unlink(tmp_.c_str());
}

std::ostream& Output::stream() {
    return *stream_;
}

void Output::commit() {
    buf_->drain();
    if (is_stdout())
        return; // closed by close_stdout()
    // A file system may report a lost write only here (NFS, quotas); a
    // new file is in place only with all of it.
    if (!tmp_.empty() && ::fsync(fd_.get()) != 0)
        cannot_write(path_, errno);
    if (::close(fd_.release()) != 0)
        cannot_write(path_, errno);
    if (tmp_.empty())
        return;
    if (::rename(tmp_.c_str(), target_.c_str()) != 0)
        cannot_write(path_, errno);
    tmp_.clear();
}

void flush_stdout() {
    errno = 0;
    const bool failed = std::fflush(stdout) != 0;
    if (failed || std::ferror(stdout)) {
        int err = errno;
        std::clearerr(stdout);
        if (failed && err)
            cannot_write("standard output", err);
        // An earlier write failed, and its errno is gone.
        throw UserError("cannot write standard output: a write to it failed",
                        "check where it goes: a full disk, a closed pipe, /dev/full");
    }
}

void close_stdout() {
    flush_stdout();
    if (::close(STDOUT_FILENO) != 0 && errno != EBADF)
        cannot_write("standard output", errno);
}

} // namespace busprof
