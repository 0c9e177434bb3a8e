#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The simulated trap path against its baseline, measured in the same run.

For 1, 2 and 4 vCPUs, in interleaved rounds:
  bare     busprof-bench-bare-chain: the same hops (SIGSEGV -> socket ->
           hypervisor thread -> eventfd -> one profiler poll() -> eventfd ->
           socket -> back) with nothing done at any of them; run every round
           with its hypervisor thread waiting in one read() and in poll() +
           read() (neither is faster at every vCPU count), and for each
           figure the variant with the better median over the rounds is the
           baseline.  Not the faster of the two in each round: that picks
           each round's luckier run and flatters the baseline by the noise;
  off      busprof-simxen + busprof daemon --manual-start (every access served,
           nothing recorded) + busprof-bench-trap-guest;
  on       the same, recording (a row per access in the trace DB; checked);
  mmio     the same as on, but each access a trapped 4-byte store to a
           memory-mapped register of the simulator's edu BAR (bp_map_mmio;
           the guest's SIGSEGV handler decodes the instruction instead of
           the OUT being refused by ioperm), recorded (a row each in
           mmio_transactions; checked).  mmio/on is the memory-mapped trap
           path against the port one;
  hog      with --idle-hog (and --pin): the bare chain again, beside a busy
           loop at SCHED_IDLE on the same CPU.  It shows what a thread that
           waits runnable at the lowest priority does to the chain: the CPU
           never idles, and the kernel runs the vCPUs' chains in another
           order (docs/design.md, "The writer's bursts").
