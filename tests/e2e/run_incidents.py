#!/usr/bin/env python3
"""One page per incident, watched live: three real crashes on one GPU, replayed in real time.

The three GPU 0 jobs of the 2026-11-26 H200 recordings (data/corpus/holdout:
c-batch-warmup-3, c-kv-cache-2, c-expandable-2; each ran out of memory, one after the other,
within 270 s) replayed together by the exporter's replay source (it aligns them on their
clocks), scraped every 5 s by a real Prometheus with alerts/ as shipped, routed by a real
Alertmanager with the routing of alerts/README.md to webhook receivers served here. Asserts:

  1. the exporter counts three out-of-memory errors on GPU 0 (gpumem_oom_events_total = 3, as
     Prometheus has it), and GpuMemoryOomOccurred reaches a receiver for each of them;
  2. every critical episode of the exporter (an unbroken stretch at critical with one driving
     process) is one firing GpuMemoryOomImminent in Prometheus, with that process's pid, and a
     page at the pager receiver: no page spans two jobs, and the number of separate pages equals
     the number of the exporter's critical episodes;
  3. no OOM alert of GPU 0 is still firing 60 s after its job's crash (the page resolves once
     its process is gone).

Whether the forecast reached critical before each crash is the forecast's business, not this
test's: it prints what it found (lead of each page, or none) and the delay from the exporter's
critical level to the page at the receiver.

    python3 tests/e2e/run_incidents.py [--interval 5s] [--speed 1]

--interval sets Prometheus's scrape and evaluation interval (5 s; docs/alerts.md has the
numbers at 15 s); --speed the replay's (1: real time, as required; faster only to try a
change). Takes about 7 minutes at speed 1, and at most TOTAL_BUDGET seconds: every wait has
its own timeout, a watchdog ends the run after the budget, and every child process is stopped
by its own pid at the end. Fails, never skips, when Prometheus or Alertmanager is missing.

Environment: GPUMEM_BIN (default target/debug/gpumem-exporter), PROMETHEUS, ALERTMANAGER,
GPUMEM_E2E_KEEP=1 keeps the temporary directory (logs, configuration, what was observed).
"""
import argparse
import gzip
import json
import os
import re
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from stack import (GPUMEM_BIN, ROOT, Budget, Failure, Prom, free_port, http_get, prometheus_config,  # noqa: E402
                   require_binaries, run_check, shipped_route_config, start_alertmanager, start_prometheus,
                   wait_for, write)

RUNS = ["c-batch-warmup-3", "c-kv-cache-2", "c-expandable-2"]
CORPUS = os.path.join(ROOT, "data", "corpus", "holdout")
GPU = "0"
# A page must have resolved this long after its job's crash.
RESOLVED_WITHIN = 60.0
START_TIMEOUT = 30.0


def traces():
    """[(run, trace path, header, crash time on the replay's clock)], in the replay's order."""
    out = []
    for run in RUNS:
        (path,) = [os.path.join(CORPUS, run, f) for f in os.listdir(os.path.join(CORPUS, run))
                   if f.endswith(".jsonl.gz")]
        with gzip.open(path, "rt") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        oom = [o["t"] for o in lines[1:] if o.get("kind") == "event" and o.get("name") == "oom"]
        if len(oom) != 1:
            raise Failure(f"{path}: expected one oom event, found {len(oom)}")
        out.append((run, path, lines[0], oom[0]))
    uuids = {h.get("gpu_uuid") for _, _, h, _ in out}
    if len(uuids) != 1:
        raise Failure(f"the three recordings are not of one GPU: {uuids}")
    # The replay aligns traces of one GPU on their t0_unix: the earliest starts at 0.
    base = min(h["t0_unix"] for _, _, h, _ in out)
    return [(run, path, h, h["t0_unix"] - base + t) for run, path, h, t in out]


SAMPLE = re.compile(r'^(gpumem_oom_risk_level|gpumem_oom_risk_driver_info|gpumem_oom_event_info)\{([^}]*)\} (\S+)$')


def labels_of(text):
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', text))


class ExporterWatch:
    """The exporter's own view of GPU 0, read from /metrics every quarter second: its level and
    driver over wall time, and when each OOM event appeared."""

    def __init__(self, port, budget):
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.budget = budget
        self.levels = []       # (wall time, level, driver pid or None)
        self.events = {}       # event number -> (first wall time seen, labels)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.is_set():
            status, body = http_get(self.url, 2, self.budget)
            now = time.time()
            if status == 200:
                level, driver = None, None
                for line in body.splitlines():
                    m = SAMPLE.match(line)
                    if not m:
                        continue
                    name, labels = m.group(1), labels_of(m.group(2))
                    if labels.get("gpu") != GPU:
                        continue
                    if name == "gpumem_oom_risk_level" and "pid" not in labels:
                        level = int(float(m.group(3)))
                    elif name == "gpumem_oom_risk_driver_info":
                        driver = labels.get("pid") or ""
                    elif name == "gpumem_oom_event_info":
                        self.events.setdefault(labels["event"], (now, labels))
                if level is not None:
                    self.levels.append((now, level, driver))
            self.stop.wait(0.25)

    def critical_episodes(self):
        """[(driver pid, first wall time at critical, last wall time at critical)]: unbroken
        stretches at critical with one driver, as the exporter served them."""
        out = []
        for t, level, driver in self.levels:
            if level >= 3 and out and out[-1][0] == driver and out[-1][3]:
                out[-1][2] = t
            elif level >= 3:
                out.append([driver, t, t, True])
            elif out:
                out[-1][3] = False
        return [(d, a, b) for d, a, b, _ in out]


