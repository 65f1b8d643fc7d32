"""The one scheduler (sim/core/instance/batching/scheduler.py): the registry's presets are settings of it, and each
rule on a small hand-built case whose outcome follows from the rule as stated in rules.py.

Requests are placed by hand: a running request that has computed its prompt and k outputs' KV but the last
(`num_computed_tokens = prompt + k - 1`, `num_output_tokens = k`) decodes one token next."""
from __future__ import annotations

import pytest

from sim.core.instance.batching import POLICIES, Scheduler, make_policy, policy_class
from sim.core.instance.batching.engine import EngineBatching
from sim.core.instance.batching.rules import (MIXED, NEW_TOKEN_CLIP, NEW_TOKEN_RATIO, ON_DEMAND, PREFILL_PRIORITY,
                                              RECOMPUTE, RESERVE_MAX_OUTPUT, RETRACT, reserved_tokens)
from sim.core.instance.batch import OVERLAP_ALL, OVERLAP_NONE
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest


def decoding(kv: BlockManager, rid: int, prompt: int, out: int, total_out: int = 100) -> SimRequest:
    """A request that has emitted `out` tokens and holds the KV of all its known tokens but the last."""
    req = SimRequest(rid, 0.0, prompt, total_out)
    req.num_output_tokens = out
    req.num_computed_tokens = prompt + out - 1
    placed = kv.grow(req, req.num_computed_tokens)
    assert placed
    return req


def ids(batch) -> list[tuple[int, int]]:
    return [(r.request_id, n) for r, n in batch.items]


def engine(kv: BlockManager, **rules) -> Scheduler:
    return Scheduler(kv, **{"max_num_seqs": 8, "max_num_batched_tokens": 64, "chunked_prefill": False, **rules})


# -- the registry ----------------------------------------------------------------------------------------------
def test_continuous_and_chunked_prefill_are_presets_of_the_one_scheduler():
    kv = BlockManager(16, 16)
    cont = make_policy("continuous", kv, {"token_budget": 4096, "max_num_seqs": 32})
    chunked = make_policy("chunked_prefill", kv, {"token_budget": 512, "max_num_seqs": 8})
    assert type(cont) is Scheduler and type(chunked) is Scheduler
    for pol, budget, seqs, chunking in ((cont, 4096, 32, False), (chunked, 512, 8, True)):
        assert isinstance(pol, Scheduler)
        assert (pol.token_budget, pol.max_num_seqs, pol.chunked_prefill) == (budget, seqs, chunking)
        assert (pol.admission, pol.preemption, pol.iteration, pol.steps, pol.overlap) == (
            ON_DEMAND, RECOMPUTE, MIXED, 1, OVERLAP_NONE)
        assert pol.steady_runs and pol.host_per_seq_s == 0.0 and not pol.graph_sizes and pol.watermark_blocks == 0
    assert POLICIES["continuous"].settings({"token_budget": 4096}) == {
        "max_num_seqs": 256, "max_num_batched_tokens": 4096, "chunked_prefill": False, "steady_runs": True}
    # The engine presets build the same class (`EnginePreset.batching`), stepping every iteration.
    assert EngineBatching is Scheduler
    pol = EngineBatching(kv, max_num_seqs=4, max_num_batched_tokens=2048, chunked_prefill=True)
    pol.running.append(decoding(kv, 9, 4, 1, total_out=50))
    assert not pol.steady_runs and pol.steady_steps(pol.schedule(0.0)) == 0
    cont.running.append(decoding(kv, 8, 4, 1, total_out=50))
    assert cont.steady_steps(cont.schedule(0.0)) == 49  # the rest of its output as one run


def test_presets_refuse_unknown_keys_and_say_their_whole_prompt_limit():
    kv = BlockManager(4, 16)
    with pytest.raises(TypeError, match="'chunked_prefill'"):
        make_policy("chunked_prefill", kv, {"chunked_prefill": False})
    with pytest.raises(ValueError, match="token_budget"):
        make_policy("continuous", kv, {"token_budget": 0})
    assert policy_class("continuous").whole_prompt_limit({"token_budget": 4096}) == 4096
    assert policy_class("continuous").whole_prompt_limit({"chunked_prefill": True}) is None
    assert policy_class("chunked_prefill").whole_prompt_limit({"token_budget": 512}) is None
    assert policy_class("static").whole_prompt_limit({}) is None


