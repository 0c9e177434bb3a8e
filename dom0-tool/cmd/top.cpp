// SPDX-License-Identifier: GPL-2.0-only
// busprof top: a refreshing view of a running daemon, like xentop.  Each
// frame: the daemon's status (its control socket) and, from the trace DB,
// per port and direction what was recorded since the last frame.
#include "cmd.h"
#include "control_reply.h"
#include "db.h"
#include "error.h"
#include "figures.h"
#include "output.h"

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <poll.h>
#include <sstream>
#include <string_view>
#include <sys/ioctl.h>
#include <termios.h>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace busprof {

namespace {

// A percentile of an interval's values; none where it had none.
std::optional<int64_t> pct(std::vector<int64_t>& v, int p) {
    if (v.empty())
        return std::nullopt;
    std::sort(v.begin(), v.end());
    return nearest_rank(v, p);
}

struct PortRow {
    int64_t port = 0;       // or a memory-mapped register's address
    int size = 0;           // a register's width
    std::string_view space; // "mmio" for a register
    std::string dir;
    uint64_t n = 0, errors = 0, timeouts = 0;
    double per_s = 0;
    std::optional<int64_t> bus_p50, bus_p99, ovh_p50, ovh_p99;
};

enum class SortBy { count, bus_p99, ovh_p99, port };
const char* sort_name(SortBy s) {
    switch (s) {
    case SortBy::count:
        return "count";
    case SortBy::bus_p99:
        return "bus p99";
    case SortBy::ovh_p99:
        return "overhead p99";
    case SortBy::port:
        return "port";
    }
    return "?";
}

// What the frame shows of one interval: the rows recorded since last_id,
// per port and direction, or with mmio, memory-mapped ones per register
// (address and width) and direction.
std::vector<PortRow> interval(Db& db, int64_t session, int64_t& last_id, double seconds,
                              SortBy sort, bool mmio) {
    struct Acc {
        std::vector<int64_t> bus, ovh;
        uint64_t n = 0, errors = 0, timeouts = 0;
    };
    std::map<std::tuple<int64_t, int, std::string>, Acc> acc;
    Stmt st(db.get(), std::string("SELECT id, ") + (mmio ? "addr" : "port") +
                          ", dir, status, bus_ns, overhead_ns, " +
                          (mmio ? "size FROM mmio_transaction_times" : "0 FROM transaction_times") +
                          " WHERE session_id = ? AND id > ? ORDER BY id");
    st.bind(1, session).bind(2, last_id);
    while (st.step()) {
        sqlite3_stmt* s = st.get();
        last_id = sqlite3_column_int64(s, 0);
        auto key = std::make_tuple(sqlite3_column_int64(s, 1), sqlite3_column_int(s, 6),
                                   reinterpret_cast<const char*>(sqlite3_column_text(s, 2)));
        Acc& a = acc[key];
        a.n++;
        std::string status = reinterpret_cast<const char*>(sqlite3_column_text(s, 3));
        a.errors += status == "error";
        a.timeouts += status == "timeout";
        if (status != "ok")
            continue;
        if (sqlite3_column_type(s, 4) != SQLITE_NULL)
            a.bus.push_back(sqlite3_column_int64(s, 4));
        if (sqlite3_column_type(s, 5) != SQLITE_NULL) // none where the clocks disagree
            a.ovh.push_back(sqlite3_column_int64(s, 5));
    }
    std::vector<PortRow> rows;
    for (auto& [k, a] : acc) {
        PortRow r;
        r.port = std::get<0>(k);
        r.size = std::get<1>(k);
        r.space = mmio ? "mmio" : "port";
        r.dir = std::get<2>(k);
        r.n = a.n;
        r.errors = a.errors;
        r.timeouts = a.timeouts;
        r.per_s = seconds > 0 ? static_cast<double>(a.n) / seconds : 0;
        r.bus_p50 = pct(a.bus, 50);
        r.bus_p99 = pct(a.bus, 99);
        r.ovh_p50 = pct(a.ovh, 50);
        r.ovh_p99 = pct(a.ovh, 99);
        rows.push_back(r);
    }
    std::stable_sort(rows.begin(), rows.end(), [sort](const PortRow& a, const PortRow& b) {
        switch (sort) {
        case SortBy::count:
            return a.n > b.n;
        case SortBy::bus_p99:
            return a.bus_p99 > b.bus_p99;
        case SortBy::ovh_p99:
            return a.ovh_p99 > b.ovh_p99;
        case SortBy::port:
            break;
        }
        return std::tie(a.port, a.size) < std::tie(b.port, b.size);
    });
    return rows;
}

// The terminal's size; 0 (no limit) where there is no terminal: --batch.
struct Size {
    size_t cols = 0, lines = 0;
};

// A column of the port table: its header, its least width, and how to
// print a row's value.
struct Column {
    const char* name;
    int width;
    bool left;    // aligned left (the direction)
    int priority; // the last to go when the terminal is narrow: 0
    std::string (*value)(const PortRow&);
};

std::string ns_text(const std::optional<int64_t>& v) {
    // "-": no value, as when every access of the port failed or, for the
    // overhead, had clocks that disagree.
    return v ? std::to_string(*v) : "-";
}

const Column kColumns[] = {
    {"port", 6, false, 0,
     [](const PortRow& r) {
         char b[8];
         std::snprintf(b, sizeof(b), "0x%04x", static_cast<int>(r.port));
         return std::string(b);
     }},
    {"dir", 3, true, 0, [](const PortRow& r) { return r.dir; }},
    {"accesses", 9, false, 0, [](const PortRow& r) { return std::to_string(r.n); }},
    {"per_s", 9, false, 7,
     [](const PortRow& r) {
         char b[32];
         std::snprintf(b, sizeof(b), "%.0f", r.per_s);
         return std::string(b);
     }},
    {"bus_p50_ns", 11, false, 8, [](const PortRow& r) { return ns_text(r.bus_p50); }},
    {"bus_p99_ns", 11, false, 1, [](const PortRow& r) { return ns_text(r.bus_p99); }},
    {"ovh_p50_ns", 11, false, 9, [](const PortRow& r) { return ns_text(r.ovh_p50); }},
    {"ovh_p99_ns", 11, false, 2, [](const PortRow& r) { return ns_text(r.ovh_p99); }},
    {"errors", 6, false, 3, [](const PortRow& r) { return std::to_string(r.errors); }},
    {"timeouts", 8, false, 4, [](const PortRow& r) { return std::to_string(r.timeouts); }},
};
// A memory-mapped register's columns, in place of the port's: its address
// space, its address as an address (64 bits wide, never padded as a port)
// and its width.
const Column kRegisterColumns[] = {
    {"space", 5, true, 0, [](const PortRow& r) { return std::string(r.space); }},
    {"addr", 10, false, 0,
     [](const PortRow& r) {
         char b[24];
         std::snprintf(b, sizeof(b), "0x%" PRIx64, static_cast<uint64_t>(r.port));
         return std::string(b);
     }},
    {"size", 4, false, 0, [](const PortRow& r) { return std::to_string(r.size); }},
};

// Words (runs of text between double blanks) packed into lines of at most
// cols characters; a word longer than that is cut.
void wrap(std::ostringstream& o, const std::string& text, size_t cols) {
    if (!cols) {
        o << text << "\n";
        return;
    }
    std::string line;
    for (size_t at = 0; at <= text.size();) {
        size_t next = text.find("  ", at);
        std::string word = text.substr(at, next == std::string::npos ? next : next - at);
        at = next == std::string::npos ? text.size() + 1 : text.find_first_not_of(' ', next);
        if (at == std::string::npos)
            at = text.size() + 1;
        word = word.substr(0, cols);
        if (!line.empty() && line.size() + 2 + word.size() > cols) {
            o << line << "\n";
            line.clear();
        }
        line += (line.empty() ? "" : "  ") + word;
    }
    o << line << "\n";
}

std::string frame(const std::map<std::string, std::string>& st, const std::vector<PortRow>& rows,
                  double seconds, SortBy sort, bool interactive, const std::string& note,
                  Size size = {}, bool mmio = false) {
    std::vector<Column> columns(std::begin(kColumns), std::end(kColumns));
    if (mmio) {
        columns.erase(columns.begin());
        columns.insert(columns.begin(), std::begin(kRegisterColumns), std::end(kRegisterColumns));
    }
    auto get = [&](const char* k) {
        auto it = st.find(k);
        return it == st.end() ? std::string("?") : it->second;
    };
    std::ostringstream o;
    wrap(o,
         "busprof top - session " + get("session") + ", domain " + get("domain") + " (id " +
             get("domid") + "), " + get("state"),
         size.cols);
    wrap(o,
         "recorded " + get("recorded") + "  dropped " + get("dropped") + "  unrecorded " +
             get("unrecorded") + "  timeouts " + get("timeouts") + "  traps " + get("traps") +
             "  queue " + get("queue"),
         size.cols);
    char buf[128];
    std::snprintf(buf, sizeof(buf), "last %.1f s, sorted by %s", seconds, sort_name(sort));
    wrap(o, buf + std::string(interactive ? "  [s] sort  [p] pause/resume  [q] quit" : "") + note,
         size.cols);

    // The columns, each as wide as its widest value; on a narrow terminal
    // the ones of least use go (the priorities above) and a line says so.
    std::vector<size_t> width(columns.size());
    for (size_t c = 0; c < columns.size(); c++) {
        width[c] = static_cast<size_t>(columns[c].width);
        for (auto& r : rows)
            width[c] = std::max(width[c], columns[c].value(r).size());
    }
    std::vector<bool> shown(columns.size());
    std::string hidden;
    for (size_t c = 0; c < columns.size(); c++)
        shown[c] = true;
    for (int drop = 9; size.cols; drop--) {
        size_t total = 0;
        for (size_t c = 0; c < columns.size(); c++)
            total += shown[c] ? width[c] + (total ? 1 : 0) : 0;
        if (total <= size.cols || drop == 0)
            break;
        for (size_t c = 0; c < columns.size(); c++)
            if (columns[c].priority == drop) {
                shown[c] = false;
                hidden = std::string(columns[c].name) + (hidden.empty() ? "" : " ") + hidden;
            }
    }
    if (!hidden.empty())
        wrap(o, "(too narrow for " + hidden + ")", size.cols);
    o << "\n";
    auto line = [&](auto&& cell) {
        std::string l;
        for (size_t c = 0; c < columns.size(); c++) {
            if (!shown[c])
                continue;
            const std::string v = cell(c);
            const std::string pad(width[c] > v.size() ? width[c] - v.size() : 0, ' ');
            l += (l.empty() ? "" : " ") + (columns[c].left ? v + pad : pad + v);
        }
        o << l.substr(0, size.cols ? size.cols : l.size()) << "\n";
    };
    line([&](size_t c) { return std::string(columns[c].name); });
    // The rows the terminal has lines for, below what is printed already
    // and above the total (and the line saying how many more there are).
    const std::string so_far = o.str();
    const size_t above = static_cast<size_t>(std::count(so_far.begin(), so_far.end(), '\n'));
    size_t fit = rows.size();
    if (size.lines && above + 2 + rows.size() > size.lines)
        fit = size.lines > above + 3 ? size.lines - above - 3 : 0;
    uint64_t total = 0;
    for (size_t i = 0; i < rows.size(); i++) {
        if (i < fit)
            line([&](size_t c) { return columns[c].value(rows[i]); });
        total += rows[i].n;
    }
    if (fit < rows.size())
        wrap(o, "(" + std::to_string(rows.size() - fit) + " more, not shown)", size.cols);
    // "total" under the columns that name the port or register, the
    // figures under accesses and per_s.
    size_t key = 0;
    for (size_t c = 0; std::string_view(columns[c].name) != "accesses"; c++)
        key += shown[c] ? width[c] + (key ? 1 : 0) : 0;
    std::snprintf(buf, sizeof(buf), "%-*s %9" PRIu64 " %9.0f", static_cast<int>(key), "total",
                  total, seconds > 0 ? static_cast<double>(total) / seconds : 0.0);
    o << std::string(buf).substr(0, size.cols ? size.cols : sizeof(buf)) << "\n";
    return o.str();
}

// The terminal in single-key mode for as long as top runs.
class RawTerminal {
  public:
    RawTerminal() {
        if (::tcgetattr(STDIN_FILENO, &saved_) != 0)
            return;
        termios t = saved_;
        t.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
        std::fputs("\x1b[?25l", stdout); // hide the cursor
    }
    ~RawTerminal() {
        if (active_)
            ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
        std::fputs("\x1b[?25h\n", stdout);
        std::fflush(stdout);
    }
    RawTerminal(const RawTerminal&) = delete;
    RawTerminal& operator=(const RawTerminal&) = delete;

