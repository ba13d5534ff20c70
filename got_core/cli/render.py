"""Human-readable renderings shared by the commands: tables that fit 80 columns, ``got show``.

Every listing is a rich table without vertical borders: ids never wrap (they are
abbreviated as git does), long text is cut with an ellipsis so each row stays one line,
and ``--json`` / ``--full`` give everything whole.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from got_core.cli.plugin import Abbrev, console, safe, when
from got_core.types import CommitInfo, Node

__all__ = ["listing", "print_commit", "print_node", "value_text"]


#: The flexible column of a listing is never cut narrower than this.
MIN_FLEX = 16


class Listing:
    """A table for a listing: a header rule, no vertical borders, one line per row.

    Columns keep the width of their longest cell (ids are short: abbreviated), except
    the ``flex`` column (default: the last), which takes the width that is left and is
    cut with an ellipsis when the terminal is narrow, and the ``wrap`` columns, which
    fold over several lines past ``max_wrap`` characters.

    With ``full`` (``--full``) nothing is cut or folded: each row is one line as wide as
    it needs, which the terminal may wrap.

    Cells are rich markup (escape text from repositories with ``safe``).
    """

    def __init__(
        self,
        *columns: str,
        title: str | None = None,
        wrap: Sequence[str] = (),
        flex: str | None = None,
        max_wrap: int = 24,
        full: bool = False,
    ) -> None:
        self.full = full
        self.columns = list(columns)
        self.title = title
        self.wrap = set(wrap)
        self.flex = self.columns.index(flex or columns[-1])
        self.max_wrap = max_wrap
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        """One row (as many cells as columns)."""
        self.rows.append(tuple(cells))

    def _widths(self, width: int) -> list[int]:
        widths = [cell_len(Text.from_markup(c).plain) for c in self.columns]
        for row in self.rows:
            for i, cell in enumerate(row):
                widths[i] = max(
                    widths[i], max((cell_len(x) for x in Text.from_markup(cell).plain.split("\n")), default=0)
                )
        for i, name in enumerate(self.columns):
            if name in self.wrap and i != self.flex:
                widths[i] = min(widths[i], max(self.max_wrap, cell_len(name)))
        gaps = 3 * (len(self.columns) - 1)  # one space of padding each side, one of separator
        left = width - gaps - sum(w for i, w in enumerate(widths) if i != self.flex)
        # Short of room: the folding columns give way first (they fold over more lines), so
        # the fixed columns (ids, scores) are never cut and the flex column keeps MIN_FLEX.
        for i, name in enumerate(self.columns):
            short = min(MIN_FLEX, widths[self.flex]) - left
            if short <= 0:
                break
            if name in self.wrap and i != self.flex:
                give = min(short, widths[i] - max(cell_len(name), 8))
                if give > 0:
                    widths[i] -= give
                    left += give
        widths[self.flex] = max(1, min(widths[self.flex], max(left, MIN_FLEX)))
        return widths

    def _full(self) -> RenderResult:
        widths = [cell_len(Text.from_markup(c).plain) for c in self.columns]
        for row in self.rows:
            widths = [max(w, cell_len(Text.from_markup(c).plain)) for w, c in zip(widths, row, strict=True)]

        def line(cells: Sequence[str], style: str = "") -> Text:
            text = Text(style=style, no_wrap=True, overflow="ignore")
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True)):
                part = Text.from_markup(cell)
                text.append_text(part)
                if i < len(cells) - 1:
                    text.append(" " * (w - part.cell_len + 3))
            text.rstrip()
            return text

        if self.title:
            yield Text.from_markup(self.title, style="italic")
        yield line(self.columns, "bold")
        for row in self.rows:
            yield line(row)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.full:
            yield from self._full()
            return
        widths = self._widths(options.max_width)
        table = Table(title=self.title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title_justify="left")
        for i, name in enumerate(self.columns):
            folds = name in self.wrap
            table.add_column(name, width=widths[i], no_wrap=not folds, overflow="fold" if folds else "ellipsis")
        for row in self.rows:
            table.add_row(*row)
        yield table


def listing(
    *columns: str, title: str | None = None, wrap: Sequence[str] = (), flex: str | None = None, full: bool = False
) -> Listing:
    """A :class:`Listing` with these columns."""
    return Listing(*columns, title=title, wrap=wrap, flex=flex, full=full)


def value_text(value: Any) -> str:
    """A stored value as text: strings as they are, numbers rounded, the rest as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _fields(pairs: Sequence[tuple[str, str]]) -> None:
    """``key: value`` lines, values aligned."""
    width = max((len(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        console.print(f"[bold]{safe(key + ':'):<{width + 1}}[/] {safe(value)}", soft_wrap=False)


def _section(title: str) -> None:
    console.rule(f"[bold]{safe(title)}", align="left")


def _step_line(i: int, step: Mapping[str, Any]) -> str:
    first = [k for k in ("type", "action", "tool", "input", "observation", "ok") if k in step]
    keys = first + sorted(k for k in step if k not in first)
    return f"{i:>2}. " + "  ".join(f"{k}: {value_text(step[k])}" for k in keys)


def print_node(node: Node, info: CommitInfo, abbrev: Abbrev) -> None:
    """``got show`` of a reasoning node: header fields, thought, a scores table, trace steps, metadata."""
    console.print(f"[bold yellow]commit {safe(node.oid)}[/]")
    pairs = [("date", when(info.time))]
    if node.parents:
        pairs.append(("parents", abbrev.many(node.parents)))
    pairs += [
        ("node", node.node_id),
        ("problem", node.problem_id or "-"),
        ("depth", str(node.depth)),
        ("outcome", node.outcome or "-"),
        ("score", "-" if node.score is None else f"{node.score:.3f}"),
    ]
    if node.tags:
        pairs.append(("tags", ", ".join(node.tags)))
    _fields(pairs)
    _section("thought.md")
    console.print(safe(node.thought.rstrip("\n")), soft_wrap=False)
    _section("scores.json")
    if node.scores or node.note:
        table = listing("score", "value", "note")
        for name in sorted(set(node.scores) | set(node.note or {})):
            note = (node.note or {}).get(name)
            table.add_row(
                safe(name),
                safe(value_text(node.scores.get(name, ""))),
                safe(value_text(note) if note is not None else ""),
            )
        console.print(table)
    else:
        console.print("No scores.")
    _section(f"trace.jsonl ({len(node.trace)} step{'s' if len(node.trace) != 1 else ''})")
    if node.trace:
        for i, step in enumerate(node.trace, 1):
            console.print(safe(_step_line(i, step)), soft_wrap=False)
    else:
        console.print("No trace steps.")
    meta = {k: v for k, v in node.metadata.items() if k not in ("node_id", "problem_id", "depth", "outcome")}
    _section("metadata.json")
    if meta:
        _fields([(k, value_text(v)) for k, v in sorted(meta.items())])
    else:
        console.print("No metadata.")


def print_commit(info: CommitInfo, files: Sequence[str], abbrev: Abbrev) -> None:
    """``got show`` of a commit that is not a reasoning node (a lesson, a checkpoint...)."""
    console.print(f"[bold yellow]commit {safe(info.oid)}[/]")
    pairs = [("date", when(info.time))]
    if info.parents:
        pairs.append(("parents", abbrev.many(info.parents)))
    if info.tags:
        pairs.append(("tags", ", ".join(info.tags)))
    _fields(pairs)
    console.print()
    for line in info.message.rstrip("\n").splitlines():
        console.print(f"    {safe(line)}", soft_wrap=False)
    _section(f"files ({len(files)})")
    for path in files:
        console.print(f"  {safe(path)}")
