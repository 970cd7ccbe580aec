"""The ``fairness`` evaluator's default evaluation next to MLflow's default classifier evaluator.

Target (issue 13 item 2): the default fairness evaluation costs at most a few times MLflow's own
``"default"`` classifier evaluator on the same 8,000 Adult rows, and under a minute at 200,000
rows. Both evaluators run in this process, on the same logged model and data, one after the
other, so the ratio is robust to the machine's load (which is printed); the absolute seconds are
not. MLflow's SHAP step is off (it crashes on pandas-3 string columns, see the README).

Models: one-hot + logistic regression, and one-hot + HistGradientBoosting (scikit-learn's
gradient-boosted trees). The 200,000-row set is Adult resampled with replacement (seed 0).
Usage: ``python benchmarks/bench_evaluator.py [--quick]`` (``--quick``: 8,000 rows only).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings
from typing import Any

import pandas as pd

from fairmonitor.datasets import load_adult

SENSITIVE = ["sex", "race"]
LABEL = "income"


def data(rows: int) -> tuple[pd.DataFrame, list[str]]:
    df = load_adult().drop(columns="income-per-year")
    df = df.sample(rows, replace=rows > len(df), random_state=0).reset_index(drop=True)
    inputs = [c for c in df.columns if c not in {LABEL, *SENSITIVE}]
    return df, inputs


def model(kind: str, df: pd.DataFrame, inputs: list[str]) -> Any:
    from sklearn.compose import make_column_transformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric = [c for c in inputs if df[c].dtype.kind in "if"]
    categorical = [c for c in inputs if c not in numeric]
    est = (LogisticRegression(max_iter=500) if kind == "logistic regression"
           else HistGradientBoostingClassifier(max_iter=100, random_state=0))
    pre = make_column_transformer(
        (StandardScaler(), numeric),
        (OneHotEncoder(handle_unknown="ignore", sparse_output=kind != "gradient boosting"),
         categorical))
    return make_pipeline(pre, est).fit(df[inputs], df[LABEL])


def timed(func: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start


def main(argv: list[str]) -> int:
    import mlflow

    quick = "--quick" in argv
    print(f"cores available: {len(os.sched_getaffinity(0))}, "
          f"load average at start: {os.getloadavg()[0]:.1f}")
    tmp = tempfile.mkdtemp(prefix="bench-evaluator-")
    os.chdir(tmp)
    mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
    ok = True
    for rows in (8000,) if quick else (8000, 200_000):
        df, inputs = data(rows)
        evaluation = df[[*inputs, *SENSITIVE, LABEL]]
        for kind in ("logistic regression", "gradient boosting"):
            clf = model(kind, df, inputs)
            with mlflow.start_run():
                # we built this model ourselves: its tree nodes are safe to load
                trusted = (["sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor"]
                           if kind == "gradient boosting" else None)
                info = mlflow.sklearn.log_model(clf, name="m", pip_requirements=["scikit-learn"],
                                                skops_trusted_types=trusted)

            def run(evaluator: str, config: dict[str, Any], info: Any = info,
                    evaluation: Any = evaluation) -> Any:
                with mlflow.start_run(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return mlflow.models.evaluate(
                        info.model_uri, evaluation, targets=LABEL, model_type="classifier",
                        evaluators=[evaluator], evaluator_config={evaluator: config})

            _, t_default = timed(lambda: run("default", {"log_model_explainability": False}))
            result, t_fair = timed(lambda: run("fairness", {"sensitive_features": SENSITIVE}))
            ratio = t_fair / t_default
            target = ratio <= 5 if rows <= 8000 else t_fair < 60
            ok &= target
            n_metrics = len({k.split("/")[1] for k in result.metrics
                             if not k.startswith("fairness/group_count")})
            print(f"{rows:>7} rows, {kind:<19}: MLflow default {t_default:6.1f} s, fairness "
                  f"(default set, {n_metrics} metrics) {t_fair:6.1f} s, ratio {ratio:5.2f} "
                  f"[{'OK' if target else 'MISSED'}: "
                  f"{'<= 5x' if rows <= 8000 else '< 60 s'}]")
            name = f"evaluator_{rows}_{kind.split()[0]}"
            if rows <= 8000:
                print(f"TARGET {name}_vs_mlflow_default: {ratio:.2f} (target <= 5) "
                      f"{'OK' if target else 'MISSED'}")
            else:
                print(f"TARGET {name}_seconds: {t_fair:.1f} (target < 60; MLflow default "
                      f"{t_default:.1f} s, ratio {ratio:.2f}) {'OK' if target else 'MISSED'}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
