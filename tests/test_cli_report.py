"""``fairmonitor report``: the first command a newcomer runs (``make demo`` before the monitor)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from fairmonitor.cli import main
from fairmonitor.commands.report import train_and_score
from fairmonitor.metrics import abcc, demographic_parity_difference


@pytest.fixture(scope="module")
def output():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["report", "--permutations", "30", "--seed", "3"])
    assert code == 0
    return buf.getvalue()


def _row(text, attribute, metric):
    block = text.split(f"Sensitive attribute '{attribute}'")[1].split("=>")[0]
    match = re.search(rf"^\s+{metric}\s+(\S+)\s+(\S+)\s+(.*)$", block, re.MULTILINE)
    assert match, f"{metric} row missing for {attribute}"
    return float(match.group(1)), float(match.group(2)), match.group(3)


def test_report_values_equal_direct_metric_calls(output):
    frame = train_and_score("german", ["sex", "age_group"], 0.3, 3)
    y_pred = (frame["score"] >= 0.5).astype(int)
    value, _, _ = _row(output, "sex", "demographic_parity_difference")
    assert value == pytest.approx(
        demographic_parity_difference(None, y_pred, sensitive_features=frame["sex"]), abs=5e-5)
    value, _, _ = _row(output, "age_group", "abcc")
    assert value == pytest.approx(abcc(frame["score"], sensitive_features=frame["age_group"]),
                                  abs=5e-5)


def test_report_lists_groups_attributes_and_verdicts(output):
    counts = train_and_score("german", ["sex", "age_group"], 0.3, 3)["sex"].value_counts()
    assert (f"Sensitive attribute 'sex': groups female {counts['female']}, "
            f"male {counts['male']}") in output
    assert "Sensitive attribute 'sex:age_group'" in output
    for attr in ("sex", "age_group", "sex:age_group"):
        _, chance, verdict = _row(output, attr, "abpc")
        assert chance > 0  # the small-sample floor is positive
        assert re.fullmatch(r"(within chance \(p=\d\.\d\d\)|gap beyond chance \(p=0\.0\d\d\))",
                            verdict)
    assert output.count("=> '") == 3
