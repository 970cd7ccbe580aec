"""Quote a recorded benchmark figure in a page instead of typing it: the ``bench`` role.

A page writes ``{bench}`bench_madd:madd_auto_vs_sort``` and the build reads the value from
``benchmarks/results/bench_madd.txt`` (written by ``benchmarks/run_all.py --record``), so the
figure a reader sees is the one the script printed, and it changes when the run is recorded
again. The value links to the run's section of the benchmarks page; hovering it shows the
command, date, machine and load of that run. A name that the recorded output does not hold is
a warning, hence a failed build under ``make docs`` (``-W``).

Syntax (the text of the role):

- ``script:name``: the value of the output line ``TARGET name: value (...)`` (also ``INFO``,
  then untagged ``name: value`` and ``name=value`` lines, indented or not, then table rows
  ``name  value ...``), that is the text up to `` (`` or the end; a name may hold spaces
  and punctuation (``bench_failover:kill failover``, ``bench_coverage:coverage, 20 rows``),
  with ``≥`` and ``≤`` for ``>=`` and ``<=``;
- ``script:name[i]``: the ``i``-th whitespace-separated field of that value (0-based), for
  table rows such as ``cold_first   25.535   0.355``;
- ``script:name@scope`` (or ``script:name[i]@scope``): the name within the block that starts
  at the line beginning with ``scope`` and ends at the next line with the same first word,
  for a script that prints one table per case (``bench_many_groups:all@k = 400``);
- ``template <script:name>``: the template with ``{}`` replaced by the value, e.g.
  ``{bench}`{}× faster <bench_madd:madd_auto_vs_histogram_loop>```.

The ``bench-output`` directive includes one Markdown section of a recorded output (from the
line starting with its ``:section:`` option, ``#`` marks aside, to the next ``## `` heading,
or to the line starting with its ``:until:`` option) under a line naming the run, for the
tables a script prints itself (``bench_alert_budget.py``). With the ``:literal:`` flag the
excerpt is shown as printed, in a code block (a whitespace-aligned table such as
``bench_coverage_scores.py``'s); ``:grep:`` keeps, after the first line, only the lines that
match a regular expression (one metric's rows of a long table).
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole
from sphinx.util.nodes import make_refnode

DOCS = Path(__file__).resolve().parents[1]
RESULTS = DOCS.parent / "benchmarks" / "results"
sys.path.insert(0, str(DOCS / "_scripts"))
from benchmark_results import label, lookup, read_result  # noqa: E402

logger = logging.getLogger(__name__)

#: ``template <script:name>`` or ``script:name``, with an optional ``[i]`` field index
ROLE_TEXT = re.compile(r"^(?:(?P<template>.*?)\s*<(?P<ref1>[^<>]+)>|(?P<ref2>[^<>]+))$", re.S)
REFERENCE = re.compile(r"^(?P<script>bench_\w+):(?P<name>[^@\[\]]+?)(?:\[(?P<field>\d+)\])?"
                       r"(?:@(?P<scope>[^@\[\]]+))?$")


def run_title(header: dict[str, str]) -> str:
    """Return the hover text of a quoted figure: the run it comes from."""
    return (f"{header.get('command', '?')}; {header.get('date', '?')}; "
            f"{header.get('machine', '?')}; load {header.get('load', '?')}")


def resolve(text: str, results: Path = RESULTS) -> tuple[str, str, dict[str, str]]:
    """Return the rendered figure, its script and its run's header; ``LookupError`` if none.

    >>> resolve("{} s <bench_toy:x>", Path("/nonexistent"))
    Traceback (most recent call last):
    ...
    LookupError: no recorded run /nonexistent/bench_toy.txt (run_all.py --record --only ...)
    """
    match = ROLE_TEXT.match(text.strip())
    ref = (match["ref1"] or match["ref2"]).strip() if match else ""
    parts = REFERENCE.match(ref)
    if parts is None:
        raise LookupError(f"{text!r} is not 'script:name', 'script:name[i]' or 'text <...>'")
    path = results / f"{parts['script']}.txt"
    if not path.exists():
        raise LookupError(f"no recorded run {path} (run_all.py --record --only ...)")
    header, output = read_result(path)
    value = lookup(output, parts["name"], (parts["scope"] or "").strip())
    if value is None:
        where = f" after {parts['scope']!r}" if parts["scope"] else ""
        raise LookupError(f"{path.name} has no figure {parts['name']!r}{where}")
    if parts["field"] is not None:
        fields = value.split()
        if int(parts["field"]) >= len(fields):
            raise LookupError(f"{parts['name']!r} in {path.name} has no field {parts['field']}")
        value = fields[int(parts["field"])]
    template = match["template"] if match["ref1"] else "{}"
    return template.replace("{}", value), parts["script"], header


class BenchRole(SphinxRole):
    """``{bench}`script:name```: a recorded figure, linked to its run on the benchmarks page."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        """Return the figure in a reference to its run; warn (fail under -W) if none."""
        try:
            figure, script, header = resolve(self.text)
        except LookupError as error:
            logger.warning("bench role: %s", error, location=self.get_location())
            return [nodes.problematic(self.rawtext, self.rawtext)], []
        self.env.note_dependency(str(RESULTS / f"{script}.txt"))
        shown = nodes.abbreviation(figure, figure, explanation=run_title(header),
                                   classes=["bench-figure"])
        ref = bench_ref("", target=label(script))
        ref += shown
        return [ref], []


class bench_ref(nodes.Inline, nodes.Element):  # noqa: N801 (docutils names nodes in lowercase)
    """A quoted figure waiting for the link to its run (:class:`LinkToRun` resolves it)."""


def link_to_run(app: object, doctree: nodes.document, docname: str) -> None:
    """Replace each quoted figure's ``bench_ref`` by a link to its run's section.

    (A ``pending_xref`` would do the linking, but the standard domain replaces an explicit
    reference's content with plain text, losing the ``<abbr>`` that carries the run.)
    """
    labels = app.env.domaindata["std"]["labels"]
    for node in list(doctree.findall(bench_ref)):
        if node["target"] not in labels:
            logger.warning("bench role: no section %s on the benchmarks page (is "
                           "benchmarks/results/ rendered?)", node["target"], location=node)
            node.replace_self(node.children)
            continue
        target_doc, labelid, _ = labels[node["target"]]
        node.replace_self(make_refnode(app.builder, docname, target_doc, labelid,
                                       node.children, node["target"]))


class BenchOutput(SphinxDirective):
    """``bench-output script``: a section of a recorded output, as is.

    Options: ``:section:``, ``:until:``, ``:literal:``, ``:grep:`` (the module's docstring).
    """

    required_arguments = 1
    option_spec = {"section": str, "until": str, "literal": directives.flag, "grep": str}

    def run(self) -> list[nodes.Node]:
        """Return the section parsed as Markdown; warn (fail under -W) if none."""
        script = self.arguments[0]
        path = RESULTS / f"{script}.txt"
        start = self.options.get("section", "")
        lines = []
        if path.exists():
            header, output = read_result(path)
            shown = excerpt(output, start, self.options.get("until"), self.options.get("grep"))
            if "literal" in self.options:
                lines = ["```text", *shown, "```"] if shown else []
            else:
                lines = _section(shown)
        if not lines:
            logger.warning("bench-output: %s holds no section %r", path, start,
                           location=self.get_location())
            return []
        self.env.note_dependency(str(path))
        note = (f"Recorded by `{header.get('command', '?')}`, {header.get('date', '?')}, "
                f"{header.get('wall', '?')} wall; {header.get('machine', '?')}; load "
                f"{header.get('load', '?')} ({{ref}}`the whole run <{label(script)}>`).")
        container = nodes.container(classes=["bench-output"])
        self.state.nested_parse(StringList([note, "", *lines]), self.content_offset, container)
        return [container]


def section_lines(output: list[str], start: str, until: str | None = None) -> list[str]:
    """Return the section starting with ``start`` (:func:`excerpt`) as Markdown.

    ``start`` is matched without the line's leading ``#`` marks: ``Reset`` finds ``## Reset``.
    The heading becomes a bold line (a heading would join the page's outline), and every line
    that is not a table row its own paragraph, so a script's ``TARGET`` lines stay one a line;
    one printed between two rows of a table follows the table.

    >>> section_lines(["## A", "| x |", "|---|", "| 1 |", "TARGET t: 1", "| 2 |", "x: 2", "## B"],
    ...               "A")
    ['**A**', '', '| x |', '|---|', '| 1 |', '| 2 |', '', 'TARGET t: 1', '', 'x: 2', '']
    >>> section_lines(["## S", "a: 1", "b: 2", "12 s"], "S", until="12 s")
    ['**S**', '', 'a: 1', '', 'b: 2', '']
    """
    return _section(excerpt(output, start, until))


def excerpt(output: list[str], start: str, until: str | None = None,
            grep: str | None = None) -> list[str]:
    """Return the lines from the first one starting with ``start`` to the section's end.

    ``start`` is matched without the line's indentation and leading ``#`` marks (so is
    ``until``: a directive's option loses its leading spaces); the section ends before the
    next ``## `` heading, or before the next line starting with ``until``. With ``grep``, only
    the later lines matching that regular expression are kept. Empty if no line starts with
    ``start``.

    >>> excerpt(["x", "metric n", "abcc 50", "abpc 50", "abcc 99", "  cells: 2", "## B"],
    ...         "metric", until="cells", grep=r"^abcc")
    ['metric n', 'abcc 50', 'abcc 99']
    """
    def bare(line: str) -> str:
        return re.sub(r"^#+ ", "", line.lstrip())

    for i, line in enumerate(output):
        if bare(line).startswith(start):
            end = next((j for j in range(i + 1, len(output))
                        if (bare(output[j]).startswith(until) if until
                            else output[j].startswith("## "))), len(output))
            rest = output[i + 1:end]
            if grep:
                rest = [row for row in rest if re.search(grep, row)]
            return [line, *rest]
    return []


def _section(lines: list[str]) -> list[str]:
    """Return an excerpt as Markdown: its heading bold, then :func:`_blocks` of the rest."""
    if not lines:
        return []
    return [re.sub(r"^#+ (.*)$", r"**\1**", lines[0]), "", *_blocks(lines[1:])]


def _blocks(lines: list[str]) -> list[str]:
    """Return ``lines`` as Markdown blocks: tables whole, any other line a paragraph."""
    blocks: list[str] = []
    deferred: list[str] = []  # lines printed inside a table, shown after it
    for k, row in enumerate(lines):
        if row.startswith("|"):
            blocks.append(row)
            continue
        table_goes_on = any(later.startswith("|") for later in
                            itertools.takewhile(str.strip, lines[k + 1:]))
        if blocks and blocks[-1].startswith("|") and table_goes_on and row.strip():
            deferred.append(row)
            continue
        if blocks and blocks[-1].startswith("|"):
            blocks.append("")
        for text in [*deferred, row] if row.strip() else deferred:
            blocks += [text, ""]
        deferred = []
    if blocks and blocks[-1].startswith("|"):
        blocks.append("")
    for text in deferred:
        blocks += [text, ""]
    return blocks


def setup(app: object) -> dict[str, bool]:
    """Register the role and the directive."""
    app.add_node(bench_ref)
    app.connect("doctree-resolved", link_to_run)
    app.add_role("bench", BenchRole())
    app.add_directive("bench-output", BenchOutput)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
