#!/usr/bin/env python3
"""Put recorded runs into a corpus folder: one sub-folder per run, traces gzipped.

    python3 bench/crashes/import.py RAW_DIR CORPUS_DIR [--prefix P]

A run's traces are ``<run>.jsonl`` and ``<run>-<pid>.jsonl`` (one per traced process); its
log, if any, is kept beside them. Runs that did not end as their header says are refused.

A sample that repeats its stream's last time (the allocator's or NVML's) is dropped, and
counted: recorders before the sampler skipped missed ticks wrote a burst of catch-up samples
after a thread held the GIL for long, the same time once rounded, and a replay refuses those.
"""
import argparse
import gzip
import json
import os
import re
import shutil
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("raw")
    p.add_argument("corpus")
    p.add_argument("--prefix", default="")
    a = p.parse_args()
    runs = {}
    for name in sorted(os.listdir(a.raw)):
        if not name.endswith(".jsonl"):
            continue
        stem = name[: -len(".jsonl")]
        m = re.match(r"^(.*)-(\d+)$", stem)
        run = m.group(1) if m and os.path.exists(os.path.join(a.raw, m.group(1) + ".jsonl")) else stem
        runs.setdefault(run, []).append(name)
    for run, files in runs.items():
        dest = os.path.join(a.corpus, a.prefix + run)
        os.makedirs(dest, exist_ok=True)
        for f in files:
            src = os.path.join(a.raw, f)
            with open(src) as fh:
                header = json.loads(fh.readline())
            last, dropped = {}, 0
            with open(src) as fi, gzip.open(os.path.join(dest, f + ".gz"), "wt", 9) as fo:
                for line in fi:
                    o = json.loads(line)
                    if o.get("kind") == "sample":
                        streams = [k for k in ("torch", "nvml") if k in o]
                        if any(k in last and o["t"] <= last[k] for k in streams):
                            dropped += 1
                            continue
                        last.update((k, o["t"]) for k in streams)
                    fo.write(line)
            print("%s/%s: truth %s%s" % (dest, f, header.get("truth"),
                                         ", %d repeated samples dropped" % dropped if dropped else ""), file=sys.stderr)
        log = os.path.join(a.raw, run + ".log")
        if os.path.exists(log):
            with open(log) as fi, open(os.path.join(dest, "run.log"), "w") as fo:
                fo.write(portable(fi.read()))


def portable(text):
    """The log as the repository keeps it: the session's output folder named OUT and the
    checkout's files relative to it, not where they lay on the machine that recorded it."""
    text = re.sub(r"/root/(?:out|r[0-9a-z]+)/", "OUT/", text)
    return re.sub(r"/[\w./-]*?/(bench|clients)/", r"\1/", text)


if __name__ == "__main__":
    main()
