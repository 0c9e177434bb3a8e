// SPDX-License-Identifier: GPL-2.0-only
// busprof report: one self-contained HTML file for a session, to open in a
// browser without a network: per port and direction a latency histogram
// on a log scale and the split of the guest's wait into its parts, a
// timeline of the accesses per vCPU, the top instructions, with --symbols
// the bus time per function, the triggers, markers and events.  The data
// goes into the page as JSON; a small script in the page draws the charts
// as SVG.
#include "cmd.h"
#include "db.h"
#include "error.h"
#include "figures.h"
#include "histogram.h"
#include "json.h"
#include "output.h"
#include "symbols.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

namespace busprof {

namespace {

// The histograms' bars: the summaries' buckets (histogram.h) with 2
// sub-bucket bits, four bars per power of two, each the union of 32 of the
// buckets of latency_buckets; a bar's edges are within 25 % of each other.
// Numbered in order; a negative value (which one clock cannot give) before
// every other.
constexpr int kBarBits = 2;
int bar_of(int64_t ns) {
    return ns >= 0 ? bucket_index(ns, kBarBits)
                   : -1 - bucket_index(ns == INT64_MIN ? INT64_MAX : -ns, kBarBits);
}
Bucket bar_at(int bar) {
    if (bar >= 0)
        return bucket_at(bar, kBarBits);
    Bucket b = bucket_at(-1 - bar, kBarBits);
    return {-b.hi, -b.lo};
}

// The result of a query that builds JSON with SQLite's own functions
// (json_object, json_group_array), which escape every string.
std::string json_query(Db& db, const std::string& sql, int64_t session) {
    Stmt st(db.get(), sql);
    if (sql.find('?') != std::string::npos)
        st.bind(1, session);
    if (!st.step())
        return "null";
    auto* t = sqlite3_column_text(st.get(), 0);
    return t ? reinterpret_cast<const char*>(t) : "null";
}

// The page.  The script reads the JSON in #data, draws each chart as an
// SVG element of class "chart" and says on <body> how many it drew
// (data-rendered) or what went wrong (data-error).
const char* const kPage1 = R"html(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>busprof report</title>
<style>
body { font: 14px/1.4 sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: 2px 8px; border: 1px solid #ddd; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; } .chart { background: #fcfcfc; border: 1px solid #e3e3e3; }
.note { color: #666; font-size: 12px; } .legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
</style></head>
<body>
<h1>busprof report</h1>
<div id="summary"></div>
<h2>Latency per port and direction</h2>
<p class="note">Bus time of each access (daemon, immediately around the real access), on a log scale: four bars per octave.</p>
<div class="charts" id="histograms"></div>
<h2>Where the guest's wait goes</h2>
<p class="note">Each access's wait, trap to resume, split into <b>exit&rarr;daemon</b> (t_bus_begin&minus;t_trap), <b>bus</b> and <b>daemon&rarr;resume</b> (t_resume&minus;t_bus_end); medians per port, then the first accesses one by one. Rows whose two clocks disagree (clock_skewed) are left out.</p>
<div class="legend"><span style="background:#e6a23c"></span>exit&rarr;daemon<span style="background:#409eff"></span>bus<span style="background:#67c23a"></span>daemon&rarr;resume</div>
<div class="charts" id="split"></div>
<h2>Timeline per vCPU</h2>
<div class="charts" id="timeline"></div>
<h2>Top instructions</h2>
<div id="rips"></div>
<section id="functions">
<h2>Bus time per function</h2>
<p class="note">Every access of the session, port and memory-mapped, by the function of its instruction as the <code>--symbols</code> files name it; those they do not name, and those with no instruction address, in the last row (?). Share: of the session's bus time.</p>
</section>
<h2>Markers</h2>
<div id="markers"></div>
<h2>Events</h2>
<div id="events"></div>
<script type="application/json" id="data">)html";

const char* const kPage2 = R"html(</script>
<script>
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#409eff", "#e6a23c", "#67c23a", "#f56c6c", "#909399", "#9b59b6", "#1abc9c", "#d35400"];
function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function text(parent, x, y, s, anchor) {
  const t = el("text", {x: x, y: y, "font-size": 10, "text-anchor": anchor || "start"}, parent);
  t.textContent = s;
  return t;
}
function chart(parent, kind, w, h, title) {
  const s = el("svg", {class: "chart", "data-kind": kind, width: w, height: h, viewBox: "0 0 " + w + " " + h});
  parent.appendChild(s);
  text(s, 8, 14, title);
  return s;
}
function ns(v) {
  if (v === null) return "\u2013";
  if (v < 0) return "-" + ns(-v);
  if (v >= 1e6) return (v / 1e6).toFixed(v >= 1e7 ? 0 : 1) + " ms";
  if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + " \u00b5s";
  return Math.round(v) + " ns";
}
function table(id, cols, rows) {
  const t = document.createElement("table");
  const hr = t.insertRow();
  for (const c of cols) { const th = document.createElement("th"); th.textContent = c[0]; th.className = c[1] || ""; hr.appendChild(th); }
  for (const r of rows) {
    const tr = t.insertRow();
    r.forEach((v, i) => { const td = tr.insertCell(); td.textContent = v === null ? "" : v; td.className = cols[i][1] || ""; });
  }
  document.getElementById(id).appendChild(t);
  return t;
}
function portName(p) {
  if (p.space === "mmio") return p.addr + "/" + p.size + " " + p.dir;   // a memory-mapped register
  return "0x" + p.port.toString(16).padStart(4, "0") + " " + p.dir;
}

function draw(d) {
  let n = 0;
  const s = d.session;
  document.title = "busprof report: session " + s.id + ", " + s.domain_name;
  table("summary", [["session"], ["domain", "l"], ["backend", "l"], ["state", "l"], ["start trigger", "l"],
                    ["stop trigger", "l"], ["pre-trigger"], ["recorded"], ["dropped"], ["unrecorded"], ["timeouts"], ["clock skew"]],
        [[s.id, s.domain_name + " (id " + s.domid + ")", s.backend + " / " + s.bus, s.state, s.start_trigger,
          s.stop_trigger, s.pre_trigger, s.recorded, s.dropped, s.unrecorded, s.timeouts, ns(s.clock_skew_ns)]]);

  // Histograms: x is the bucket index (log scale), y the count.
  const H = document.getElementById("histograms");
  const all = d.ports.concat(d.registers || []);   // ports, then memory-mapped registers
  let bmin = Infinity, bmax = -Infinity;
  for (const p of all) for (const b of p.hist) { bmin = Math.min(bmin, b[0]); bmax = Math.max(bmax, b[0]); }
  for (const p of all) {
    const w = 460, h = 180, x0 = 40, y0 = 150, span = Math.max(bmax - bmin + 1, 8);
    const svg = chart(H, "histogram", w, h, portName(p) + ": " + p.count + " accesses, p50 " + ns(p.p50) + ", p99 " + ns(p.p99) + ", max " + ns(p.max));
    if (p.space === "mmio") { svg.setAttribute("data-addr", p.addr); svg.setAttribute("data-size", p.size); }
    else svg.setAttribute("data-port", p.port);
    svg.setAttribute("data-dir", p.dir);
    const top = Math.max(...p.hist.map(b => b[3]), 1), bw = (w - x0 - 10) / span;
    for (const b of p.hist) {
      const bh = (y0 - 24) * b[3] / top;
      const r = el("rect", {class: "bar", x: x0 + (b[0] - bmin) * bw, y: y0 - bh, width: Math.max(bw - 1, 1), height: bh, fill: "#409eff"}, svg);
      el("title", {}, r).textContent = ns(b[1]) + " \u2013 " + ns(b[2]) + ": " + b[3];
    }
    el("line", {x1: x0, y1: y0, x2: w - 10, y2: y0, stroke: "#999"}, svg);
    for (const t of d.ticks)   // one label per power of two
      if (t[0] >= bmin && t[0] <= bmax + 1) text(svg, x0 + (t[0] - bmin) * bw, y0 + 14, ns(t[1]), "middle");
    text(svg, x0 - 4, y0 - (y0 - 24), String(top), "end");
    n++;
  }

  // Split: medians per port, then access by access.
  const S = document.getElementById("split");
  const parts = ["#e6a23c", "#409eff", "#67c23a"];
  {
    const rowh = 22, w = 620, x0 = 110, h = 30 + rowh * all.length;
    const svg = chart(S, "split-medians", w, h, "median of each part, per port");
    const max = Math.max(...all.map(p => p.split[0] + p.split[1] + p.split[2]), 1);
    all.forEach((p, i) => {
      let x = x0; const y = 24 + i * rowh;
      text(svg, x0 - 6, y + 12, portName(p), "end");
      p.split.forEach((v, k) => {   // null: every access's clocks disagreed, drawn as 0
        const bw = (w - x0 - 80) * v / max;
        el("title", {}, el("rect", {class: "part", x: x, y: y, width: bw, height: rowh - 6, fill: parts[k]}, svg)).textContent = ns(v);
        x += bw;
      });
      text(svg, x + 4, y + 12, ns(p.split[0] + p.split[1] + p.split[2]));
    });
    n++;
  }
  {
    const acc = d.accesses.filter(a => a[6] === 0 && a[4] !== null).slice(0, d.split_accesses);
    const w = 900, h = 220, x0 = 50, y0 = 190;
    const svg = chart(S, "split-accesses", w, h, "the first " + acc.length + " accesses, trap to resume");
    const max = Math.max(...acc.map(a => a[3] + a[4] + a[5]), 1), bw = (w - x0 - 10) / Math.max(acc.length, 1);
    acc.forEach((a, i) => {
      let y = y0;
      [a[3], a[4], a[5]].forEach((v, k) => {
        const bh = (y0 - 24) * v / max;
        y -= bh;
        el("rect", {class: "part", x: x0 + i * bw, y: y, width: Math.max(bw - 0.5, 0.5), height: bh, fill: parts[k]}, svg);
      });
    });
    text(svg, x0 - 4, 30, ns(max), "end");
    n++;
  }

  // Timeline: one lane per vCPU, a dot per access, coloured by port or register.
  {
    const T = document.getElementById("timeline");
    const vcpus = [...new Set(d.accesses.map(a => a[1]))].sort((a, b) => a - b);
    const lane = 26, w = 1000, x0 = 60, h = 40 + lane * Math.max(vcpus.length, 1);
    const svg = chart(T, "timeline", w, h, d.accesses.length + " accesses" + (d.sampled ? " (every " + d.sampled + "th)" : "") +
                      " over " + ns(d.span_ns));
    // a port's key, or a register's: address, width and direction
    const keys = all.map(p => (p.space === "mmio" ? parseInt(p.addr, 16) + "/" + p.size : p.port) + p.dir);
    vcpus.forEach((v, i) => text(svg, x0 - 6, 34 + i * lane + 4, "vCPU " + v, "end"));
    for (const a of d.accesses) {
      const i = vcpus.indexOf(a[1]), k = keys.indexOf((a[8] ? a[2] + "/" + a[8] : a[2]) + a[7]);
      el("circle", {class: "access", cx: x0 + (w - x0 - 10) * a[0] / Math.max(d.span_ns, 1), cy: 34 + i * lane, r: 2.5,
                    fill: COLORS[(k < 0 ? 0 : k) % COLORS.length]}, svg);
    }
    all.forEach((p, k) => {
      el("rect", {x: x0 + k * 110, y: h - 14, width: 10, height: 10, fill: COLORS[k % COLORS.length]}, svg);
      text(svg, x0 + k * 110 + 14, h - 5, portName(p));
    });
    n++;
  }

  table("rips", [["rip", "l"], ["symbol", "l"], ["source", "l"], ["accesses"], ["ports / addresses", "l"], ["bus time"]],
        d.rips.map(r => [r.rip, r.symbol, r.source, r.accesses, r.accessed, ns(r.bus_ns)])).id = "rip-table";
  if (d.functions)   // only with --symbols
    table("functions", [["function", "l"], ["accesses"], ["instructions"], ["bus time"], ["mean bus time"], ["share"]],
          d.functions.map(f => [f.symbol === null ? "?" : f.symbol, f.accesses, f.instructions, ns(f.bus_ns), ns(f.mean_bus_ns),
                                f.share === null ? "\u2013" : (100 * f.share).toFixed(1) + " %"])).id = "function-table";
  else
    document.getElementById("functions").remove();
  table("markers", [["t"], ["kind", "l"], ["origin", "l"], ["vCPU"], ["ports", "l"], ["cause", "l"]],
        d.markers.map(m => [ns(m.t_ns - d.t0), m.kind, m.origin, m.vcpu,
                            m.port_first === null ? "" : "0x" + m.port_first.toString(16) + "-0x" + m.port_last.toString(16), m.cause])).id = "marker-table";
  table("events", [["t"], ["kind", "l"], ["detail", "l"]],
        d.events.map(e => [ns(e.t_ns - d.t0), e.kind, e.detail])).id = "event-table";
  return n;
}
try {
  const n = draw(JSON.parse(document.getElementById("data").textContent));
  document.body.setAttribute("data-rendered", n);
} catch (e) {
  document.body.setAttribute("data-error", String(e));
  document.body.insertAdjacentText("afterbegin", "report could not be drawn: " + e);
}
</script>
</body></html>
)html";

// Up to this many accesses go into the page (evenly sampled beyond).
constexpr int64_t kMaxAccesses = 20000;
constexpr int kSplitAccesses = 300;

// Per port and direction: bus times, and the overhead's parts with the
// bus times of the rows whose clocks agree.
struct Port {
    int64_t port; // or a memory-mapped register's address
    int size;     // a register's width; 0 for a port
    std::string dir;
    std::vector<int64_t> bus;
    std::vector<int64_t> exit, resume, busok; // rows whose clocks agree
};

// The page's time line: from the first access or marker to the last, and
// how many accesses there are.
struct Span {
    int64_t t0 = 0, t1 = 0, total = 0;
};

Span span_of(Db& db, int64_t session) {
    Span sp;
    Stmt st(db.get(), "SELECT min(a, coalesce(m0, a)), max(b, coalesce(m1, b)), n FROM"
                      " (SELECT min(t_trap_ns) AS a, max(t_resume_ns) AS b, count(*) AS n"
                      "  FROM access_times WHERE session_id = ?1),"
                      " (SELECT min(t_ns) AS m0, max(t_ns) AS m1 FROM markers"
                      "  WHERE session_id = ?1)");
    st.bind(1, session);
    if (st.step()) {
        sp.t0 = sqlite3_column_int64(st.get(), 0);
        sp.t1 = sqlite3_column_int64(st.get(), 1);
        sp.total = sqlite3_column_int64(st.get(), 2);
    }
    return sp;
}

// The session's accesses: those to ports by port and direction, those to
// memory-mapped registers by address, width and direction, each list in
// the order of its key's first access.
struct Accesses {
    std::vector<Port> ports, registers;
};

// Every access of the session, of both address spaces, into its port or
// register, and every `every`th (0: all), in the order of their traps, into
// acc as the page's list of accesses.
Accesses read_accesses(Db& db, int64_t session, int64_t t0, int64_t every,
                       std::ostringstream& acc) {
    Accesses all;
    // (port or address, width, direction): a port's width is 0, so the two
    // spaces' keys never meet and one map indexes both lists
    std::map<std::tuple<int64_t, int, std::string>, size_t> index;
    int64_t i = 0, shown = 0;
    auto json = [](const std::optional<int64_t>& v) {
        return v ? std::to_string(*v) : std::string("null");
    };
    // Bus time and the overhead's parts as the schema defines them; the
    // parts are NULL where the two clocks disagree.
    Stmt st(db.get(), "SELECT t_trap_ns, vcpu, addr, dir, trap_to_bus_ns, bus_ns,"
                      " bus_to_resume_ns, clock_skewed, status,"
                      " CASE space WHEN 'mmio' THEN size ELSE 0 END FROM access_times"
                      " WHERE session_id = ? ORDER BY t_trap_ns, space DESC, id");
    st.bind(1, session);
    while (st.step()) {
        sqlite3_stmt* s = st.get();
        int64_t port = sqlite3_column_int64(s, 2);
        int size = sqlite3_column_int(s, 9); // 0: a port
        std::string dir = reinterpret_cast<const char*>(sqlite3_column_text(s, 3));
        auto key = std::make_tuple(port, size, dir);
        auto& of = size ? all.registers : all.ports;
        if (!index.count(key)) {
            index[key] = of.size();
            of.push_back({port, size, dir, {}, {}, {}, {}});
        }
        Port& p = of[index[key]];
        auto value = [s](int col) -> std::optional<int64_t> {
            if (sqlite3_column_type(s, col) == SQLITE_NULL)
                return std::nullopt;
            return sqlite3_column_int64(s, col);
        };
        bool ok = std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 8))) == "ok";
        bool skewed = sqlite3_column_int(s, 7) != 0;
        int64_t trap = sqlite3_column_int64(s, 0);
        auto to_bus = value(4), bus = value(5), to_resume = value(6);
        if (ok && bus) {
            p.bus.push_back(*bus);
            if (to_bus && to_resume) {
                p.exit.push_back(*to_bus);
                p.busok.push_back(*bus);
                p.resume.push_back(*to_resume);
            }
        }
        if (!every || i % every == 0) {
            acc << (shown ? "," : "") << "[" << trap - t0 << "," << sqlite3_column_int(s, 1) << ","
                << port << ",";
            if (ok && bus)
                acc << json(to_bus) << "," << *bus << "," << json(to_resume);
            else
                acc << "null,null,null";
            acc << "," << (skewed ? 1 : 0) << "," << json_string(dir) << "," << size << "]";
            shown++;
        }
        i++;
    }
    return all;
}

