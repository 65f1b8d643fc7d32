"""Multi-turn sessions: context growth, think-time gaps, and prefix hashes a prefix cache can hit."""
from __future__ import annotations

import numpy as np
import pytest

from scenarios.arrivals.poisson import poisson_arrivals
from scenarios.arrivals.process import ArrivalProcess
from scenarios.hashing import block_hash, name_salt
from scenarios.lengths import Fixed, LogNormal
from scenarios.rng import Streams
from scenarios.sessions import SessionSpec, ThinkTime, TurnCount, segment_cumsum, session_workload


def spec(**kw):
    base = dict(session_arrivals=ArrivalProcess(10_000.0, lambda r: poisson_arrivals(r, 0.5, 10_000.0), 0.5, "p"),
                turns=TurnCount("fixed", 4), think_time=ThinkTime("fixed", 30.0), user_tokens=Fixed(300),
                output_tokens=Fixed(200), shared_prefix_tokens=1100, shared_prefix_name="bot",
                hash_block_tokens=512)
    base.update(kw)
    return SessionSpec(**base)


def turns_of(wl, sid):
    rows = np.nonzero(wl.session_id == sid)[0]
    return rows[np.argsort(wl.arrival_s[rows], kind="stable")]


def test_segment_cumsum():
    x = np.array([1, 2, 3, 10, 20])
    assert segment_cumsum(x, np.array([0, 3]), np.array([3, 2])).tolist() == [1, 3, 6, 10, 30]


def test_context_grows_by_previous_answer_and_new_message():
    wl = session_workload(spec(), Streams(1))
    rows = turns_of(wl, int(wl.session_id[0]))
    # turn k prompt = 1100 + 300 (k + 1) + 200 k
    assert wl.prompt_tokens[rows].tolist() == [1400, 1900, 2400, 2900]
    assert np.diff(wl.arrival_s[rows]).tolist() == pytest.approx([30.0] * 3)


def test_tpot_estimate_lengthens_gaps():
    wl = session_workload(spec(tpot_estimate_s=0.05), Streams(1))
    rows = turns_of(wl, int(wl.session_id[0]))
    assert np.diff(wl.arrival_s[rows]).tolist() == pytest.approx([40.0] * 3)  # 30 s + 200 tokens × 50 ms


def test_prefix_hashes_extend_turn_by_turn_and_share_the_system_prompt():
    wl = session_workload(spec(), Streams(2))
    a, b = turns_of(wl, 0), turns_of(wl, 1)
    for rows in (a, b):
        hashes = [wl.prefix_hashes[i] for i in rows]
        assert [len(h) for h in hashes] == [p // 512 for p in wl.prompt_tokens[rows]]  # full blocks only
        for earlier, later in zip(hashes, hashes[1:]):
            assert np.array_equal(later[: len(earlier)], earlier)  # turn k+1 re-sends turn k's context
    shared = block_hash(name_salt("bot"), np.arange(2))  # 1100 tokens = 2 full blocks of 512
    assert np.array_equal(wl.prefix_hashes[a[0]][:2], shared)
    assert np.array_equal(wl.prefix_hashes[b[0]][:2], shared)
    assert not set(wl.prefix_hashes[a[-1]][2:].tolist()) & set(wl.prefix_hashes[b[-1]][2:].tolist())


def test_max_context_cuts_sessions_and_window_cuts_late_turns():
    wl = session_workload(spec(max_context_tokens=2000), Streams(3))
    assert wl.prompt_tokens.max() <= 2000
    assert set(np.bincount(wl.session_id).tolist()) <= {0, 1, 2}  # turns 1400 and 1900 survive, 2400 does not
    late = session_workload(spec(think_time=ThinkTime("fixed", 5000.0)), Streams(3))
    assert late.arrival_s.max() < 10_000.0


def test_geometric_turns_mean():
    s = spec(session_arrivals=ArrivalProcess(1e5, lambda r: poisson_arrivals(r, 1.0, 1e5), 1.0, "p"),
             turns=TurnCount("geometric", 4.0, 1000), think_time=ThinkTime("fixed", 0.0))
    wl = session_workload(s, Streams(4))
    per_session = np.bincount(wl.session_id)
    # 100,000 sessions; a geometric with mean 4 has sd 3.5 → SE 0.011; 3% is > 10 SE.
    assert per_session.mean() == pytest.approx(4.0, rel=0.03)


def test_changing_output_law_keeps_session_starts_and_user_messages():
    a = session_workload(spec(output_tokens=Fixed(200)), Streams(5))
    b = session_workload(spec(output_tokens=LogNormal.from_mean(200, 0.5)), Streams(5))
    first_a, first_b = a.arrival_s[np.unique(a.session_id, return_index=True)[1]], \
        b.arrival_s[np.unique(b.session_id, return_index=True)[1]]
    assert np.array_equal(first_a, first_b)


def test_first_user_message_has_its_own_law():
    wl = session_workload(spec(first_user_tokens=Fixed(1000)), Streams(6))
    rows = turns_of(wl, 0)
    assert wl.prompt_tokens[rows].tolist() == [2100, 2600, 3100, 3600]  # 1100 + 1000, then + 200 + 300 a turn
