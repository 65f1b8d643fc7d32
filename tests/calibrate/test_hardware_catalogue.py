"""conf/hardware: every entry loads, has the keys of h100_sxm.yaml, and sources or flags each figure."""
from __future__ import annotations


import pytest
import yaml

from inferplan.specs import CONF_DIR, available, load_hardware

REQUIRED = {"h100_sxm", "h200", "h800", "a100_80gb", "l40s", "mi300x", "cpu_server", "cpu_local", "npu_generic",
            "fpga_generic"}
KEYS = set(yaml.safe_load((CONF_DIR / "hardware" / "h100_sxm.yaml").read_text()))


def test_catalogue_has_the_required_entries():
    assert REQUIRED <= set(available("hardware"))


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_entry_loads_with_the_same_keys_and_positive_figures(name):
    path = CONF_DIR / "hardware" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    assert set(data) == KEYS and data["name"] == name
    assert set(data["peak_flops_per_s"]) == {"bf16", "fp8", "int8", "fp32"}
    hw = load_hardware(name)
    assert hw.kind in ("gpu", "cpu", "npu", "fpga")
    assert hw.mem_bandwidth_bytes_per_s > 0 and hw.memory_bytes > 0 and hw.usd_per_hour > 0
    assert hw.peak_for("int8") >= hw.peak_for("bf16") >= hw.peak_for("fp32")


COMMENTED = ("memory_bytes", "devices_per_node", "intra_node_bandwidth_bytes_per_s", "intra_node_latency_s",
             "inter_node_bandwidth_bytes_per_s", "inter_node_latency_s", "host_link_bandwidth_bytes_per_s",
             "idle_power_w", "usd_per_hour")


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_figure_has_a_source_or_says_assumption(name):
    """The header names its source(s) with a date (peaks, memory bandwidth, power); the figures datasheets do not
    give (links, latencies, idle power, price, node size) carry their own comment: a source or "assumption"."""
    text = (CONF_DIR / "hardware" / f"{name}.yaml").read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "20" in header and ("Source" in header or "ASSUMPTION" in header or "Measured" in header)
    lines = {line.split(":")[0]: line for line in text.splitlines() if not line.startswith(("#", " "))}
    for key in COMMENTED:
        assert "#" in lines[key], f"{name}: {key} has no source comment"
    assert ("assumption" in text.lower()) or name in ("h100_sxm",)
