"""Whether two checkouts give bit-for-bit the same intervals (speed-ups must not move one).

Per checkout, in a fresh process (``PYTHONPATH`` at that checkout), a few hundred seeded
windows go through ``evaluate_window(..., confidence_level=0.95)`` (sizes 50 to 10^5 rows, 2-6
groups per attribute and their intersection, rates near 0, 0.3 and near 1, a group with no
positive prediction for the DP ratio) and :func:`rate_gap_interval` is called directly on
weighted counts (``effective_trials``) and with ``rng`` an int or a Generator. Every interval's
lower, upper, chance, method and reason is dumped to JSON (floats as ``float.hex``) and the two
dumps are compared exactly.

Usage: ``nice -n 10 python benchmarks/interval_identity.py BEFORE_DIR AFTER_DIR [--windows 300]``
(exit status 1 and the differing keys if any field differs). ``--quick``: 40 windows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings

SIZES = (50, 120, 400, 1_000, 5_000, 10_000, 100_000)
RATE_METRICS = ["demographic_parity_difference", "demographic_parity_ratio",
                "equalized_odds_difference", "equal_opportunity_difference"]
SCORE_METRICS = ["abcc", "abpc", "madd"]


def _fields(iv) -> list:
    return [float(iv.lower).hex(), float(iv.upper).hex(), float(iv.chance).hex(), iv.method,
            iv.reason]


def _window(seed: int):
    import numpy as np

    from fairmonitor.report import Window

    rng = np.random.default_rng(seed)
    n = int(SIZES[seed % len(SIZES)])
    k_sex, k_race = 2 + seed % 2, 2 + (seed // 2) % 5  # 2-3 and 2-6 groups
    sex = rng.choice(np.array([f"s{i}" for i in range(k_sex)], dtype=object), n)
    race = rng.choice(np.array([f"r{i}" for i in range(k_race)], dtype=object), n,
                      p=rng.dirichlet(np.ones(k_race) * 2))
    base = (0.01, 0.3, 0.97, 0.05)[seed % 4]
    shift = rng.normal(0, 0.05 if seed % 3 else 0.0, k_race)
    rate = np.clip(base + shift[np.searchsorted(np.unique(race), race)], 0.0, 1.0)
    y = (rng.random(n) < np.clip(base + rng.normal(0, 0.02), 0, 1)).astype(int)
    if seed % 5 == 0:  # a group with no positive prediction: DP ratio 0
        rate = np.where(race == "r0", 0.0, rate)
    if seed % 2:
        score = np.clip(rate + rng.normal(0, 0.1, n), 0, 1)
        return Window({"sex": sex, "race": race}, y_score=score, y_true=y), n
    pred = (rng.random(n) < rate).astype(int)
    return Window({"sex": sex, "race": race}, y_pred=pred, y_true=y), n


def _direct(seed: int) -> dict:
    import numpy as np

    from fairmonitor.metrics._rate_intervals import rate_gap_interval

    rng = np.random.default_rng(10_000 + seed)
    k = 2 + seed % 5
    trials = rng.integers(0, 400, (2, k)).astype(float)
    succ = np.floor(trials * rng.choice([0.0, 0.02, 0.5, 0.98, 1.0], (2, k)))
    eff = trials * rng.uniform(0.3, 1.0, (2, k))
    out = {}
    for ratio in (False, True):
        for name, kw in (("plain", {}), ("weighted", {"effective_trials": eff}),
                         ("int", {"rng": seed}), ("gen", {"rng": np.random.default_rng(seed)})):
            s, t = (succ[0], trials[0]) if ratio else (succ, trials)
            kwa = dict(kw)
            if "effective_trials" in kwa and ratio:
                kwa["effective_trials"] = eff[0]
            out[f"direct/{seed}/{ratio}/{name}"] = _fields(
                rate_gap_interval(s, t, ratio=ratio, n_draws=500 if name == "gen" else 2000,
                                  **kwa))
    return out


def dump(windows: int) -> dict:
    from fairmonitor.report import evaluate_window

    out = {}
    warnings.simplefilter("ignore")
    for seed in range(windows):
        window, n = _window(seed)
        metrics = RATE_METRICS + (SCORE_METRICS if seed % 2 and n <= 10_000 else [])
        report = evaluate_window(window, metrics=metrics, confidence_level=0.95,
                                 min_group_size=5 if seed % 4 else 30)
        for (metric, attr), iv in report.intervals.items():
            out[f"{seed}/{metric}/{attr}"] = _fields(iv)
        out.update(_direct(seed))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*")
    parser.add_argument("--windows", type=int, default=300)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    windows = 40 if args.quick else args.windows
    if args.child:
        json.dump(dump(windows), sys.stdout)
        return
    dumps = []
    for tree in args.trees:
        env = {**os.environ, "PYTHONPATH": f"{tree}:{tree}/plugins"}
        out = subprocess.run([sys.executable, __file__, "--child", "--windows", str(windows)],
                             env=env, capture_output=True, text=True, check=True).stdout
        dumps.append(json.loads(out))
    before, after = dumps
    differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    print(f"{len(before)} intervals compared over {windows} windows: {len(differ)} differ")
    for key in differ[:20]:
        print(key, before.get(key), after.get(key))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