// "ports" (histogram of bus time, percentiles, split), "registers" (the
// same of memory-mapped registers, where the session has any) and
// "ticks", the histograms' axis labels.
void write_ports(JsonObject& o, std::vector<Port>& ports, std::vector<Port>& registers) {
    // A percentile as every command takes it; null where there is no value.
    auto pct = [](std::vector<int64_t>& v, int p) {
        if (v.empty())
            return std::string("null");
        std::sort(v.begin(), v.end());
        return std::to_string(nearest_rank(v, p));
    };
    int highest = 0; // the last bar of every histogram
    auto array = [&](std::vector<Port>& of) {
        std::sort(of.begin(), of.end(), [](const Port& a, const Port& b) {
            return std::tie(a.port, a.size, a.dir) < std::tie(b.port, b.size, b.dir);
        });
        JsonArray all;
        for (Port& p : of) {
            std::map<int, int64_t> hist;
            for (int64_t v : p.bus)
                hist[bar_of(v)]++;
            JsonArray bars;
            for (auto [b, n] : hist) {
                Bucket bar = bar_at(b);
                bars.add_json(JsonArray()
                                  .add_json(std::to_string(b))
                                  .add_json(std::to_string(bar.lo))
                                  .add_json(std::to_string(bar.hi))
                                  .add_json(std::to_string(n))
                                  .str());
                highest = std::max(highest, b);
            }
            JsonObject key;
            if (p.size) {
                char hex[32];
                std::snprintf(hex, sizeof(hex), "0x%" PRIx64, static_cast<uint64_t>(p.port));
                key.add("space", "mmio").add("addr", hex).add("size", p.size);
            } else {
                key.add("port", p.port);
            }
            all.add_json(key.add("dir", p.dir)
                             .add("count", static_cast<uint64_t>(p.bus.size()))
                             .add_json("p50", pct(p.bus, 50))
                             .add_json("p99", pct(p.bus, 99))
                             .add_json("max", pct(p.bus, 100))
                             .add_json("hist", bars.str())
                             .add_json("split", JsonArray()
                                                    .add_json(pct(p.exit, 50))
                                                    .add_json(pct(p.busok, 50))
                                                    .add_json(pct(p.resume, 50))
                                                    .str())
                             .str());
        }
        return all.str();
    };
    o.add_json("ports", array(ports));
    if (!registers.empty())
        o.add_json("registers", array(registers));
    // The axis' labels: the bars that begin a power of two.
    JsonArray ticks;
    for (int b = 1; b <= highest + 1; b++)
        if (int64_t lo = bar_at(b).lo; std::has_single_bit(static_cast<uint64_t>(lo)))
            ticks.add_json(
                JsonArray().add_json(std::to_string(b)).add_json(std::to_string(lo)).str());
    o.add_json("ticks", ticks.str());
}

