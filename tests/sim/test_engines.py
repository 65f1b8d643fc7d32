"""Engine presets (conf/engine/) on hand-computable workloads: synthetic 10 ms iterations (constant cost).

Every expected time is derived in the comments from the preset's rules with a 10 ms step.
"""
from __future__ import annotations

import numpy as np
import pytest

from inferplan.errors import InputError
from scenarios.workload import Workload
from sim.core.instance.batching.engine import EngineBatching
from inferplan.config.engine import graph_sizes
from sim.core.instance.engine import build_scheduler
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest
from sim.core.instance.batch import ScheduledBatch
from sim.simulate import simulate

from tests.sim.helpers import run_config

STEP = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0", "scenario.frontend_overhead_s=0",
        "scenario.pools.main.instances=1"]
# A: arrives 0, 10 prompt tokens, 7 output tokens. B: arrives 5 ms, 10 prompt, 2 output.
AB = Workload.from_columns([0.0, 0.005], [10, 10], [7, 2])
V0 = ["engine=vllm_v0", "engine.watermark_fraction=0", "engine.max_num_batched_tokens=8192"]


def times(res):
    r = res.requests
    return [(round(a, 6), round(b, 6)) for a, b in zip(r["ttft_s"], r["e2e_s"])]


def test_prefill_priority_stalls_decodes_by_the_prefill_iteration():
    # t=0 [A prefill] -> .01 A token 1. t=.01: B waits, so a prefill-only iteration [B prefill] -> .02 B token 1;
    # A's decode stalls behind it by exactly that iteration. t=.02 [A, B decode] -> .03 A 2, B 2 (done);
    # A's tokens 3..7 at .04 .. .08.
    res = simulate(run_config(*STEP, *V0), AB)
    assert times(res) == [(0.01, 0.08), (0.015, 0.025)]
    # Mixed iterations (vLLM V1) put B's prefill beside A's decode: A token 2 at .02, done at .07.
    mixed = simulate(run_config(*STEP, "engine=vllm_v1"), AB)
    assert times(mixed) == [(0.01, 0.07), (0.015, 0.025)]


def test_multi_step_groups_decodes_and_sends_tokens_at_the_group_end():
    # k = 3. [A prefill] -> .01 (A token 1 sent). [B prefill] -> .02 (B token 1). Decode group of 3 steps from
    # .02: .03 A 2, B 2 (B's last); .04 A 3; .05 A 4; all sent at .05 (B done at .05). Group [A] .06 .07 .08:
    # A's last token at .08.
    res = simulate(run_config(*STEP, *V0, "engine.num_scheduler_steps=3"), AB)
    assert times(res) == [(0.01, 0.08), (0.015, 0.045)]


def test_a_request_arriving_in_a_multi_step_group_waits_for_its_end():
    # A (prompt 10, output 9) prefilled -> .01; group of k=4 decode steps .01 -> .05. B arrives at .015 and is
    # admitted only at the group's end: [B prefill] .05 -> .06, TTFT .045. With k = 1 it joins after A's step in
    # progress (.02): [B prefill] .02 -> .03, TTFT .015.
    wl = Workload.from_columns([0.0, 0.015], [10, 10], [9, 2])
    k4 = simulate(run_config(*STEP, *V0, "engine.num_scheduler_steps=4"), wl)
    k1 = simulate(run_config(*STEP, *V0), wl)
    assert round(float(k4.requests["ttft_s"][1]), 6) == 0.045
    assert round(float(k1.requests["ttft_s"][1]), 6) == 0.015


def _kv_pressure(engine: str):
    wl = Workload.from_columns(np.zeros(12), np.full(12, 64), np.full(12, 64))
    return simulate(run_config(*STEP, f"engine={engine}", "++scenario.pools.main.num_gpu_blocks_override=24",
                               "++scenario.pools.main.engine={name: " + engine + ", block_size_tokens: 16}"), wl)


