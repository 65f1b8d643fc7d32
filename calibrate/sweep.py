"""The measuring loop: times every (shape, implementation) not yet in the store, within a time budget.

Order: implementations take turns (round robin over the (op, dtype, impl) groups) and, within a group, shapes go
coarse to fine (smallest, largest, middle, quarters, ...), so a budget that runs out early still leaves every op
with points spread over its whole range. Points already in the store are skipped (resume). A shape an
implementation does not take (`Unsupported`) is recorded as skipped; an exception is recorded as a failure, and an
implementation that fails `MAX_CONSECUTIVE_FAILURES` times in a row is dropped for the rest of the run. The store
is flushed every `flush_every_s`, at the end, and when a signal stops it (`control.Interrupted` propagates after the
flush). The deadline is also checked between the launches of one point (`control.check()`), so a slow point
cannot carry the sweep far past its budget; that point is then not kept.
"""
from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from calibrate import ops
from calibrate.control import BudgetReached, Control, Interrupted
from calibrate.impls import Impl
from calibrate.measurements import MeasurementStore
from calibrate.progress import Reporter
from calibrate.shapes import OpShape
from calibrate.timing import Timing
from calibrate.torch_ops import Bench, Unsupported

MAX_CONSECUTIVE_FAILURES = 6


@dataclass(frozen=True)
class Task:
    shape: OpShape
    impl: Impl

    @property
    def group(self) -> str:
        return f"{self.shape.op}/{self.shape.dtype}/{self.impl.name}"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.shape.op, self.shape.dtype, self.impl.name, self.shape.shape


@dataclass
class SweepResult:
    measured: int = 0                    # points timed in this run
    reused: int = 0                      # points found in the store
    remaining: int = 0                   # points left when the budget ran out
    stopped_by_budget: bool = False
    skipped: dict[str, dict] = field(default_factory=dict)   # group -> {points, reason}
    failed: dict[str, dict] = field(default_factory=dict)    # group -> {points, reason}
    elapsed_s: float = 0.0


def coarse_to_fine(n: int) -> list[int]:
    """Indices 0..n-1 in breadth-first bisection order: ends first, then midpoints of ever finer intervals."""
    if n <= 2:
        return list(range(n))
    order, queue = [0, n - 1], deque([(0, n - 1)])
    while queue:
        lo, hi = queue.popleft()
        if hi - lo > 1:
            mid = (lo + hi) // 2
            order.append(mid)
            queue.extend(((lo, mid), (mid, hi)))
    return order


def order_tasks(tasks: list[Task]) -> list[Task]:
    """Round robin over groups; coarse to fine by work (flops + bytes) within each group."""
    groups: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        groups[t.group].append(t)
    queues = []
    for name in sorted(groups):
        g = sorted(groups[name], key=lambda t: (t.shape.flops + t.shape.bytes, t.shape.shape))
        queues.append(deque(g[i] for i in coarse_to_fine(len(g))))
    ordered = []
    while queues:
        for q in list(queues):
            ordered.append(q.popleft())
            if not q:
                queues.remove(q)
    return ordered


def make_row(task: Task, timing: Timing, model: str, peaks: dict) -> dict:
    s = task.shape
    peak = peaks["flops_per_s"][ops.check_dtype(s.dtype)["compute"]]
    return {"op": s.op, "dtype": s.dtype, "impl": task.impl.name, "primary": task.impl.primary, "shape": s.shape,
            "layers": "+".join(s.layers), "models": model, "flops": s.flops, "bytes": s.bytes,
            "roofline_s": ops.roofline_s(s.flops, s.bytes, peak, peaks["mem_bytes_per_s"]),
            "measured_s": timing.median_s, "p20_s": timing.p20_s, "p80_s": timing.p80_s, "repeats": timing.repeats}


def _note(book: dict[str, dict], group: str, reason: str) -> None:
    entry = book.setdefault(group, {"points": 0, "reason": reason})
    entry["points"] += 1


def run_sweep(tasks: list[Task], store: MeasurementStore, time_bench: Callable[[Bench, Control], Timing],
              device: torch.device, peaks: dict, model: str, deadline_s: float, *, reporter: Reporter | None = None,
              flush_every_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
              control: Control | None = None) -> SweepResult:
    """Time every task not yet in `store`, stopping when `clock()` passes `deadline_s`. `time_bench(bench,
    control)` returns a `Timing` (or raises `BudgetReached`/`Interrupted` from `control.check()`). Returns counts;
    the store holds the rows."""
    control = control or Control(clock=clock)
    control.deadline_s = deadline_s
    reporter = reporter or Reporter(False)
    start = clock()
    result = SweepResult()
    todo = []
    for t in tasks:
        if store.has(t.key):
            store.note_models(t.key, model, t.shape.layers)
            result.reused += 1
        else:
            todo.append(t)
    todo = order_tasks(todo)
    streak: dict[str, int] = defaultdict(int)
    dropped: dict[str, str] = {}
    last_flush = clock()
    try:
        reporter.stage("sweep", len(todo), "points to time")
        for i, task in enumerate(todo):
            if clock() >= deadline_s:
                result.stopped_by_budget, result.remaining = True, len(todo) - i
                break
            if task.impl.name in dropped:
                _note(result.failed, task.group, dropped[task.impl.name])
                reporter.step(task.group)
                continue
            try:
                timing = time_bench(task.impl.build(task.shape, device), control)
            except BudgetReached:
                result.stopped_by_budget, result.remaining = True, len(todo) - i
                break
            except Unsupported as err:
                _note(result.skipped, task.group, str(err))
            except Exception as err:  # any kernel/library error is data: record it and go on
                if isinstance(err, Interrupted):
                    raise
                reason = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
                _note(result.failed, task.group, reason)
                streak[task.impl.name] += 1
                if streak[task.impl.name] >= MAX_CONSECUTIVE_FAILURES:
                    dropped[task.impl.name] = f"dropped after {MAX_CONSECUTIVE_FAILURES} failures: {reason}"
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            else:
                streak[task.impl.name] = 0
                store.add(make_row(task, timing, model, peaks))
                result.measured += 1
            reporter.step(f"{task.group} {task.shape.shape}")
            if clock() - last_flush >= flush_every_s:
                store.write()
                last_flush = clock()
        reporter.end(f"{result.measured} timed, {result.reused} reused"
                     + (f", budget reached with {result.remaining} left" if result.stopped_by_budget else ""))
    finally:
        store.metadata.setdefault("skipped", {}).update(result.skipped)
        store.metadata.setdefault("failed", {}).update(result.failed)
        store.write()
    result.elapsed_s = clock() - start
    return result
