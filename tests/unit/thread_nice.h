// SPDX-License-Identifier: GPL-2.0-only
// The unit tests' look at the daemon's threads: their names and nice values.
#pragma once

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/resource.h>

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
