"""What can stop a calibration early: its time budget and a signal (SIGINT/SIGTERM), checked between launches.

`Control.check()` is called by the timers between launches and by the campaign between stages: it raises
`Interrupted` once a signal has been noted, and `BudgetReached` once `clock()` passes the deadline of the current
stage. `run_interruptible(fn, control, on_abandon)` (used by `python -m calibrate`) runs `fn` in a worker thread
so that the main thread stays free to take signals even while a long torch op holds the worker: on a signal it
sets the flag, waits `grace_s` for the worker to stop at its next check (the normal path: the store is flushed by
the campaign), and otherwise calls `on_abandon()` (which flushes the store itself) and reports `Interrupted`.
"""
from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


class Interrupted(Exception):
    """A SIGINT or SIGTERM arrived; `exit_code` is 128 + the signal number (130, 143)."""

    def __init__(self, signum: int, abandoned: bool = False) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.abandoned = signum, abandoned

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class BudgetReached(Exception):
    """The stage's deadline passed in the middle of a measurement (that measurement is not kept)."""


@dataclass
class Control:
    """The stop flag and the current deadline (seconds on `clock`), shared by the campaign and its timers."""

    deadline_s: float = float("inf")
    clock: Callable[[], float] = time.monotonic
    _stop: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None
    flush: Callable[[], object] | None = None  # last write of what was measured (set once the store is open)

    def request_stop(self, signum: int) -> None:
        self.signum = signum
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def left_s(self) -> float:
        return self.deadline_s - self.clock()

    def check(self) -> None:
        if self._stop.is_set():
            raise Interrupted(self.signum or signal.SIGINT)
        if self.clock() >= self.deadline_s:
            raise BudgetReached()


def run_interruptible(fn: Callable[[], object], control: Control, on_abandon: Callable[[], None],
                      grace_s: float = 0.5) -> object:
    """`fn()`'s result, run in a worker thread while the main thread handles SIGINT/SIGTERM (see module doc).

    Raises what `fn` raised, or `Interrupted(abandoned=True)` when the worker did not stop within `grace_s` of the
    signal (the caller must then leave with `os._exit`, the worker being still inside a library call)."""
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["result"] = fn()
        except BaseException as err:  # handed to the main thread
            box["error"] = err

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, lambda signum, _frame: control.request_stop(signum))
    worker = threading.Thread(target=work, name="calibrate", daemon=True)
    try:
        worker.start()
        while worker.is_alive() and not control.stopping:
            worker.join(0.05)
        if worker.is_alive():  # a signal: give the worker a moment to stop at its next check
            worker.join(grace_s)
        if worker.is_alive():
            on_abandon()
            raise Interrupted(control.signum or signal.SIGINT, abandoned=True)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("result")
