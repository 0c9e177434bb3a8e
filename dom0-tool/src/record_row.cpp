// SPDX-License-Identifier: GPL-2.0-only
#include "record_row.h"

namespace busprof {

void bind_ns(Stmt& s, int i, uint64_t ns) {
    ns ? s.bind(i, static_cast<int64_t>(ns)) : s.bind_null(i);
}

std::string insert_sql(size_t n) {
    std::string sql = "INSERT INTO transactions (session_id, domid, vcpu, rip, port, size, dir,"
                      " value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, status,"
                      " clock_skewed, pre_trigger, task, pcpu, storage_overlap) VALUES ";
    for (size_t i = 0; i < n; i++)
        sql +=
            i ? ",(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    return sql;
}

void bind_record(sqlite3_stmt* s, int base, const Record& r, int64_t session_row, bool overlap) {
    auto i64 = [&](int i, int64_t v) { sqlite3_bind_int64(s, base + i, v); };
    auto ns = [&](int i, uint64_t v) {
        v ? sqlite3_bind_int64(s, base + i, static_cast<int64_t>(v))
          : sqlite3_bind_null(s, base + i);
    };
    i64(1, session_row);
    i64(2, r.domid);
    i64(3, r.vcpu);
    i64(4, static_cast<int64_t>(r.rip));
    i64(5, r.port);
    i64(6, r.size);
    sqlite3_bind_text(s, base + 7, dir_name(r.dir), -1, SQLITE_STATIC);
    i64(8, r.value);
    i64(9, static_cast<int64_t>(r.t_trap_ns));
    ns(10, r.t_bus_begin_ns);
    ns(11, r.t_bus_end_ns);
    i64(12, static_cast<int64_t>(r.t_resume_ns));
    sqlite3_bind_text(s, base + 13, status_name(r.status), -1, SQLITE_STATIC);
    i64(14, (r.flags & XEN_BUSPROF_RECORD_CLOCK_SKEWED) ? 1 : 0);
    i64(15, (r.flags & XEN_BUSPROF_RECORD_PRE_TRIGGER) ? 1 : 0);
    if (r.who_known) {
        i64(16, static_cast<int64_t>(r.task));
        i64(17, static_cast<int64_t>(r.pcpu));
    } else {
        sqlite3_bind_null(s, base + 16);
        sqlite3_bind_null(s, base + 17);
    }
    i64(18, overlap ? 1 : 0);
}

} // namespace busprof