def test_no_evict_admission_never_preempts_where_on_demand_does():
    # 24 blocks of 16 tokens = 384 tokens; each request needs 64 + 63 = 127 tokens (8 blocks) at its end.
    # On-demand admission (vLLM V1) admits 6 prompts (4 blocks each) and must preempt as they grow;
    # GUARANTEED_NO_EVICT (trtllm) admits 3 (8 blocks reserved each) and never preempts.
    on_demand, no_evict = _kv_pressure("vllm_v1"), _kv_pressure("trtllm")
    assert int(np.sum(on_demand.requests["preemptions"])) > 0
    assert int(np.sum(no_evict.requests["preemptions"])) == 0
    assert (no_evict.requests["status"] == "completed").all() and (on_demand.requests["status"] == "completed").all()


def test_cuda_graph_padding_prices_the_next_captured_size():
    assert graph_sizes({"small": [1, 2, 4], "step": 8, "max": 24}) == (1, 2, 4, 8, 16, 24)
    kv = BlockManager(100, 16)
    pol = EngineBatching(kv, max_num_seqs=8, max_num_batched_tokens=64, chunked_prefill=False,
                         cuda_graph_sizes=(1, 2, 4, 8))
    reqs = []
    for i in range(3):
        r = SimRequest(i, 0.0, 4, 5)
        r.num_computed_tokens, r.num_output_tokens = 4, 1
        kv.grow(r, 5)
        reqs.append(r)
    b = pol._batch([(r, 1) for r in reqs])
    assert (b.shape.decode_seqs, b.shape.decode_ctx_sum, b.shape.sampled_seqs) == (4, 3 * 5 + 1, 3)
    # 9 sequences: above the largest captured size, eager and unpadded.
    assert pol._batch([(reqs[0], 1)] * 9).shape.decode_seqs == 9
    # With per-token cost 1 ms: 3 decodes priced as 4 -> 10 + 4 ms per decode step.
    wl = Workload.from_columns([0.0, 0.0, 0.0], [4, 4, 4], [3, 3, 3])
    res = simulate(run_config(*STEP, "cost.per_token_s=0.001", "engine=vllm_v1"), wl)
    # prefill of 12 tokens: 10 + 12 = 22 ms; two decode steps of 3 padded to 4: 14 ms each -> 50 ms.
    assert np.allclose(res.requests["e2e_s"], 0.050)


def test_engine_keys_are_checked():
    with pytest.raises(InputError):
        simulate(run_config(*STEP, "engine=vllm_v1", "+engine.no_such_key=1"), AB)
    with pytest.raises(InputError):
        simulate(run_config(*STEP, "+engine.max_num_seqs=3"), AB)   # generic has no settings
    with pytest.raises(InputError, match="conf/engine/sglang.yaml: parameters: \"overlap\" 'some' is not one of"):
        simulate(run_config(*STEP, "engine=sglang", "engine.overlap=some"), AB)


def test_itl_counts_each_delivery_and_shows_multi_step_bursts():
    # As in the multi-step test: A is sent tokens at .01 (1), .05 (2-4), .08 (5-7): gaps .04, .03;
    # B at .02 and .05: gap .03. Three gaps in all.
    res = simulate(run_config(*STEP, *V0, "engine.num_scheduler_steps=3"), AB)
    assert np.allclose(res.requests["itl_max_s"], [0.04, 0.03])
    itl = res.summary["latency_s"]["itl"]
    assert itl["mean"] == pytest.approx((0.04 + 0.03 + 0.03) / 3, rel=0.02)
    # One step at a time (k = 1, prefill priority): A's gaps .02 (behind B's prefill) then .01 x 5.
    one = simulate(run_config(*STEP, *V0), AB)
    assert np.allclose(one.requests["itl_max_s"], [0.02, 0.01])


def test_itl_of_fast_forwarded_runs_equals_stepping():
    from tests.sim.helpers import poisson_workload
    wl = poisson_workload(60, 20.0, seed=3)
    fast = simulate(run_config("scenario.pools.main.instances=1"), wl)
    slow = simulate(run_config("scenario.pools.main.instances=1", "fast_forward=false"), wl)
    assert np.array_equal(fast.requests["itl_max_s"], slow.requests["itl_max_s"], equal_nan=True)
    for k in ("p50", "p90", "p99"):
        assert fast.summary["latency_s"]["itl"][k] == pytest.approx(slow.summary["latency_s"]["itl"][k], rel=1e-9)
    # Every gap is at most the longest, and the mean gap equals the mean decode step seen by the requests.
    assert fast.summary["latency_s"]["itl"]["p99"] <= np.nanmax(fast.requests["itl_max_s"]) * 1.02


