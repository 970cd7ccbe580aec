"""Draw the metric pictures of the documentation from the bundled UCI Adult data.

A logistic regression is trained on Adult without its sensitive columns (as ``make demo``
does); its held-out scores are drawn with the evaluator's own plotting functions
(``fairmonitor_mlflow.plots``), so a picture shows what the metric computes on real data:

- ``abcc_score_cdfs.png``: the score CDFs of women and men, the area between them shaded
  (ABCC);
- ``madd_histograms.png``: the two groups' score histograms (MADD);
- ``robustness_curve.png``: the DP gap and the robustness ratio under input noise.

Run by ``docs/conf.py`` before each build; a figure newer than this script and every module
of the package is kept, so a rebuild without code changes draws nothing. Usage::

    python docs/_scripts/figures.py --out docs/_generated/figures [--force]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("abcc_score_cdfs.png", "madd_histograms.png", "robustness_curve.png")
SENSITIVE = ("sex", "race")
NOT_INPUTS = ("income-per-year", "income", "fnlwgt", *SENSITIVE)


def _newest_source() -> float:
    """Return the newest mtime of this script and the modules a figure depends on."""
    files = [Path(__file__), *ROOT.glob("fairmonitor/**/*.py"),
             *ROOT.glob("plugins/fairmonitor_mlflow/*.py")]
    return max(f.stat().st_mtime for f in files)


def _up_to_date(out: Path) -> bool:
    paths = [out / n for n in NAMES]
    return all(p.exists() for p in paths) and min(
        p.stat().st_mtime for p in paths) > _newest_source()


def _model_and_scores():
    """Train on 70% of Adult (no sensitive inputs); the held-out rows and their scores."""
    import pandas as pd
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from fairmonitor.datasets import load_adult

    df = load_adult()
    inputs = [c for c in df.columns if c not in NOT_INPUTS]
    numeric = [c for c in inputs if pd.api.types.is_numeric_dtype(df[c])]
    df[numeric] = df[numeric].astype(float)
    categorical = [c for c in inputs if c not in numeric]
    train, test = train_test_split(df, test_size=0.3, random_state=0, stratify=df["income"])
    model = make_pipeline(
        make_column_transformer((StandardScaler(), numeric),
                                (OneHotEncoder(handle_unknown="ignore"), categorical)),
        LogisticRegression(max_iter=1000),
    ).fit(train[inputs], train["income"])
    return model, test.reset_index(drop=True), inputs


def draw(out: Path) -> None:
    """Write the three figures into ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from fairmonitor_mlflow import plots

    from fairmonitor.metrics import abcc, madd
    from fairmonitor.robustness import robustness_ratio

    model, test, inputs = _model_and_scores()
    scores = model.predict_proba(test[inputs])[:, 1]
    columns = {"sex": test["sex"].to_numpy()}
    value = abcc(scores, sensitive_features=columns["sex"])
    plots.save_png(plots.score_cdfs("sex", columns, scores, value=value),
                   str(out / "abcc_score_cdfs.png"))
    madd_value = madd(scores, sensitive_features=columns["sex"], bandwidth=0.02).value
    plots.save_png(plots.madd_histograms("sex", columns, scores, n_bins=50, value=madd_value),
                   str(out / "madd_histograms.png"))
    result = robustness_ratio(lambda x: model.predict_proba(x)[:, 1], test[inputs],
                              sensitive_features=test["sex"].to_numpy(),
                              y_true=test["income"].to_numpy(), n_repeats=5, max_rows=10_000,
                              random_state=np.random.default_rng(0))
    plots.save_png(plots.robustness_curve("sex", result), str(out / "robustness_curve.png"))


def main(argv: list[str] | None = None) -> int:
    """Draw the figures unless they are up to date (``--force``: always)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.force or not _up_to_date(args.out):
        draw(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
