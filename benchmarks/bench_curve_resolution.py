"""What reading ABCC's and ABPC's curves at 64 bins instead of 128 changed (issue 25, cost).

The score intervals carry their bootstrap and null curves at ``CURVE_RESOLUTION`` bins (pairs of
the fine histogram's 128) since 2026-11-27. This compares the ``results/bench_coverage_scores.txt``
recorded at 64 bins (commit ``d0bb782``, the last with nothing else changed) with the last
record made at 128 bins (commit ``051a0f1``), both read with ``git show``, cell by cell. Both
runs simulate the same windows (each cell and window has its own seed), so a difference is the
binning's, plus the two bootstraps' own Monte Carlo noise: about one in a hundred windows can
flip at a bound. ``--before`` and ``--after`` (a commit or a file) compare any two records,
e.g. ``--before d0bb782 --after 6da1504`` for the upper end's whole bias correction with
several pairs near the max (the targets are this script's, not that change's; later records
ran the reference on more windows, which changes a cell's windows after the tenth).

Targets: coverage within 0.02 of the 128-bin run's in every cell with a gap, zero exclusion
within 0.02 in every parity cell, the mean width within 5% in every cell. Printed beside them:
the largest change of power (zero exclusion with a gap), and the cells whose verdict on
coverage or zero exclusion changed (5-group cells sit at the coverage cap, so a window or two
can move them across it).

Usage: ``python benchmarks/bench_curve_resolution.py [--before REF|PATH] [--after REF|PATH]``.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORD = "benchmarks/results/bench_coverage_scores.txt"
BEFORE = "051a0f1"  # the last commit whose record read the curves at 128 bins
AFTER = "d0bb782"  # the record at 64 bins, before the upper end's bias share changed


def cells(text: str) -> dict[tuple[str, ...], dict[str, float | str]]:
    """The rows of a bench_coverage_scores.py output, by cell (columns found by the header,
    which later records widened)."""
    out: dict[tuple[str, ...], dict[str, float | str]] = {}
    column: dict[str, int] = {}
    for line in text.splitlines():
        part = line.split()
        if part[:2] == ["metric", "dist"]:
            column = {name: k for k, name in enumerate(part)}
        if not column or len(part) < len(column) or part[0] not in ("abcc", "abpc"):
            continue
        out[tuple(part[:6])] = {"cover": float(part[column["cover"]]),
                                "excl0": float(part[column["excl0"]]),
                                "width": float(part[column["width"]]),
                                "verdict": " ".join(part[column["verdict"]:])}
    return out


def _record(source: str) -> str:
    """The text of a record: a file, or the recorded file as of a commit."""
    if Path(source).is_file():
        return Path(source).read_text()
    return subprocess.run(["git", "show", f"{source}:{RECORD}"], cwd=HERE,
                          capture_output=True, text=True, check=True).stdout


def target(name: str, value: float, op: str, bound: float) -> None:
    ok = value <= bound if op == "<=" else value >= bound
    print(f"TARGET {name}: {value:.3g} (target {op} {bound:g}) {'OK' if ok else 'FAIL'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="a commit (its record) or a file")
    parser.add_argument("--after", default=AFTER, help="a commit (its record) or a file")
    args = parser.parse_args()
    old, new = cells(_record(args.before)), cells(_record(args.after))
    shared = [k for k in new if k in old]
    print(f"{len(shared)} cells in both runs ({args.before}, then {args.after})")
    print(f"{'metric':5s} {'dist':4s} {'n':>6s} {'bal':>4s} {'K':>2s} {'gap':>4s} "
          f"{'cover':>13s} {'excl0':>13s} {'width':>17s}")
    d_cover, d_excl, d_power, ratios, moved = [], [], [], [], []
    for key in shared:
        a, b = old[key], new[key]
        ratio = float(b["width"]) / float(a["width"])
        excl = abs(float(b["excl0"]) - float(a["excl0"]))
        if key[5] == "yes":  # a gap: coverage is judged, zero exclusion is power
            d_cover.append(abs(float(b["cover"]) - float(a["cover"])))
            d_power.append(excl)
        else:
            d_excl.append(excl)
        ratios.append(ratio)
        for flag in ("COV", "ZERO"):
            was, now = flag in str(a["verdict"]), flag in str(b["verdict"])
            if was != now:
                moved.append(" ".join(key) + f" ({'now' if now else 'no longer'} {flag})")
        print(f"{' '.join(f'{x:>4s}' for x in key)}  {a['cover']:.3f}->{b['cover']:.3f}  "
              f"{a['excl0']:.3f}->{b['excl0']:.3f}  {a['width']:.4f}->{b['width']:.4f} "
              f"({ratio:.2f})")
    print(f"largest change: coverage (with a gap) {max(d_cover):.3f}, zero exclusion (at "
          f"parity) {max(d_excl):.3f}, power (zero exclusion with a gap) {max(d_power):.3f}; "
          f"width ratio {min(ratios):.3f} to {max(ratios):.3f}")
    print("verdicts on coverage or zero exclusion that changed: "
          + ("; ".join(moved) if moved else "none"))
    target("curve_resolution_cells", len(shared), ">=", 160)
    target("curve_resolution_coverage_change", max(d_cover), "<=", 0.02)
    target("curve_resolution_exclusion_change", max(d_excl), "<=", 0.02)
    target("curve_resolution_width_low", min(ratios), ">=", 0.95)
    target("curve_resolution_width_high", max(ratios), "<=", 1.05)


if __name__ == "__main__":
    main()
