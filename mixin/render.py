#!/usr/bin/env python3
"""Render the monitoring mixin into Prometheus rule files and Grafana dashboards.

    python3 mixin/render.py --check          # the shipped files must equal the default render
    python3 mixin/render.py --write          # regenerate alerts/*.yaml and grafana/*.json
    python3 mixin/render.py --out DIR        # write DIR/alerts/*.yaml and DIR/grafana/*.json
    python3 mixin/render.py --mixin my.libsonnet --out DIR   # a mixin with your own _config

Evaluates the jsonnet with the `jsonnet` Python package (`_jsonnet`), or else the `jsonnet`
command. Needs PyYAML. Every rendered dashboard is linted (lint_dashboards) before anything is
written or compared.

The output format is fixed so that a render is byte-for-byte reproducible:
  - rule files: a comment header, then the groups in block style; `expr` with line breaks as a
    literal block (`|`), `description` annotations folded (`>-`) at the mixin's own line
    breaks (u.description) or else at 100 columns outside template actions, every other
    string plain where YAML reads it back unchanged, else
    double-quoted. The comments of the mixin's rules (hidden fields) are kept. Whatever is
    written is read back with PyYAML and must equal the mixin's rules exactly.
  - dashboards: JSON, 2-space indent, sorted keys, final newline.
"""
import argparse
import difflib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import yaml

from lint import lint_dashboards  # noqa: E402  (beside this file)

MIXIN_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(MIXIN_DIR)
# Everything the mixin renders is shipped in these places; --check also fails on a file there
# that the mixin does not render.
SHIPPED_GLOBS = ("alerts/*.yaml", "grafana/*.json")

WIDTH = 100
# Per file; a longer diff is a reformatting, not an edit to read line by line.
MAX_DIFF_LINES = 400


# --- evaluation ------------------------------------------------------------------------------


def evaluate(mixin_path):
    """The render of lib/render.libsonnet for the mixin at mixin_path, as Python data."""
    snippet = "(import %s)(import %s)" % (
        json.dumps(os.path.join(MIXIN_DIR, "lib", "render.libsonnet")),
        json.dumps(os.path.abspath(mixin_path)),
    )
    try:
        import _jsonnet
    except ImportError:
        _jsonnet = None
    if _jsonnet is not None:
        out = _jsonnet.evaluate_snippet("render", snippet, jpathdir=[MIXIN_DIR])
    else:
        jsonnet = shutil.which("jsonnet")
        if not jsonnet:
            sys.exit("render.py: neither the jsonnet Python package nor a jsonnet command is installed")
        run = subprocess.run([jsonnet, "-J", MIXIN_DIR, "-e", snippet], stdout=subprocess.PIPE, text=True)
        if run.returncode:
            sys.exit(f"render.py: jsonnet failed (exit {run.returncode})")
        out = run.stdout
    return json.loads(out)


# --- YAML ------------------------------------------------------------------------------------

RULE_KEYS = ["alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"]
GROUP_KEYS = ["name", "interval", "query_offset", "limit", "labels"]
LABEL_KEYS = ["severity"]
ANNOTATION_KEYS = ["summary", "description", "runbook_url"]
PLAIN_FIRST = set("-?:,[]{}#&*!|>'\"%@`")


def ordered(mapping, first):
    return [k for k in first if k in mapping] + [k for k in mapping if k not in first]


def plain_ok(s):
    if not s or s != s.strip() or "\n" in s or "\t" in s or s[0] in PLAIN_FIRST:
        return False
    if ": " in s or " #" in s or s.endswith(":"):
        return False
    try:
        return yaml.safe_load(s) == s
    except yaml.YAMLError:
        return False


def fold(s, width):
    """Lines of s for a folded block scalar: breaks at single spaces outside {{ }} actions,
    greedy up to width; None where folding could change the text."""
    if not s or s[0] == " " or s[-1] == " " or "\n" in s or "\t" in s:
        return None
    breaks, depth = [], 0
    for i, ch in enumerate(s):
        if s.startswith("{{", i):
            depth += 1
        elif s.startswith("}}", i) and depth:
            depth -= 1
        elif ch == " " and depth == 0 and s[i - 1] != " " and s[i + 1] != " ":
            breaks.append(i)
    lines, start, last = [], 0, None
    for b in breaks + [len(s)]:
        if b - start > width and last is not None:
            lines.append(s[start:last])
            start = last + 1
        last = b
    lines.append(s[start:])
    return lines


