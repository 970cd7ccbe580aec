"""Sphinx configuration of the fairmonitor documentation site (``make docs``).

Sphinx with the PyData theme, numpydoc and MyST: the docstrings are numpydoc already (as in
scikit-learn and fairlearn, whose sites use the same stack), so the API reference is read from
them as written, and the guides stay Markdown pages that GitHub renders too. Before the build,
:func:`_generate` writes what is derived from the code into ``docs/_generated/`` (ignored by
git): the metric figures (``_scripts/figures.py``, from the bundled data), the configuration
reference (from the monitor's config schema), the benchmarks page's recorded runs (from
``benchmarks/results/``, as ``benchmarks/run_all.py --record`` wrote them) and the list of
``docs/*.md`` pages that no toctree names yet, so a page added to ``docs/`` shows up in the
navigation without an edit here. A page quotes a recorded benchmark figure with the ``bench``
role of ``_ext/bench_figures.py`` instead of typing it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
GENERATED = DOCS / "_generated"
# this checkout's package, not an installed one; docs/_ext: the site's own extensions
for _path in (str(ROOT / "plugins"), str(ROOT), str(DOCS / "_ext")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

project = "fairmonitor"
author = "fairmonitor contributors"
copyright = "fairmonitor contributors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "numpydoc",
    "sphinx.ext.mathjax",
    "bench_figures",  # docs/_ext: {bench}`script:name` quotes a recorded benchmark figure
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_generated/*.md", "_scripts", "Thumbs.db", ".DS_Store"]
root_doc = "index"
# a code block whose lexer fails (e.g. a PromQL recording-rule name with a colon) is still shown,
# unhighlighted: cosmetic, not a broken page
suppress_warnings = ["misc.highlighting_failure"]

# MyST: GitHub-style heading anchors (`page.md#some-heading`, as the pages link on GitHub)
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "dollarmath"]

# API reference: the docstrings as numpydoc writes them; members in source order
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "show-inheritance": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

html_theme = "pydata_sphinx_theme"
html_title = "fairmonitor"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "footer_start": ["copyright"],
    "footer_end": [],
    "secondary_sidebar_items": ["page-toc"],
}
# the whole site in the left sidebar: the guides are one level deep, so the theme's own
# section navigation would be empty on most pages
html_sidebars = {"**": ["globaltoc.html"]}
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False

# pages listed by hand in index.md's toctrees; every other docs/*.md page goes in "More pages"
LISTED = {
    "index", "getting-started", "metrics", "evaluator", "monitor", "multiclass", "configuration",
    "alerting", "alert-modes", "alert-routing", "runbook", "statistics", "intervals",
    "intervals_scores", "reliability", "high-availability", "state-and-recovery",
    "spark-and-rollups", "benchmarks", "api", "architecture", "contributing",
}


def _more_pages() -> str:
    """Return a toctree of the docs/*.md pages no toctree of index.md lists ("" if none)."""
    extra = sorted(p.stem for p in DOCS.glob("*.md") if p.stem not in LISTED)
    if not extra:
        return ""
    return "```{toctree}\n:caption: More pages\n:maxdepth: 1\n\n" + "\n".join(extra) + "\n```\n"


def _write_if_changed(path: Path, text: str) -> None:
    # an unchanged file keeps its mtime, so Sphinx does not re-read the pages including it
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def config_reference() -> str:
    """Return the configuration reference page's table, from the monitor's config schema."""
    from fairmonitor.monitor.config.reference import markdown

    return markdown() + "\n"


def benchmark_results() -> str:
    """Return the benchmarks page's recorded runs (``benchmarks/results/``, as written)."""
    sys.path.insert(0, str(DOCS / "_scripts"))
    try:
        from benchmark_results import markdown
    finally:
        sys.path.remove(str(DOCS / "_scripts"))
    return markdown(ROOT / "benchmarks" / "results", ROOT / "benchmarks")


def _generate(app: object = None, config: object = None) -> None:
    """Write the code-derived parts of the site into ``docs/_generated/``."""
    (GENERATED / "figures").mkdir(parents=True, exist_ok=True)
    _write_if_changed(GENERATED / "config-reference.md", config_reference())
    _write_if_changed(GENERATED / "benchmark-results.md", benchmark_results())
    _write_if_changed(GENERATED / "more-pages.md", _more_pages())
    # the figures: a subprocess, so matplotlib and scikit-learn stay out of Sphinx's process;
    # the script skips figures that are newer than itself and the data
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(DOCS / "_scripts" / "figures.py"),
                    "--out", str(GENERATED / "figures")], check=True, env=env)


def setup(app: object) -> dict[str, bool]:
    """Generate the derived pages once the configuration is read, before any page is."""
    app.connect("config-inited", _generate)
    return {"parallel_read_safe": True}