def test_swap_preemption_through_the_preset_keeps_tokens_and_completes():
    # vLLM V0 with preemption_mode=swap on the KV-pressure case: victims keep their tokens (swapped over the
    # h100_sxm host link into the preset's 4 GiB per GPU), so every request completes and is preempted without
    # recompute; under recompute the same pressure re-prefills the victims. Both preempt.
    wl = Workload.from_columns(np.zeros(12), np.full(12, 64), np.full(12, 64))
    base = [*STEP, "engine=vllm_v0", "++scenario.pools.main.num_gpu_blocks_override=24"]
    swap = simulate(run_config(*base, "++scenario.pools.main.engine={name: vllm_v0, block_size_tokens: 16, "
                                      "preemption: swap, watermark_fraction: 0}"), wl)
    rec = simulate(run_config(*base, "++scenario.pools.main.engine={name: vllm_v0, block_size_tokens: 16, "
                                     "watermark_fraction: 0}"), wl)
    assert (swap.requests["status"] == "completed").all() and (rec.requests["status"] == "completed").all()
    assert int(np.sum(swap.requests["preemptions"])) > 0 and int(np.sum(rec.requests["preemptions"])) > 0
    # The constant cost makes a re-prefill free (10 ms per iteration whatever it computes), while swap transfers
    # are priced over the host link: here the swap run is the longer one, by less than one iteration.
    extra_s = swap.summary["simulated_duration_s"] - rec.summary["simulated_duration_s"]
    assert 0.0 < extra_s < 0.01


def test_sglang_v04_preset_overlaps_and_caps_its_request_pool():
    from sim.resolve import engine_preset as preset
    from sim.validate.published import engine_preset
    v03, v04 = preset("sglang", None, "t"), preset("sglang_v04", None, "t")
    assert v04.overlap == "all" and v03.overlap == "none"
    # max_running_requests rule, 100,000 KV tokens, context 8,192: int(100000 / 8192 x 512) = 6,250 request slots,
    # capped at 4,096 (0.4.0) or 5,120 (0.3.0); minus one, and under KV tokens // 2.
    assert v04.max_seqs(8192, 100_000) == 4095 and v03.max_seqs(8192, 100_000) == 5119
    assert build_scheduler(v03, BlockManager(1, 1), 8192, 100_000).max_num_seqs == 5119
    row = {"id": "T", "engine": "SGLang", "engine_version": "0.4.1", "flags": ""}
    assert engine_preset(row) == "sglang_v04" and engine_preset({**row, "engine_version": "0.3.0"}) == "sglang"
    # End to end on A/B (the constant cost is all host overhead, so overlap hides none of it here): completes.
    a = simulate(run_config(*STEP, "engine=sglang_v04"), AB)
    assert (a.requests["status"] == "completed").all()


def test_sglang_0_5_turns_its_overlap_scheduler_off_for_linear_attention_models():
    """SGLang 0.5.9 forces `disable_overlap_schedule` for hybrid (linear-attention) models whose radix cache runs in
    no_buffer mode (shared/engine-defaults/sglang.csv): the preset's `overlap_linear_attention` applies to such a
    model's pool only."""
    pool = "scenario.pools.main"
    hybrid = run_config("engine=sglang_v05_serve", f"{pool}.model=qwen3_5_397b_a17b", f"{pool}.hardware=h200",
                        f"++{pool}.tp=8", f"++{pool}.weights_dtype=fp8")
    dense = run_config("engine=sglang_v05_serve", f"{pool}.model=qwen3_32b", f"{pool}.hardware=h200")
    assert hybrid.setups["main"].engine.overlap == "none"
    assert dense.setups["main"].engine.overlap == "all"
    assert run_config("engine=sglang_v04", f"{pool}.model=qwen3_5_397b_a17b", f"{pool}.hardware=h200",
                      f"++{pool}.tp=8", f"++{pool}.weights_dtype=fp8").setups["main"].engine.overlap == "all"
    with pytest.raises(InputError, match="conf/engine/sglang_v05_serve.yaml: overlap_linear_attention: 'some'"):
        run_config("engine=sglang_v05_serve", "engine.overlap_linear_attention=some")


