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
#: ``name   value   value`` (a padded name first, so ``all`` is not read from ``all - madd  1``)
FIGURES = (r"^(?:TARGET|INFO) {name}:\s*(?P<value>\S.*)$",
           r"^\s*{name}(?::\s*|=)(?P<value>\S.*)$", r"^\s*{name}\s{{2,}}(?P<value>\S.*)$",
           r"^\s*{name}\s+(?P<value>\S.*)$")


def lookup(output: list[str], name: str, scope: str = "") -> str | None:
    """Return the value a recorded output gives ``name`` (the text before `` (``), or None.

    ``≥`` and ``≤`` in ``name`` stand for ``>=`` and ``<=`` (a role's text cannot hold ``<``
    or ``>``). With ``scope``, the name is looked for in that block only (:func:`block`), for
    a script that prints the same table once per case.

    >>> lookup(["TARGET madd_auto_vs_sort: 3.30 (target <= 4) OK", "k=10"], "madd_auto_vs_sort")
    '3.30'
    >>> lookup(["cold_first     25.535   0.355", "k=10"], "cold_first"), lookup(["k=10"], "k")
    ('25.535   0.355', '10')
    >>> lookup(["x  1  2", "TARGET x: 3 (target <= 4)"], "x"), lookup(["TARGET x: 1"], "y")
    ('3', None)
    >>> lookup(["  kill failover: median 2.42 s, max 2.59 s (2.42, 2.59)"], "kill failover")
    'median 2.42 s, max 2.59 s'
    >>> lookup(["k = 2:", "  all - madd  0.1 s", "  all  0.2 s", "k = 9:", "  all  0.5 s"],
    ...        "all", scope="k = 9"), lookup(["rows >= 50: 97% (target)"], "rows ≥ 50")
    ('0.5 s', '97%')

    """
    lines = block(output, scope) if scope else output
    name = name.replace("≥", ">=").replace("≤", "<=")
    for form in FIGURES:
        pattern = re.compile(form.format(name=re.escape(name)))
        for line in lines:
            if (match := pattern.match(line)):
                return match["value"].split(" (")[0].strip()
    return None


def block(output: list[str], scope: str) -> list[str]:
    """Return the block of lines under the first line starting with ``scope``.

    ``scope`` must end at a word's end (``k = 10`` is not ``k = 100``). The block runs from
    the line after it (indentation aside) up to the next line that starts
    with the same first word: the next ``k = ...`` of a script that prints ``k = 2:``,
    ``k = 10:``, ... Empty if no line starts with ``scope``.

    >>> block(["k = 2:", "  a 1", "k = 100:", "k = 10:", "  a 2", "TARGET t: 3", "k = 5:"],
    ...       "k = 10")
    ['  a 2', 'TARGET t: 3']
    """
    starts = re.compile(re.escape(scope) + r"(?!\w)")  # "k = 10" is not "k = 100"
    for i, line in enumerate(output):
        if starts.match(line.lstrip()):
            first = line.split()[:1]
            end = next((j for j in range(i + 1, len(output)) if output[j].split()[:1] == first),
                       len(output))
            return output[i + 1:end]
    return []


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
