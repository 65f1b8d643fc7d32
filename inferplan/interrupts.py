"""Ctrl-C (SIGINT) and SIGTERM without losing what was computed.

Entry points run inside `signals_raise()`: both signals raise `Interrupted` (a `KeyboardInterrupt` carrying the
signal number), so one `except` handles either and the exit status is `128 + signum` (130, 143). A long loop whose
state must stay consistent (the simulator's event loop) runs inside `stop_requested()`: the first signal only sets a
flag that the loop reads between events, so it stops at a clean boundary and its results are collected as usual;
a second signal raises at once. Writing results runs inside `signals_deferred()`: a signal waits until the files
are complete. Outside the main thread (Streamlit's script thread, worker threads) nothing is installed: Python
delivers signals to the main thread only.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; `exit_code` is the shell's convention for death by that signal."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def signum_of(err: BaseException) -> int:
    """The signal behind a KeyboardInterrupt (a plain one is SIGINT)."""
    return getattr(err, "signum", int(signal.SIGINT))


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _handlers(handler) -> Iterator[None]:
    if not _main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _raise(signum, frame) -> None:
    raise Interrupted(signum)


def interrupt_behind(err: BaseException) -> Interrupted | None:
    """The `Interrupted` that `err` was raised while handling, if any: library code whose cleanup fails when our
    exception arrives mid-call (Hydra's config reader closes a file it never opened) replaces the interrupt with
    an error of its own, which must not become a traceback."""
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        if isinstance(e, Interrupted):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


@contextlib.contextmanager
def unmasked_interrupts() -> Iterator[None]:
    """Around a call into library code: an error that masks an `Interrupted` is raised as that interrupt."""
    try:
        yield
    except Exception as err:
        stop = interrupt_behind(err)
        if stop is None:
            raise
        raise stop from None


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` inside the block (also where library code masks it)."""
    with _handlers(_raise), unmasked_interrupts():
        yield


@dataclass
class StopFlag:
    """Set by the first signal inside `stop_requested()`; `signum` 0 means no stop was asked for."""

    signum: int = 0


@contextlib.contextmanager
def stop_requested() -> Iterator[StopFlag]:
    """The first signal sets the flag (the caller stops at its next clean boundary); a second raises."""
    flag = StopFlag()

    def handler(signum, frame) -> None:
        if flag.signum:
            raise Interrupted(signum)
        flag.signum = int(signum)
    with _handlers(handler):
        yield flag


@contextlib.contextmanager
def signals_deferred() -> Iterator[StopFlag]:
    """A signal inside the block is held until it ends, then raised as `Interrupted` (files stay whole)."""
    flag = StopFlag()

    def handler(signum, frame) -> None:
        flag.signum = flag.signum or int(signum)
    with _handlers(handler):
        yield flag
    if flag.signum:
        raise Interrupted(flag.signum)


def quiet_interrupts(message: str) -> None:
    """An interrupt that escapes everything (Ctrl-C while modules import) prints `message`, not a traceback;
    Python still exits with 130. Entry points call this before their heavy imports."""
    def hook(kind, value, tb) -> None:
        if issubclass(kind, KeyboardInterrupt):
            print(message, file=sys.stderr)
            return
        sys.__excepthook__(kind, value, tb)
    sys.excepthook = hook
