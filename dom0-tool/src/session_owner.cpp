// SPDX-License-Identifier: GPL-2.0-only
#include "session_owner.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace busprof {

namespace {

// "<boot id>/<pid>/<start time>" of this process: who owns a session row
// while it runs.  A pid alone could be reused by an unrelated process.
// Fields 3 (state) and 22 (starttime) of /proc/PID/stat; empty if there is
// no such process.
struct ProcStat {
    std::string state, start;
};

ProcStat proc_stat(long pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(f, line))
        return {};
    // The command name (field 2) may hold spaces.
    size_t p = line.rfind(')');
    if (p == std::string::npos)
        return {};
    std::istringstream rest(line.substr(p + 2));
    ProcStat st;
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; i++) {
        if (i == 3)
            st.state = field;
        else if (i == 22)
            st.start = field;
    }
    return st.start.empty() ? ProcStat{} : st;
}

std::string start_time_of(long pid) {
    return proc_stat(pid).start;
}

std::string boot_id() {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(f, id);
    return id;
}

} // namespace

std::string owner_self() {
    return boot_id() + "/" + std::to_string(::getpid()) + "/" + start_time_of(::getpid());
}

bool owner_alive(const std::string& owner) {
    size_t a = owner.find('/'), b = owner.rfind('/');
    if (a == std::string::npos || a == b || owner.substr(0, a) != boot_id())
        return false;
    long pid = std::strtol(owner.c_str() + a + 1, nullptr, 10);
    if (pid <= 0 || owner.substr(b + 1).empty())
        return false;
    // A process that ended keeps its stat, start time and all, while it is
    // a zombie (its parent has not waited for it yet): it writes no more.
    const ProcStat st = proc_stat(pid);
    return st.start == owner.substr(b + 1) && st.state != "Z" && st.state != "X";
}

} // namespace busprof
