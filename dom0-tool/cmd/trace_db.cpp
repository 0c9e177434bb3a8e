// SPDX-License-Identifier: GPL-2.0-only
// The trace DB a reading command names with --db.
#include "cmd.h"
#include "db.h"
#include "error.h"

#include <charconv>
#include <sys/stat.h>
#include <vector>

namespace busprof {

Db open_trace_db(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        throw UserError("trace DB " + path +
                            (S_ISDIR(st.st_mode) ? " is a directory" : " is not a regular file"),
                        "pass --db FILE, a trace DB that 'busprof daemon' or 'busprof demo' wrote");
    return Db::open(path, false);
}

int trace_db_domain(Db& db, const std::string& spec) {
    const bool hex = spec.size() > 2 && (spec[0] == '0' && (spec[1] == 'x' || spec[1] == 'X'));
    const char* first = spec.data() + (hex ? 2 : 0);
    const char* last = spec.data() + spec.size();
    uint64_t id = 0;
    auto [end, ec] = std::from_chars(first, last, id, hex ? 16 : 10);
    if (first != last && end == last) {
        if (ec != std::errc() || id > 0x7fef)
            throw UserError("domain " + spec + " is not a domain id (0 to 32751)",
                            "name a domain by its id or by the name its sessions recorded");
        return static_cast<int>(id);
    }
    // A name: the domids the trace DB's sessions recorded for it.
    std::vector<int64_t> ids;
    Stmt st(db.get(), "SELECT DISTINCT domid FROM sessions WHERE domain_name = ? ORDER BY domid");
    st.bind(1, spec);
    while (st.step())
        ids.push_back(sqlite3_column_int64(st.get(), 0));
    if (ids.size() == 1)
        return static_cast<int>(ids[0]);
    std::string known;
    if (ids.empty()) {
        Stmt names(db.get(), "SELECT DISTINCT domain_name || ' (' || domid || ')' FROM sessions"
                             " ORDER BY domid, domain_name");
        while (names.step())
            known +=
                (known.empty() ? "" : ", ") +
                std::string(reinterpret_cast<const char*>(sqlite3_column_text(names.get(), 0)));
        throw UserError("no session of a domain named '" + spec + "' in the trace DB",
                        known.empty() ? "the trace DB has no session yet"
                                      : "its domains: " + known);
    }
    for (int64_t i : ids)
        known += (known.empty() ? "" : ", ") + std::to_string(i);
    throw UserError("the domain name '" + spec + "' was several domains' in the trace DB (ids " +
                        known + ")",
                    "name the one you mean by its id");
}

} // namespace busprof
