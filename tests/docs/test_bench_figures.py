"""Pages quote recorded benchmark figures through the ``bench`` role, never typed by hand.

``docs/_ext/bench_figures.py`` reads a figure from ``benchmarks/results/<script>.txt`` (what
``benchmarks/run_all.py --record`` wrote) at build time. These tests resolve the role against
the committed results (the expected value is read from the file here, independently), build a
two-page site with it under ``-W`` (a missing figure fails the build), and scan the pages whose
figures were converted for a timing, ratio, size or measured share typed outside the role.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
sphinx_build = pytest.importorskip("sphinx.cmd.build")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench_figures = _load(ROOT / "docs" / "_ext" / "bench_figures.py", "bench_figures")


def _recorded(script: str, pattern: str) -> str:
    """The first group of ``pattern`` in a committed result file, read without the extension."""
    text = (RESULTS / f"{script}.txt").read_text(encoding="utf-8")
    match = re.search(pattern, text, flags=re.M)
    assert match, f"{script}.txt lost the line {pattern!r}"
    return match[1]


def test_a_target_line_resolves_to_its_value_with_the_runs_conditions():
    expected = _recorded("bench_madd", r"^TARGET madd_auto_vs_sort: (\S+) \(")
    figure, script, header = bench_figures.resolve("bench_madd:madd_auto_vs_sort")
    assert (figure, script) == (expected, "bench_madd")
    assert header["date"] == _recorded("bench_madd", r"^# date: (.*)$")
    title = bench_figures.run_title(header)
    for field in ("command", "date", "machine", "load"):
        assert header[field] in title


def test_a_template_and_a_table_field():
    after = _recorded("bench_cold_start", r"^cold_first\s+\S+\s+(\S+)$")
    figure, _, _ = bench_figures.resolve("{} s after <bench_cold_start:cold_first[1]>")
    assert figure == f"{after} s after"
    unit = _recorded("bench_cold_start", r"^TARGET kernel_import: (\S+ s) \(")
    assert bench_figures.resolve("bench_cold_start:kernel_import")[0] == unit


def _block(script: str, start: str) -> str:
    """The recorded lines after the one starting with ``start``, up to the next ``k = ``."""
    text = (RESULTS / f"{script}.txt").read_text(encoding="utf-8")
    return text.split(f"\n{start}", 1)[1].split("\nk = ", 1)[0]


def test_a_scoped_name_reads_its_own_block():
    # bench_many_groups prints the same rows once per K; `all` is not `all - madd`
    block = _block("bench_many_groups", "k = 100 ")
    expected = re.search(r"^\s+all\s+(\d\S* s)$", block, flags=re.M)[1]
    assert bench_figures.resolve("bench_many_groups:all@k = 100")[0] == expected
    first = re.search(r"^\s+all\s+(\d\S* s)$", _block("bench_many_groups", "k = 2 "), flags=re.M)
    assert bench_figures.resolve("bench_many_groups:all")[0] == first[1]


def test_a_name_with_punctuation_and_comparisons():
    parity = _recorded("bench_coverage", r"^coverage, >= 50 rows, parity:\s+(.*?) \(target")
    assert bench_figures.resolve("bench_coverage:coverage, ≥ 50 rows, parity")[0] == parity
    width = _recorded("bench_coverage", r"^width / reference, 2 groups:\s+(.*?) \(target")
    assert bench_figures.resolve("bench_coverage:width / reference, 2 groups")[0] == width
    failing = _recorded("bench_coverage", r"^cells: \d+, failing targets: (\d+)$")
    assert bench_figures.resolve("bench_coverage:cells[3]")[0] == failing


@pytest.mark.parametrize("text, message", [
    ("bench_madd:no_such_figure", "has no figure 'no_such_figure'"),
    ("bench_many_groups:all@k = 7", "has no figure 'all' after 'k = 7'"),
    ("bench_nothing:x", "no recorded run"),
    ("bench_cold_start:cold_first[9]", "has no field 9"),
    ("madd_auto_vs_sort", "is not 'script:name'"),
])
def test_a_missing_figure_is_an_error(text, message):
    with pytest.raises(LookupError, match=re.escape(message)):
        bench_figures.resolve(text)


def _loop_section() -> str:
    """The start of the recorded histogram-loop line (its size depends on --quick)."""
    return _recorded("bench_madd", r"^(n = \S+): histogram loop ")


def _page() -> str:
    return f"""# Quoted

MADD costs {{bench}}`{{}}× one sort <bench_madd:madd_auto_vs_sort>`.

```{{bench-output}} bench_madd
:section: {_loop_section()}
```

