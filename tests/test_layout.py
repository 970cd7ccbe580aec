"""The layout is the architecture: import arrows point one way and modules form no circle.

Read from the source with :mod:`ast` (imports inside functions included where stated), so a lazy
import cannot hide an arrow that points the wrong way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fairmonitor"

# A module may import its own layer and the layers below it, never one above.
LAYERS = [
    {"fairmonitor.exceptions", "fairmonitor._validation", "fairmonitor._kernels",
     "fairmonitor.utils"},
    {"fairmonitor.metrics"},
    {"fairmonitor.robustness", "fairmonitor.mitigation"},
    {"fairmonitor.report", "fairmonitor.summaries"},
    {"fairmonitor.datasets", "fairmonitor.monitor", "fairmonitor.alerting", "fairmonitor.spark"},
    {"fairmonitor.commands", "fairmonitor.demo", "fairmonitor.cli"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


MODULES = _modules()


def _imports(name: str, *, top_level_only: bool) -> set[str]:
    """The fairmonitor modules ``name`` imports (a ``from pkg import sub`` counts as ``sub``)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    if top_level_only:  # also `if TYPE_CHECKING:` blocks are not imports at run time: skip them
        nodes = [n for n in nodes if isinstance(n, ast.Import | ast.ImportFrom)]
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("fairmonitor.")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "fairmonitor" and not target.startswith("fairmonitor."):
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & MODULES.keys()
            found |= subs or {target}
    return {m for m in found if m in MODULES}


def _layer(module: str) -> int:
    for i, layer in enumerate(LAYERS):
        if any(module == root or module.startswith(root + ".") for root in layer):
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "fairmonitor"))
def test_imports_point_down(module):
    upward = {t for t in _imports(module, top_level_only=False)
              if t != "fairmonitor" and _layer(t) > _layer(module)}
    assert not upward, f"{module} imports a layer above it: {sorted(upward)}"


def test_metrics_import_only_metrics_validation_and_exceptions():
    allowed = ("fairmonitor.metrics", "fairmonitor._validation", "fairmonitor.exceptions",
               "fairmonitor._kernels", "fairmonitor.utils")
    for module in (m for m in MODULES if m.startswith("fairmonitor.metrics")):
        bad = {t for t in _imports(module, top_level_only=False) if not t.startswith(allowed)}
        assert not bad, f"{module} imports {sorted(bad)}"


def _third_party_imports(path: Path, *, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_pyspark_is_imported_only_by_fairmonitor_spark_and_only_lazily():
    for module, path in MODULES.items():
        anywhere = "pyspark" in _third_party_imports(path, top_level_only=False)
        if not module.startswith("fairmonitor.spark"):
            assert not anywhere, f"{module} imports pyspark: only fairmonitor.spark may"
        else:  # `import fairmonitor.spark` must work without the spark extra
            assert "pyspark" not in _third_party_imports(path, top_level_only=True), module


def test_fairmonitor_spark_uses_the_dataframe_api_only():
    # Spark Connect has no RDD, no SparkContext and no JVM handle; a JVM UDF would not ship
    forbidden = {"rdd", "sparkContext", "SparkContext", "_jvm", "_jdf", "_jsc", "udf",
                 "pandas_udf", "registerJavaFunction"}
    for path in (PACKAGE / "spark").rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.alias):
                names.add(node.name.rsplit(".", 1)[-1])
        assert not names & forbidden, f"{path.name} uses {sorted(names & forbidden)}"


def _find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (module -> imported modules), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            # a package's __init__ importing its own submodules is the package, not a circle
            if node == nxt or nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_import_circles():
    circle = _find_circle({m: _imports(m, top_level_only=False) for m in MODULES})
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_the_circle_finder_finds_circles():
    assert _find_circle({"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}}) == [
        "a.x", "a.y", "a.z", "a.x"]
    assert _find_circle({"a": {"a.x"}, "a.x": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("path", [
    "fairmonitor.metrics.hfm", "fairmonitor.metrics.counterpart_fairness",
    "fairmonitor.metrics.abcc", "fairmonitor.metrics.madd", "fairmonitor.metrics.permutation_test",
    "fairmonitor.robustness.robustness_ratio", "fairmonitor.robustness.RobustnessResult",
    "fairmonitor.mitigation.MADDPostProcessor", "fairmonitor.report.evaluate_window",
    "fairmonitor.report.Window", "fairmonitor.monitor.config.load_config",
    "fairmonitor.monitor.sources.SQLSource", "fairmonitor.monitor.sources.logger.PredictionLogger",
])
def test_public_names_stay_where_the_docs_say(path):
    import importlib

    module, name = path.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), name))


def _package(module: str) -> str:
    """The package a module belongs to: ``fairmonitor.<first part>``."""
    return ".".join(module.split(".")[:2])


def _private_reach_through(name: str) -> list[str]:
    """What ``name`` imports from another package's private modules or private names.

    A package's private parts are its modules below it whose name starts with ``_`` and the
    names starting with ``_``; the package-wide modules at the top (``fairmonitor._validation``,
    ``fairmonitor._kernels``) are packages of their own, open to all but their private names.
    """
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            pairs = [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            pairs = [(target, [a.name for a in node.names])]
        else:
            continue
        for target, names in pairs:
            if not target.startswith("fairmonitor.") or _package(target) == _package(name):
                continue
            private = [p for p in target.split(".")[2:] if p.startswith("_")]
            private += [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private:
                found.append(f"{name}:{node.lineno} {target} {sorted(private)}")
    return found


def test_no_module_imports_another_packages_private_names():
    found = {m: _private_reach_through(m) for m in sorted(MODULES)}
    bad = [line for lines in found.values() for line in lines]
    assert not bad, "import the public home instead:\n" + "\n".join(bad)


def test_the_reach_through_finder_finds_private_imports(tmp_path, monkeypatch):
    path = tmp_path / "probe.py"
    path.write_text("from ..metrics._madd.madd import _plan\nfrom ..metrics import madd\n"
                    "from ._x import y\n")
    monkeypatch.setitem(MODULES, "fairmonitor.summaries.probe", path)
    assert _private_reach_through("fairmonitor.summaries.probe") == [
        "fairmonitor.summaries.probe:1 fairmonitor.metrics._madd.madd ['_madd', '_plan']"]
