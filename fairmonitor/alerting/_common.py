"""Names shared by the generated rules, alerts, dashboard and provisioning files.

Every artefact refers to the same Prometheus data source uid, dashboard uid and folder, so they
are defined once here and cross-checked by the tests.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import yaml

from ..exceptions import ConfigError
from ..report.registry import METRICS

__all__ = [
    "DASHBOARD_UID", "DATASOURCE", "DATASOURCE_UID", "FOLDER", "NAMESPACE",
    "absolute_url", "cadence_seconds", "dashboard_url", "dump_yaml", "fairness_name_regex",
    "promql_duration", "promql_string", "runbook_link",
]

NAMESPACE = "fairmonitor"
#: uid of the provisioned Prometheus data source; the dashboard and Grafana alerts use it.
DATASOURCE_UID = "fairmonitor-prometheus"
DATASOURCE: Mapping[str, str] = {"type": "prometheus", "uid": DATASOURCE_UID}
DASHBOARD_UID = "fairmonitor"
#: Grafana folder holding the dashboard and the Grafana-managed alert rules.
FOLDER = "Fairness"


def fairness_name_regex() -> str:
    """Return a ``__name__`` regex matching exactly the per-metric gauges; group 1 is the metric.

    Prometheus anchors label regexes, so ``fairmonitor_robustness_ratio_max`` does not match
    ``fairmonitor_robustness_ratio_by_level``.

    >>> fairness_name_regex().startswith("fairmonitor_(demographic_parity_difference|")
    True
    """
    return f"{NAMESPACE}_({'|'.join(METRICS)})"


def promql_duration(delta: timedelta) -> str:
    """Return a Prometheus duration with the largest exact unit.

    >>> promql_duration(timedelta(minutes=90)), promql_duration(timedelta(seconds=45))
    ('90m', '45s')
    >>> promql_duration(timedelta(0))
    '0s'
    """
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def promql_string(value: str) -> str:
    r"""Return a PromQL string literal (JSON escapes are valid PromQL escapes).

    >>> print(promql_string('a"b'))
    "a\"b"
    """
    return json.dumps(value, ensure_ascii=False)


def cadence_seconds(model: Any) -> int:
    """Seconds between two evaluations of a model: one window every ``every``.

    The monitor evaluates each window as soon as it closes (plus the label delay for label
    metrics), so the cadence no longer depends on how often the scheduler wakes up.

    >>> from types import SimpleNamespace
    >>> cadence_seconds(SimpleNamespace(every=timedelta(minutes=5)))
    300
    """
    return int(model.every.total_seconds())


def dashboard_url(grafana_url: str, **variables: str) -> str:
    """Link to the fairmonitor dashboard with its variables set (``var-<name>=<value>``).

    Values are inserted as given: pass URL-safe text or a template expression that escapes
    itself, such as ``{{ $labels.model | urlquery }}`` in a Prometheus annotation.

    >>> dashboard_url("http://grafana:3000/", model="credit", metric="abcc")
    'http://grafana:3000/d/fairmonitor/fairmonitor?var-model=credit&var-metric=abcc'
    """
    base = f"{grafana_url.rstrip('/')}/d/{DASHBOARD_UID}/{DASHBOARD_UID}"
    query = "&".join(f"var-{name}={value}" for name, value in variables.items())
    return f"{base}?{query}" if query else base


def absolute_url(name: str, url: object, what: str, *, query: bool = True) -> str:
    """``url`` if it is an absolute http(s) URL with a host and no fragment, else ConfigError.

    A page is read on a phone or in another network: a relative link (``docs/runbook.md``) or
    one without a host opens nothing. Links are built by appending to the base (``#<alert>``
    for the runbook, ``/d/<uid>/...?var-...`` for Grafana), so the base may not carry a
    fragment, nor a query when ``query`` is False.

    >>> absolute_url("runbook_url", "https://wiki.example.org/fm/runbook.md", "of the runbook")
    'https://wiki.example.org/fm/runbook.md'
    >>> absolute_url("runbook_url", "docs/runbook.md", "of the runbook")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fairmonitor.exceptions.ConfigError: runbook_url: must be an absolute http(s) URL ...
    """
    example = {"grafana_url": "https://grafana.example.org"}.get(
        name, "https://git.example.org/ml/fairmonitor/blob/main/docs/runbook.md")
    problem = f"must be an absolute http(s) URL {what}, as seen by whoever reads the alert " \
              f"(e.g. {example})"
    if not isinstance(url, str):
        raise ConfigError(f"{name}: {problem}; got {url!r}.")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in url:
        raise ConfigError(f"{name}: {problem}; got {url!r}.")
    if parts.fragment or url.endswith("#"):
        raise ConfigError(f"{name}: must not contain a '#fragment' (each alert appends its "
                          f"own); got {url!r}.")
    if not query and (parts.query or url.endswith("?")):
        raise ConfigError(f"{name}: must not contain a '?query' (links append their own "
                          f"path and variables); got {url!r}.")
    return url


def runbook_link(base: str | None, alert: str) -> str | None:
    """Link to the section of ``docs/runbook.md`` that explains ``alert`` (None without a base).

    The runbook has one ``## <AlertName>`` heading per alert, whose anchor (on GitHub, GitLab
    and most Markdown renderers) is the lower-case name.

    >>> runbook_link("https://git.example.org/ml/fairmonitor/blob/main/docs/runbook.md",
    ...              "FairmonitorDown")
    'https://git.example.org/ml/fairmonitor/blob/main/docs/runbook.md#fairmonitordown'
    >>> runbook_link(None, "FairmonitorDown") is None
    True
    """
    return None if base is None else f"{base}#{alert.lower()}"


class _Dumper(yaml.SafeDumper):
    """Block style everywhere; multi-line or long strings as literal blocks, never folded."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value or len(value) > 80 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any, header: str = "") -> str:
    r"""YAML text of ``data`` (keys in insertion order), after ``header`` comment lines.

    >>> print(dump_yaml({"expr": "a\n> b"}, header="generated"), end="")
    # generated
    expr: |-
      a
      > b
    """
    lines = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 16)
    return lines + body