def test_steady_runs_need_the_plain_rules():
    kv = BlockManager(4, 16)
    with pytest.raises(ValueError, match="steady_runs"):
        engine(kv, iteration="prefill_priority", steady_runs=True)
    with pytest.raises(ValueError, match="steady_runs"):
        engine(kv, num_scheduler_steps=2, steady_runs=True)
    with pytest.raises(ValueError, match='"admission" \'fifo\' is not one of on_demand, reserve_max_output'):
        engine(kv, admission="fifo")


# -- admission -------------------------------------------------------------------------------------------------
def _admitted(kv: BlockManager, **rules) -> int:
    """How many of four waiting requests (prompt 16, output 40: 55 tokens of KV at the end, 4 blocks of 16) the
    first iteration admits with 6 blocks free."""
    pol = engine(kv, **rules)
    for i in range(4):
        pol.add_request(SimRequest(i, 0.0, 16, 40), 0.0)
    batch = pol.schedule(0.0)
    return 0 if batch is None else len(batch.items)


def test_admission_rules():
    # on_demand: each prompt needs one block now: all four.
    assert _admitted(BlockManager(6, 16)) == 4
    # reserve_max_output: 4 blocks each for the whole life: one fits, the second (4 more) does not.
    assert _admitted(BlockManager(6, 16), admission="reserve_max_output") == 1
    # new_token_ratio (SGLang's PrefillAdder): a prompt being admitted, and one admitted but not yet decoding,
    # reserves its whole output: 16 + 40 = 56 tokens = 4 blocks each: one.
    assert _admitted(BlockManager(6, 16), admission="new_token_ratio", new_token_ratio_init=0.5,
                     new_token_ratio_decay=0.0) == 1
    # watermark 0.5 x 6 = 3 blocks kept free: one block each while 3 stay free: three.
    assert _admitted(BlockManager(6, 16), watermark_fraction=0.5) == 3


def test_new_token_ratio_takes_the_ratio_of_decoding_requests_only_and_clips_the_output():
    """SGLang (managers/schedule_policy.py): a running (decoding) request reserves ratio x min(its remaining output,
    4096); the prompt being admitted its tokens plus min(its remaining output, 4096) in full."""
    def admits(blocks: int) -> bool:
        kv = BlockManager(blocks, 16)
        pol = engine(kv, admission="new_token_ratio", new_token_ratio_init=0.5, new_token_ratio_decay=0.0)
        pol.running.append(decoding(kv, 0, 16, 1, total_out=40))   # holds 16 tokens: 1 block
        pol.add_request(SimRequest(1, 0.0, 16, 40), 0.0)
        batch = pol.schedule(0.0)
        return batch is not None and 1 in [r.request_id for r, _ in batch.items]
    # the decoding request: 16 + 0.5 x 39 -> 35 tokens, 3 blocks, 1 beyond the 2 it holds once this iteration
    # grows it (its full 55 would be 2 beyond); the new prompt: 16 + 40 = 56 tokens, 4 blocks. 7 blocks leave 5
    # free: admitted (it would not be, were the decoding request's whole output reserved); 6 leave 4: not.
    assert admits(7) and not admits(6)
    long = SimRequest(2, 0.0, 100, 10_000)
    assert reserved_tokens(long, True, NEW_TOKEN_RATIO, 0.5) == 100 + NEW_TOKEN_CLIP == 4196
    long.num_output_tokens, long.num_computed_tokens = 10, 109
    assert reserved_tokens(long, False, NEW_TOKEN_RATIO, 0.5) == 109 + NEW_TOKEN_CLIP // 2


def test_new_token_ratio_decays_per_iteration_to_its_floor():
    pol = engine(BlockManager(6, 16), admission="new_token_ratio", new_token_ratio_init=0.3,
                 new_token_ratio_min=0.1, new_token_ratio_decay=0.15)
    assert pol.admission == NEW_TOKEN_RATIO
    pol.schedule(0.0)
    assert pol.new_token_ratio == pytest.approx(0.15)
    pol.schedule(0.0)
    assert pol.new_token_ratio == pytest.approx(0.1)


# -- preemption ------------------------------------------------------------------------------------------------
def test_recompute_preempts_the_last_admitted_and_admits_nobody_that_iteration():
    # Blocks of 4 tokens. A (prompt 4, 5 outputs) holds 2 blocks and needs a 3rd; B (prompt 4, 1 output) holds 1
    # and needs a 2nd; one block is free. A takes it; B cannot grow and is the last admitted: B is preempted
    # (recomputed later from the head of `waiting`), and the waiting C is not admitted in this iteration.
    kv = BlockManager(4, 4)
    pol = engine(kv)
    a, b = decoding(kv, 0, 4, 5), decoding(kv, 1, 4, 1)
    pol.running[:] = [a, b]
    pol.add_request(SimRequest(2, 0.0, 4, 10), 0.0)
    batch = pol.schedule(0.0)
    assert ids(batch) == [(0, 1)]
    assert [r.request_id for r in pol.waiting] == [1, 2]
    assert (b.num_computed_tokens, b.num_output_tokens, b.preemptions, pol.preemptions) == (0, 1, 1, 1)
    assert kv.held(b) == 0


