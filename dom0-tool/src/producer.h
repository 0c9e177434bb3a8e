/* SPDX-License-Identifier: GPL-2.0-only */
// The producer's side of the writer: the hand-off that the thread serving
// the guest calls.  Records go through the writer's lock-free queue, notes
// (session rows, markers, events, extract requests) and counters through
// an outbox that is handed over when the writer's lock is free; the
// producer never waits for the writer.
#pragma once

#include "record.h"
#include "storage_gate.h"

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace busprof {

struct SessionRow {
    uint16_t domid;
    std::string domain_name, backend, bus, state, start_trigger, stop_trigger;
    uint64_t created_ns;
    uint64_t pre_trigger = 0; // --pre-trigger N
};

// What the daemon knows of a session at a moment: the latest one written wins.
struct SessionCounters {
    std::string state;
    uint64_t started_ns = 0, stopped_ns = 0; // 0: not yet
    uint64_t timeouts = 0, unrecorded = 0;
    uint64_t dropped = 0;        // records the queue refused
    uint64_t notes_dropped = 0;  // guest markers and events refused
    int64_t clock_error_ns = -1; // +/- of the clock offset; -1: not measured
    uint64_t clock_skew_ns = 0;  // largest disagreement of Xen's stamps with ours
};

// A guest's extract request, to be answered once everything the daemon
// queued before it is committed.
struct ExtractRequest {
    uint32_t session; // ordinal, see Producer::begin_session
    uint16_t domid;
    xen_busprof_ctrl_msg msg;
    int64_t upto = 0; // writer: the last transaction id queued before it
    // A wide request (XEN_BUSPROF_CTRL_WIDE, interface 1.3): its span, and
    // the answer is wide records.  Otherwise the ports of msg.
    bool wide = false;
    uint32_t space = XEN_BUSPROF_SPACE_PIO;
    uint64_t first = 0, last = 0;
    int64_t upto_mmio = 0; // writer: the same for memory-mapped rows
};

struct ExtractResult {
    int status = 0; // 0 or -errno for the guest
    uint64_t total = 0, snapshot = 0;
    std::vector<xen_busprof_record_ext> records; // XEN_BUSPROF_RECORD_WHO where known
    std::vector<xen_busprof_record_wide> wide;   // instead, for a wide request
};

// A note as the writer takes it: its place among the records, and what it
// writes.
struct Note {
    uint64_t after; // records pushed before it
    std::variant<SessionRow, Marker, Event, ExtractRequest> body;
    uint32_t session; // for SessionRow: the ordinal it creates
};

// What a flush waits for (Writer::request_flush).
struct FlushMark {
    uint64_t records, notes, summaries;
};

class Writer;

// The one producer of a Writer (Writer::producer()): one thread at a time
// calls it, the daemon's ioreq thread once it serves the guest.  Records
// and notes name their session by the ordinal begin_session() returns.
class Producer {
  public:
    Producer(const Producer&) = delete;

    // Hands over what waits in the outbox: what finds the writer's lock
    // taken waits there, which pump() (and every call below) hands over
    // when the lock is free.
    bool pump(bool wait = false);                // false: the lock was taken, try again
    uint32_t begin_session(const SessionRow& s); // never refused
    void set_counters(uint32_t session, const SessionCounters& c);
    bool push(const Record& r);                         // false if full
    bool add_marker(Marker m, bool from_guest = false); // a guest's may be refused
    bool add_event(Event e, bool from_guest = false);
    void request_extract(const ExtractRequest& r); // never refused

    // Writer::flush, request_flush and session_row, with the outbox handed
    // over first (waiting for the writer's lock, which is never held
    // across SQL).
    bool flush(int timeout_ms = 10000);
    FlushMark request_flush();
    int64_t session_row(uint32_t session, int timeout_ms);

    // The producer marks its accesses with it (see AccessGate).
    AccessGate& gate();

  private:
    friend class Writer;
    explicit Producer(Writer& w) : w_(w) {}
    bool enqueue(Note n, bool droppable);

    Writer& w_;
    uint32_t sessions_ = 0;
    std::deque<Note> outbox_;                          // notes not yet handed over
    std::map<uint32_t, SessionCounters> out_counters_; // likewise
};

} // namespace busprof
