"""The one-page HTML report of a fairness evaluation.

Self-contained (plots embedded as data URIs), because MLflow's artifact viewer shows an HTML
artifact in a sandboxed frame where relative images do not load; the tables and plots are also
linked as files next to it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

__all__ = ["render_html"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em}
th{background:#f3f3f3} .num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37} .warning{color:#9a6700;font-weight:bold}
.critical{color:#cf222e;font-weight:bold} .undefined{color:#777}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
"""


def _fmt(value: Any) -> str:
    if value is None:
        return "NaN"
    if isinstance(value, float):
        return f"{value:.4g}"
    return escape(str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num">{_fmt(c)}</td>' if isinstance(c, int | float) and not isinstance(
                c, bool) else f"<td>{c if isinstance(c, _Raw) else _fmt(c)}</td>" for c in row)
        + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


class _Raw(str):
    """Already-escaped HTML for a table cell."""


def _status(status: str | None) -> _Raw:
    s = status or "-"
    return _Raw(f'<span class="{escape(s)}">{escape(s)}</span>')


def _interval(v: Mapping[str, Any]) -> str:
    lo, hi = v.get("ci_lower"), v.get("ci_upper")
    if lo is None or hi is None or lo != lo or hi != hi:  # x != x: NaN
        return v.get("interval_note") or "-"
    return f"[{_fmt(lo)}, {_fmt(hi)}]"


def render_html(data: dict[str, Any], written: Sequence[Any], outdir: str) -> str:
    """Render the report from :func:`~fairmonitor_mlflow.artifacts.report_dict` data."""
    parts = [f"<!doctype html><meta charset='utf-8'><title>Fairness report</title>"
             f"<style>{_STYLE}</style><h1>Fairness report</h1>"
             f"<p>Status: {_status(data['status'])} &middot; {data['n_rows']} rows &middot; "
             f"sensitive features: {escape(', '.join(data['config']['sensitive_features']))}</p>"]
    parts.append("<h2>Metrics</h2>")
    parts.append(_table(
        ["metric", "attribute", "value", "95% interval", "chance level", "status", "ideal",
         "MLflow key", "note"],
        [[v["metric"], v["attribute"], v["value"], _interval(v), v.get("chance"),
          _status(v["status"]), v["ideal"], v["key"], v["reason"] or v["help"] or ""]
         for v in data["values"]]))
    if data["skipped"]:
        parts.append("<h2>Not computed</h2>")
        parts.append(_table(["metric", "why"], sorted(data["skipped"].items())))
    if data.get("artifact_failures"):
        parts.append("<h2>Artifacts left out</h2><ul>" + "".join(
            f"<li>{escape(f)}</li>" for f in data["artifact_failures"]) + "</ul>")
    if data["notes"]:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>"
                                                   for n in data["notes"]) + "</ul>")
    parts.append("<h2>Inputs</h2>")
    parts.append(_table(["input", "source"], sorted(data["inputs"].items())))
    groups = next((w for w in written if w.path == "fairness_groups.csv"), None)
    if groups is not None:
        parts.append("<h2>Groups</h2>")
        frame = groups.content
        parts.append(_table(list(frame.columns),
                            [[None if c != c else c for c in row]  # NaN -> "NaN"
                             for row in frame.itertuples(index=False)]))
    images = [w for w in written if w.kind == "png"]
    if images:
        parts.append("<h2>Plots</h2>")
    for w in images:
        with open(os.path.join(outdir, w.path), "rb") as fh:
            encoded = base64.b64encode(fh.read()).decode("ascii")
        parts.append(f"<h3>{escape(w.title)}</h3><img alt='{escape(w.title)}' "
                     f"src='data:image/png;base64,{encoded}'>")
    links = [f"<li><a href='{escape(w.path)}'>{escape(w.path)}</a> ({escape(w.title)})</li>"
             for w in written]
    parts.append("<h2>Files</h2><ul>" + "".join(links)
                 + "<li><a href='fairness_report.json'>fairness_report.json</a></li></ul>")
    return "\n".join(parts)