def test_retract_takes_the_most_advanced_request_even_one_already_scheduled():
    # As above, but SGLang's retraction: the victim is A (5 outputs against 1), scheduled before B in this
    # iteration: A leaves the iteration too and B decodes in the blocks A gave back.
    kv = BlockManager(4, 4)
    pol = engine(kv, preemption="retract")
    assert pol.preemption == RETRACT
    a, b = decoding(kv, 0, 4, 5, total_out=10), decoding(kv, 1, 4, 1, total_out=10)
    pol.running[:] = [a, b]
    batch = pol.schedule(0.0)
    assert ids(batch) == [(1, 1)] and pol.running == [b] and list(pol.waiting) == [a]
    assert (a.num_computed_tokens, kv.held(a), a.preemptions) == (0, 0, 1)
    # The ratio is reset to what the survivor needs for 20 more steps: (1 + 20) / 10, at most 1.
    assert pol.new_token_ratio == 1.0


# -- iteration mix and chunking --------------------------------------------------------------------------------
def _decode_and_prompt(**rules):
    kv = BlockManager(64, 16)
    pol = engine(kv, **rules)
    pol.running.append(decoding(kv, 0, 10, 1))
    pol.add_request(SimRequest(1, 0.0, 10, 5), 0.0)
    return pol


def test_mixed_puts_admissions_beside_the_decodes():
    pol = _decode_and_prompt()
    assert pol.iteration == MIXED
    assert ids(pol.schedule(0.0)) == [(0, 1), (1, 10)]


def test_prefill_priority_runs_the_prefill_alone_then_the_decodes():
    pol = _decode_and_prompt(iteration="prefill_priority")
    assert pol.iteration == PREFILL_PRIORITY
    batch = pol.schedule(0.0)
    assert ids(batch) == [(1, 10)]
    pol.update_from_output(batch, 0.01)
    assert ids(pol.schedule(0.01)) == [(0, 1), (1, 1)]


def test_a_prompt_over_the_budget_waits_without_chunking_and_is_split_with_it():
    kv = BlockManager(64, 16)
    whole = engine(kv, max_num_batched_tokens=8)
    whole.add_request(SimRequest(0, 0.0, 10, 2), 0.0)
    assert whole.schedule(0.0) is None
    chunked = engine(kv, max_num_batched_tokens=8, chunked_prefill=True)
    chunked.add_request(SimRequest(1, 0.0, 10, 2), 0.0)
    first = chunked.schedule(0.0)
    assert ids(first) == [(1, 8)]
    assert chunked.update_from_output(first, 0.01) == []
    second = chunked.schedule(0.01)
    assert ids(second) == [(1, 2)]
    req = second.items[0][0]
    assert req.num_output_tokens == 0
    chunked.update_from_output(second, 0.02)
    assert req.num_output_tokens == 1  # the prompt's last chunk sampled the first token (the instance records it)


# -- multi-step ------------------------------------------------------------------------------------------------
def test_multi_step_groups_reserve_their_kv_and_hold_tokens_to_the_end():
    # Decodes of A (3 outputs left) and B (1 left) as a group of k = 3 steps; KV for all three reserved at its
    # start; with stream_each_step false nothing is sent before the group's end, where both leave (B finished at
    # step 1, A at step 3), in admission order.
    kv = BlockManager(64, 4)
    pol = engine(kv, num_scheduler_steps=3, stream_each_step=False)
    a, b = decoding(kv, 0, 4, 2, total_out=5), decoding(kv, 1, 4, 4, total_out=5)
    pol.running[:] = [a, b]
    step1 = pol.schedule(0.0)
    assert ids(step1) == [(0, 1), (1, 1)]
    assert kv.held(a) == kv.blocks_for(a.num_computed_tokens + 3)
    assert pol.update_from_output(step1, 0.01) == [] and pol.undelivered == {0, 1}
    assert b.num_output_tokens == 5 and b.status != "completed"   # computed, not sent
    step2 = pol.schedule(0.01)
    assert ids(step2) == [(0, 1)]  # B is done: the group goes on with A
    assert pol.update_from_output(step2, 0.02) == []
    step3 = pol.schedule(0.02)
    assert pol.update_from_output(step3, 0.03) == [a, b] and not pol.undelivered
    assert (a.finish_s, b.finish_s) == (0.03, 0.03) and pol.running == []


