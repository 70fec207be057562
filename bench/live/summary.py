#!/usr/bin/env python3
"""What reached the webhook receiver in a live run, beside each job's start and crash.

    python3 bench/live/summary.py OUTDIR

Two layouts. bench/live/run.sh's (OUTDIR/<job>.jsonl): when each job started and hit its real
torch.OutOfMemoryError, then each page with its lead before every crash. bench/crashes/
session.sh's (OUTDIR/runs.tsv, a folder per run): per run and per exporter (the scrape job:
`gpumem-exporter` takes the client's reports, `gpumem-exporter-nvml` reads NVML alone), every
page (critical) and warning (high) with the times it fired and resolved after the run's start
and before its crash, each counted once however often Alertmanager sent it again. An alert
belongs to the run during which it first fired: from the run's start to the next run's (runs
one after another), or to its end (runs side by side; then it is listed under each of them,
and its pid tells whose it is). Runs given a GPU each (runs.tsv's fifth column) are lanes: a
run's alerts are those with its GPU's `gpu` label, until the next run on that GPU starts.
"""
import glob
import json
import os
import sys

EXPORTERS = {"gpumem-exporter": "with client", "gpumem-exporter-nvml": "NVML alone"}


def read_jsonl(path):
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut short by a kill
    return out


def crash_of(paths):
    """(t0_unix of the first trace, Unix time of the first OOM or None, [(Unix time, pid)] of
    each process that ran out, first first)."""
    t0, first, pids = None, None, []
    for path in paths:
        start = pid = None
        for r in read_jsonl(path):
            if r.get("kind") == "header":
                start, pid = r.get("t0_unix"), r.get("pid")
                t0 = t0 or start
            elif r.get("kind") == "event" and r.get("name") == "oom" and start is not None:
                pids.append((start + r["t"], pid))
                if first is None or start + r["t"] < first:
                    first = start + r["t"]
                break
    return t0, first, sorted(pids)


def notifications(out):
    """Each alert once: its labels, the first time its firing and its resolved notification
    reached the receiver (None when none did)."""
    path = os.path.join(out, "pages.jsonl")
    alerts = {}
    for n in read_jsonl(path) if os.path.exists(path) else []:
        labels = n.get("labels") or {}
        key = (tuple(sorted(labels.items())), n.get("startsAt"))
        a = alerts.setdefault(key, {"labels": labels, "firing": None, "resolved": None})
        status = n.get("status")
        if status in ("firing", "resolved") and (a[status] is None or n["received"] < a[status]):
            a[status] = n["received"]
    return sorted(alerts.values(), key=lambda a: min(t for t in (a["firing"], a["resolved"]) if t is not None))


def flat(out):
    ooms = {}
    for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
        name = os.path.basename(path)[: -len(".jsonl")]
        if name == "pages":
            continue
        t0, oom, _ = crash_of([path])
        print(f"{name}: t0 {t0} oom {'none' if oom is None else round(oom, 1)}")
        if oom is not None:
            ooms[name] = oom
    pages = [a for a in notifications(out) if a["firing"] is not None]
    for p in pages:
        received = p["firing"]
        lead = {k: round(v - received, 1) for k, v in ooms.items() if v > received - 600}
        print(f"page {p['labels'].get('alertname')} {p['labels'].get('severity')} received {received:.1f} "
              f"seconds before each crash: {lead}")
    if not pages:
        print("no pages received")


def session(out):
    runs = []
    with open(os.path.join(out, "runs.tsv")) as f:
        for line in f:
            name, start, end, code, *gpu = line.rstrip("\n").split("\t")
            runs.append((name, float(start), float(end), code, gpu[0] if gpu else ""))
    runs.sort(key=lambda r: r[1])
    alerts = notifications(out)
    jobs = sorted({a["labels"].get("job", "?") for a in alerts} | {"gpumem-exporter"})
    if os.path.exists(os.path.join(out, "exporter-nvml.log")):
        jobs = sorted(set(jobs) | {"gpumem-exporter-nvml"})
    t_first = runs[0][1] if runs else 0.0
    # The pids each run traced: an alert that names another run's process (its OOM event,
    # still firing after the next run on its GPU started) is that run's.
    pids_of = {}
    for name, *_ in runs:
        for path in glob.glob(os.path.join(out, name, name + "*.jsonl")):
            with open(path) as f:
                header = json.loads(f.readline() or "{}")  # the header alone, not the trace
            pids_of.setdefault(name, set()).add(str(header.get("pid")))
    theirs = {p for n, ps in pids_of.items() for p in ps}
    table = []
    for i, (name, start, end, code, gpu) in enumerate(runs):
        # Runs on GPUs of their own (a fifth column) are lanes: a run's alerts carry its GPU's
        # `gpu` label and fire before the next run of the same lane starts.
        lane = [r for r in runs[i + 1 :] if r[4] == gpu]
        until = max(end, lane[0][1]) if lane else float("inf")
        traces = sorted(glob.glob(os.path.join(out, name, name + "*.jsonl")))
        _, crash, pids = crash_of(traces)
        truth = "oom" if crash is not None else "no crash"
        heading = f"{name}{' on GPU ' + gpu if gpu else ''}: {start - t_first:.0f}-{end - t_first:.0f} s of the session, exit {code}, {truth}"
        if crash is not None:
            heading += " after its start: " + ", ".join(f"pid {p} at {t - start:.1f} s" for t, p in pids)
        print(heading + f"; {len(traces)} trace(s)")

        def at(t):
            if t is None:
                return "-"
            s = f"+{t - start:.1f} s"
            return s + (f" ({crash - t:.1f} s before the crash)" if crash is not None and t <= crash else "")

        for job in jobs:
            mine = [a for a in alerts if a["labels"].get("job", "?") == job
                    and start <= (a["firing"] or a["resolved"]) < until
                    and (not gpu or a["labels"].get("gpu", gpu) == gpu)
                    and (a["labels"].get("pid") not in theirs or a["labels"]["pid"] in pids_of.get(name, ()))]
            print(f"  {EXPORTERS.get(job, job)} ({job}):" + ("" if mine else " nothing"))
            for a in mine:
                lb = a["labels"]
                who = f" pid {lb['pid']}" if lb.get("pid") else ""
                print(f"    {lb.get('severity', '?'):8} {lb.get('alertname', '?')}{who}: fired {at(a['firing'])}, resolved {at(a['resolved'])}")
            pages = [a for a in mine if a["labels"].get("severity") == "critical" and a["firing"]]
            warns = [a for a in mine if a["labels"].get("severity") == "warning" and a["firing"]]

            def first(xs):
                if not xs:
                    return "-"
                t = min(a["firing"] for a in xs)
                return f"+{t - start:.0f}" + (f" / {crash - t:.0f} ahead" if crash is not None else "")

            table.append((name, EXPORTERS.get(job, job), len(pages), first(pages), len(warns), first(warns)))
    print()
    print("| run | exporter | pages | first page (s after start / before the crash) | warnings | first warning |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in table:
        print("| %s | %s | %d | %s | %d | %s |" % row)


def main():
    out = sys.argv[1]
    if os.path.exists(os.path.join(out, "runs.tsv")):
        session(out)
    else:
        flat(out)


if __name__ == "__main__":
    main()
