"""Long-lived workers (`sim.workers.WorkerPool`, behind the planner's ProcessExecutor) give what the inline path
gives: the same summaries and the same bytes in every run folder, for several configurations on one worker."""
from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from sim.compose import compose_config
from sim.plan.executors import InlineExecutor, ProcessExecutor, Task


def _tasks(root: Path) -> list[Task]:
    out = []
    for i, (n, router) in enumerate([(1, "round_robin"), (2, "least_kv"), (3, "least_outstanding")]):
        ov = ("scenario=smoke", f"router={router}", f"scenario.pools.main.instances={n}",
              "scenario.traffic.num_requests=60", "metrics.progress=false")
        cfg = OmegaConf.to_container(compose_config(list(ov)), resolve=True)
        out.append(Task(str(i), cfg, ov, str(root / str(i))))
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _strip_wall(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "wall_time_s"}


def test_worker_pool_equals_inline(tmp_path):
    inline = {t.key: o for t, o in InlineExecutor().run(_tasks(tmp_path / "inline"))}
    ex = ProcessExecutor(1)  # one worker: the three configurations run one after another in the same process
    try:
        pooled = {t.key: o for t, o in ex.run(_tasks(tmp_path / "pool"))}
    finally:
        ex.close()
    assert sorted(pooled) == sorted(inline) == ["0", "1", "2"]
    for key in inline:
        assert _strip_wall(pooled[key]["summary"]) == _strip_wall(inline[key]["summary"])
        a, b = _files(tmp_path / "inline" / key), _files(tmp_path / "pool" / key)
        assert sorted(a) == sorted(b)
        for name in a:
            if name != "summary.json":  # (it holds the wall time)
                assert a[name] == b[name], (key, name)
