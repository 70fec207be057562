#!/usr/bin/env python3
"""Put recorded runs into a corpus folder: one sub-folder per run, traces gzipped.

    python3 bench/crashes/import.py RAW_DIR CORPUS_DIR [--prefix P]

A run's traces are ``<run>.jsonl`` and ``<run>-<pid>.jsonl`` (one per traced process); its
log, if any, is kept beside them. Runs that did not end as their header says are refused.
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
            with open(src, "rb") as fi, gzip.open(os.path.join(dest, f + ".gz"), "wb", 9) as fo:
                shutil.copyfileobj(fi, fo)
            print("%s/%s: truth %s" % (dest, f, header.get("truth")), file=sys.stderr)
        log = os.path.join(a.raw, run + ".log")
        if os.path.exists(log):
            shutil.copy(log, os.path.join(dest, "run.log"))


if __name__ == "__main__":
    main()