// Top instructions by bus time, of both address spaces, named where
// --symbols knows them: the elements of "rips", each with the ports and
// register addresses it accessed.
std::string rips_json(Db& db, int64_t session, const Symbols& syms) {
    Stmt r(db.get(), "SELECT rip, count(*), group_concat(DISTINCT CASE space WHEN 'mmio'"
                     " THEN printf('0x%x', addr) ELSE printf('0x%04x', addr) END),"
                     " coalesce(sum(bus_ns), 0) AS bus"
                     " FROM access_times WHERE session_id = ? AND rip != 0"
                     " GROUP BY rip ORDER BY bus DESC, rip LIMIT 20");
    r.bind(1, session);
    JsonArray rips;
    while (r.step()) {
        auto rip = static_cast<uint64_t>(sqlite3_column_int64(r.get(), 0));
        auto sym = syms.lookup(rip);
        char hex[32];
        std::snprintf(hex, sizeof(hex), "0x%" PRIx64, rip);
        rips.add_json(
            JsonObject()
                .add("rip", hex)
                .add_json("symbol", sym ? json_string(sym->text()) : "null")
                .add_json("source", sym && !sym->source.empty() ? json_string(sym->source) : "null")
                .add("accesses", static_cast<int64_t>(sqlite3_column_int64(r.get(), 1)))
                .add("accessed", reinterpret_cast<const char*>(sqlite3_column_text(r.get(), 2)))
                .add("bus_ns", static_cast<int64_t>(sqlite3_column_int64(r.get(), 3)))
                .str());
    }
    return rips.str();
}

