"""NCCL all-reduce by message size (Ampere): the segment form by hand, the shipped file, and the simulator's links."""
from __future__ import annotations

import pytest

from calibrate.efficiency import NcclForm, load_generation
from inferplan.specs import load_hardware
from sim.core.cost.comm import Links

FORM = NcclForm((("a100_80gb", "intra", 4, 1e6, 20e-6, 0.5), ("a100_80gb", "intra", 4, float("inf"), 50e-6, 0.8)))


def test_segment_by_size_floor_plus_bus_bandwidth():
    # 4 ranks: 2 (p-1)/p = 1.5 of the buffer; 300 GB/s link
    assert FORM.time_s("a100_80gb", "intra", 4, 1e6, 300e9) == pytest.approx(20e-6 + 1.5e6 / (300e9 * 0.5))
    assert FORM.time_s("a100_80gb", "intra", 4, 4e6, 300e9) == pytest.approx(50e-6 + 6e6 / (300e9 * 0.8))
    # a floor at the smallest message, not 2 (p-1) datasheet hops
    assert FORM.time_s("a100_80gb", "intra", 4, 2048, 300e9) == pytest.approx(20e-6 + 3072 / 150e9)


def test_no_segment_means_the_ring_applies():
    assert FORM.time_s("a100_80gb", "intra", 8, 1e6, 300e9) is None
    assert FORM.time_s("a100_80gb", "inter", 4, 1e6, 25e9) is None
    assert FORM.time_s("a100_pcie", "intra", 4, 1e6, 300e9) is None


def test_shipped_ampere_segments_cover_vidurs_node_types_and_end_unbounded():
    g = load_generation("ampere")
    assert g is not None and g.nccl is not None
    keys = {(hw, link, p) for hw, link, p, *_ in g.nccl.segments}
    assert {("a100_80gb", "intra", 2), ("a100_80gb", "intra", 8), ("a100_80gb", "inter", 16),
            ("a100_pcie", "intra", 4)} <= keys
    for key in keys:
        segs = [s for s in g.nccl.segments if s[:3] == key]
        assert segs[-1][3] == float("inf") and all(s[4] >= 0 and s[5] > 0 for s in segs)


def test_simulator_links_price_a100_all_reduce_with_the_segments():
    hw = load_hardware("a100_80gb")
    g = load_generation("ampere")
    links = Links(hw, tp=4, ep=1, stage_devices=4, pp=1, link_efficiency=0.75, scale={}, generation=g)
    ring = Links(hw, tp=4, ep=1, stage_devices=4, pp=1, link_efficiency=0.75, scale={})
    for nbytes in (16 * 1024, 8 * 4096 * 2, 64e6):
        want = g.nccl.time_s("a100_80gb", "intra", 4, nbytes, hw.intra_node_bandwidth_bytes_per_s)
        assert links.allreduce_s(nbytes) == pytest.approx(want)
    assert links.allreduce_s(16 * 1024) != ring.allreduce_s(16 * 1024)
    # tp=3 has no segment: the ring
    three = Links(hw, tp=3, ep=1, stage_devices=3, pp=1, link_efficiency=0.75, scale={}, generation=g)
    plain = Links(hw, tp=3, ep=1, stage_devices=3, pp=1, link_efficiency=0.75, scale={})
    assert three.allreduce_s(1e6) == plain.allreduce_s(1e6)
