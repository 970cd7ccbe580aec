"""CFair (counterpart fairness) at 10^5 rows: time to target, and speed-up over exhaustive search.

Data: 10^5 rows, 10 numeric features, a 30% / 70% group split confounded on three features, a
group-blind model. Measured in this process:

- ``cfair_1e5_seconds``: ``counterpart_fairness`` with default settings (fit the propensity
  model, caliper and Mahalanobis matrix, match, test). Target (issue 3): <= 30 s on 2 cores.
- ``cfair_reuse_1e5_seconds``: the same with a reused matcher (a monitor's per-window cost).
- ``cfair_vs_exhaustive``: CFair's whole run over an exhaustive nearest-counterpart search on
  the same whitened rows without the caliper restriction (every G0 unit against every G1 unit,
  the reference code's all-pairs approach, here as blocked GEMM). Target <= 1.

Usage: ``python benchmarks/bench_cfair.py [--quick]`` (``--quick``: 2 * 10^4 rows).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from fairmonitor.metrics import counterpart_fairness, fit_matcher


def data(n: int, d: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    group = rng.random(n) < 0.3
    X = rng.normal(size=(n, d))
    X[:, :3] += np.where(group, -0.4, 0.4)[:, None]
    score = 1 / (1 + np.exp(-(X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 4])))
    return X, np.where(group, "protected", "reference"), score


def exhaustive_search(y0: np.ndarray, y1: np.ndarray, block: int = 512) -> np.ndarray:
    """Nearest G1 row of every G0 row, over all of G1 (no caliper)."""
    sq1 = np.einsum("ij,ij->i", y1, y1)
    out = np.empty(len(y0), dtype=np.intp)
    for a in range(0, len(y0), block):
        score = (-2.0 * y0[a:a + block]) @ y1.T
        score += sq1
        out[a:a + block] = np.argmin(score, axis=1)
    return out


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv: list[str]) -> int:
    n = 20_000 if "--quick" in argv else 100_000
    X, group, score = data(n)
    counterpart_fairness(X[:2000], None, score[:2000],
                         sensitive_features=group[:2000])  # warm imports
    print(f"rows={n} features={X.shape[1]} cores={os.cpu_count()} "
          f"load={os.getloadavg()[0]:.1f}")

    t_full, r = timed(lambda: counterpart_fairness(X, None, score, sensitive_features=group))
    c = r.comparisons[0]
    print(f"cfair default: {t_full:.2f} s  value={r.value:.4f} dp_gap={r.dp_gap:.4f} "
          f"pairs={r.n_pairs} unmatched={r.n_unmatched} caliper={c.caliper:.4f} "
          f"max_smd {c.max_smd_before:.3f} -> {c.max_smd_after:.3f}")
    t_fit, matcher = timed(lambda: fit_matcher(X, sensitive_features=group))
    t_reuse, _ = timed(lambda: counterpart_fairness(X, None, score, sensitive_features=group,
                                                     matcher=matcher))
    t_strict, strict = timed(lambda: counterpart_fairness(X, None, score, sensitive_features=group,
                                                          matcher=matcher, replace=False))
    print(f"fit_matcher: {t_fit:.2f} s  reuse: {t_reuse:.2f} s  "
          f"replace=False with reuse: {t_strict:.2f} s (pairs={strict.n_pairs})")

    pair = matcher.pairs[0]
    z = pair.standardise(matcher.encoding.transform(X, n)) @ pair.whitening
    first = group == "protected"  # the smaller side, matched from
    t_exh, _ = timed(lambda: exhaustive_search(z[first], z[~first]))
    print(f"exhaustive search alone (no caliper): {t_exh:.2f} s")

    label = "1e5" if n == 100_000 else f"{n}"
    print(f"TARGET cfair_{label}_seconds: {t_full:.2f} (target <= 30) "
          f"{'OK' if t_full <= 30 else 'MISS'}")
    print(f"TARGET cfair_reuse_{label}_seconds: {t_reuse:.2f} (target <= 30) "
          f"{'OK' if t_reuse <= 30 else 'MISS'}")
    ratio = t_full / t_exh
    verdict = "OK" if ratio <= 1 else "MISS"
    print(f"TARGET cfair_vs_exhaustive: {ratio:.2f} (target <= 1) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