def test_a_preset_places_its_front_end_time_on_the_entry_or_the_first_tokens_path():
    """`frontend_path` (sim/core/instance/frontend.py): `entry` by default, `first_token` when the preset says so (the
    vLLM and TensorRT-LLM serving presets do); any other value is refused in one line naming the preset file and the
    key."""
    assert run_config("engine=sglang_v05_serve").setups["main"].engine.frontend_path == "entry"
    assert run_config("engine=trtllm_v1_serve").setups["main"].engine.frontend_path == "first_token"
    assert run_config("engine=vllm_v1_serve").setups["main"].engine.frontend_path == "first_token"
    entry = run_config("engine=vllm_v1_serve", "engine.frontend_path=entry")
    assert entry.setups["main"].engine.frontend_path == "entry"
    with pytest.raises(InputError, match='conf/engine/vllm_v1_serve.yaml: parameters: "frontend_path" must be one'):
        run_config("engine=vllm_v1_serve", "engine.frontend_path=exit")


@pytest.mark.parametrize("engine, ranks", [("trtllm_v1_serve", 4), ("vllm_v1_async_serve", 4),
                                           ("sglang_v05_serve", 1)])
def test_an_engine_whose_dp_ranks_each_schedule_takes_their_limits_per_rank(engine, ranks):
    """vLLM V1 (one engine core per DP rank) and TensorRT-LLM (each attention-DP rank's executor) schedule per rank:
    an instance of 4 DP ranks takes 4 x max_num_batched_tokens and 4 x max_num_seqs per iteration, and reserves
    activations for one rank's budget each (the memory plan's share is token_budget / dp); SGLang divides its
    limits by the DP size, so they stay the instance's."""
    pool = "scenario.pools.main"
    run = run_config(f"engine={engine}", f"{pool}.model=mixtral_8x7b", f"++{pool}.tp=1", f"{pool}.hardware=h100_sxm",
                     f"++{pool}.deployment={{dp:4,ep:4}}")
    preset = run.setups["main"].engine
    assert run.setups["main"].token_budget == preset.max_num_batched_tokens * ranks
    scheduler = build_scheduler(preset, BlockManager(64, 16), 4096, 1024, dp=4)
    assert scheduler.token_budget == preset.max_num_batched_tokens * ranks
    if preset.max_num_seqs is not None:
        assert scheduler.max_num_seqs == preset.max_num_seqs * ranks
    assert build_scheduler(preset, BlockManager(64, 16), 4096, 1024).token_budget == preset.max_num_batched_tokens


def test_the_tensorrt_llm_serving_preset_chunks_a_prompt_the_running_batch_leaves_no_room_for():
    """`trtllm_v1_serve` chunks its prefills (fitted on the measured rows: docs/validation.md, "TensorRT-LLM's
    chunked context"). A (10 in, 40 out) decodes from t=0; B (8,192 in, 3 out) arrives at 1 ms. Budget 8,192
    tokens, A's decode takes one: chunked, B's prompt runs as 8,191 tokens in [.01, .02] and 1 in [.02, .03],
    first token at .03 (TTFT .029), tokens 2-3 at .04, .05. Unchunked, B fits no iteration while A decodes: it
    waits for A's last token (.40), prefills in [.40, .41] (TTFT .409). A 12,000-token prompt, longer than the
    whole budget, is never scheduled unchunked; chunked it takes two iterations."""
    steps = [*STEP, "scenario.pools.main.model=qwen3_32b", "engine=trtllm_v1_serve",
             "engine.frontend_per_prefill_s=0", "engine.frontend_per_prefill_stream_s=0"]
    b_8k = Workload.from_columns([0.0, 0.001], [10, 8192], [40, 3])
    assert times(simulate(run_config(*steps), b_8k)) == [(0.01, 0.4), (0.029, 0.049)]
    assert times(simulate(run_config(*steps, "engine.chunked_prefill=false"), b_8k)) == [(0.01, 0.4), (0.409, 0.429)]
    b_12k = Workload.from_columns([0.0, 0.001], [10, 12000], [40, 3])
    assert times(simulate(run_config(*steps), b_12k)) == [(0.01, 0.4), (0.029, 0.049)]
    unchunked = simulate(run_config(*steps, "engine.chunked_prefill=false"), b_12k).requests
    assert unchunked["status"][0] == "completed" and unchunked["status"][1] != "completed"