// Bus time per function, of both address spaces: the elements of
// "functions", most bus time first.  The instructions no --symbols file
// names and the accesses with no instruction address (rip 0) are one row,
// of symbol null, last: the rows hold every access, and their shares add
// up to the session's bus time.  Bus time and its mean as symbolize takes
// them per instruction: over the rows that have one.
std::string functions_json(Db& db, int64_t session, const Symbols& syms) {
    struct Function {
        std::optional<std::string> symbol; // nullopt: no file names it
        int64_t accesses = 0, instructions = 0, timed = 0, bus = 0;
    };
    std::vector<Function> fns;
    std::map<std::optional<std::string>, size_t> index;
    int64_t total = 0;
    Stmt r(db.get(), "SELECT rip, count(*), count(bus_ns), coalesce(sum(bus_ns), 0)"
                     " FROM access_times WHERE session_id = ? GROUP BY rip");
    r.bind(1, session);
    while (r.step()) {
        auto rip = static_cast<uint64_t>(sqlite3_column_int64(r.get(), 0));
        std::optional<std::string> name;
        if (auto sym = rip ? syms.lookup(rip) : std::nullopt)
            name = sym->name;
        if (!index.count(name)) {
            index[name] = fns.size();
            fns.push_back({name});
        }
        Function& f = fns[index[name]];
        f.accesses += sqlite3_column_int64(r.get(), 1);
        f.instructions += rip != 0;
        f.timed += sqlite3_column_int64(r.get(), 2);
        f.bus += sqlite3_column_int64(r.get(), 3);
        total += sqlite3_column_int64(r.get(), 3);
    }
    std::sort(fns.begin(), fns.end(), [](const Function& a, const Function& b) {
        return std::make_tuple(!a.symbol, -a.bus, a.symbol) <
               std::make_tuple(!b.symbol, -b.bus, b.symbol);
    });
    JsonArray all;
    for (const Function& f : fns) {
        // as round(avg(bus_ns)) gives it in SQL
        std::string mean = f.timed ? std::to_string(std::llround(static_cast<double>(f.bus) /
                                                                 static_cast<double>(f.timed)))
                                   : "null";
        char share[32] = "null";
        if (total)
            std::snprintf(share, sizeof(share), "%.6g",
                          static_cast<double>(f.bus) / static_cast<double>(total));
        all.add_json(JsonObject()
                         .add_json("symbol", f.symbol ? json_string(*f.symbol) : "null")
                         .add("accesses", f.accesses)
                         .add("instructions", f.instructions)
                         .add("bus_ns", f.bus)
                         .add_json("mean_bus_ns", mean)
                         .add_json("share", share)
                         .str());
    }
    return all.str();
}