def emit_value(key, value, indent, out, prefix=None, folds=None):
    """Append `key: value` at indent (prefix replaces the indent's last 2 columns: '- ').
    folds: {key: lines} of strings to fold at the mixin's own line breaks."""
    lead = " " * indent if prefix is None else " " * (indent - len(prefix)) + prefix
    inner = " " * (indent + 2)
    if isinstance(value, dict):
        first = LABEL_KEYS if key == "labels" else ANNOTATION_KEYS if key == "annotations" else []
        if not value:
            out.append(f"{lead}{key}: {{}}")
            return
        out.append(f"{lead}{key}:")
        for k in ordered(value, first):
            emit_value(k, value[k], indent + 2, out, folds=folds if key == "annotations" else None)
        return
    if not isinstance(value, str):
        out.append(f"{lead}{key}: {json.dumps(value)}")
        return
    lines = value.split("\n")
    if "\n" in value and not value.endswith("\n\n") and lines[0][:1] != " " and "\t" not in value \
            and all(line == line.rstrip() for line in lines):
        chomp = "" if value.endswith("\n") else "-"
        body = lines[:-1] if value.endswith("\n") else lines
        out.append(f"{lead}{key}: |{chomp}")
        out.extend(inner + line if line else "" for line in body)
        return
    folded = None
    lines = (folds or {}).get(key)
    if lines and " ".join(lines) == value and all(fold(line, len(line)) == [line] for line in lines):
        folded = lines
    elif key == "description":
        folded = fold(value, WIDTH - len(inner))
    if folded:
        out.append(f"{lead}{key}: >-")
        out.extend(inner + line for line in folded)
    elif plain_ok(value):
        out.append(f"{lead}{key}: {value}")
    else:
        out.append(f"{lead}{key}: {json.dumps(value, ensure_ascii=False)}")


def emit_comment(text, indent, out):
    if not text:
        return
    for line in text.rstrip("\n").split("\n"):
        out.append((" " * indent + "# " + line).rstrip())


def plain_rules(rules):
    """The rule file as Prometheus reads it: the mixin's groups, without the render hints."""
    return {"groups": [dict(g, rules=[item["rule"] for item in g["rules"]]) for g in rules["groups"]]}


def rule_yaml(rules):
    out = []
    emit_comment(rules["header"], 0, out)
    if out:
        out.append("")
    out.append("groups:")
    for gi, group in enumerate(rules["groups"]):
        if gi:
            out.append("")
        keys = [k for k in ordered(group, GROUP_KEYS) if k != "rules"]
        for i, k in enumerate(keys):
            emit_value(k, group[k], 4, out, prefix="- " if i == 0 else None)
        out.append("    rules:")
        for ri, item in enumerate(group["rules"]):
            rule, comments = item["rule"], item["comments"]
            if ri and ("alert" in rule or item["section"]):
                out.append("")
            emit_comment(comments.get("above"), 6, out)
            for i, k in enumerate(ordered(rule, RULE_KEYS)):
                if i:
                    emit_comment(comments.get(k), 8, out)
                emit_value(k, rule[k], 8, out, prefix="- " if i == 0 else None, folds=item.get("folds"))
    text = "\n".join(out) + "\n"
    back = yaml.safe_load(text)
    if back != plain_rules(rules):
        raise SystemExit("render.py: the YAML written does not read back as the mixin's rules (a bug of the emitter)")
    return text


def dashboard_json(dashboard):
    return json.dumps(dashboard, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- main ------------------------------------------------------------------------------------


def render(mixin_path):
    data = evaluate(mixin_path)
    files, dashboards = {}, {}
    for path, spec in data["files"].items():
        if "rules" in spec:
            files[path] = rule_yaml(spec["rules"])
        else:
            dashboards[path] = spec["dashboard"]
            files[path] = dashboard_json(spec["dashboard"])
    return data["config"], dashboards, files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mixin", default=os.path.join(MIXIN_DIR, "mixin.libsonnet"),
                    help="a libsonnet file that evaluates to the mixin (default: mixin/mixin.libsonnet)")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="compare the render with the shipped files")
    mode.add_argument("--write", action="store_true", help="write the render over the shipped files")
    mode.add_argument("--out", metavar="DIR", help="write the render under DIR")
    args = ap.parse_args()

    started = time.monotonic()
    config, dashboards, files = render(args.mixin)
    elapsed = time.monotonic() - started

    default_mixin = os.path.abspath(args.mixin) == os.path.join(MIXIN_DIR, "mixin.libsonnet")
    problems = lint_dashboards(dashboards, config, file_named_after_uid=default_mixin)
    for p in problems:
        print("LINT:", p, file=sys.stderr)
    if problems:
        return 1
    print(f"rendered {len(files)} files in {elapsed:.2f}s; {len(dashboards)} dashboards lint clean", flush=True)

    if args.out or args.write:
        base = args.out or ROOT
        for path, text in sorted(files.items()):
            dest = os.path.join(base, path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w", encoding="utf-8") as f:
                f.write(text)
            print("wrote", os.path.join(args.out, path) if args.out else path)
        return 0

    status = 0
    shipped = {os.path.relpath(p, ROOT) for g in SHIPPED_GLOBS for p in glob.glob(os.path.join(ROOT, g))}
    for path in sorted(shipped - set(files)):
        print(f"DIFF: {path} is shipped but the mixin does not render it", file=sys.stderr)
        status = 1
    for path, text in sorted(files.items()):
        try:
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current == text:
            print(f"ok   {path}", flush=True)
            continue
        status = 1
        if current is None:
            print(f"DIFF: {path} is rendered but not shipped", file=sys.stderr)
            continue
        print(f"DIFF: {path} differs from the mixin's render (python3 mixin/render.py --write):", file=sys.stderr)
        diff = list(difflib.unified_diff(
            current.splitlines(keepends=True), text.splitlines(keepends=True),
            fromfile=f"{path} (shipped)", tofile=f"{path} (mixin render)"))
        sys.stderr.writelines(diff[:MAX_DIFF_LINES])
        if len(diff) > MAX_DIFF_LINES:
            print(f"... {len(diff) - MAX_DIFF_LINES} more lines of diff", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
