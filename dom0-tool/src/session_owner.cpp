// SPDX-License-Identifier: GPL-2.0-only
#include "session_owner.h"

#include "summaries.h"

#include <cstdio>
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

// Sessions whose daemon ended without stopping them (killed, crashed, the
// machine rebooted) are marked aborted when a DB is opened for writing.
void abort_orphans(Db& db, const std::string& path) {
    std::vector<std::pair<int64_t, std::string>> open;
    {
        Stmt q(db.get(), "SELECT id, owner FROM sessions WHERE owner IS NOT NULL");
        while (q.step())
            open.emplace_back(sqlite3_column_int64(q.get(), 0),
                              reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 1)));
    }
    for (auto& [id, owner] : open) {
        if (owner_alive(owner))
            continue;
        db.exec("BEGIN IMMEDIATE");
        try {
            Stmt u(
                db.get(),
                "UPDATE sessions SET state = 'aborted', owner = NULL, stopped_ns = MAX("
                " created_ns,"
                " COALESCE((SELECT MAX(t_resume_ns) FROM transactions WHERE session_id = ?1), 0),"
                " COALESCE((SELECT MAX(t_ns) FROM markers WHERE session_id = ?1), 0))"
                " WHERE id = ?1");
            u.bind(1, id);
            u.step();
            summarise_rest(db, id);
            Stmt e(db.get(), "INSERT INTO events (session_id, kind, t_ns, detail)"
                             " SELECT id, 'aborted', stopped_ns, ? FROM sessions WHERE id = ?");
            e.bind(1, "the daemon of this session (" + owner.substr(owner.find('/') + 1) +
                          ") ended without stopping it; found when the DB was next opened");
            e.bind(2, id);
            e.step();
            db.exec("COMMIT");
        } catch (...) {
            sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
        std::fprintf(stderr,
                     "busprof: session %lld of %s was left behind by a daemon that ended"
                     " without stopping it: marked aborted\n",
                     static_cast<long long>(id), path.c_str());
    }
}

} // namespace busprof