std::string build_json(Db& db, int64_t session, const Symbols& syms) {
    JsonObject o;
    o.add_json(
        "session",
        json_query(db,
                   "SELECT json_object('id', id, 'domid', domid, 'domain_name', domain_name,"
                   " 'backend', backend, 'bus', bus, 'state', state, 'start_trigger',"
                   " start_trigger, 'stop_trigger', stop_trigger, 'pre_trigger', pre_trigger,"
                   " 'recorded', recorded, 'dropped', dropped, 'unrecorded', unrecorded,"
                   " 'timeouts', timeouts, 'clock_skew_ns', clock_skew_ns)"
                   " FROM sessions WHERE id = ?",
                   session));
    const Span sp = span_of(db, session);
    const int64_t t0 = sp.t0, t1 = sp.t1, total = sp.total;
    int64_t every = total > kMaxAccesses ? (total + kMaxAccesses - 1) / kMaxAccesses : 0;
    std::ostringstream acc;
    Accesses all = read_accesses(db, session, t0, every, acc);
    write_ports(o, all.ports, all.registers);
    o.add_json("accesses", "[" + acc.str() + "]")
        .add("sampled", every)
        .add("span_ns", t1 - t0)
        .add("t0", t0)
        .add("split_accesses", static_cast<int64_t>(kSplitAccesses))
        .add_json("rips", rips_json(db, session, syms))
        .add_json("markers",
                  json_query(db,
                             "SELECT coalesce(json_group_array(json_object('t_ns', t_ns, 'kind',"
                             " kind, 'origin', origin, 'vcpu', vcpu, 'port_first', port_first,"
                             " 'port_last', port_last, 'cause', cause)), '[]') FROM (SELECT *"
                             " FROM markers WHERE session_id = ? ORDER BY t_ns, id)",
                             session))
        .add_json("events",
                  json_query(db,
                             "SELECT coalesce(json_group_array(json_object('t_ns', t_ns, 'kind',"
                             " kind, 'detail', detail)), '[]') FROM (SELECT * FROM events"
                             " WHERE session_id = ? ORDER BY t_ns, id)",
                             session));
    if (!syms.empty())
        o.add_json("functions", functions_json(db, session, syms));
    return o.str();
}

} // namespace

