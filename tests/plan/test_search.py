"""The search space syntax and the line search, against oracles whose threshold is known."""
from __future__ import annotations

import math

import pytest

from inferplan.errors import InputError
from sim.plan.search import LineSearch, pool_is_fixed
from sim.plan.space import Line, parse_dimension, parse_space


@pytest.mark.parametrize("arg, values", [
    ("search.scenario.pools.main.instances=range(1,9)", (1, 2, 3, 4, 5, 6, 7, 8)),
    ("search.scenario.pools.main.instances=range(2,17,4)", (2, 6, 10, 14)),
    ("search.scenario.pools.main.instances=[4,1,2,2]", (1, 2, 4)),          # counts: sorted, unique
    ("search.batching=[continuous,chunked_prefill]", ("continuous", "chunked_prefill")),
    ("search.batching=continuous,chunked_prefill", ("continuous", "chunked_prefill")),
    ("search.router=choice(round_robin,least_kv)", ("round_robin", "least_kv")),
    ("search.scenario.pools.main.weights_dtype=fp8_block", ("fp8_block",)),
])
def test_choices_parse_with_hydras_grammar(arg, values):
    assert parse_dimension(arg).values == values


def test_counts_and_choices_are_told_apart():
    space = parse_space(["search.batching=[continuous,static]", "search.scenario.pools.a.instances=[1,2]",
                         "search.scenario.pools.b.instances=range(1,5)"])
    assert [d.pool for d in space.dimensions] == [None, "a", "b"]
    assert space.bisected.key == "scenario.pools.b.instances"      # the count with the most choices
    lines = space.lines()
    assert len(lines) == 4 and lines[0].fixed == ("batching=continuous", "scenario.pools.a.instances=1")
    assert lines[0].overrides(2) == (*lines[0].fixed, "scenario.pools.b.instances=3")


@pytest.mark.parametrize("arg, message", [
    ("search.x=interval(0,1)", "interval() is continuous"),
    ("search.x=[]", "has no choices"),
    ("search.=1", "needs a key and choices"),
    ("search.scenario.pools.main.instances=[-1,2]", "instance counts must be >= 0"),
    ("search.x=[a,", "cannot parse"),
])
def test_bad_dimensions_say_what_to_write(arg, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_dimension(arg)


def test_a_key_searched_twice_is_refused():
    with pytest.raises(InputError, match="is searched twice"):
        parse_space(["search.batching=[static]", "search.batching=[continuous]"])


def _run_line(n: int, threshold: int | None, width: int, monotone: bool = True) -> tuple[LineSearch, list[int]]:
    """Drive a LineSearch over n counts whose verdict is `index >= threshold` (None: nothing passes)."""
    dim = parse_dimension(f"search.scenario.pools.main.instances=range(1,{n + 1})")
    s, probed, notes = LineSearch(Line((), dim), monotone=monotone), [], []
    while not s.done:
        picks = s.probes(width)
        assert picks, "an open line must propose probes"
        probed += picks
        s.update({i: threshold is not None and i >= threshold for i in picks}, notes)
    assert notes == []
    return s, probed


@pytest.mark.parametrize("n", [1, 2, 7, 8, 33])
@pytest.mark.parametrize("width", [1, 3])
def test_bisection_finds_every_threshold_within_its_budget(n, width):
    for threshold in [None, *range(n)]:
        s, probed = _run_line(n, threshold, width)
        assert len(probed) == len(set(probed))
        if threshold is None:
            assert probed == [n - 1] and s.hi is None        # pruned after one simulation
            continue
        assert s.hi == threshold
        assert threshold == 0 or threshold - 1 in probed    # the next-cheaper count was simulated
        rounds = 1 + math.ceil(math.log(n, width + 1)) if n > 1 else 1
        assert len(probed) <= 1 + width * (rounds - 1)


def test_an_autoscaled_pool_is_enumerated_not_bisected():
    s, probed = _run_line(6, 3, width=1, monotone=False)
    assert sorted(probed) == list(range(6))


def test_a_non_monotone_observation_is_noted():
    dim = parse_dimension("search.scenario.pools.main.instances=range(1,5)")
    s, notes = LineSearch(Line(("batching=static",), dim)), []
    s.update({3: True}, notes)
    s.update({1: True}, notes)
    s.update({0: False, 2: False}, notes)
    assert s.hi == 1 and s.done and "not monotone" in notes[0] and "batching=static" in notes[0]


@pytest.mark.parametrize("config, fixed", [
    ({"autoscaler": {"name": "fixed"}, "scenario": {"pools": {"main": {}}}}, True),
    ({"autoscaler": {"name": "reactive"}, "scenario": {"pools": {"main": {}}}}, False),
    ({"autoscaler": {"name": "fixed"}, "scenario": {"pools": {"main": {"autoscaler": {"name": "predictive"}}}}}, False),
    ({"autoscaler": {"name": "reactive"}, "scenario": {"pools": {"main": {"autoscaler": {"name": "fixed"}}}}}, True),
])
def test_only_fixed_size_pools_count_as_monotone(config, fixed):
    assert pool_is_fixed(config, "main") is fixed
