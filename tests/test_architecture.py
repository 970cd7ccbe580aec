"""ARCHITECTURE.md stays true: every module, file and function it names exists as named.

The map names files (``report/intervals.py``, ``_parity.py``), dotted references
(``rollups.evaluate_rollup``, ``metrics._groups.encode_attributes``) and calls with their
arguments (``job.run_once(config, sources, ...)``); each is resolved against the repository,
so a renamed module or a changed signature fails here instead of misleading a newcomer.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
_SKIP_DIRS = {".git", ".venv", "__pycache__", "node_modules", ".mypy_cache", ".ruff_cache"}

# a file or folder: no spaces, ends with a known suffix or a slash
_PATH = re.compile(r"^[\w.\-/]+(\.py|\.pyx|\.md|\.yml|\.yaml|\.toml|/)$")
# a dotted reference, optionally called: a.b.c or a/b.c(args)
_DOTTED = re.compile(
    r"^(?P<name>[A-Za-z_]\w*(?:[./][A-Za-z_]\w*)+)(?:\((?P<args>[^)]*)\))?$")


def _backticked(text: str) -> list[str]:
    """The backticked spans, a span broken over lines joined back."""
    return [re.sub(r"\s+", " ", t).strip() for t in re.findall(r"`([^`]+)`", text)]


@cache
def _repo_paths() -> tuple[str, ...]:
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if _SKIP_DIRS & set(rel.parts):
            continue
        out.append(rel.as_posix() + ("/" if path.is_dir() else ""))
    return tuple(out)


def _path_exists(token: str) -> bool:
    """The token is a repository path, or the tail of one (the map names files in context)."""
    return any(p == token or p.endswith("/" + token) for p in _repo_paths())


@cache
def _modules() -> tuple[str, ...]:
    names = []
    for path in (ROOT / "fairmonitor").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return tuple(names)


def _resolve(dotted: str) -> object | None:
    """The object a dotted reference names, reading its head as the tail of a module name."""
    parts = dotted.replace("/", ".").split(".")
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        for module in _modules():
            if module == head or module.endswith("." + head):
                obj: object = importlib.import_module(module)
                try:
                    for attr in parts[cut:]:
                        obj = getattr(obj, attr)
                except AttributeError:
                    continue
                return obj
    return None


def _is_ours(dotted: str) -> bool:
    head = dotted.replace("/", ".").split(".")[0]
    if importlib.util.find_spec(head) is not None:  # a library's (mlflow.models.evaluate)
        return head == "fairmonitor"
    return any(m.split(".")[-1] == head or f".{head}." in f".{m}." for m in _modules())


def _references() -> list[str]:
    return sorted(set(_backticked(ARCHITECTURE.read_text())))


@pytest.mark.parametrize("token", [t for t in _references() if _PATH.match(t)])
def test_named_paths_exist(token: str) -> None:
    assert _path_exists(token), f"ARCHITECTURE.md names `{token}`, which no file or folder is"


@pytest.mark.parametrize("token", [t for t in _references()
                                   if not _PATH.match(t) and (m := _DOTTED.match(t))
                                   and _is_ours(m["name"])])
def test_named_modules_and_functions_exist(token: str) -> None:
    match = _DOTTED.match(token)
    assert match is not None
    obj = _resolve(match["name"])
    assert obj is not None, f"ARCHITECTURE.md names `{token}`, which does not resolve"
    if match["args"] is None or not callable(obj):
        return
    params = inspect.signature(obj).parameters
    named = [a.strip().split("=")[0].strip() for a in match["args"].split(",")]
    unknown = [a for a in named if a and a != "..." and a not in params]
    assert not unknown, (f"ARCHITECTURE.md calls `{token}`, but {match['name']} has no "
                         f"parameter(s) {unknown}; it takes {list(params)}")


def test_the_checks_catch_a_stale_name() -> None:
    assert not _path_exists("_accele.py")
    assert _path_exists("report/intervals.py")
    assert _resolve("rollups.evaluate_rollup") is not None
    assert _resolve("rollups.no_such_function") is None
    assert _resolve("metrics._groups.encode_attributes") is not None
