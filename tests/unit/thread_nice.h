// SPDX-License-Identifier: GPL-2.0-only
// The unit tests' look at the daemon's threads: their names and nice values,
// and the privilege to raise them.
#pragma once

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <linux/capability.h>
#include <string>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

// The nice value of a thread of this process (99 if it cannot be read).
inline int nice_of(int tid) {
    errno = 0;
    const int n = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
    return errno ? 99 : n;
}

// The id of this process's thread of that name (0: none).
inline int thread_named(const std::string& name) {
    for (auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream f(t.path() / "comm");
        std::string n;
        std::getline(f, n);
        if (n == name)
            return std::stoi(t.path().filename().string());
    }
    return 0;
}

// Drops CAP_SYS_NICE from the calling thread (capabilities are per thread,
// and the threads it makes inherit them): what a daemon run in a container
// that drops the capability has.  The name of the call that failed, or "".
inline std::string drop_sys_nice() {
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (::syscall(SYS_capget, &h, d) != 0)
        return "capget";
    d[0].effective &= ~(1u << CAP_SYS_NICE);
    d[0].permitted &= ~(1u << CAP_SYS_NICE);
    if (::syscall(SYS_capset, &h, d) != 0)
        return "capset";
    return "";
}

// Sets a resource limit's soft value for as long as it lives.
class SoftLimit {
  public:
    SoftLimit(int resource, rlim_t value) : resource_(resource) {
        ok_ = ::getrlimit(resource, &saved_) == 0;
        rlimit l = saved_;
        l.rlim_cur = value;
        ok_ = ok_ && ::setrlimit(resource, &l) == 0;
    }
    ~SoftLimit() {
        if (ok_)
            (void)::setrlimit(resource_, &saved_);
    }
    SoftLimit(const SoftLimit&) = delete;
    SoftLimit& operator=(const SoftLimit&) = delete;
    bool ok() const { return ok_; }

  private:
    int resource_;
    rlimit saved_{};
    bool ok_ = false;
};