  private:
    termios saved_{};
    bool active_ = false;
};

volatile std::sig_atomic_t g_quit = 0;
volatile std::sig_atomic_t g_resized = 0; // SIGWINCH: draw the frame again at the new size

Size terminal_size() {
    winsize w{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) != 0 || !w.ws_col || !w.ws_row)
        return {80, 24}; // what a terminal that does not say is taken to be
    return {w.ws_col, w.ws_row};
}

} // namespace

namespace {

struct TopOptions {
    double interval_s = 1.0;
    bool batch = false;
    uint64_t iterations = 0;
    std::string db_path;
    std::string sort = "count";
    bool mmio = false; // --space mmio: memory-mapped registers, not ports
};

const auto kTimeout = std::chrono::milliseconds(5000);
const auto kFlushWait = std::chrono::milliseconds(2000);

// When the next frame is due: a time point of the steady clock, in a
// fraction of seconds (--interval).
using Due = decltype(std::chrono::steady_clock::now() + std::chrono::duration<double>());

// Waits out the interval, until `until`, reacting to keys meanwhile: q
// quits, s sorts by the next column, p pauses or resumes the recording.
// A resize (SIGWINCH) ends the wait too; the poll it interrupts returns
// at once.
void wait_for_frame(Globals& g, Due until, bool interactive, SortBy& by, const std::string& state) {
    while (!g_quit && !g_resized) {
        auto left =
            std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            break;
        pollfd p{STDIN_FILENO, POLLIN, 0};
        if (!interactive || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
            if (!interactive)
                ::usleep(static_cast<useconds_t>(left.count() * 1000));
            continue;
        }
        char key = 0;
        if (::read(STDIN_FILENO, &key, 1) != 1)
            continue;
        if (key == 'q')
            g_quit = 1;
        else if (key == 's')
            by = static_cast<SortBy>((static_cast<int>(by) + 1) % 4);
        else if (key == 'p')
            daemon_request(g.socket, state == "paused" ? "resume" : "pause", kTimeout);
        else
            continue;
        break; // show the change at once
    }
}

// What a frame shows, kept to draw it again at another size.
struct Shown {
    bool drawn = false;
    std::map<std::string, std::string> st;
    std::vector<PortRow> rows;
    double secs = 0;
    std::string note;
};

// One frame: the rows recorded since last_id, under the daemon's status
// (st, which it updates; a rearm starts the new session from its start).
Shown next_frame(Globals& g, Db& db, std::map<std::string, std::string>& st, int64_t& session,
                 int64_t& last_id, double secs, SortBy by, bool mmio) {
    // What the daemon recorded until now, written: records wait
    // for the writer's next burst (up to a second), and a frame
    // would otherwise count them when they were written, in lumps.
    // Where the DB cannot be written (another connection holds
    // its lock, a full disk) the daemon says so at once, and the
    // frame shows what was written.
    std::string note;
    try {
        daemon_request(g.socket, "flush", kFlushWait);
    } catch (const UserError& e) {
        note = std::string("  (not flushed: ") + e.what() + ")";
    }
    st = parse_status_line(daemon_request(g.socket, "status", kTimeout));
    if (int64_t s = std::stoll(st["session"]); s != session) {
        session = s; // a rearm: the new session from its start
        last_id = 0;
    }
    auto rows = interval(db, session, last_id, secs, by, mmio);
    // The header from a status asked after the rows were read,
    // so it is never older than they are: rows the writer
    // committed after the first status (a guest's start_trap
    // commits the records before it) came from a session
    // that first status may show as not started yet.
    if (auto later = parse_status_line(daemon_request(g.socket, "status", kTimeout));
        later["session"] == st["session"])
        st = std::move(later);
    return {true, st, std::move(rows), secs, note};
}

int run_top(Globals& g, const TopOptions& o) {
    auto st = parse_status_line(daemon_request(g.socket, "status", kTimeout));
    std::string path = o.db_path.empty() ? st["db"] : o.db_path;
    Db db = open_trace_db(path);
    SortBy by = o.sort == "bus"        ? SortBy::bus_p99
                : o.sort == "overhead" ? SortBy::ovh_p99
                : o.sort == "port"     ? SortBy::port
                                       : SortBy::count;
    const bool interactive = !o.batch && ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
    std::signal(SIGINT, [](int) { g_quit = 1; });
    std::signal(SIGTERM, [](int) { g_quit = 1; });
    if (interactive) {
        // Without SA_RESTART: the wait for a key returns, and the frame is
        // drawn again at once.
        struct sigaction sa {};
        sa.sa_handler = [](int) { g_resized = 1; };
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGWINCH, &sa, nullptr);
    }
    std::unique_ptr<RawTerminal> term;
    if (interactive)
        term = std::make_unique<RawTerminal>();

