#!/usr/bin/env python3
"""The figure of docs/analysis.md: one recorded crash replayed at the production rate, with the
GPU's free memory, the forecast (ETA and its earliest bound), the time really left and the risk
level. Standard library only; writes an SVG.

    python3 bench/crashes/figure.py data/corpus/holdout/live-kept-logits docs/img/forecast-kept-logits.svg
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIB = float(1 << 30)


def timeline(run_dir):
    files = sorted(glob.glob(os.path.join(run_dir, "*.jsonl*")))
    out = os.path.join(tempfile.mkdtemp(), "timeline.jsonl")
    subprocess.run(
        [os.environ.get("GPUMEM_BIN", os.path.join(ROOT, "target/release/gpumem-exporter")), "replay", *files,
         "--sample-interval", "1s", "--replay.report-interval", "1s", "--output", out],
        check=True, stderr=subprocess.DEVNULL)
    rows = []
    for line in open(out):
        o = json.loads(line)
        r = {"t": o["t"]}
        for m in o["metrics"]:
            if "pid" in m["labels"]:
                continue
            r[m["name"]] = m["value"]
        rows.append(r)
    return rows


def crash_time(run_dir):
    import gzip
    for f in sorted(glob.glob(os.path.join(run_dir, "*.jsonl*"))):
        opener = gzip.open if f.endswith(".gz") else open
        with opener(f, "rt") as fh:
            for line in fh:
                o = json.loads(line)
                if o.get("kind") == "event" and o.get("name") == "oom":
                    return o["t"]
    raise SystemExit("no oom event in %s" % run_dir)


def main():
    run_dir, out = sys.argv[1], sys.argv[2]
    rows = timeline(run_dir)
    crash = crash_time(run_dir)
    rows = [r for r in rows if r["t"] <= crash + 5]
    W, H, L, R, T = 760, 420, 60, 20, 30
    ph = 150  # height of each panel
    x0, x1 = 0.0, crash + 5
    sx = lambda t: L + (t - x0) / (x1 - x0) * (W - L - R)
    free_max = max(r.get("gpumem_free_bytes", 0) for r in rows) / GIB
    def poly(points, color, dash=""):
        if not points:
            return ""
        d = " ".join("%.1f,%.1f" % p for p in points)
        return '<polyline fill="none" stroke="%s" stroke-width="1.6" %s points="%s"/>' % (
            color, 'stroke-dasharray="5,4"' if dash else "", d)
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>']
    # Panel 1: free memory.
    y1 = lambda v: T + ph - v / free_max * ph
    svg.append('<text x="%d" y="%d">GPU free memory (GiB), NVML</text>' % (L, T - 8))
    svg.append(poly([(sx(r["t"]), y1(r.get("gpumem_free_bytes", 0) / GIB)) for r in rows], "#1f77b4"))
    for v in (0, free_max / 2, free_max):
        svg.append('<text x="%d" y="%.1f" text-anchor="end">%.0f</text>' % (L - 6, y1(v) + 4, v))
    # Panel 2: ETA against the time really left, 0..300 s, and the risk level as a band.
    top2 = T + ph + 60
    cap = 300.0
    y2 = lambda v: top2 + ph - min(v, cap) / cap * ph
    svg.append('<text x="%d" y="%d">seconds to the failing allocation: forecast (solid), earliest (thin), really left (dashed)</text>' % (L, top2 - 8))
    colors = {2: "#fdd49e", 3: "#fc8d59"}
    for r in rows:
        lvl = int(r.get("gpumem_oom_risk_level", 0))
        if lvl in colors:
            svg.append('<rect x="%.1f" y="%d" width="%.1f" height="6" fill="%s"/>' % (
                sx(r["t"]), top2 + ph + 4, sx(r["t"] + 1) - sx(r["t"]), colors[lvl]))
    svg.append(poly([(sx(r["t"]), y2(crash - r["t"])) for r in rows if crash - r["t"] <= cap], "#555", dash=True))
    segs, cur = [], []
    for r in rows:
        if "gpumem_oom_eta_seconds" in r:
            cur.append((sx(r["t"]), y2(r["gpumem_oom_eta_seconds"])))
        elif cur:
            segs.append(cur)
            cur = []
    segs.append(cur)
    for s in segs:
        svg.append(poly(s, "#d62728"))
    low = [(sx(r["t"]), y2(r["gpumem_oom_eta_lower_seconds"])) for r in rows if "gpumem_oom_eta_lower_seconds" in r]
    svg.append(poly(low, "#d62728").replace('stroke-width="1.6"', 'stroke-width="0.7"'))
    for v in (0, 100, 200, 300):
        svg.append('<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (L - 6, y2(v) + 4, v))
    lx = W - R - 170
    svg.append('<text x="%d" y="%d">risk: high</text><rect x="%d" y="%d" width="14" height="6" fill="%s"/>' % (lx + 20, top2 + 12, lx, top2 + 6, colors[2]))
    svg.append('<text x="%d" y="%d">critical</text><rect x="%d" y="%d" width="14" height="6" fill="%s"/>' % (lx + 110, top2 + 12, lx + 90, top2 + 6, colors[3]))
    # Time axis and the crash.
    for t in range(0, int(x1) + 1, 30):
        svg.append('<text x="%.1f" y="%d" text-anchor="middle">%d s</text>' % (sx(t), H - 8, t))
    svg.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black" stroke-dasharray="2,3"/>' % (sx(crash), sx(crash), T, top2 + ph))
    svg.append('<text x="%.1f" y="%d" text-anchor="end">torch.OutOfMemoryError</text>' % (sx(crash) - 4, T + 12))
    svg.append("</svg>")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
