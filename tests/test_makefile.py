"""`make demo` installs the package alone; `make test` and `make docs` add their extras.

The demo must stay light (issue 31: the test and Spark extras made a 1.7 GB `.venv` before
anything showed); this reads the Makefile's rules instead of running them (an install needs
the package index and minutes).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
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


UV_INSTALL = ".venv/bin/uv pip install --quiet --python .venv/bin/python"


def _installs(recipe: list[str]) -> list[str]:
    """The arguments of the recipe's package installs (uv's), after ``uv pip install``."""
    return [line.split(UV_INSTALL, 1)[1].split(";")[0].split() for line in recipe
            if UV_INSTALL in line]


def test_uv_is_installed_into_the_venv_by_pip_pinned_to_a_minor_series():
    # the only pip install: uv itself, so a fresh clone needs nothing beyond Python
    _, base = _rule("$(BASE_STAMP)")
    pips = [line for line in base if "pip install" in line and not line.startswith(UV_INSTALL)]
    assert pips == [".venv/bin/python -m pip install --quiet 'uv>=0.13,<0.14'"]
    assert base.index(pips[0]) < next(i for i, line in enumerate(base)
                                      if line.startswith(UV_INSTALL))
    # the venv is created before anything goes into it
    assert base[0] == "test -x .venv/bin/python || python3 -m venv .venv"


def test_demo_installs_the_package_without_extras():
    prerequisites, recipe = _rule("demo")
    assert prerequisites == [expand("$(KERNELS)")]
    _, base = _rule("$(BASE_STAMP)")
    assert _installs(base) == [["-e", "."]]
    # uv does not byte-compile (pip needed --no-compile): no --compile-bytecode may creep in
    assert not any("compile" in line for line in base)


def test_kernels_rebuild_when_a_pyx_changes_without_installing_anything():
    prerequisites, recipe = _rule("$(KERNELS)")
    assert prerequisites[:2] == [expand("$(BASE_STAMP)"), "setup.py"]
    assert "$(wildcard fairmonitor/_kernels/*.pyx)" in " ".join(prerequisites)
    # uv skips an installed package unless told: --reinstall-package rebuilds the kernels
    assert _installs(recipe) == [["--no-deps", "--reinstall-package", "fairmonitor", "-e", "."]]


def test_a_fresh_install_builds_the_kernels_once(tmp_path):
    # make runs the kernels' recipe after remaking the base install, which built them: the
    # recipe must rebuild only when setup.py or a .pyx is newer than the stamp. Run its guard
    # in a scratch tree with the install replaced by a marker.
    _, recipe = _rule("$(KERNELS)")
    guard = recipe[0].replace("$@", ".venv/.kernels").replace("$$", "$")
    guard = guard.replace(f"{UV_INSTALL} --no-deps --reinstall-package fairmonitor -e .",
                          "touch rebuilt")
    kernels = tmp_path / "fairmonitor" / "_kernels"
    kernels.mkdir(parents=True)
    (tmp_path / ".venv").mkdir()
    for name in ("setup.py", "fairmonitor/_kernels/madd.pyx", ".venv/.kernels"):
        (tmp_path / name).write_text("")
    stamp = tmp_path / ".venv" / ".kernels"
    os.utime(stamp, (time.time() + 5, time.time() + 5))  # the base install's touch, later

    def rebuilt() -> bool:
        subprocess.run(["sh", "-c", guard], cwd=tmp_path, check=True)
        return (tmp_path / "rebuilt").exists()

    assert not rebuilt()  # fresh install: the stamp is newer than every source
    os.utime(kernels / "madd.pyx", (time.time() + 10, time.time() + 10))  # an edited kernel
    assert rebuilt()
    (tmp_path / "rebuilt").unlink()
    stamp.unlink()
    assert rebuilt()  # no stamp: build


def test_test_and_docs_add_the_extras_they_need():
    stamp = expand("$(STAMP)")
    for target in ("test", "docs"):
        assert _rule(target)[0] == [stamp, expand("$(KERNELS)")]
    _, recipe = _rule("$(STAMP)")
    assert _installs(recipe) == [["-e", "'.[test,spark,docs]'"]]
    _, docs = _rule("docs")
    assert any("sphinx -W" in line for line in docs)  # warnings are errors