Each guest vCPU makes ACCESSES trapped OUTs in a row to a port of its own
(the sim bus with --latency-ns 0, so the bus itself costs ~nothing).  Printed:
per-access wait p50/p99/p99.9 and throughput, the min and median over the
rounds, and the ratios on/bare and on/off of the medians; the same ratios
taken round by round (each round's runs follow one another, so what drifts
between rounds cancels), their median and range, which say how noisy the
machine was; the CPU time of the daemon's threads per access (from
/proc/PID/task/*/schedstat, read before the daemon stops), which the noise of
a shared machine moves far less than the rates, and of each part of the chain
against the bare chain's (the guest's process; the simulator's process, from
its CPU-time clock, or the bare hypervisor process; the daemon's serving
thread or the bare profiler process); and, from the trace DB, how many
recorded accesses waited over 1 ms in each round (a burst of the writer that
held them shows there), how many of the rows are marked storage_overlap (in
flight while the writer committed or a checkpoint ran), and the p99.9 of the
trap-to-resume time of all rows and of the unmarked ones.  --pin runs every
process on CPU 0 (taskset): wake-up noise removed, parallelism too.

usage: trap_path.py --bin BUILD_DIR [--accesses N] [--rounds R] [--vcpus 1,2,4] [--pin [--idle-hog]]
                    [--queue N]   (the daemon's record queue: a burst is a quarter of it at most)
The daemon runs with its own scheduling (docs/design.md, "The writer's bursts"),
which its command line does not offer to change.
"""
import argparse
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import time

PORTS = "0x3f8-0x3ff,0x300-0x30f"
EDU = "0xfebf0000-0xfebfffff"  # the simulator's edu BAR0


def parse(out):
    m = re.search(r"WAIT_NS p50 (\d+) p99 (\d+) p999 (\d+) max (\d+)", out)
    e = re.search(r"ELAPSED_NS (\d+) ACCESSES (\d+)", out)
    if not m or not e:
        raise RuntimeError("no figures in: " + out)
    p50, p99, p999, _ = map(int, m.groups())
    n = int(e.group(2))
    # The CPU time of each part, per access: the guest's process, and the
    # bare chain's hypervisor and profiler processes.
    cpu = {k: int(v) / n for k, v in re.findall(r"(guest|hypervisor|profiler) (\d+)",
                                                 out.split("CPU_NS", 1)[-1])} \
        if "CPU_NS" in out else {}
    return {"p50": p50, "p99": p99, "p999": p999, "rate": n / (int(e.group(1)) / 1e9),
            **{k + "_cpu": v for k, v in cpu.items()}}


class Sim:
    def __init__(self, b, pin, vcpus, daemon_args=()):
        self.b, self.pin, self.daemon_args = b, pin, list(daemon_args)
        self.tmp = tempfile.TemporaryDirectory(prefix="busprof-trap.")
        d = self.tmp.name
        self.sock, self.ctl, self.db = (os.path.join(d, "simxen.sock"),
                                        os.path.join(d, "busprof.sock"),
                                        os.path.join(d, "trace.db"))
        self.sim = self.spawn(["dom0-tool/busprof-simxen", "--socket", self.sock,
                               "--domain", f"1:bench:{PORTS}:{vcpus + 1}:iomem={EDU}"])
        self.wait(self.sock)
        self.run(["dom0-tool/busprof", "policy", "bench", "--allow", PORTS,
                  "--allow-mmio", EDU, "--sim-socket", self.sock])

    def cmd(self, argv):
        a = [os.path.join(self.b, argv[0]), *argv[1:]]
        return ["taskset", "-c", "0", *a] if self.pin else a

    def spawn(self, argv, **kw):
        return subprocess.Popen(self.cmd(argv), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, **kw)

    def run(self, argv, env=None):
        r = subprocess.run(self.cmd(argv), capture_output=True, text=True, env=env, timeout=600)
        if r.returncode:
            raise RuntimeError(f"{argv[0]}: {r.stderr}")
        return r.stdout

    @staticmethod
    def wait(path):
        for _ in range(1000):
            if os.path.exists(path):
                return
            time.sleep(0.01)
        raise RuntimeError(f"{path} never appeared")

    def measure(self, accesses, vcpus, record, mmio=False):
        if os.path.exists(self.db):
            os.unlink(self.db)
        d = self.spawn(["dom0-tool/busprof", "daemon", "bench", "--backend", "sim",
                        "--sim-socket", self.sock, "--socket", self.ctl, "--db", self.db,
                        "--latency-ns", "0", *self.daemon_args,
                        *([] if record else ["--manual-start"])])
        self.wait(self.ctl)
        env = dict(os.environ, BUSPROF_SIM_SOCKET=self.sock, BUSPROF_SIM_DOMID="1")
        sim_before = process_cpu_ns(self.sim.pid)
        out = self.run(["tests/busprof-bench-trap-guest", str(accesses), str(vcpus),
                        *(["mmio"] if mmio else [])], env)
        sim_cpu = process_cpu_ns(self.sim.pid) - sim_before
        cpu = thread_cpu_ns(d.pid)
        d.send_signal(signal.SIGTERM)
        _, err = d.communicate(timeout=60)
        if d.returncode:
            raise RuntimeError("daemon: " + err)
        waits = {0: [], 1: []}  # trap to resume, by storage_overlap
        table = "mmio_transactions" if mmio else "transactions"
        for w, o in sqlite3.connect(self.db).execute(
                f"SELECT t_resume_ns - t_trap_ns, storage_overlap FROM {table}"):
            waits[o].append(w)
        rows = len(waits[0]) + len(waits[1])
        want = accesses * vcpus if record else 0
        if rows != want:
            raise RuntimeError(f"{rows} rows recorded, {want} expected")
        slow = {o: sum(w > 1000000 for w in waits[o]) for o in waits}
        per = accesses * vcpus
        serve = sum(ns for name, ns in cpu.items() if not name.startswith("bp-"))
        return {**parse(out), "hypervisor_cpu": sim_cpu / per, "profiler_cpu": serve / per,
                "writer_cpu": cpu.get("bp-writer", 0) / per,
                "other_cpu": sum(ns for name, ns in cpu.items()
                                 if name.startswith("bp-") and name != "bp-writer") / per,
                "slow": slow[0] + slow[1], "slow_marked": slow[1],
                "marked": len(waits[1]), "db_p999": p999(waits[0] + waits[1]),
                "db_p999_unmarked": p999(waits[0])}

    def close(self):
        self.sim.kill()
        self.sim.wait()
        self.tmp.cleanup()


def thread_cpu_ns(pid):
    """CPU time of each thread of pid so far, by thread name (summed)."""
    cpu = {}
    task = f"/proc/{pid}/task"
    for tid in os.listdir(task):
        try:
            with open(f"{task}/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"{task}/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except FileNotFoundError:
            continue  # the thread ended
        cpu[name] = cpu.get(name, 0) + ns
    return cpu


def process_cpu_ns(pid):
    """CPU time of pid so far, its ended threads' included, in ns: the
    process's CPU-time clock (Linux's clockid of a PID's CPUCLOCK_SCHED:
    (~pid << 3) | 2).  /proc/PID/stat, where that clock cannot be read,
    counts clock ticks (10 ms here: 100 ns an access over 100 000)."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)
    except OSError:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1e9 / os.sysconf("SC_CLK_TCK")


def p999(v):
    v = sorted(v)
    return v[len(v) * 999 // 1000] if v else 0


WAITS = ("read", "poll")
FIGURES = (("p50", "ns"), ("p99", "ns"), ("p999", "ns"), ("rate", "/s"))


def best_wait(res, v, key):
    """The bare chain's variant with the better median of key over the rounds."""
    med = {w: statistics.median(x[key] for x in res[(v, w)]) for w in WAITS}
    return (max if key == "rate" else min)(WAITS, key=lambda w: med[w])


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--accesses", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--vcpus", default="1,2,4")
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--queue", type=int)
    ap.add_argument("--idle-hog", action="store_true")
    a = ap.parse_args()
    if a.idle_hog and not a.pin:
        ap.error("--idle-hog needs --pin: the busy loop shares CPU 0 with the chain")
    extra = [] if a.queue is None else ["--queue", str(a.queue)]
    b = os.path.abspath(a.bin)
    print(f"trap path: {a.accesses} OUTs per vCPU, {a.rounds} interleaved rounds"
          f"{', pinned to CPU 0' if a.pin else ''}"
          f"{', daemon ' + ' '.join(extra) if extra else ''}; load before: {loadavg()}")
    res = {}
    for v in map(int, a.vcpus.split(",")):
        for r in range(a.rounds):
            sim = Sim(b, a.pin, v, extra)
            def bare(w):
                return parse(subprocess.run(sim.cmd(["tests/busprof-bench-bare-chain",
                                                     str(a.accesses), str(v), w]),
                                            capture_output=True, text=True, timeout=600).stdout)
            try:
                for w in WAITS:
                    res.setdefault((v, w), []).append(bare(w))
                if a.idle_hog:
                    hog = subprocess.Popen(["chrt", "-i", "0", "taskset", "-c", "0", "sh", "-c",
                                            "while :; do :; done"])
                    try:
                        res.setdefault((v, "hog"), []).append(bare(best_wait(res, v, "rate")))
                    finally:
                        hog.kill()
                        hog.wait()
                res.setdefault((v, "off"), []).append(sim.measure(a.accesses, v, False))
                res.setdefault((v, "on"), []).append(sim.measure(a.accesses, v, True))
                res.setdefault((v, "mmio"), []).append(sim.measure(a.accesses, v, True, True))
            finally:
                sim.close()

    def fig(v, kind, key, f):
        return f([x[key] for x in res[(v, kind)]])

    def paired(v, kind, base, key):
        return [x[key] / y[key] for x, y in zip(res[(v, kind)], res[(v, base)])]

    hog_col = f" {'bare+hog':>10}" if a.idle_hog else ""
    print(f"{'vCPUs':>5} {'figure':<12} {'bare':>10} {'off':>10} {'on':>10} {'mmio':>10}"
          f" {'on/bare':>8} {'on/off':>7} {'mmio/on':>8}   [min for on]{hog_col}   (median of rounds)")
    for v in sorted({k[0] for k in res}):
        for key, unit in FIGURES:
            base = best_wait(res, v, key)
            med = {k: fig(v, k, key, statistics.median) for k in (base, "off", "on", "mmio")}
            lo = fig(v, "on", key, min if key != "rate" else max)
            hog = f" {fig(v, 'hog', key, statistics.median):>10.0f}" if a.idle_hog else ""
            print(f"{v:>5} {key + ' ' + unit:<12} {med[base]:>10.0f} {med['off']:>10.0f}"
                  f" {med['on']:>10.0f} {med['mmio']:>10.0f} {med['on'] / med[base]:>7.2f}x"
                  f" {med['on'] / med['off']:>6.2f}x {med['mmio'] / med['on']:>7.2f}x"
                  f"   [{lo:.0f}]{hog}")
    for v in sorted({k[0] for k in res}):
        print(f"{v:>5} vCPUs: the bare chain's better wait (median of rounds), by figure: "
              + ", ".join(f"{key} {best_wait(res, v, key)}" for key, _ in FIGURES)
              + "; accesses/s read / poll: "
              + " / ".join(f"{fig(v, w, 'rate', statistics.median):.0f}" for w in WAITS))
        print(f"{v:>5} vCPUs: ratios round by round, median [min-max]:")
        for key, _ in FIGURES:
            ob = paired(v, "on", best_wait(res, v, key), key)
            oo = paired(v, "on", "off", key)
            mo = paired(v, "mmio", "on", key)
            print(f"{'':>7}{key:<5} on/bare {statistics.median(ob):.2f}x [{min(ob):.2f}-{max(ob):.2f}]"
                  f"   on/off {statistics.median(oo):.2f}x [{min(oo):.2f}-{max(oo):.2f}]"
                  f"   mmio/on {statistics.median(mo):.2f}x [{min(mo):.2f}-{max(mo):.2f}]")
        cpu = {k: {c: fig(v, k, c, statistics.median)
                   for c in ("profiler_cpu", "writer_cpu", "other_cpu")}
               for k in ("off", "on")}
        print(f"{v:>5} vCPUs: daemon CPU per access (median of rounds), off / on:"
              f" serving thread {cpu['off']['profiler_cpu']:.0f} / {cpu['on']['profiler_cpu']:.0f} ns,"
              f" writer {cpu['off']['writer_cpu']:.0f} / {cpu['on']['writer_cpu']:.0f} ns,"
              f" other threads {cpu['off']['other_cpu']:.0f} / {cpu['on']['other_cpu']:.0f} ns")
        base = best_wait(res, v, "rate")
        parts = [(p, {k: fig(v, k, p + "_cpu", statistics.median)
                      for k in (base, "off", "on", "mmio")})
                 for p in ("guest", "hypervisor", "profiler")]
        print(f"{v:>5} vCPUs: CPU per access by part (median of rounds), bare ({base}) / off / on"
              " / mmio:"
              + ",".join(f" {p} {c[base]:.0f} / {c['off']:.0f} / {c['on']:.0f} / {c['mmio']:.0f} ns"
                         for p, c in parts)
              + " (profiler: the bare chain's, the daemon's serving thread)")
    for v in sorted({k[0] for k in res}):
        print(f"{v:>5} vCPUs: recorded accesses that waited over 1 ms (t_trap_ns to t_resume_ns),"
              f" per round: {', '.join(str(x['slow']) for x in res[(v, 'on')])}"
              f" of {a.accesses * v}; of them marked storage_overlap:"
              f" {', '.join(str(x['slow_marked']) for x in res[(v, 'on')])}")
        on = res[(v, "on")]
        print(f"{v:>5} vCPUs: marked storage_overlap per round:"
              f" {', '.join(str(x['marked']) for x in on)};"
              f" p99.9 of t_trap_ns to t_resume_ns, all rows / unmarked rows (median):"
              f" {statistics.median(x['db_p999'] for x in on):.0f} /"
              f" {statistics.median(x['db_p999_unmarked'] for x in on):.0f} ns")
    print(f"load after: {loadavg()}")


if __name__ == "__main__":
    main()
