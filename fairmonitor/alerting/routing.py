"""Who gets which alert, how fast, and which cause silences which symptom: shared by both paths.

``docker/alertmanager.yml`` (the default path) and the notification policies of the opt-in
Grafana-managed alerting (:mod:`.grafana_alerts`) route the same alerts the same way; the tests
check the Alertmanager file against the names and timings here. ``docs/alert-routing.md``
explains the tree and the measured time-to-page.

- **Pages never wait for an existing group.** Alertmanager sends a new alert of an existing
  aggregation group at the group's next ``group_interval`` tick, and drops an alert that fired
  and resolved between two ticks (nobody heard it fire). So ``severity`` is part of every
  ``group_by`` (a warning's group never holds its critical), and pages use
  :data:`PAGE_TIMING`, whose ``group_interval`` (30 s) is shorter than the shortest critical
  episode (one window of the model; the smallest documented window is 1 minute): a critical
  is sent, firing and resolved, even when it lasts a single window. Warnings batch
  (:data:`BATCH_TIMING`).
- **The monitoring on-call hears about the pipeline.** :data:`MONITOR_ALERTS` (no model) go to
  it only; :data:`MODEL_HEALTH_ALERTS` go to it *and* (``continue``) to the model's team,
  grouped by alert name and failing stage, so one failing checkpoint is one notification
  whatever the number of models.
- **One cause, one page.** While a cause of :data:`INHIBITIONS` fires, the symptoms it explains
  are not notified (Alertmanager ``inhibit_rules``). Grafana has no inhibition: its symptom
  rules drop, in their query, the models whose cause condition holds
  (:func:`unless_cause`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from ._common import NAMESPACE, promql_duration

__all__ = [
    "BATCH_TIMING", "CAUSE_STAGES", "INHIBITIONS", "MODEL_HEALTH_ALERTS", "MONITOR_ALERTS",
    "MONITOR_TIMING", "PAGE_TIMING", "SYMPTOMS", "alert_regex", "unless_cause",
]

#: Alerts about the monitor itself (no ``model`` label): the monitoring on-call only.
MONITOR_ALERTS = ("FairmonitorDown", "FairmonitorAbsent", "FairmonitorNoLeader",
                  "FairmonitorRuleEvaluationFailures")
#: A model's pipeline health: the monitoring on-call as well as the model's team.
MODEL_HEALTH_ALERTS = (
    "FairmonitorErrors", "FairmonitorDataErrors", "FairmonitorWindowStale",
    "FairmonitorNeverEvaluated", "FairmonitorLabelsOverdue", "FairmonitorNoTraffic",
    "FairnessMetricUndefined",
)
#: What a failing pipeline looks like downstream: silenced while their cause fires.
SYMPTOMS = ("FairmonitorWindowStale", "FairmonitorNeverEvaluated", "FairmonitorLabelsOverdue",
            "FairmonitorNoTraffic", "FairnessMetricUndefined")
#: ``stage`` values of ``fairmonitor_errors_total`` that stop a model's windows (a source that
#: cannot be read, rows that cannot be converted, a checkpoint that cannot be written).
CAUSE_STAGES = ("source", "data", "checkpoint")
#: Pages (critical): their own groups, sent within ``group_wait`` of the first alert, and any
#: change of an existing group (a new critical, a resolve) within ``group_interval``.
PAGE_TIMING: Mapping[str, str] = {"group_wait": "10s", "group_interval": "30s",
                                  "repeat_interval": "1h"}
#: The monitor itself (down, absent): its ``group_wait`` covers the scrape (15 s) and
#: evaluation (15 s) offsets of replicas that stop together, so they make one page.
MONITOR_TIMING: Mapping[str, str] = {**PAGE_TIMING, "group_wait": "30s"}
#: Warnings: batched; a resolve leaves within one group_interval.
BATCH_TIMING: Mapping[str, str] = {"group_wait": "30s", "group_interval": "5m",
                                   "repeat_interval": "4h"}
#: (cause, symptoms, labels equal on both sides) of the Alertmanager ``inhibit_rules`` that
#: express "one cause, one page". A cause is (alertname, extra matcher or "").
INHIBITIONS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("FairmonitorAbsent", "", SYMPTOMS, ()),
    ("FairmonitorNoLeader", "", SYMPTOMS, ()),
    ("FairmonitorDown", "", SYMPTOMS, ("instance",)),
    ("FairmonitorErrors", f'stage=~"{"|".join(CAUSE_STAGES)}"', SYMPTOMS, ("model",)),
    ("FairmonitorDataErrors", "", SYMPTOMS, ("model",)),
)


def alert_regex(names: tuple[str, ...]) -> str:
    """Return a label regex matching exactly ``names`` (Alertmanager and Grafana anchor it).

    >>> alert_regex(("FairmonitorDown", "FairmonitorAbsent"))
    'FairmonitorDown|FairmonitorAbsent'
    """
    return "|".join(names)


def unless_cause(expr: str, error_window: timedelta, *, on: str = "model") -> str:
    """``expr`` (a symptom's query, by ``model``) without the models whose cause holds now.

    Grafana-managed alerting has no inhibition rules, so a symptom rule (staleness, no traffic,
    undefined values, ...) excludes, in its own query, the models with errors of a
    :data:`CAUSE_STAGES` stage in the last ``error_window`` (the condition of the
    ``FairmonitorErrors`` rule, read before its ``for`` elapses) or with windows held by a data
    error (the condition of ``FairmonitorDataErrors``). Unlike an inhibition the symptom is
    then not firing at all (Normal, not muted), and it fires again, after its own ``for``, once
    the cause is gone while the symptom remains.

    >>> print(unless_cause("max by (model) (x)", timedelta(minutes=15)))
    (
      max by (model) (x)
    )
    unless on(model)
    (
      sum by (model) (increase(fairmonitor_errors_total{stage=~"source|data|checkpoint"}[15m])) > 0
      or
      max by (model) (fairmonitor_data_error_windows) > 0
    )
    """
    stages = "|".join(CAUSE_STAGES)
    errors = (f"sum by (model) (increase({NAMESPACE}_errors_total{{stage=~\"{stages}\"}}"
              f"[{promql_duration(error_window)}])) > 0")
    data = f"max by (model) ({NAMESPACE}_data_error_windows) > 0"
    return f"(\n  {expr}\n)\nunless on({on})\n(\n  {errors}\n  or\n  {data}\n)"
