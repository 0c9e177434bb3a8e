/* SPDX-License-Identifier: GPL-2.0-only */
// One subcommand, one file: each registers itself on the CLI11 app.
#pragma once

#include "latency.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

struct xen_busprof_query;
struct xen_busprof_query_mmio;

namespace busprof {

class Db;

struct Globals {
    std::string db;         // trace DB
    std::string socket;     // daemon control socket
    std::string sim_socket; // simulated hypervisor socket
    std::string backend;    // sim | xen
};

// Each setup_* adds its subcommand; the callback runs it and returns the exit code.
using Runner = std::function<int()>;
void setup_daemon(CLI::App& app, Globals& g, Runner& run);
void setup_policy(CLI::App& app, Globals& g, Runner& run);
void setup_trap(CLI::App& app, Globals& g, Runner& run); // trap untrap
void setup_sessions(CLI::App& app, Globals& g, Runner& run);
void setup_control(CLI::App& app, Globals& g, Runner& run); // pause resume stop rearm status
void setup_stats(CLI::App& app, Globals& g, Runner& run);
void setup_query(CLI::App& app, Globals& g, Runner& run);
void setup_demo(CLI::App& app, Globals& g, Runner& run);
void setup_symbolize(CLI::App& app, Globals& g, Runner& run);
void setup_top(CLI::App& app, Globals& g, Runner& run);
void setup_report(CLI::App& app, Globals& g, Runner& run);
void setup_export(CLI::App& app, Globals& g, Runner& run);
void setup_diff(CLI::App& app, Globals& g, Runner& run);

// --symbols FILE[@ADDR] (symbolize.cpp), for the commands that name RIPs.
class Symbols;
void add_symbols_option(CLI::App* c, std::vector<std::string>& specs);
Symbols load_symbols(const std::vector<std::string>& specs);
// busprof symbolize's table: per domain and RIP, of the selected rows.
std::string symbolize_sql(const Selection& sel);

// --space port|mmio and --mmio RANGES (args.cpp), for the commands that
// read one address space's rows: port transactions by default,
// memory-mapped ones with --space mmio or --mmio (the spans as 'busprof
// trap --mmio' takes them).  space_selected() then sets sel's space and
// spans; it refuses --port with either.
struct SpaceOptions {
    std::string space = "port";
    std::string mmio;
};
void add_space_options(CLI::App* c, SpaceOptions& o);
// --space alone, for a command without a port filter (top).
void add_space_option(CLI::App* c, std::string& space);
void space_selected(CLI::App* c, const SpaceOptions& o, Selection& sel);

// The policy's (or the traps') ranges of a query as a JSON array of
// {"first": PORT, "last": PORT} (policy.cpp), for policy's and trap's JSON.
std::string ranges_json(const xen_busprof_query& q, bool traps);
// The same of a query_mmio answer: its memory-mapped policy or traps.
std::string spans_json(const xen_busprof_query_mmio& m, bool traps);

// Option checks (args.cpp).  A value they refuse is a CLI::ValidationError,
// which main reports as busprof's own error.
// Decimal or 0x hex, no sign, within [lo, hi]; passed on in decimal.
CLI::Validator integer_in(uint64_t lo, uint64_t hi, const std::string& unit = {});
CLI::Validator signed_in(int64_t lo, int64_t hi);
// A finite decimal number within [lo, hi].
CLI::Validator seconds_in(double lo, double hi);
CLI::Validator non_empty(const std::string& what);
// A domain by id (as integer_in(0, 0x7fef)) or by name; see trace_db_domain().
CLI::Validator domain_spec();

// The trace DB at path, read-only (Db::open), once it is known to be a
// regular file: SQLite would wait forever on a FIFO.  Throws UserError.
Db open_trace_db(const std::string& path);

// The domain a reading command's --domain names: its id (decimal or 0x hex,
// 0 to 32751), or its name as the trace DB's sessions recorded it.  A name
// that no session, or sessions of several domids, recorded is refused (a
// domain's name is reused after it is destroyed; its id is not within one
// boot).  Throws UserError.
int trace_db_domain(Db& db, const std::string& spec);

// Sends one command line to the daemon; returns its reply without the
// final OK line.  Throws UserError for ERR replies, no daemon, or no whole
// answer within timeout.
std::string daemon_request(const std::string& socket, const std::string& line,
                           std::chrono::milliseconds timeout);

} // namespace busprof
