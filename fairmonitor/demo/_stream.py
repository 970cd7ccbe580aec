"""Step 3 of the demo: a production stream with a bias injected part-way, and its monitor config.

Each simulated hour draws ``rows_per_window`` requests at random (with replacement) from the
held-out people, with the champion's scores and the true labels. From window ``from_window`` on,
the scores of one group are multiplied by ``factor`` (a simulated upstream fault that hits one
group only, e.g. a feature silently zeroed for them), so fewer of them are selected.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["Bias", "monitor_yaml", "production_stream", "stream_summary"]


@dataclass(frozen=True)
class Bias:
    """From window ``from_window`` (0-based) on, scores of ``column == group`` are scaled."""

    column: str
    group: str
    factor: float
    from_window: int

    def describe(self, start: datetime, window: timedelta) -> str:
        """Return the shift in plain words.

        >>> from datetime import datetime, timedelta, UTC
        >>> Bias("sex", "Female", 0.5, 3).describe(datetime(2026, 1, 1, tzinfo=UTC),
        ...                                        timedelta(hours=1))
        'from 2026-01-01 03:00 UTC (window 4) on, the scores of sex=Female are multiplied by 0.5'
        """
        when = start + self.from_window * window
        return (f"from {when:%Y-%m-%d %H:%M} UTC (window {self.from_window + 1}) on, the scores "
                f"of {self.column}={self.group} are multiplied by {self.factor:g}")


def production_stream(pool: Any, *, start: datetime, window: timedelta, n_windows: int,
                      rows_per_window: int, bias: Bias, threshold: float = 0.5,
                      seed: int = 0) -> Any:
    """Timestamped predictions: ``pool`` rows (with ``score`` and ``label``) resampled per window.

    Returns a frame with ``timestamp`` (UTC, spread uniformly over each window), ``window``
    (0-based), the pool's other columns, the possibly biased ``score`` and
    ``prediction = score >= threshold``.

    Examples
    --------
    >>> import pandas as pd
    >>> from datetime import datetime, timedelta, UTC
    >>> pool = pd.DataFrame({"sex": ["Female", "Male"], "score": [0.8, 0.8], "label": [1, 1]})
    >>> s = production_stream(pool, start=datetime(2026, 1, 1, tzinfo=UTC),
    ...                       window=timedelta(hours=1), n_windows=2, rows_per_window=50,
    ...                       bias=Bias("sex", "Female", 0.5, 1))
    >>> s.groupby(["window", "sex"])["prediction"].mean().to_dict()
    {(0, 'Female'): 1.0, (0, 'Male'): 1.0, (1, 'Female'): 0.0, (1, 'Male'): 1.0}
    """
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    n = n_windows * rows_per_window
    frame = pool.iloc[rng.integers(0, len(pool), n)].reset_index(drop=True)
    k = np.repeat(np.arange(n_windows), rows_per_window)
    offsets = np.sort(rng.uniform(0.0, window.total_seconds(),
                                  (n_windows, rows_per_window)), axis=1).reshape(-1)
    score = frame["score"].to_numpy(dtype=float).copy()
    hit = (k >= bias.from_window) & (frame[bias.column].astype(str).to_numpy() == bias.group)
    score[hit] *= bias.factor
    frame["score"] = score
    frame["prediction"] = (score >= threshold).astype(int)
    frame["window"] = k
    frame["timestamp"] = (pd.Timestamp(start)
                          + pd.to_timedelta(k * window.total_seconds() + offsets, unit="s"))
    return frame


def stream_summary(stream: Any, bias: Bias, label: str = "label") -> dict[str, float]:
    """Return the biased group's selection and true-positive rates, before and after the shift.

    >>> import pandas as pd
    >>> s = pd.DataFrame({"sex": ["Female"] * 4, "window": [0, 0, 1, 1],
    ...                   "prediction": [1, 0, 0, 0], "label": [1, 1, 1, 0]})
    >>> stream_summary(s, Bias("sex", "Female", 0.5, 1))
    {'selection_before': 0.5, 'selection_after': 0.0, 'tpr_before': 0.5, 'tpr_after': 0.0}
    """
    group = stream[stream[bias.column].astype(str) == bias.group]
    after = group["window"] >= bias.from_window
    out = {}
    for name, part in (("before", group[~after]), ("after", group[after])):
        out[f"selection_{name}"] = float(part["prediction"].mean())
        out[f"tpr_{name}"] = float(part.loc[part[label] == 1, "prediction"].mean())
    return {k: out[k] for k in ("selection_before", "selection_after", "tpr_before",
                                "tpr_after")}


def monitor_yaml(*, model: str, registered: str, alias: str, tracking_uri: str, experiment: str,
                 predictions_url: str, listen_address: str, checkpoint: str,
                 sensitive: Sequence[str], start: datetime, window: timedelta,
                 metrics: Sequence[str], thresholds: dict[str, list[dict[str, Any]]],
                 min_group_size: int, catch_up: int) -> str:
    """Return the demo's monitor configuration as YAML (what ``fairmonitor monitor`` reads)."""
    hours = window.total_seconds() / 3600

    def flow(value: Any) -> str:  # JSON is valid YAML flow style
        return json.dumps(value)

    lines = [
        "# Written by `fairmonitor demo`: the monitor configuration of the demo scenario.",
        "# Check it:    fairmonitor monitor --config monitor.yaml --check",
        "# Rules:       fairmonitor rules --config monitor.yaml --out dashboards",
        f"listen_address: {listen_address}",
        f"checkpoint: {checkpoint}",
        f"catch_up: {catch_up}",
        "models:",
        f"  {model}:",
        f"    model: models:/{registered}@{alias}",
        f"    tracking_uri: {flow(tracking_uri)}",
        f"    experiment: {experiment}",
        f"    source: {{kind: sql, url: {flow(predictions_url)}, table: predictions}}",
        f"    sensitive_features: {flow(list(sensitive))}",
        "    label: label",
        "    score: score",
        "    prediction: prediction",
        f"    window: {int(hours)}h",
        f"    start: {flow(start.isoformat())}",
        f"    metrics: {flow(list(metrics))}",
        f"    min_group_size: {min_group_size}",
        "    intersection: false",
        "    thresholds:",
    ]
    for metric, entries in thresholds.items():
        lines.append(f"      {metric}:")
        lines += [f"        - {flow(e)}" for e in entries]
    return "\n".join(lines) + "\n"


def sqlite_url(path: Path) -> str:
    """``sqlite:///`` URL of an absolute path (so it does not depend on the working directory).

    >>> sqlite_url(Path("/tmp/demo/mlflow.db"))
    'sqlite:////tmp/demo/mlflow.db'
    """
    return f"sqlite:///{path.resolve()}"