    int64_t session = std::stoll(st["session"]);
    int64_t last_id = 0;
    // The first frame covers what is recorded from now on.
    {
        Stmt s(db.get(), std::string("SELECT coalesce(max(id), 0) FROM ") +
                             (o.mmio ? "mmio_transactions" : "transactions"));
        if (s.step())
            last_id = sqlite3_column_int64(s.get(), 0);
    }
    auto t_prev = std::chrono::steady_clock::now();
    Shown last; // the frame on the screen, drawn again on a resize
    for (uint64_t n = 0; !g_quit && (!o.iterations || n < o.iterations); n++) {
        wait_for_frame(g, t_prev + std::chrono::duration<double>(o.interval_s), interactive, by,
                       st["state"]);
        if (g_quit)
            break;
        if (g_resized) {
            g_resized = 0;
            if (last.drawn) {
                std::fputs("\x1b[H\x1b[2J", stdout);
                std::fputs(frame(last.st, last.rows, last.secs, by, true, last.note,
                                 terminal_size(), o.mmio)
                               .c_str(),
                           stdout);
                flush_stdout();
            }
            n--; // not a frame of its own
            continue;
        }
        auto now = std::chrono::steady_clock::now();
        double secs = std::chrono::duration<double>(now - t_prev).count();
        t_prev = now;
        last = next_frame(g, db, st, session, last_id, secs, by, o.mmio);
        std::string f = frame(last.st, last.rows, secs, by, interactive, last.note,
                              interactive ? terminal_size() : Size{}, o.mmio);
        if (interactive)
            std::fputs("\x1b[H\x1b[2J", stdout);
        std::fputs(f.c_str(), stdout);
        if (!interactive)
            std::fputs("\n", stdout);
        flush_stdout();
    }
    return EXIT_SUCCESS;
}

} // namespace

void setup_top(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand(
        "top", "a refreshing view of a running daemon: per-port accesses, latency, state");
    auto o = std::make_shared<TopOptions>();
    c->add_option("--socket", g.socket, "control socket of the daemon");
    c->add_option("--db", o->db_path, "trace DB (default: the daemon's)");
    c->add_option("--interval", o->interval_s, "seconds between frames")
        ->capture_default_str()
        ->check(seconds_in(0.1, 3600));
    c->add_flag("--batch", o->batch, "print the frames as plain text, for scripts (no keys)");
    c->add_option("--iterations", o->iterations, "stop after this many frames (0: until q or ^C)")
        ->check(integer_in(0, UINT32_MAX));
    c->add_option("--sort", o->sort, "count, bus, overhead or port (the port or the address)")
        ->check(CLI::IsMember({"count", "bus", "overhead", "port"}));
    auto space = std::make_shared<std::string>("port");
    add_space_option(c, *space);
    c->callback([&g, &run, o, space] {
        o->mmio = *space == "mmio";
        run = [&g, o] { return run_top(g, *o); };
    });
}

} // namespace busprof
