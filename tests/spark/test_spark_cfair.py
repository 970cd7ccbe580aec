"""CFair on Spark with a frozen matcher (issue 17 item 4).

CFair fits a matching (propensity model, caliper) on the rows it is given; on Spark those are
each window's row sample, so every window would fit its own matching and windows would not be
comparable. A matcher fitted once (``fit_matcher``, e.g. on a reference window) and passed as
``options={"cfair": {"matcher": ...}}`` is frozen: every window is matched by it.
"""

from __future__ import annotations

import numpy as np

from fairmonitor.metrics import fit_matcher
from fairmonitor.report import Window, evaluate_summary
from fairmonitor.spark import evaluate_spark, summarize_spark
from fairmonitor.summaries import SummarySpec, summarize

SENSITIVE = ["sex", "race"]
FEATURES = ["x1", "x2"]


def test_a_frozen_matcher_matches_every_window_alike(spark, prediction_log, tmp_path):
    log = prediction_log(3000, hours=3, seed=5)
    log.to_parquet(tmp_path / "log.parquet")
    reference = prediction_log(2000, hours=1, seed=6)
    matcher = {attr: fit_matcher(reference[FEATURES], sensitive_features=reference[attr],
                                 random_state=0)
               for attr in SENSITIVE}
    frame = spark.read.parquet(str(tmp_path / "log.parquet")).repartition(2)
    hourly = summarize_spark(frame, sensitive_features=SENSITIVE, label="label", score="score",
                             features=FEATURES, timestamp="timestamp", window="1h")
    options = {"cfair": {"matcher": matcher}}
    reports = evaluate_spark(None, summaries=hourly, metrics=["cfair"], options=options,
                             rng=0)
    assert len(reports) == 3
    for start, report in reports.items():
        ts = log["timestamp"].dt.tz_localize("UTC")
        w = Window.from_frame(log[(ts >= start) & (ts < start + np.timedelta64(1, "h"))],
                              sensitive_features=SENSITIVE, label="label", score="score",
                              features=FEATURES)
        local = evaluate_summary(summarize(w.sensitive_features, y_pred=w.y_pred,
                                           y_score=w.y_score, y_true=w.y_true, X=w.X,
                                           spec=SummarySpec()),
                                 metrics=["cfair"], options=options, rng=0)
        for attr in SENSITIVE:
            value = report.values[("cfair", attr)]
            assert np.isfinite(value)
            assert value == local.values[("cfair", attr)]
            # the matcher used is the frozen one, not one fitted on the window's sample
            assert report.details[("cfair", attr)].matcher is matcher[attr]