def firing_intervals(prom, alertname, start, end, step):
    """{pid: [(from, to)]} of the alert firing on GPU 0, from Prometheus's ALERTS series."""
    result, err = prom.query_range(f'ALERTS{{alertname="{alertname}",alertstate="firing",gpu="{GPU}"}}',
                                   start, end, step)
    if result is None:
        raise Failure(f"query of ALERTS for {alertname}: {err}")
    out = {}
    for s in result:
        pid = s["metric"].get("pid", "")
        times = [float(t) for t, _ in s["values"]]
        spans = []
        for t in times:
            if spans and t - spans[-1][1] <= 1.5 * step:
                spans[-1][1] = t
            else:
                spans.append([t, t])
        out.setdefault(pid, []).extend((a, b) for a, b in spans)
    return out


def run(tmp, children, hook, args, budget):
    require_binaries()
    runs = traces()
    last_crash = max(c for _, _, _, c in runs) / args.speed
    interval = args.interval
    step = float(interval.rstrip("s"))
    exp_port, prom_port, am_port = free_port(), free_port(), free_port()
    write(os.path.join(tmp, "alertmanager.yml"), shipped_route_config(hook.port))
    rules = [os.path.join(ROOT, "alerts", f) for f in ("gpumem-rules.yaml", "gpumem-alerts.yaml")]
    write(os.path.join(tmp, "prometheus.yml"), prometheus_config(exp_port, am_port, rules, interval))
    start_alertmanager(children, tmp, am_port)
    start_prometheus(children, tmp, prom_port)

    def up(url):
        def pred():
            children.check_alive()
            return http_get(url, 2, budget)[0] == 200
        return pred

    wait_for(up(f"http://127.0.0.1:{am_port}/-/ready"), START_TIMEOUT, "Alertmanager to be ready", budget)
    wait_for(up(f"http://127.0.0.1:{prom_port}/-/ready"), START_TIMEOUT, "Prometheus to be ready", budget)
    # The replay's clock starts with the exporter: start it last, with everything listening.
    started = time.time()
    children.start("exporter", [GPUMEM_BIN, "--source", "replay:" + ",".join(p for _, p, _, _ in runs),
                                "--replay.speed", str(args.speed), "--sample-interval", "1s",
                                "--web.listen-address", f"127.0.0.1:{exp_port}", "--ingest.socket", ""])
    prom = Prom(prom_port, budget)
    watch = ExporterWatch(exp_port, budget)
    wait_for(up(f"http://127.0.0.1:{exp_port}/metrics"), START_TIMEOUT, "the exporter's /metrics", budget)
    watch.thread.start()
    crashes = {run: started + c / args.speed for run, _, _, c in runs}
    for run, _, h, c in runs:
        budget.log(f"{run} (pid {h['pid']}) crashes at {c:.1f} s of the replay")

    # Watch until the last crash, its OOM alert's notification and the resolution of every
    # page have come, or the time is up.
    def settled():
        if time.time() < started + last_crash + 5:
            return False
        occurred = {a["labels"].get("event") for _, a, _ in hook.alerts()
                    if a["labels"].get("alertname") == "GpuMemoryOomOccurred" and a.get("status") == "firing"}
        firing, _ = prom.query(f'ALERTS{{alertstate="firing",gpu="{GPU}",alertname=~"GpuMemoryOom(Imminent|RiskHigh)"}}')
        return len(occurred) >= len(runs) and firing == []

    try:
        while budget.remaining() > 20 and not settled():
            children.check_alive()
            if time.time() > started + last_crash + RESOLVED_WITHIN + 30:
                break
            time.sleep(1)
    finally:
        watch.stop.set()
        watch.thread.join(timeout=5)
    end = time.time()
    budget.log(f"watched {end - started:.0f} s of the replay")

    failures = []
    by_pid = {str(h["pid"]): run for run, _, h, _ in runs}
    # 1. three OOMs, each an alert of its own at a receiver.
    total, err = prom.query(f'sum(gpumem_oom_events_total{{gpu="{GPU}"}})')
    counted = int(float(total[0]["value"][1])) if total else None
    budget.log(f"gpumem_oom_events_total for GPU {GPU} in Prometheus: {counted} ({err or 'ok'})")
    if counted != len(runs):
        failures.append(f"gpumem_oom_events_total for GPU {GPU} is {counted}, expected {len(runs)}")
    occurred = {}
    for path, a, received in hook.alerts():
        lb = a["labels"]
        if lb.get("alertname") == "GpuMemoryOomOccurred" and a.get("status") == "firing":
            occurred.setdefault(lb.get("event"), (received, path, lb, a.get("annotations", {})))
    for event, (received, path, lb, ann) in sorted(occurred.items()):
        run = by_pid.get(lb.get("pid"), "?")
        budget.log(f"GpuMemoryOomOccurred event {event} ({run}, pid {lb.get('pid')}, {lb.get('kind')}, "
                   f"outcome {lb.get('outcome')}) reached {path} {received - crashes.get(run, received):+.1f} s "
                   f"after the crash: {ann.get('description')}")
    pids_occurred = sorted(lb.get("pid") for _, _, lb, _ in occurred.values())
    if pids_occurred != sorted(by_pid):
        failures.append(f"GpuMemoryOomOccurred notifications for pids {pids_occurred}, expected one for each of "
                        f"{sorted(by_pid)}")
    # 2. each of the exporter's critical episodes is one page, for its own process.
    episodes = watch.critical_episodes()
    imminent = firing_intervals(prom, "GpuMemoryOomImminent", started, end, step)
    pages = {}
    for path, a, received in hook.alerts():
        lb = a["labels"]
        if lb.get("alertname") == "GpuMemoryOomImminent" and a.get("status") == "firing":
            pages.setdefault(lb.get("pid", ""), (received, path))
    for run, _, h, _ in runs:
        pid = str(h["pid"])
        mine = [e for e in episodes if e[0] == pid]
        crash = crashes[run]
        if not mine:
            budget.log(f"{run}: the exporter never reached critical for pid {pid} before its crash: no page "
                       f"(the forecast's business); its OOM event and alert are above")
        for _, a, b in mine:
            budget.log(f"{run}: the exporter at critical from {crash - a:.1f} s before the crash to "
                       f"{b - crash:+.1f} s after it")
        if mine and pid not in pages:
            failures.append(f"{run}: the exporter was critical with driver pid {pid}, but no page reached a receiver")
        if pid in pages:
            received, path = pages[pid]
            budget.log(f"{run}: page for pid {pid} reached {path} {crash - received:.1f} s before the crash, "
                       f"{received - mine[0][1]:.1f} s after the exporter's critical level" if mine else
                       f"{run}: a page for pid {pid} came without an exporter critical episode")
            if path != "/gpu-pager":
                failures.append(f"{run}: the page was routed to {path}, not to gpu-pager")
        spans = imminent.get(pid, [])
        if len(spans) != len(mine):
            failures.append(f"{run}: {len(mine)} critical episode(s) of the exporter, but GpuMemoryOomImminent "
                            f"fired {len(spans)} time(s) for pid {pid}: {spans}")
        for a, b in spans:
            budget.log(f"{run}: GpuMemoryOomImminent firing in Prometheus from {crash - a:.1f} s before the crash "
                       f"to {b - crash:+.1f} s after it")
    unexplained = set(imminent) - set(by_pid)
    if unexplained:
        failures.append(f"GpuMemoryOomImminent fired for pids that are none of the three jobs: {sorted(unexplained)}")
    # 3. nothing still firing a minute after its crash.
    for alertname in ("GpuMemoryOomImminent", "GpuMemoryOomRiskHigh"):
        for pid, spans in firing_intervals(prom, alertname, started, end, step).items():
            run = by_pid.get(pid)
            for a, b in spans:
                crash = crashes.get(run)
                if crash is None or b > crash + RESOLVED_WITHIN or (b >= end - step and b > crash):
                    failures.append(f"{alertname} for pid {pid or '(none)'} ({run}) still firing "
                                    f"{b - (crash or started):.0f} s after its crash")
                elif b >= crash:
                    budget.log(f"{alertname} for {run}: last firing {b - crash:+.1f} s after the crash")
    with open(os.path.join(tmp, "observed.json"), "w") as f:
        json.dump({"started": started, "crashes": crashes, "exporter_levels": watch.levels,
                   "exporter_events": watch.events, "notifications": list(hook.alerts())}, f)
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--interval", default="5s", help="Prometheus scrape and evaluation interval (5s)")
    p.add_argument("--speed", type=float, default=1.0, help="replay speed (1: real time)")
    args = p.parse_args()
    if not re.fullmatch(r"\d+s", args.interval):
        p.error("--interval: whole seconds, such as 5s")
    # The replay (about 410 s at speed 1), a minute after the last crash, start and stop.
    budget = Budget(410 / args.speed + 90)
    tmp = tempfile.mkdtemp(prefix="gpumem-incidents-")
    return run_check("INCIDENTS E2E", tmp, budget, lambda children, hook: run(tmp, children, hook, args, budget))


if __name__ == "__main__":
    sys.exit(main())
