"""Synthetic predictions for the docker demo stack (the `demo` service of docker/compose.yaml).

Writes what a serving app would log with :class:`fairmonitor.monitor.sources.logger.PredictionLogger`:
model ``credit`` (sensitive ``sex`` and ``age_group``, score and label) and model ``fraud``
(``region``, score only), matching docker/monitor.example.yaml. The gap between groups drifts
slowly (a 6-hour cycle), so the dashboard shows metrics crossing the warning and critical
thresholds and recovering. It back-fills the last two hours on start, then logs a batch of
"live" predictions every ``--every`` seconds until stopped.

    python docker/demo_predictions.py --url sqlite:////data/predictions.db
"""

from __future__ import annotations

import argparse
import math
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from fairmonitor.monitor.sources.logger import PredictionLogger

CYCLE = timedelta(hours=6)


def bias(t: datetime) -> float:
    """Score gap between groups at time ``t``: 0 to 0.14 and back over a 6-hour cycle."""
    phase = (t.timestamp() % CYCLE.total_seconds()) / CYCLE.total_seconds()
    return 0.07 * (1 - math.cos(2 * math.pi * phase))


def credit_frame(rng: np.random.Generator, stamps: pd.DatetimeIndex) -> pd.DataFrame:
    """Credit decisions: men get a score bonus that drifts with :func:`bias`."""
    n = len(stamps)
    sex = rng.choice(["F", "M"], n)
    age = rng.choice(["young", "old"], n, p=[0.4, 0.6])
    bonus = np.array([bias(t) for t in stamps.to_pydatetime()])
    score = np.clip(rng.beta(4, 4, n) + np.where(sex == "M", bonus / 2, -bonus / 2), 0, 1)
    label = (rng.random(n) < 0.5 + 0.3 * (score - 0.5)).astype(int)
    return pd.DataFrame({"timestamp": stamps, "sex": sex, "age_group": age, "score": score,
                         "label": label, "version": "1"})


def fraud_frame(rng: np.random.Generator, stamps: pd.DatetimeIndex) -> pd.DataFrame:
    """Fraud scores: region ``south`` is flagged more often as :func:`bias` grows."""
    n = len(stamps)
    region = rng.choice(["north", "south", "east", "west"], n)
    bonus = np.array([bias(t) for t in stamps.to_pydatetime()])
    score = np.clip(rng.beta(2, 6, n) + np.where(region == "south", bonus, 0.0), 0, 1)
    return pd.DataFrame({"timestamp": stamps, "region": region, "score": score,
                         "version": "1"})


def log_between(loggers: dict[str, PredictionLogger], rng: np.random.Generator,
                start: datetime, end: datetime, per_minute: int) -> int:
    """Log ``per_minute`` predictions per minute and model with timestamps in [start, end)."""
    n = max(1, int((end - start).total_seconds() / 60 * per_minute))
    offsets = np.sort(rng.random(n)) * (end - start).total_seconds()
    stamps = pd.DatetimeIndex([start + timedelta(seconds=float(s)) for s in offsets])
    rows = loggers["credit"].log_frame(credit_frame(rng, stamps))
    return rows + loggers["fraud"].log_frame(fraud_frame(rng, stamps))


def main() -> None:
    """Back-fill two hours, then log live predictions until stopped."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="sqlite:////data/predictions.db")
    parser.add_argument("--per-minute", type=int, default=40)
    parser.add_argument("--every", type=float, default=30.0, help="seconds between batches")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    loggers = {
        "credit": PredictionLogger(args.url, model="credit", version="1",
                                   sensitive_features=["sex", "age_group"]),
        "fraud": PredictionLogger(args.url, model="fraud", version="1",
                                  sensitive_features=["region"], table="fraud_predictions"),
    }
    last = datetime.now(UTC)
    rows = log_between(loggers, rng, last - timedelta(hours=2), last, args.per_minute)
    print(f"back-filled {rows} predictions", flush=True)
    while True:
        time.sleep(args.every)
        now = datetime.now(UTC)
        log_between(loggers, rng, last, now, args.per_minute)
        last = now


if __name__ == "__main__":
    main()
