#!/usr/bin/env python3
"""Pages before real crashes, watched live: every run of the crash corpus replayed in real time
(NVML every second, one allocator report a second) through the exporter, scraped by a real
Prometheus with alerts/, routed by a real Alertmanager to a webhook that timestamps each page.
Each run is its own GPU, all start together; one stack per scrape/evaluation interval.

    python3 bench/live/replay.py OUT_DIR [--intervals 5s,15s] [--corpus data/corpus]

Needs prometheus and prometheus-alertmanager (Debian packages) and a built exporter
(GPUMEM_BIN, default target/release/gpumem-exporter). Prints a table of page leads
(crash time − webhook receipt) and writes it to OUT_DIR/leads.md.
"""
import argparse
import glob
import gzip
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(l) for l in f if l.strip()]


def prepare(corpus, work):
    """Rewrite each run's traces onto a GPU of its own; return [(index, run, crash_t, healthy)]."""
    runs = []
    for k, d in enumerate(sorted(p for p in glob.glob(os.path.join(corpus, "*", "*")) if os.path.isdir(p))):
        files = sorted(glob.glob(os.path.join(d, "*.jsonl*")))
        traces = [read_lines(f) for f in files]
        base = min(t[0].get("t0_unix", 0.0) for t in traces)
        crash = None
        for i, t in enumerate(traces):
            h = t[0]
            off = h.get("t0_unix", base) - base
            for o in t[1:]:
                if o.get("kind") == "event" and o.get("name") == "oom":
                    crash = o["t"] + off if crash is None else min(crash, o["t"] + off)
            h["gpu_uuid"] = "GPU-corpus-%02d" % k
            h["gpu_index"] = k
            out = os.path.join(work, "%02d-%d.jsonl" % (k, i))
            with open(out, "w") as f:
                for o in t:
                    f.write(json.dumps(o) + "\n")
        runs.append((k, os.path.basename(d), os.path.basename(os.path.dirname(d)), crash))
    return runs


class Hook(http.server.BaseHTTPRequestHandler):
    pages = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        t = time.time()
        for a in body.get("alerts", []):
            if a.get("status") == "firing":
                Hook.pages.append((t, self.server.stack, a["labels"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


def start_stack(name, interval, traces, work, hook_port):
    exp_port, prom_port, am_port = free_port(), free_port(), free_port()
    d = os.path.join(work, name)
    os.makedirs(d)
    procs = []
    t_start = time.time()
    exporter = subprocess.Popen(
        [os.environ.get("GPUMEM_BIN", os.path.join(ROOT, "target/release/gpumem-exporter")),
         "--source", "replay:" + ",".join(traces), "--sample-interval", "1s",
         "--web.listen-address", "127.0.0.1:%d" % exp_port, "--ingest.socket", ""],
        stdout=open(os.path.join(d, "exporter.log"), "w"), stderr=subprocess.STDOUT)
    procs.append(exporter)
    with open(os.path.join(ROOT, "bench", "live", "alertmanager.yml")) as src, \
            open(os.path.join(d, "am.yml"), "w") as f:
        f.write(src.read().replace("WEBHOOK_URL", "http://127.0.0.1:%d/%s" % (hook_port, name)))
    procs.append(subprocess.Popen(
        ["prometheus-alertmanager", "--config.file=" + os.path.join(d, "am.yml"),
         "--storage.path=" + os.path.join(d, "am"), "--web.listen-address=127.0.0.1:%d" % am_port,
         "--cluster.listen-address="],
        stdout=open(os.path.join(d, "alertmanager.log"), "w"), stderr=subprocess.STDOUT))
    with open(os.path.join(d, "prom.yml"), "w") as f:
        f.write("""global:
  scrape_interval: %s
  evaluation_interval: %s
rule_files: [%s, %s]
alerting:
  alertmanagers:
    - static_configs: [{targets: ['127.0.0.1:%d']}]
scrape_configs:
  - job_name: gpumem-exporter
    static_configs: [{targets: ['127.0.0.1:%d']}]
""" % (interval, interval, os.path.join(ROOT, "alerts/gpumem-rules.yaml"),
       os.path.join(ROOT, "alerts/gpumem-alerts.yaml"), am_port, exp_port))
    procs.append(subprocess.Popen(
        ["prometheus", "--config.file=" + os.path.join(d, "prom.yml"),
         "--storage.tsdb.path=" + os.path.join(d, "prom"), "--web.listen-address=127.0.0.1:%d" % prom_port],
        stdout=open(os.path.join(d, "prometheus.log"), "w"), stderr=subprocess.STDOUT))
    return t_start, procs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--intervals", default="5s,15s")
    p.add_argument("--corpus", default=os.path.join(ROOT, "data/corpus"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(a.out, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    runs = prepare(a.corpus, work)
    traces = sorted(glob.glob(os.path.join(work, "*.jsonl")))
    hook_port = free_port()
    server = http.server.HTTPServer(("127.0.0.1", hook_port), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.stack = None

    class Routed(Hook):
        def do_POST(self):
            self.server.stack = self.path.strip("/")
            Hook.do_POST(self)

    server.RequestHandlerClass = Routed
    stacks = {}
    all_procs = []
    for iv in a.intervals.split(","):
        t0, procs = start_stack(iv, iv, traces, work, hook_port)
        stacks[iv] = t0
        all_procs += procs
    longest = max((c or 0) for _, _, _, c in runs) + 90
    try:
        time.sleep(longest)
    finally:
        for pr in all_procs:
            pr.terminate()
        for pr in all_procs:
            pr.wait()
    lines = ["| run | set | crash at s | " + " | ".join(
        "%s: warning lead s | %s: page lead s" % (iv, iv) for iv in stacks) + " |",
        "| --- | --- | --- | " + " | ".join("--- | ---" for _ in stacks) + " |"]
    for k, name, group, crash in runs:
        cells = []
        for iv, t0 in stacks.items():
            got = {}
            for t, stack, labels in Hook.pages:
                if stack == iv and labels.get("gpu") == str(k):
                    got.setdefault(labels.get("alertname"), t)
            def lead(alert):
                if alert not in got:
                    return "none"
                if crash is None:
                    return "page on a healthy run"
                return "%.0f" % (t0 + crash - got[alert])
            cells += [lead("GpuMemoryOomRiskHigh"), lead("GpuMemoryOomImminent")]
        lines.append("| %s | %s | %s | %s |" % (name, group, "%.0f" % crash if crash else "healthy", " | ".join(cells)))
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(a.out, "leads.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(a.out, "pages.json"), "w") as f:
        json.dump(Hook.pages, f)


if __name__ == "__main__":
    main()
