"""Every number of the cell metrics, dumped under two versions of the code, compared bit for bit.

Usage (run from the repository root of each version, so ``benchmarks`` is found)::

    PYTHONPATH=<old checkout> python benchmarks/cell_values_identical.py dump old.pkl
    PYTHONPATH=<new checkout> python benchmarks/cell_values_identical.py dump new.pkl
    python benchmarks/cell_values_identical.py compare old.pkl new.pkl

Summaries: merged days with and without the intersection, every group in cells or some raw
(``max_raw``), single hours, the 10^7-row harness day, small random summaries (rounded, clipped,
tied scores). Numbers: ``evaluate_summary``'s values, certified errors, interval bounds and
chance levels; ``abcc_from_summary``, ``madd_from_summary`` (auto, a fixed bandwidth, fixed
bins; every pair) and ``abpc_from_summary`` under both aggregations; each group's fine
histogram. Floats compare as bits (signed zeros; NaN equals NaN).
"""
import math
import pickle
import sys
import warnings


def dump(path):
    sys.path.insert(0, "benchmarks")
    import numpy as np
    from bench_summaries import METRICS, day

    from fairmonitor.report import evaluate_summary
    from fairmonitor.report.intervals import _fine
    from fairmonitor.summaries import SummarySpec, from_bytes, merge_all, summarize, to_bytes
    from fairmonitor.summaries import compute as C

    warnings.simplefilter("ignore")


    def numbers(m):
        out = {}
        for level in (None, 0.95):
            r = evaluate_summary(m, metrics=METRICS, confidence_level=level)
            out.update({(level, "v") + k: v for k, v in r.values.items()})
            for k, iv in r.intervals.items():
                out[(level, "iv") + k] = (iv.lower, iv.upper, iv.chance, iv.method, iv.reason)
            for k, d in r.details.items():
                if hasattr(d, "error"):
                    out[(level, "err") + k] = d.error
        for name, attr in m.attributes.items():
            for agg in ("max", "mean"):
                a = C.abcc_from_summary(attr, max_bins_cells=m.spec.max_bins, agg=agg)
                out[("abcc", name, agg)] = (a.value, a.error)
                for bw in ("auto", 0.1):
                    try:
                        r = C.madd_from_summary(attr, max_bins_cells=m.spec.max_bins, agg=agg, bandwidth=bw)
                        out[("madd", name, agg, bw)] = (r.value, [(p.groups, p.value, p.n_bins) for p in r.pairs])
                    except Exception as e:
                        out[("madd", name, agg, bw)] = repr(e)
                for nb in (10, 100):
                    try:
                        r = C.madd_from_summary(attr, max_bins_cells=m.spec.max_bins, agg=agg, n_bins=nb)
                        out[("maddn", name, agg, nb)] = (r.value, [(p.groups, p.value) for p in r.pairs])
                    except Exception as e:
                        out[("maddn", name, agg, nb)] = repr(e)
                for bw in ("scott", "silverman", 0.05):
                    try:
                        out[("abpc", name, agg, bw)] = C.abpc_from_summary(attr, max_bins_cells=m.spec.max_bins, agg=agg, bandwidth=bw)
                    except Exception as e:
                        out[("abpc", name, agg, bw)] = repr(e)
            for lab, g in attr.groups.items():
                out[("fine", name, lab)] = _fine(g).tobytes()
        return out

    res = {}
    sf, score, label, hour = day(2 * 10**6)
    b = np.searchsorted(hour, np.arange(25))
    for inter in (False, True):
        for max_raw in (8192, 60000, 200000):
            spec = SummarySpec(max_raw=max_raw, sample_size=0)
            parts = [from_bytes(to_bytes(summarize({k: v[x:y] for k, v in sf.items()}, y_score=score[x:y], y_true=label[x:y], spec=spec, intersection=inter))) for x, y in zip(b[:-1], b[1:])]
            res[("day", inter, max_raw)] = numbers(merge_all(parts))
            res[("hour", inter, max_raw)] = numbers(parts[3])
    # the harness's day
    sf, score, label, hour = day(10**7)
    b = np.searchsorted(hour, np.arange(25))
    spec = SummarySpec(max_raw=8192, sample_size=0)
    res["harness"] = numbers(merge_all([from_bytes(to_bytes(summarize({k: v[x:y] for k, v in sf.items()}, y_score=score[x:y], y_true=label[x:y], spec=spec, intersection=False))) for x, y in zip(b[:-1], b[1:])]))
    # small random summaries: rounded scores, clipped scores, few rows, mixes
    rng = np.random.default_rng(1)
    for t in range(40):
        n = int(rng.integers(50, 20000))
        k = int(rng.integers(2, 5))
        g = rng.integers(0, k, n).astype(str)
        h = rng.integers(0, 2, n).astype(str)
        kind = t % 4
        s = rng.beta(2, 3 + rng.integers(0, 3, n), n)
        if kind == 1: s = np.round(s, 2)
        if kind == 2: s = np.clip(s * 1.5 - 0.2, 0, 1)
        if kind == 3: s = np.where(rng.random(n) < .3, 0.5, s)
        y = (rng.random(n) < s).astype(int)
        spec = SummarySpec(max_raw=int(rng.integers(10, 3000)), sample_size=0)
        cut = np.sort(rng.integers(0, n, 3))
        parts = [summarize({"g": g[a:c], "h": h[a:c]}, y_score=s[a:c], y_true=y[a:c], spec=spec, intersection=bool(t % 2)) for a, c in zip(np.r_[0, cut], np.r_[cut, n]) if c > a]
        res[("rand", t)] = numbers(merge_all(parts))
    pickle.dump(res, open(path, "wb"))
    print("dumped", len(res), "summaries")


def compare(old, new):
    a, b = (pickle.load(open(p, "rb")) for p in (old, new))
    def flat(x):
        if isinstance(x, (tuple, list)):
            for y in x: yield from flat(y)
        else: yield x
    bad = 0; n = 0; maxd = 0.0
    assert a.keys() == b.keys()
    for s in a:
        assert a[s].keys() == b[s].keys(), s
        for k in a[s]:
            for x, y in zip(flat(a[s][k]), flat(b[s][k]), strict=True):
                n += 1
                if isinstance(x, float) and isinstance(y, float):
                    same = (x == y and math.copysign(1, x) == math.copysign(1, y)) or (x != x and y != y)
                    if not same:
                        bad += 1; maxd = max(maxd, abs(x - y)); print("DIFF", s, k, x, y)
                elif x != y:
                    bad += 1; print("DIFF", s, k, repr(x)[:80], repr(y)[:80])
    print(f"compared {n} numbers in {len(a)} summaries: {bad} differ, max |diff| {maxd}")


if __name__ == "__main__":
    {"dump": dump, "compare": compare}[sys.argv[1]](*sys.argv[2:])
