"""`make demo` installs the package alone; `make test` and `make docs` add their extras.

The demo must stay light (issue 31: the test and Spark extras made a 1.7 GB `.venv` before
anything showed); this reads the Makefile's rules instead of running them (an install needs
the package index and minutes).
"""

from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = (Path(__file__).resolve().parents[1] / "Makefile").read_text()


def _variables() -> dict[str, str]:
    return dict(re.findall(r"^([A-Z_]+) [:?]?= (.*)$", MAKEFILE, flags=re.M))


def expand(text: str) -> str:
    """``text`` with the Makefile's variables substituted, nested ones included."""
    variables = _variables()
    while (new := re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m[1], m[0]), text)) != text:
        text = new
    return text


def _rule(target: str) -> tuple[list[str], list[str]]:
    """The prerequisites and recipe lines of ``target`` (variables expanded)."""
    for match in re.finditer(r"^([^\s:#][^:=]*):(?!=)(.*)\n((?:\t.*\n?)*)", MAKEFILE, flags=re.M):
        if expand(match.group(1)).strip() == expand(target):
            recipe = [expand(line.strip()) for line in match.group(3).splitlines()]
            return expand(match.group(2)).split(), recipe
    raise AssertionError(f"no rule for {target}")


def _installs(recipe: list[str]) -> list[str]:
    return [line for line in recipe if "pip install" in line and "--upgrade pip" not in line]


def test_demo_installs_the_package_without_extras():
    prerequisites, recipe = _rule("demo")
    assert prerequisites == [expand("$(KERNELS)")]
    _, base = _rule("$(BASE_STAMP)")
    assert [line.split("pip install")[1].split() for line in _installs(base)] == [
        ["--quiet", "--no-compile", "-e", "."]]


def test_kernels_rebuild_when_a_pyx_changes_without_installing_anything():
    prerequisites, recipe = _rule("$(KERNELS)")
    assert prerequisites[:2] == [expand("$(BASE_STAMP)"), "setup.py"]
    assert "$(wildcard fairmonitor/_kernels/*.pyx)" in " ".join(prerequisites)
    assert [line.split("pip install")[1].split() for line in _installs(recipe)] == [
        ["--quiet", "--no-compile", "--no-deps", "-e", "."]]


def test_test_and_docs_add_the_extras_they_need():
    stamp = expand("$(STAMP)")
    for target in ("test", "docs"):
        assert _rule(target)[0] == [stamp, expand("$(KERNELS)")]
    _, recipe = _rule("$(STAMP)")
    assert any("'.[test,spark,docs]'" in line for line in _installs(recipe))
    _, docs = _rule("docs")
    assert any("sphinx -W" in line for line in docs)  # warnings are errors
