"""``fairmonitor warm`` checks that every compiled kernel is built and loads, and says how to
build one that is missing (issue 27: the kernels are compiled at install, not at first use)."""

from __future__ import annotations

import importlib.machinery

import pytest

from fairmonitor._kernels import _MissingKernel
from fairmonitor.cli import main
from fairmonitor.commands import warm


def test_warm_loads_every_kernel(capsys):
    assert main(["warm"]) == 0
    out = capsys.readouterr().out
    assert "compiled kernels load" in out
    for name in ("groups", "cells"):  # the ported ones, at least
        assert name in out


def test_warm_fails_naming_the_build_command_when_a_kernel_is_not_built(
        capsys, monkeypatch, tmp_path):
    (tmp_path / "missing.pyx").write_text("")
    finder = _MissingKernel(tmp_path)
    monkeypatch.setattr(warm, "kernel_names", lambda: ["groups", "missing"])
    original = importlib.import_module

    def import_module(name):
        if name.endswith(".missing"):  # what the import system asks the finder, last
            finder.find_spec(name)
        return original(name)

    monkeypatch.setattr(warm.importlib, "import_module", import_module)
    assert main(["warm"]) == 1
    err = capsys.readouterr().err
    assert "fairmonitor._kernels.missing is not built" in err
    assert "pip install -e ." in err and "build_ext --inplace" in err
    assert "1 of 2 compiled kernels do not load" in err


def test_an_unbuilt_kernel_raises_an_import_error_that_says_how_to_build(tmp_path):
    (tmp_path / "fake.pyx").write_text("")
    finder = _MissingKernel(tmp_path)
    with pytest.raises(ImportError, match=r"pip install -e \.") as info:
        finder.find_spec("fairmonitor._kernels.fake")
    assert info.value.name == "fairmonitor._kernels.fake"
    assert importlib.machinery.EXTENSION_SUFFIXES[0] in str(info.value)
    # anything else is not its business: other modules, kernels with no source here
    assert finder.find_spec("fairmonitor._kernels.other") is None
    assert finder.find_spec("fake") is None
