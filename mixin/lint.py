"""The one structural lint of the Grafana dashboards: stable uids, no hard-coded data source,
a unit on every panel that shows data, panels on the grid without overlap.

Standard library only: mixin/render.py lints every render with it (an override of the mixin
included), and tests/e2e/check_dashboards.py runs it on the shipped files before its own checks
of the queries.
"""
import os
import re

DS_REF = {"type": "prometheus", "uid": "${datasource}"}
BUILTIN_ANNOTATION_DS = {"type": "grafana", "uid": "-- Grafana --"}
UID_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def walk_panels(panels):
    for p in panels or []:
        yield p
        yield from walk_panels(p.get("panels"))


def datasource_refs(node, where=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "datasource":
                yield where + "." + k, v
            else:
                yield from datasource_refs(v, where + "." + k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from datasource_refs(v, f"{where}[{i}]")


def lint_dashboards(dashboards, config, file_named_after_uid):
    """Problems of the rendered dashboards ({path: dashboard}), as sentences."""
    problems = []
    uids = {}
    # None: no mixin configuration to hold the uids against (the shipped files alone).
    configured = None if config is None else set((config.get("dashboardUids") or {}).values())
    for path, dash in sorted(dashboards.items()):
        name = os.path.basename(path)

        def bad(msg, name=name):
            problems.append(f"{name}: {msg}")

        uid = dash.get("uid")
        if not isinstance(uid, str) or not UID_RE.match(uid):
            bad(f"uid {uid!r} is not 1-40 characters of [A-Za-z0-9_-]")
        elif configured is not None and uid not in configured:
            bad(f"uid {uid!r} is not one of _config.dashboardUids: set it in the mixin, never generate it")
        elif uid in uids:
            bad(f"uid {uid!r} also used by {uids[uid]}")
        else:
            uids[uid] = name
        if file_named_after_uid and uid != name[: -len(".json")]:
            bad(f"uid {uid!r} differs from the file name (the shipped files are named after their uids)")
        if dash.get("id") is not None:
            bad("`id` must be null (import-ready)")
        variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
        ds = variables.get("datasource")
        if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
            bad("no template variable `datasource` of type datasource with query prometheus")
        for vname, v in variables.items():
            if v.get("type") == "query" and v.get("datasource") != DS_REF:
                bad(f"variable {vname}: datasource {v.get('datasource')!r} is not {DS_REF}")
        panels = list(walk_panels(dash.get("panels")))
        if not panels:
            bad("no panels")
        ids = [p.get("id") for p in panels]
        if len(ids) != len(set(ids)):
            bad("panel ids are not unique")
        cells = {}
        for p in panels:
            title = p.get("title") or f"panel {p.get('id')}"
            grid = p.get("gridPos") or {}
            if not all(isinstance(grid.get(k), int) for k in "xywh"):
                bad(f"panel {title!r}: no gridPos")
            else:
                if grid["x"] + grid["w"] > 24:
                    bad(f"panel {title!r}: wider than the 24-column grid")
                for x in range(grid["x"], grid["x"] + grid["w"]):
                    for y in range(grid["y"], grid["y"] + grid["h"]):
                        if (x, y) in cells:
                            bad(f"panel {title!r} overlaps panel {cells[(x, y)]!r}")
                            break
                        cells[(x, y)] = title
                    else:
                        continue
                    break
            if p.get("type") in ("row", "text"):
                continue
            unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
            if not isinstance(unit, str) or not unit:
                bad(f"panel {title!r}: no fieldConfig.defaults.unit")
            if p.get("datasource") != DS_REF:
                bad(f"panel {title!r}: datasource {p.get('datasource')!r} is not {DS_REF}")
            targets = p.get("targets") or []
            if not targets:
                bad(f"panel {title!r}: no targets")
            for t in targets:
                if t.get("datasource") != DS_REF:
                    bad(f"panel {title!r} target {t.get('refId')}: datasource {t.get('datasource')!r} is not {DS_REF}")
                if not t.get("expr"):
                    bad(f"panel {title!r} target {t.get('refId')}: no expr")
        for a in dash.get("annotations", {}).get("list", []):
            expected = BUILTIN_ANNOTATION_DS if a.get("builtIn") else DS_REF
            if a.get("datasource") != expected:
                bad(f"annotation {a.get('name')!r}: datasource {a.get('datasource')!r} is not {expected}")
        for where, value in datasource_refs(dash):
            if value not in (DS_REF, BUILTIN_ANNOTATION_DS):
                bad(f"hard-coded datasource at {where}: {value!r}")
    return problems
