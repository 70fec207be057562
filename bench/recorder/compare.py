#!/usr/bin/env python3
"""The replay's verdict beside what Alertmanager did live, for each run of a device session
(bench/recorder/device.sh OUTDIR): when the job failed, from when the replay says the exporter
warned and paged, and when the warning and the page reached the webhook receiver.

    python3 bench/recorder/compare.py OUTDIR
"""
import glob
import json
import os
import sys

out = sys.argv[1]
pages = []
if os.path.exists(os.path.join(out, "pages.jsonl")):
    with open(os.path.join(out, "pages.jsonl")) as f:
        pages = [json.loads(l) for l in f if l.strip()]


def header(path):
    with open(path) as f:
        return json.loads(f.readline())


for run in sorted(d for d in glob.glob(os.path.join(out, "*")) if os.path.isdir(d)):
    name = os.path.basename(run)
    traces = sorted(glob.glob(os.path.join(run, "run*.jsonl")))
    if not traces:
        print("%s: no trace" % name)
        continue
    hs = [header(t) for t in traces]
    t0 = min(h["t0_unix"] for h in hs)
    try:
        with open(os.path.join(run, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError):
        s = {}
    print("%s: %d trace(s) on GPU(s) %s; exit %s; complete %s; stopped_by %s" % (
        name, len(traces), sorted({h.get("gpu_index") for h in hs}), [h.get("exit_code") for h in hs],
        [h.get("complete") for h in hs], [h.get("stopped_by") for h in hs]))
    print("   replay: oom_t %s, warning from %s (lead %s), critical from %s (lead %s)" % (
        s.get("oom_t"), s.get("warning_from_t"), s.get("warning_lead_s"), s.get("critical_from_t"),
        s.get("critical_lead_s")))
    if s.get("oom_t") is None:
        continue
    oom_unix = t0 + s["oom_t"]
    mine = [p for p in pages if t0 <= p["received"] <= oom_unix + 120]
    for p in mine:
        print("   live: %s %s %s at %.1f s, %.1f s before the failure" % (
            p["labels"].get("alertname"), p["labels"].get("severity"), p["status"],
            p["received"] - t0, oom_unix - p["received"]))
    if not mine:
        print("   live: no notification")