void setup_report(CLI::App& app, Globals& g, Runner& run) {
    auto* c = app.add_subcommand("report", "one self-contained HTML report of a session");
    auto out = std::make_shared<std::string>();
    auto session = std::make_shared<int64_t>(0);
    auto specs = std::make_shared<std::vector<std::string>>();
    c->add_option("--db", g.db, "trace DB file");
    c->add_option("--session", *session, "the session (default: the last one)")
        ->check(integer_in(1, INT64_MAX));
    c->add_option("-o,--output", *out, "the HTML file to write, - for stdout")
        ->required()
        ->check(non_empty("--output"));
    add_symbols_option(c, *specs);
    c->callback([&g, &run, out, session, specs] {
        run = [&g, out, session, specs] {
            Output o(*out); // a bad -o fails before any work
            Symbols syms = load_symbols(*specs);
            Db db = open_trace_db(g.db);
            int64_t s = *session;
            if (!s)
                s = db.scalar("SELECT coalesce(max(id), 0) FROM sessions");
            if (!s || !db.scalar("SELECT count(*) FROM sessions WHERE id = " + std::to_string(s)))
                throw UserError(s ? "no session " + std::to_string(s) + " in " + g.db
                                  : "no session in " + g.db,
                                "list them with 'busprof sessions --db " + g.db + "'");
            std::string json = build_json(db, s, syms);
            // Nothing in the data may end the <script> element it sits in.
            for (size_t at = 0; (at = json.find("</", at)) != std::string::npos; at += 3)
                json.replace(at, 2, "<\\/");
            o.stream() << kPage1 << json << kPage2;
            o.commit();
            // Beside the page, not in it, when the page goes to stdout.
            std::fprintf(o.is_stdout() ? stderr : stdout,
                         "busprof: report of session %" PRId64 " written to %s\n", s,
                         o.is_stdout() ? "standard output" : out->c_str());
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
