"""A Python prometheus_client exporter serving the same series as gpumem-exporter.

The comparison point of bench/scrape_load.sh. It fetches the exporter's /metrics once (text
format 0.0.4), parses every sample with prometheus_client's parser, and serves them from a
custom collector that builds the families anew on every scrape, as a Python exporter that keeps
its state in plain objects would (gauges and counters with the same names, help, labels and
values). Only this collector is registered: no process/platform/gc collectors, so both servers
answer with the same series.

    python python_exporter.py serve --source URL --port PORT [--dump FILE]
    python python_exporter.py compare FILE_A FILE_B     # same samples in both bodies?
"""

import argparse
import math
import signal
import sys
import threading
import urllib.request

from prometheus_client import start_http_server
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.parser import text_string_to_metric_families


def fetch(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode("utf-8")


def parse(text):
    """[(name, help, type, [(sample_name, labels, value)])] of a text-format body."""
    out = []
    for fam in text_string_to_metric_families(text):
        if fam.type not in ("gauge", "counter"):
            raise SystemExit(f"unexpected type {fam.type} for {fam.name}")
        samples = [(s.name, dict(s.labels), s.value) for s in fam.samples]
        out.append((fam.name, fam.documentation, fam.type, samples))
    return out


class Replay:
    """Yields the parsed families, built anew on every collect()."""

    def __init__(self, families):
        self.families = families

    def collect(self):
        for name, doc, typ, samples in self.families:
            if typ == "counter":
                fam = CounterMetricFamily(name, doc)
            else:
                fam = GaugeMetricFamily(name, doc)
            for sname, labels, value in samples:
                fam.add_sample(sname, labels, value)
            yield fam


def serve(args):
    text = fetch(args.source)
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as f:
            f.write(text)
    families = parse(text)
    n = sum(len(f[3]) for f in families)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Replay(families))
    server, thread = start_http_server(args.port, addr=args.addr, registry=registry)
    print(f"serving {len(families)} families, {n} samples on {args.addr}:{args.port}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.shutdown()


def samples_of(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            out[key] = s.value
    return out


def compare(args):
    a, b = samples_of(args.a), samples_of(args.b)
    only_a = a.keys() - b.keys()
    only_b = b.keys() - a.keys()
    differ = [
        k
        for k in a.keys() & b.keys()
        if not (a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])))
    ]
    print(f"samples: {len(a)} / {len(b)}; only in first {len(only_a)}, only in second "
          f"{len(only_b)}, different values {len(differ)}")
    for k in sorted(only_a)[:5]:
        print("  only in first:", k)
    for k in sorted(only_b)[:5]:
        print("  only in second:", k)
    for k in differ[:5]:
        print("  differ:", k, a[k], b[k])
    return 0 if not (only_a or only_b or differ) else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--source", required=True, help="URL of gpumem-exporter's /metrics")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--addr", default="127.0.0.1")
    s.add_argument("--dump", help="write the body fetched from --source to this file")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args()
    if args.cmd == "serve":
        serve(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