def test_multi_step_streaming_sends_each_step():
    kv = BlockManager(64, 4)
    pol = engine(kv, num_scheduler_steps=3)
    b = decoding(kv, 1, 4, 4, total_out=5)
    pol.running.append(b)
    step1 = pol.schedule(0.0)
    assert pol.update_from_output(step1, 0.01) == [b] and b.finish_s == 0.01


# -- overlap ---------------------------------------------------------------------------------------------------
def test_overlap_all_keeps_a_finished_request_in_the_next_iteration():
    # SGLang's overlap scheduler: A finishes in iteration i (done at its end) but iteration i+1 was formed before
    # that was seen: A is priced there as one more decode and its blocks come back only after it.
    kv = BlockManager(64, 4)
    pol = engine(kv, overlap="all")
    assert pol.overlap == OVERLAP_ALL
    a, b = decoding(kv, 0, 4, 4, total_out=5), decoding(kv, 1, 4, 1, total_out=5)
    pol.running[:] = [a, b]
    first = pol.schedule(0.0)
    assert pol.update_from_output(first, 0.01) == [a] and a.finish_s == 0.01 and a.status == "completed"
    assert kv.held(a) > 0
    second = pol.schedule(0.01)
    assert ids(second) == [(1, 1)] and second.shape.decode_seqs == 2
    pol.update_from_output(second, 0.02)
    assert kv.held(a) == 0


def test_host_work_and_graph_padding_price_the_iteration():
    kv = BlockManager(64, 4)
    pol = engine(kv, host_per_seq_s=0.002, cuda_graph_sizes=(1, 4, 8))
    pol.running[:] = [decoding(kv, i, 4, 1) for i in range(3)]
    batch = pol.schedule(0.0)
    assert batch.host_s == pytest.approx(0.006) and batch.shape.decode_seqs == 4


def test_a_second_tier_prefix_load_is_priced_into_the_admitting_iteration():
    # The prefix [10, 11] was prefilled on another instance of the pool and sits in the shared second tier: the
    # request admitted here skips 1,024 prompt tokens and loads them first, 2 x 512 tokens x 1,000 B / 1 GB/s.
    from sim.core.instance.kv_cache import SharedKVTier
    for build in (lambda kv: engine(kv, max_num_batched_tokens=4096), lambda kv: make_policy("continuous", kv, {})):
        tier = SharedKVTier(1e12, 512 * 1000.0)
        a, b = (BlockManager(8, 512, prefix_caching=True, hash_block_tokens=512, kv_bytes_per_token=1000.0,
                             tier2_bandwidth_bytes_per_s=1e9, shared_tier=tier) for _ in range(2))
        writer = SimRequest(0, 0.0, 1100, 2, prefix_hashes=[10, 11])
        a.grow(writer, 1100)
        a.publish(writer, writer.prefix_hashes, 1100)
        pol = build(b)
        pol.add_request(SimRequest(1, 0.0, 1600, 2, prefix_hashes=[10, 11, 12]), 0.0)
        batch = pol.schedule(0.0)
        assert ids(batch) == [(1, 1600 - 1024)] and batch.load_s == pytest.approx(2 * 512 * 1000 / 1e9)


def test_decodes_reserve_the_speculative_lookahead_and_the_rest_of_a_group():
    # Block of 1 token so that held blocks count KV slots. With 2 draft tokens, a decode grows by its token + 2;
    # a prompt's last token (no output yet) by its token only; in a group of k = 3 steps a decode also reserves
    # the 2 steps after this one.
    kv = BlockManager(100, 1)
    pol = engine(kv, chunked_prefill=True)
    pol.lookahead_tokens = 2
    dec = decoding(kv, 0, 4, 1)
    last = SimRequest(1, 0.0, 4, 5)
    last.num_computed_tokens = 3
    kv.grow(last, 3)
    pol.running[:] = [dec, last]
    pol.schedule(0.0)
    assert (kv.held(dec), kv.held(last)) == (4 + 1 + 2, 4)
    grouped = engine(BlockManager(100, 1), num_scheduler_steps=3)
    g = decoding(grouped.kv, 2, 4, 1)
    grouped.running.append(g)
    grouped.schedule(0.0)
    assert grouped.kv.held(g) == 4 + 3
