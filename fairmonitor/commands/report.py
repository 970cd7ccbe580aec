"""``fairmonitor report``: train a model on bundled data and explain its fairness.

The first thing a newcomer runs. It trains a scikit-learn logistic regression on the bundled
German credit data (the sensitive columns are not model inputs), scores a held-out split, and
prints every label- and score-based metric per sensitive attribute with group counts, the
small-sample floor of each metric (the mean under random group labels) and a plain-language
verdict from a permutation test.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["add_arguments", "run"]

_DATASETS = {
    # dataset -> (loader, label column, default sensitive columns, columns never used as inputs)
    "german": ("load_german", "good_credit", ["sex", "age_group"],
               ["credit", "good_credit", "personal_status", "sex", "age_group"]),
    "adult": ("load_adult", "income", ["sex", "race"],
              ["income-per-year", "income", "sex", "race", "fnlwgt"]),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``report`` options."""
    parser.add_argument("--dataset", choices=sorted(_DATASETS), default="german",
                        help="bundled dataset (default: german)")
    parser.add_argument("--sensitive", nargs="+", metavar="COLUMN",
                        help="sensitive columns (default: sex age_group for german)")
    parser.add_argument("--min-group-size", type=int, default=20,
                        help="leave out groups with fewer held-out rows (default: 20)")
    parser.add_argument("--permutations", type=int, default=200,
                        help="group-label permutations for the chance floor (default: 200)")
    parser.add_argument("--test-size", type=float, default=0.3,
                        help="held-out share scored by the model (default: 0.3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def train_and_score(dataset: str, sensitive: list[str], test_size: float, seed: int) -> Any:
    """Train the demo model; return the held-out frame with ``score`` and ``label`` columns."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from .. import datasets

    loader, label, _, excluded = _DATASETS[dataset]
    df = getattr(datasets, loader)()
    inputs = [c for c in df.columns if c not in {*excluded, *sensitive}]
    numeric = [c for c in inputs if pd.api.types.is_numeric_dtype(df[c])]
    categorical = [c for c in inputs if c not in numeric]
    model = make_pipeline(
        ColumnTransformer([("num", StandardScaler(), numeric),
                           ("cat", OneHotEncoder(handle_unknown="ignore"), categorical)]),
        LogisticRegression(max_iter=1000),
    )
    train, test = train_test_split(df, test_size=test_size, random_state=seed,
                                   stratify=df[label])
    model.fit(train[inputs], train[label])
    test = test.copy()
    test["score"] = model.predict_proba(test[inputs])[:, 1]
    test["label"] = test[label]
    return test


def _verdict(value: float, p_value: float | None, reason: str | None) -> str:
    if math.isnan(value):
        return f"undefined: {reason}" if reason else "undefined"
    if p_value is None:
        return ""
    if p_value < 0.05:
        return f"gap beyond chance (p={p_value:.3f})"
    return f"within chance (p={p_value:.2f})"


def run(args: argparse.Namespace) -> int:
    """Train, evaluate and print the report; exit code 0."""
    import numpy as np

    from .. import METRICS, Window, evaluate_window
    from ._chance import chance_floor

    sensitive = args.sensitive or _DATASETS[args.dataset][2]
    frame = train_and_score(args.dataset, sensitive, args.test_size, args.seed)
    window = Window.from_frame(frame, sensitive_features=sensitive, label="label", score="score")
    names = [n for n, s in METRICS.items() if not (s.needs_features or s.needs_model)]
    report = evaluate_window(window, metrics=names, min_group_size=args.min_group_size,
                             rng=args.seed)
    rng = np.random.default_rng(args.seed)
    print(f"fairmonitor report: {args.dataset} (bundled), logistic regression, "
          f"{report.n_rows} held-out rows scored; predictions are score >= 0.5")
    for attr in report.attributes:
        counts = ", ".join(f"{g} {c}" for g, c in report.group_counts[attr].items())
        print(f"\nSensitive attribute '{attr}': groups {counts}")
        print(f"  {'metric':32s} {'value':>8s} {'chance':>8s}  verdict")
        flagged = []
        for name in report.metrics:
            value = report.values[(name, attr)]
            floor = chance_floor(METRICS[name], window, attr, args.min_group_size,
                                 args.permutations, rng) if not math.isnan(value) else None
            verdict = _verdict(value, floor.p_value if floor else None,
                               report.reasons.get((name, attr)))
            if floor is not None and floor.p_value < 0.05:
                flagged.append(name)
            chance = f"{floor.null_mean:8.4f}" if floor else f"{'':8s}"
            print(f"  {name:32s} {value:8.4f} {chance}  {verdict}")
        if flagged:
            print(f"  => '{attr}': {len(flagged)} metric(s) show a gap larger than random group "
                  f"labels produce: {', '.join(flagged)}.")
        else:
            print(f"  => '{attr}': no metric shows a gap beyond what random group labels "
                  "produce on this many rows.")
    for note in report.notes:
        print(f"note: {note}")
    print("\n'chance' is the metric's mean when group labels are shuffled: the value a perfectly "
          "fair model would still show on this sample. Alert above it, not above 0.")
    return 0
