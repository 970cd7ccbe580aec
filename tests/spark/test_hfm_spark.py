"""HFM's average on Spark: sampled query rows scanned exactly against every row.

Every query row's distance is the single-process one (the same ``nearest_sqdist`` on features
scaled with the same minima and spans), so: with every row a query the value is the exact
``hfm``; with fewer, it is the single-process estimator on the same query rows; neither
depends on the partitioning. A few thousand rows: each call is three small Spark jobs.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from fairmonitor import Window, evaluate_window
from fairmonitor.exceptions import GroupExclusionWarning, InvalidInputError
from fairmonitor.metrics import hfm
from fairmonitor.metrics._hfm.exact import feature_space
from fairmonitor.metrics._hfm.hfm import _label_codes, sampled_result
from fairmonitor.metrics._hfm.sampled import average_of_distances, nearest_sqdist
from fairmonitor.spark import evaluate_spark, hfm_average_spark
from fairmonitor.spark._hfm_partition import attribute_salt, feat
from fairmonitor.utils.groups import encode_groups
from fairmonitor.utils.rowkeys import row_keys, splitmix

SENSITIVE = ["sex", "race"]
FEATURES = ["x1", "x2", "region"]
ATTRS = ["sex", "race", "sex:race"]
COLUMNS = dict(sensitive_features=SENSITIVE, label="label", score="score", features=FEATURES)


@pytest.fixture(scope="module")
def rows(prediction_log):
    log = prediction_log(1_200, seed=5, hours=2)
    rng = np.random.default_rng(5)
    return log.assign(region=rng.choice(["north", "south", "east"], len(log)))


@pytest.fixture(scope="module")
def parquet(rows, tmp_path_factory):
    path = tmp_path_factory.mktemp("hfm-spark") / "rows.parquet"
    rows.to_parquet(path)
    return str(path)


@pytest.fixture(scope="module")
def frame(spark, parquet):
    return spark.read.parquet(parquet).repartition(3)


def local(rows, sf, **kw):
    """Single-process hfm of ``rows`` on the attributes ``sf``."""
    return hfm(rows[FEATURES], rows["label"], (rows["score"] >= 0.5).astype(int),
               sensitive_features={a: rows[a] for a in sf}, **kw)


def parts(attr):
    return attr.split(":")


def test_every_row_a_query_is_the_exact_average(frame, rows):
    got = hfm_average_spark(frame, **COLUMNS, n_queries=5_000)
    assert list(got) == [None]
    for attr in ATTRS:
        r = got[None][attr]
        exact = local(rows, parts(attr), method="exact")
        sampled = local(rows, parts(attr), method="sampled", n_queries=5_000,
                        version="average")
        for ref in (exact, sampled):
            assert abs(r.value_average - ref.value_average) <= 1e-12, attr
            assert abs(r.distance_average - ref.distance_average) <= 1e-12
            assert abs(r.distance_model_average - ref.distance_model_average) <= 1e-12
        assert r.method == "sampled" and r.n_queries == len(rows) and r.n_samples == len(rows)
        lo, hi = r.average_ci
        assert lo == pytest.approx(hi, abs=1e-15)  # every row measured: no sampling error
        for name, a in r.per_attribute.items():
            assert abs(a.value_average - exact.per_attribute[name].value_average) <= 1e-12
            assert a.labels == exact.per_attribute[name].labels
            assert a.counts.tolist() == exact.per_attribute[name].counts.tolist()


def test_small_groups_are_left_out_as_in_one_process(frame, rows):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = hfm_average_spark(frame, **COLUMNS, n_queries=5_000, min_group_size=300)
        exact = local(rows, ["race"], method="exact", min_group_size=300)
    excluded = [w for w in caught if issubclass(w.category, GroupExclusionWarning)]
    assert {str(w.message) for w in excluded} == {
        "sensitive attribute 'race': left out 1 group(s) with fewer than min_group_size=300 "
        "rows: 'c' (223 rows)"}
    r = got[None]["race"]
    assert r.per_attribute["race"].excluded == exact.per_attribute["race"].excluded != {}
    assert abs(r.value_average - exact.value_average) <= 1e-12


def single_process_on(rows, attr_rows, queries):
    """The single-process estimator of one attribute, on the given query rows."""
    space = feature_space(rows[FEATURES], scale=True)
    true, pred = _label_codes(rows["label"], (rows["score"] >= 0.5).astype(int))
    groups = encode_groups({attr_rows: rows[attr_rows]})
    kept = np.flatnonzero(groups.codes >= 0)
    delta = np.sqrt(nearest_sqdist(space, true, pred, groups.codes, queries, kept))
    return sampled_result([average_of_distances(delta, kept.size)], [groups], [groups],
                          "average", queries.size, len(rows))


def test_fewer_queries_equal_the_single_process_estimator_on_the_same_rows(frame, rows):
    got, queries = hfm_average_spark(frame, **COLUMNS, n_queries=150, seed=7,
                                     return_queries=True)
    position = {x: i for i, x in enumerate(rows["x1"])}  # x1 is continuous: one row each
    for attr in SENSITIVE:
        chosen = queries[None][attr]
        assert len(chosen) == 150 and chosen[feat(0)].is_unique
        index = np.array([position[x] for x in chosen[feat(0)]])
        ref = single_process_on(rows, attr, index)
        r = got[None][attr]
        assert r.n_queries == ref.n_queries == 150
        assert abs(r.distance_average - ref.distance_average) <= 1e-12
        assert abs(r.distance_model_average - ref.distance_model_average) <= 1e-12
        assert abs(r.value_average - ref.value_average) <= 1e-12
        assert np.allclose(r.average_ci, ref.average_ci, rtol=0, atol=1e-12)
        assert r.average_ci[0] < r.value_average < r.average_ci[1]
    # independent draws per attribute (salted hashes), and another seed draws other rows
    assert set(queries[None]["sex"][feat(0)]) != set(queries[None]["race"][feat(0)])
    other = hfm_average_spark(frame, **COLUMNS, n_queries=150, seed=8)
    assert other[None]["sex"].value_average != got[None]["sex"].value_average


def smallest_salted_keys(rows, attr, q, seed=0):
    """Positions of the ``q`` rows of smallest salted key, in one process (unsigned order).

    The key mixes the columns the executors hash, in their order (sensitive columns, label,
    prediction, features as Spark selects them: numbers as doubles, then the score).
    """
    columns = {"sex": rows["sex"].to_numpy(), "race": rows["race"].to_numpy(),
               "label": rows["label"].to_numpy(),
               "pred": (rows["score"] >= 0.5).astype(np.int64).to_numpy(),
               "x1": rows["x1"].to_numpy(np.float64), "x2": rows["x2"].to_numpy(np.float64),
               "region": rows["region"].to_numpy(), "score": rows["score"].to_numpy()}
    keys = splitmix(row_keys(columns, len(rows)) ^ np.uint64(attribute_salt(seed, attr)))
    return np.argsort(keys, kind="stable")[:q], keys


def test_the_query_rows_are_the_smallest_unsigned_keys_of_all_rows(spark, parquet, rows):
    # the chosen rows are the q smallest keys of all rows as unsigned integers, as one
    # process finds them. 3 partitions of ~400 rows > q: each keeps its q smallest
    # (argpartition), all below 2**63; 12 of ~100 < q: every row is a candidate, half of
    # them with the top bit set, which a signed ranking would put first
    q = 150
    for n_partitions in (3, 12):
        frame = spark.read.parquet(parquet).repartition(n_partitions)
        _, queries = hfm_average_spark(frame, **COLUMNS, n_queries=q, return_queries=True)
        for attr in SENSITIVE:
            want, keys = smallest_salted_keys(rows, attr, q)
            assert set(np.argsort(keys.view(np.int64))[:q]).isdisjoint(want)  # signed: others
            chosen = queries[None][attr][feat(0)].to_numpy()  # in key order
            assert np.array_equal(chosen, rows["x1"].to_numpy()[want]), (n_partitions, attr)


def test_the_partitioning_changes_nothing(spark, parquet):
    one = hfm_average_spark(spark.read.parquet(parquet).repartition(1), **COLUMNS,
                            n_queries=150)
    four = hfm_average_spark(spark.read.parquet(parquet).repartition(4), **COLUMNS,
                             n_queries=150)
    for attr in ATTRS:
        a, b = one[None][attr], four[None][attr]
        assert (a.value_average, a.average_ci) == (b.value_average, b.average_ci), attr
        assert a.distance_average == b.distance_average


def test_the_interval_covers_the_exact_value(frame, rows):
    got = hfm_average_spark(frame, **COLUMNS, n_queries=300)
    for attr in ATTRS:
        lo, hi = got[None][attr].average_ci
        exact = local(rows, parts(attr), method="exact").value_average
        assert lo < exact < hi, (attr, lo, exact, hi)
        assert hi - lo < 0.5  # and says something


def test_evaluate_spark_scans_every_row_per_window(frame, rows):
    reports = evaluate_spark(frame, **COLUMNS, timestamp="timestamp", window="1h",
                             metrics=["hfm_average", "hfm"], rng=0)
    assert len(reports) == 2
    ts = rows["timestamp"].dt.tz_localize("UTC")
    for start, report in reports.items():
        part = rows[(ts >= start) & (ts < start + pd.Timedelta(hours=1))].reset_index(drop=True)
        assert len(part) < 2000  # the default hfm_queries: every row a query, so exact
        want = evaluate_window(Window.from_frame(part, sensitive_features=SENSITIVE,
                                                 label="label", score="score",
                                                 features=FEATURES),
                               metrics=["hfm_average"])
        for attr in ATTRS:
            key = ("hfm_average", attr)
            assert abs(report.values[key] - want.values[key]) <= 1e-12, attr
            assert report.details[key].method == "sampled"
            iv = report.intervals[key]
            assert iv.method == "sampled-hfm" and iv.lower == pytest.approx(iv.upper)
            assert not math.isnan(report.values[("hfm", attr)])  # still on the row sample
        assert any("scanned exactly" in note for note in report.notes)


def test_evaluate_spark_with_fewer_queries_and_on_the_sample(frame):
    scanned = evaluate_spark(frame, **COLUMNS, metrics=["hfm_average"], hfm_queries=100)
    sample = evaluate_spark(frame, **COLUMNS, metrics=["hfm_average"], hfm_queries=None)
    for attr in ATTRS:
        iv = scanned[None].intervals[("hfm_average", attr)]
        assert iv.lower < scanned[None].values[("hfm_average", attr)] < iv.upper
        assert scanned[None].details[("hfm_average", attr)].n_queries == 100
        assert sample[None].details[("hfm_average", attr)].method == "exact"  # row sample
    assert not any("scanned exactly" in note for note in sample[None].notes)


def test_a_text_window_column_and_missing_values(spark, rows):
    holes = rows.drop(columns="timestamp").astype({"sex": object})
    holes["day"] = np.where(np.arange(len(holes)) % 3, "mon", "tue")
    holes.loc[::41, "sex"] = None
    frame = spark.createDataFrame(holes).repartition(2)
    with pytest.raises(InvalidInputError, match="'sex' has 30 missing values"):
        hfm_average_spark(frame, **COLUMNS)
    got = hfm_average_spark(frame, **COLUMNS, window_column="day", missing={"sex": "drop"})
    assert sorted(got) == ["mon", "tue"]
    for day in ("mon", "tue"):
        part = holes[(holes["day"] == day) & holes["sex"].notna()].reset_index(drop=True)
        exact = local(part, ["sex"], method="exact")
        assert abs(got[day]["sex"].value_average - exact.value_average) <= 1e-12


def test_invalid_features_are_named_before_the_scan(spark, rows):
    bad = rows.drop(columns="timestamp").assign(x1=rows["x1"].where(rows.index % 50 > 0))
    with pytest.raises(InvalidInputError, match="feature 'x1' has 24 missing or NaN"):
        hfm_average_spark(spark.createDataFrame(bad), **COLUMNS)
    with pytest.raises(InvalidInputError, match="features"):
        hfm_average_spark(spark.createDataFrame(bad), **{**COLUMNS, "features": []})


def test_a_failing_scan_is_a_nan_with_its_reason_in_evaluate_spark(spark, rows):
    bad = rows.drop(columns="timestamp").assign(x1=rows["x1"].where(rows.index % 50 > 0))
    frame = spark.createDataFrame(bad)
    report = evaluate_spark(frame, **COLUMNS, metrics=["hfm_average"])[None]
    for attr in ATTRS:
        assert math.isnan(report.values[("hfm_average", attr)])
        assert report.reasons[("hfm_average", attr)].startswith("error: feature 'x1' has 24")
    with pytest.raises(InvalidInputError, match="feature 'x1'"):
        evaluate_spark(frame, **COLUMNS, metrics=["hfm_average"], errors="raise")
