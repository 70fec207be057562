#!/usr/bin/env python3
"""One screen of a live run (bench/live/run.sh OUTDIR): when each job started and hit its
real torch.OutOfMemoryError, and when each page reached the receiver, with the lead.

    python3 bench/live/summary.py OUTDIR
"""
import glob
import json
import os
import sys

out = sys.argv[1]
ooms = {}
for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    name = os.path.basename(path)[: -len(".jsonl")]
    if name == "pages":
        continue
    t0 = oom = None
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == "header" and r.get("t0_unix"):
                t0 = t0 or r["t0_unix"]
            if r.get("kind") == "event" and r.get("name") == "oom" and oom is None:
                oom = r["t"]
    print(f"{name}: t0 {t0} oom {'none' if oom is None else round(t0 + oom, 1)}")
    if oom is not None:
        ooms[name] = t0 + oom
pages = []
if os.path.exists(os.path.join(out, "pages.jsonl")):
    with open(os.path.join(out, "pages.jsonl")) as f:
        for line in f:
            try:
                pages.append(json.loads(line))
            except ValueError:
                pass
for p in pages:
    received = p["received"]
    lead = {k: round(v - received, 1) for k, v in ooms.items() if v > received - 600}
    print(f"page {p['labels'].get('alertname')} {p['labels'].get('severity')} received {received:.1f} "
          f"seconds before each crash: {lead}")
if not pages:
    print("no pages received")
