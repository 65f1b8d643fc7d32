"""Terminal output that fits 80 columns: compact tables whose columns are as wide as their widest value or header
word (headers wrap between words, nothing is cut by an ellipsis), and the console width used when stdout is not a
terminal (files, CI logs). The planner's report and the sweep's comparison table use it."""
from __future__ import annotations

import math
import sys
import textwrap

from rich import box
from rich.console import Console
from rich.table import Table

WIDTH = 80  # columns when stdout is not a terminal; a terminal's own width otherwise


def console(width: int | None = None) -> Console:
    return Console(highlight=False, width=width or (None if sys.stdout.isatty() else WIDTH))


def knob_header(key: str) -> str:
    """A searched or swept key as a header that may wrap between words: `scenario.pools.l40s_int4.min_instances`
    -> `l40s_int4 min instances` (the pool kept, `_` in the knob's name read as spaces)."""
    head, _, last = key.removeprefix("scenario.pools.").removeprefix("scenario.fleet.pools.").rpartition(".")
    return f"{head} {last.replace('_', ' ')}".strip()


def ms(x) -> str:
    """Seconds as milliseconds with one decimal; `-` for a missing value (None or NaN)."""
    return "-" if x is None or x != x else f"{x * 1e3:,.1f}"


def served_percent(x) -> str:
    """A served fraction in percent with three decimals, truncated, not rounded (99.9995% must not read 100)."""
    return "-" if x is None or x != x else f"{math.floor(x * 1e5) / 1e3:.3f}"


def compact_table(title: str, heads: list[str], rows: list[list[str]], left: tuple[int, ...] = ()) -> Table:
    """A table with one space between columns and a rule under the header; columns in `left` are left-aligned,
    the rest right-aligned (numbers)."""
    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    for i, head in enumerate(heads):
        width = max([len(w) for w in head.split()] + [len(r[i]) for r in rows] + [1])
        t.add_column("\n".join(textwrap.wrap(head, width)), justify="left" if i in left else "right", no_wrap=True)
    for r in rows:
        t.add_row(*r)
    return t
