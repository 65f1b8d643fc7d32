"""Static batching: wait for a full batch (or a timeout), then run it to completion (FasterTransformer-style; the
request-level scheme of `request_level.py`)."""
from __future__ import annotations

from sim.core.instance.batch import ScheduledBatch
from sim.core.instance.batching.request_level import RequestLevelBatching, reserve, run_to_completion_step
from sim.core.instance.kv_cache import BlockManager


class StaticBatching(RequestLevelBatching):
    """Batches of `batch_size` requests in arrival order, started when full or when the oldest has waited
    `timeout_s`."""

    def __init__(self, kv: BlockManager, *, batch_size: int = 8, timeout_s: float = 0.05) -> None:
        if batch_size < 1:
            raise ValueError('"batch_size" must be >= 1')
        if timeout_s < 0:
            raise ValueError('"timeout_s" must be >= 0')
        super().__init__(kv)
        self.batch_size, self.timeout_s = batch_size, timeout_s

    def schedule(self, now: float) -> ScheduledBatch | float | None:
        if self.running:
            return run_to_completion_step(self.running)
        if not self.waiting:
            return None
        deadline = self.waiting[0].enqueued_s + self.timeout_s
        if len(self.waiting) < self.batch_size and now < deadline:
            return deadline
        load_s = 0.0
        while self.waiting and len(self.running) < self.batch_size:
            got = reserve(self.kv, self.waiting[0])
            if got is None:
                break
            load_s += got
            self.running.append(self.waiting.popleft())
        return run_to_completion_step(self.running, load_s) if self.running else None
