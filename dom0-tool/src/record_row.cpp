// SPDX-License-Identifier: GPL-2.0-only
#include "record_row.h"

namespace busprof {

void bind_ns(Stmt& s, int i, uint64_t ns) {
    ns ? s.bind(i, static_cast<int64_t>(ns)) : s.bind_null(i);
}

std::string insert_sql(size_t n, bool mmio) {
    std::string sql = std::string("INSERT INTO ") +
                      (mmio ? "mmio_transactions (session_id, domid, vcpu, rip, addr,"
                            : "transactions (session_id, domid, vcpu, rip, port,") +
                      " size, dir, value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns,"
                      " status, clock_skewed, pre_trigger, task, pcpu, storage_overlap) VALUES ";
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
    const bool mmio = r.space == XEN_BUSPROF_SPACE_MMIO;
    // A 64-bit value is stored signed, as rip is.
    i64(5, mmio ? static_cast<int64_t>(r.addr) : r.port);
    i64(6, r.size);
    sqlite3_bind_text(s, base + 7, dir_name(r.dir), -1, SQLITE_STATIC);
    i64(8, mmio ? static_cast<int64_t>(r.wide_value) : r.value);
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

const char* const kSummaryColumns = "domid, port, dir, status, t_trap_ns, t_bus_begin_ns,"
                                    " t_bus_end_ns, t_resume_ns, clock_skewed";

Record summary_record(sqlite3_stmt* q) {
    auto col = [&](int i) { return sqlite3_column_int64(q, i); };
    Record r{};
    r.domid = static_cast<uint16_t>(col(0));
    r.port = static_cast<uint16_t>(col(1));
    r.dir = dir_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q, 2)));
    r.status = status_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q, 3)));
    r.t_trap_ns = static_cast<uint64_t>(col(4));
    r.t_bus_begin_ns = static_cast<uint64_t>(col(5)); // NULL reads 0, as the writer had it
    r.t_bus_end_ns = static_cast<uint64_t>(col(6));
    r.t_resume_ns = static_cast<uint64_t>(col(7));
    r.flags = col(8) ? XEN_BUSPROF_RECORD_CLOCK_SKEWED : 0;
    return r;
}

const char* const kExtractColumns = "id, rip, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,"
                                    " t_resume_ns, value, port, vcpu, size, dir, status,"
                                    " clock_skewed, pre_trigger, task, pcpu, storage_overlap";

xen_busprof_record_ext extract_record(sqlite3_stmt* q) {
    xen_busprof_record_ext e{};
    xen_busprof_record& x = e.rec;
    auto col = [&](int i) { return sqlite3_column_int64(q, i); };
    x.id = col(0);
    x.rip = col(1);
    x.t_trap_ns = col(2);
    x.t_bus_begin_ns = col(3); // NULL (no bus access) reads 0
    x.t_bus_end_ns = col(4);
    x.t_resume_ns = col(5);
    x.value = static_cast<uint32_t>(col(6));
    x.port = static_cast<uint16_t>(col(7));
    x.vcpu = static_cast<uint16_t>(col(8));
    x.size = static_cast<uint8_t>(col(9));
    x.dir = dir_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q, 10)));
    x.status = status_from_name(reinterpret_cast<const char*>(sqlite3_column_text(q, 11)));
    x.flags = (col(12) ? XEN_BUSPROF_RECORD_CLOCK_SKEWED : 0) |
              (col(13) ? XEN_BUSPROF_RECORD_PRE_TRIGGER : 0) |
              (col(16) ? XEN_BUSPROF_RECORD_STORAGE_OVERLAP : 0);
    // task and pcpu come together with Xen's stamp, or not at all.
    if (sqlite3_column_type(q, 14) != SQLITE_NULL && sqlite3_column_type(q, 15) != SQLITE_NULL) {
        x.flags |= XEN_BUSPROF_RECORD_WHO;
        e.task = static_cast<uint64_t>(col(14));
        e.pcpu = static_cast<uint32_t>(col(15));
    }
    return e;
}

const char* const kExtractMmioColumns = "id, rip, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,"
                                        " t_resume_ns, value, addr, vcpu, size, dir, status,"
                                        " clock_skewed, pre_trigger, task, pcpu, storage_overlap";

xen_busprof_record_wide extract_wide_record(sqlite3_stmt* q, bool mmio) {
    xen_busprof_record_wide w{};
    w.ext = extract_record(q);
    // The narrower forms say what they can (public/busprof.h): port 0 and
    // the low 32 bits of the value for a memory-mapped access.
    w.space = mmio ? XEN_BUSPROF_SPACE_MMIO : XEN_BUSPROF_SPACE_PIO;
    w.addr = static_cast<uint64_t>(sqlite3_column_int64(q, 7));
    w.value = static_cast<uint64_t>(sqlite3_column_int64(q, 6));
    if (mmio)
        w.ext.rec.port = 0;
    return w;
}

} // namespace busprof
