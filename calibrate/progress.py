"""What a calibration prints while it runs, on stderr: every stage, with elapsed time and the budget left.

On a terminal, one rich progress bar per stage (start-up, peaks, sweep, fit) with the count, the elapsed time and
an ETA (the rate so far, capped by the budget left). Elsewhere (logs, pipes, CI), one line per stage start and
end, and a line every `every_s` within a stage, e.g. `[  12.3 s] sweep: 40/812 points, budget left 95 s`.
`enabled=False` (progress=false) prints nothing. Times come from the campaign's clock.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Reporter:
    """Stage-by-stage progress against a deadline (seconds on `clock`)."""

    def __init__(self, enabled: bool = True, *, deadline_s: float = float("inf"), stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, every_s: float = 10.0, start_s: float | None = None):
        self.stream = stream or sys.stderr
        self.enabled, self.deadline_s, self.clock, self.every_s = enabled, deadline_s, clock, every_s
        self.start_s = start_s if start_s is not None else (clock() if enabled else 0.0)
        self.live = enabled and self.stream.isatty()
        self._bar = self._job = None
        self._stage, self._total, self._done, self._stage_start, self._last_line = "", 0, 0, 0.0, 0.0

    def _left(self) -> str:
        left = self.deadline_s - self.clock()
        return "" if left == float("inf") else f", budget left {max(left, 0.0):.0f} s"

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        msg = f"[{self.clock() - self.start_s:7.1f} s] {text}"
        if self._bar is not None:
            self._bar.console.print(msg, highlight=False)
        else:
            print(msg, file=self.stream, flush=True)

    def stage(self, name: str, total: int, what: str = "") -> None:
        """Start a stage of `total` steps (closing the previous one)."""
        self.end()
        self._stage, self._total, self._done = name, total, 0
        if not self.enabled:  # disabled: never reads the clock (tests drive the campaign with a fake one)
            return
        self._stage_start = self._last_line = self.clock()
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description:<56}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[eta]}"),
                                 console=Console(file=self.stream), transient=False)
            self._bar.start()
            self._job = self._bar.add_task(f"{name}: {what}"[:56], total=total, eta=self._eta())
        else:
            self.line(f"{name}: {total} {what}{self._left()}")

    def _eta(self) -> str:
        left = self.deadline_s - self.clock()
        if self._done:
            rate_s = (self.clock() - self._stage_start) / self._done
            left = min(left, rate_s * (self._total - self._done))
        return "" if left == float("inf") else f"eta {max(left, 0.0):.0f} s"

    def step(self, what: str = "", n: int = 1) -> None:
        self._done += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._job, advance=n, description=f"{self._stage}: {what}"[:56], eta=self._eta())
        elif self.clock() - self._last_line >= self.every_s:
            self._last_line = self.clock()
            self.line(f"{self._stage}: {self._done}/{self._total} {what}{self._left()}")

    def abort(self) -> None:
        """Close the current stage silently (the run was stopped; the caller says so)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = self._job = None
        self._stage = ""

    def end(self, note: str = "") -> None:
        """Close the current stage with its count (and `note`)."""
        if not self._stage:
            return
        stage, self._stage = self._stage, ""
        if self._bar is not None:
            self._bar.stop()
            self._bar = self._job = None
        if self.enabled:
            self.line(f"{stage}: done {self._done}/{self._total} in {self.clock() - self._stage_start:.1f} s"
                      + (f" ({note})" if note else ""))
