"""Host work of engine presets (`host_per_seq_s`, `overlap`) and SGLang-style overlap's one-iteration lag, on an
instance driven directly with a two-part synthetic cost: every iteration is GPU_S of GPU time plus HOST_S of host
overhead (the cost model's per-iteration part), so every expected time is a sum of those two numbers."""
from __future__ import annotations

import simpy

from sim.core.cost.base import PARTS, BatchShape, StepCost
from sim.core.cost.host_overlap import scheduled_cost
from sim.core.instance.batching.engine import EngineBatching
from sim.core.instance.instance import Instance
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest

GPU_S, HOST_S = 0.010, 0.004


class SplitCost:
    """GPU_S of attention + HOST_S of overhead per iteration; records each batch's decode sequences."""
    draft_tokens = 0
    acceptance: tuple = ()

    def __init__(self) -> None:
        self.decode_seqs: list[int] = []

    def step_cost(self, b: BatchShape, load_s: float = 0.0, host_s: float = 0.0, overlap: int = 0,
                  back_to_back: bool = False) -> StepCost:
        self.decode_seqs.append(b.decode_seqs)
        parts = dict.fromkeys(PARTS, 0.0)
        parts["attention"], parts["overhead"] = GPU_S, HOST_S
        return scheduled_cost(StepCost(GPU_S + HOST_S, parts), load_s, host_s, overlap, back_to_back)


def run(requests, blocks: int = 64, **engine):
    """(finish times by request id, the cost model) for requests (arrival_s, prompt, output), one instance."""
    env = simpy.Environment()
    kv = BlockManager(blocks, 16)
    policy = EngineBatching(kv, max_num_seqs=8, max_num_batched_tokens=1024, chunked_prefill=True, **engine)
    cost = SplitCost()
    done: dict[int, float] = {}
    inst = Instance(env, "p", 0, policy, kv, cost, lambda r: done.setdefault(r.request_id, r.finish_s),
                    fast_forward=False)
    inst.state = "active"
    for i, (t, prompt, out) in enumerate(requests):
        req = SimRequest(i, t, prompt, out)
        env.process(_submit(env, inst, req, t))
    env.run()
    return done, cost, inst, kv


def _submit(env, inst, req, t):
    yield env.timeout(t)
    inst.submit(req, env.now)


def test_without_overlap_an_iteration_is_gpu_plus_host():
    # 4 output tokens: prefill + 3 decodes, each 14 ms -> 56 ms.
    done, *_ = run([(0.0, 10, 4)])
    assert round(done[0], 9) == round(4 * (GPU_S + HOST_S), 9)


def test_overlap_all_hides_host_work_except_after_idle():
    # The first iteration (after idle) exposes its host work: 14 ms; the 3 after it take max(10, 4) = 10 ms:
    # 14 + 30 = 44 ms.
    done, *_ = run([(0.0, 10, 4)], overlap="all")
    assert round(done[0], 9) == round(GPU_S + HOST_S + 3 * GPU_S, 9)
    # Per-sequence host work 2 ms x 1 seq: host 6 ms, still under the GPU's 10: 16 + 3 x 10 = 46 ms.
    done, *_ = run([(0.0, 10, 4)], overlap="all", host_per_seq_s=0.002)
    assert round(done[0], 9) == round(GPU_S + HOST_S + 0.002 + 3 * GPU_S, 9)
    # 8 ms per sequence: host 12 ms > GPU 10 ms, so each overlapped iteration takes the host's 12 ms:
    # 22 + 3 x 12 = 58 ms.
    done, *_ = run([(0.0, 10, 4)], overlap="all", host_per_seq_s=0.008)
    assert round(done[0], 9) == round(GPU_S + HOST_S + 0.008 + 3 * (HOST_S + 0.008), 9)


def test_idle_gap_exposes_host_work_again():
    # Request 0 (2 tokens) runs 0 -> 14 ms -> 24 ms; the instance idles until request 1 at 100 ms, whose first
    # iteration exposes host work again: 100 + 14 + 10 = 124 ms.
    done, *_ = run([(0.0, 10, 2), (0.1, 10, 2)], overlap="all")
    assert round(done[0], 9) == 0.024 and round(done[1], 9) == 0.124


def test_output_overlap_hides_only_the_per_sequence_part():
    # vLLM V0 async output processing: the 3 ms per-sequence part runs under the next step's GPU, the 4 ms per-
    # iteration part stays: 10 + 4 + 3 (first, after idle) + 3 x (10 + 4) = 59 ms.
    done, *_ = run([(0.0, 10, 4)], overlap="output", host_per_seq_s=0.003)
    assert round(done[0], 9) == round(GPU_S + HOST_S + 0.003 + 3 * (GPU_S + HOST_S), 9)
    # Without overlap the per-sequence part adds to every iteration: 4 x 17 = 68 ms.
    done, *_ = run([(0.0, 10, 4)], host_per_seq_s=0.003)
    assert round(done[0], 9) == round(4 * (GPU_S + HOST_S + 0.003), 9)


def test_overlap_all_keeps_a_finished_request_one_more_iteration():
    # A (2 tokens) and B (4 tokens) both arrive at 0: [prefill A, B] -> both token 1; [decode A, B] -> A done.
    # Under overlap the next iteration is formed before A's output is seen: it still decodes A (discarded), so
    # the decode batches are 2, 2, 1 sequences, not 2, 1, 1; A's blocks are free only after that iteration.
    _, cost, _, kv = run([(0.0, 10, 2), (0.0, 10, 4)], overlap="all")
    assert cost.decode_seqs == [0, 2, 2, 1]
    _, plain, _, _ = run([(0.0, 10, 2), (0.0, 10, 4)])
    assert plain.decode_seqs == [0, 2, 1, 1]
    assert kv.free_blocks == kv.num_blocks  # everything released when the instance went idle


def test_host_keys_are_checked():
    import pytest
    kv = BlockManager(8, 16)
    with pytest.raises(ValueError, match="overlap"):
        EngineBatching(kv, max_num_seqs=1, max_num_batched_tokens=16, chunked_prefill=True, overlap="some")
    with pytest.raises(ValueError, match="host_per_seq_s"):
        EngineBatching(kv, max_num_seqs=1, max_num_batched_tokens=16, chunked_prefill=True, host_per_seq_s=-1.0)
