"""Render ``benchmarks/results/*.txt`` (written by ``run_all.py --record``) as a Markdown page.

The documentation's benchmarks page includes this page, so every figure it shows is a script's
own output under the header its run recorded: the command, the date, the machine and the load.
Nothing here measures or rounds anything; a result is shown as the script printed it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

#: ``TARGET name: what was measured (the target) verdict``, as the scripts print it
TARGET = re.compile(r"^TARGET (?P<name>.+?): (?P<result>.*)$")


def read_result(path: Path) -> tuple[dict[str, str], list[str]]:
    """Return one recorded run's header fields and its output lines."""
    header: dict[str, str] = {}
    output: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        field = re.match(r"^# (command|date|machine|load|wall): (.*)$", line)
        if field and not output:
            header[field[1]] = field[2]
        else:
            output.append(line)
    return header, output


#: the output lines naming one figure, in the order they are looked for: ``TARGET name: value``
#: or ``INFO name: value``, then ``name: value`` or ``name=value``, then a table row
#: ``name   value   value``
FIGURES = (r"^(?:TARGET|INFO) {name}:\s*(?P<value>\S.*)$",
           r"^\s*{name}(?::\s*|=)(?P<value>\S.*)$", r"^\s*{name}\s+(?P<value>\S.*)$")


def lookup(output: list[str], name: str) -> str | None:
    """Return the value a recorded output gives ``name`` (the text before `` (``), or None.

    >>> lookup(["TARGET madd_auto_vs_sort: 3.30 (target <= 4) OK", "k=10"], "madd_auto_vs_sort")
    '3.30'
    >>> lookup(["cold_first     25.535   0.355", "k=10"], "cold_first"), lookup(["k=10"], "k")
    ('25.535   0.355', '10')
    >>> lookup(["x  1  2", "TARGET x: 3 (target <= 4)"], "x"), lookup(["TARGET x: 1"], "y")
    ('3', None)
    >>> lookup(["  kill failover: median 2.42 s, max 2.59 s (2.42, 2.59)"], "kill failover")
    'median 2.42 s, max 2.59 s'

    """
    for form in FIGURES:
        pattern = re.compile(form.format(name=re.escape(name)))
        for line in output:
            if (match := pattern.match(line)):
                return match["value"].split(" (")[0].strip()
    return None


def label(script: str) -> str:
    """Return the label of a script's section (for ``{ref}`` and the ``bench`` role)."""
    return f"bench-{script}"


def summary(script: Path) -> str:
    """Return the first line of a script's docstring: what it measures."""
    if not script.exists():
        return ""
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return docstring.strip().splitlines()[0] if docstring.strip() else ""


def targets_table(output: list[str]) -> list[str]:
    """Return a Markdown table of the run's ``TARGET`` lines (empty if it printed none)."""
    rows = [m for line in output if (m := TARGET.match(line))]
    if not rows:
        return []
    table = ["| target | result, as printed |", "|---|---|"]
    pipe = "\\|"  # a literal | inside a Markdown table cell
    table += [f"| `{m['name']}` | {m['result'].replace('|', pipe)} |" for m in rows]
    return table + [""]


def section(path: Path, scripts: Path) -> list[str]:
    """Return one script's section: what it measures, its run's conditions, targets, output."""
    header, output = read_result(path)
    # the anchor other pages link: benchmarks.md#bench_madd; the label: the `bench` role's target
    lines = [f"({label(path.stem)})=", f"### {path.stem}", ""]
    if (what := summary(scripts / f"{path.stem}.py")):
        lines += [what, ""]
    lines += [f"- command: `{header.get('command', '?')}`",
              f"- run: {header.get('date', '?')}, {header.get('wall', '?')} wall",
              f"- machine: {header.get('machine', '?')}",
              f"- load average (1, 5, 15 min): {header.get('load', '?')}", ""]
    lines += targets_table(output)
    return lines + ["```text", *output, "```", ""]


def markdown(results: Path, scripts: Path) -> str:
    """Return the whole page: one section per recorded run, in the scripts' order."""
    files = sorted(results.glob("bench_*.txt"))
    if not files:
        return "No run is recorded yet: `python benchmarks/run_all.py --record`.\n"
    return "\n".join(line for path in files for line in section(path, scripts))