```{{bench-output}} bench_coverage
:section: cell
:until: == summary
:grep: coverage:FAIL
:literal:
```
"""
RUNS = ("# Runs\n\n(bench-bench_madd)=\n## bench_madd\n\nthe run.\n\n"
        "(bench-bench_coverage)=\n## bench_coverage\n\nthe run.\n")


def _build(src: Path, page: str) -> tuple[int, Path]:
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'docs' / '_ext')!r})\n"
        "extensions = ['myst_parser', 'bench_figures']\nroot_doc = 'index'\n")
    (src / "index.md").write_text("# Home\n\n```{toctree}\nquoted\nruns\n```\n")
    (src / "quoted.md").write_text(page)
    (src / "runs.md").write_text(RUNS)
    out = src / "_build"
    status = sphinx_build.build_main(["-W", "-q", "-b", "html", "-d", str(out / ".doctrees"),
                                      str(src), str(out)])
    return status, out


def test_the_role_renders_the_value_linked_to_its_run(tmp_path):
    pytest.importorskip("myst_parser")
    status, out = _build(tmp_path, _page())
    assert status == 0
    html = (out / "quoted.html").read_text(encoding="utf-8")
    value = _recorded("bench_madd", r"^TARGET madd_auto_vs_sort: (\S+) \(")
    link = re.search(r'<a class="reference internal" href="runs.html#bench-bench-madd"[^>]*>'
                     r'<abbr class="bench-figure" title="([^"]*)">([^<]*)</abbr></a>', html)
    assert link, html
    assert link[2] == f"{value}× one sort"
    assert _recorded("bench_madd", r"^# machine: (.*)$") in link[1]
    # the directive's section: the recorded line itself, under the run's command
    loop = _recorded("bench_madd", rf"^{re.escape(_loop_section())}: histogram loop (\S+ s)")
    assert f"histogram loop {loop}" in html
    assert "python benchmarks/bench_madd.py" in html
    # a literal excerpt: the table's header, then only its failing rows, as printed
    pre = re.findall(r"<pre>(.*?)</pre>", html, flags=re.S)
    assert len(pre) == 1, html
    rows = re.sub(r"<[^>]+>", "", pre[0]).splitlines()
    text = (RESULTS / "bench_coverage.txt").read_text(encoding="utf-8")
    failing = [row for row in text.split("\n== summary")[0].splitlines()
               if row.endswith(("coverage:FAIL", "coverage:FAIL width:PASS"))]
    assert rows[0].startswith("cell ") and rows[1:] == failing


def test_a_missing_figure_fails_the_build(tmp_path):
    pytest.importorskip("myst_parser")
    status, _ = _build(tmp_path, "# Quoted\n\n{bench}`bench_madd:no_such_figure`\n")
    assert status != 0


# Every page a reader sees: figures are quoted through the role (or reworded without a
# number). ARCHITECTURE.md is on the site too (docs/architecture.md includes it).
CONVERTED = ["README.md", "ARCHITECTURE.md",
             *sorted(f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md"))]

NUMBER = r"\d[\d,]*(?:\.\d+)?"
#: what a measured figure looks like: a decimal duration, a timed run, a ratio, a size, a
#: measured share; configured values (`30s`, "a lease of 30 s") are integers or code spans
FIGURE = re.compile("|".join([
    r"\b\d+\.\d+\s?(?:s|ms|µs|us|ns|min|seconds|minutes)\b",
    rf"\b{NUMBER}\s?(?:s|seconds|min|minutes) (?:of )?(?:wall|CPU)\b",
    rf"\b{NUMBER}\s?×",
    rf"\b{NUMBER}(?:[-–]{NUMBER})?x (?:faster|slower|the cost|as fast|as slow)\b",
    rf"\b{NUMBER}\s?(?:B|KB|MB|GB|KiB|MiB|GiB|bytes)(?:/row)?\b",
    r"\b\d+\.\d+\s?%",
    r"\b\d+[-–]\d+\s?%",
]))


def _prose(text: str) -> str:
    """``text`` without code blocks, code spans and role or directive uses (kept line count)."""
    text = re.sub(r"^(```|~~~).*?^\1", lambda m: "\n" * m[0].count("\n"), text,
                  flags=re.M | re.S)
    text = re.sub(r"\{bench\}`[^`]*`", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


def hand_typed(text: str) -> list[str]:
    """The lines of ``text`` that type a measured figure outside the role."""
    return [f"{number}: {line.strip()}" for number, line in enumerate(_prose(text).splitlines(), 1)
            if FIGURE.search(line)]


@pytest.mark.parametrize("line", [
    "about 11× faster", "47 s of CPU", "median 2.42 s", "a 645 MB venv", "1.0-1.9x the cost",
    "94.5% of runs", "35–150% on Adult-like data", "145,980 bytes",
])
def test_the_scan_catches_a_typed_figure(line):
    assert hand_typed(line)


@pytest.mark.parametrize("line", [
    "a lease of 30 s", "`group_wait: 10s`", "{bench}`{} s <bench_hfm:x>`", "95% interval",
    "the 5-minute window", "```text\n2.42 s\n```",
])
def test_the_scan_lets_configured_values_and_quotes_through(line):
    assert hand_typed(line) == []



@pytest.mark.parametrize("page", CONVERTED)
def test_no_hand_typed_figure_in_a_converted_page(page):
    assert hand_typed((ROOT / page).read_text(encoding="utf-8")) == []


def _quotes(text: str) -> list[str]:
    return re.findall(r"\{bench\}`([^`]*)`", _without_code(text))


def _without_code(text: str) -> str:
    """``text`` without its fenced blocks other than ``bench-output`` ones."""
    return re.sub(r"^```(?!\{bench-output\}).*?^```", "", text, flags=re.M | re.S)


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_every_quoted_figure_of_a_page_is_recorded(page):
    # the site build fails on a missing figure too (-W); this says which, in seconds
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    for quote in _quotes(text):
        bench_figures.resolve(quote)
    for script, start in re.findall(r"^```\{bench-output\} (\S+)\n:section: (.*)$", text,
                                    flags=re.M):
        _, output = bench_figures.read_result(RESULTS / f"{script}.txt")
        assert bench_figures.section_lines(output, start.strip()), (script, start)


def test_the_examples_in_the_parsers_docstrings():
    # the suite's --doctest-modules covers fairmonitor/ and plugins/ only, not docs/
    import doctest

    for module in (bench_figures, sys.modules["benchmark_results"]):
        assert doctest.testmod(module).failed == 0, module.__name__
