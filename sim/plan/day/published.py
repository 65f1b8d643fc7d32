"""DeepSeek's published day (reference figures): used only to print and document the comparison with a day plan,
never as an input to the traffic, the sizing or a test's expected value.

Source: DeepSeek, "Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview" (github.com/deepseek-ai/
open-infra-index, 2025-03-01), 24 h from 2025-02-27 12:00 UTC+8: "the peak node occupancy reached 278, with an
average occupancy of 226.75 nodes (each node contains 8 H800 GPUs)"; "each H800 node delivers an average
throughput of 73.7k tokens/s input (including cache hits) during prefilling or 14.8k tokens/s output during
decoding"; the daily cost "$87,072" at $2 per H800-hour. Night-time nodes are lent to research and training
(no node-hour figure is published).
"""
from __future__ import annotations

PUBLISHED_DAY: dict[str, float] = {
    "average_nodes": 226.75,
    "peak_nodes": 278.0,
    "node_hours": 226.75 * 24,
    "usd_per_day": 87072.0,
    "prefill_input_tokens_per_s_per_node": 73.7e3,
    "decode_output_tokens_per_s_per_node": 14.8e3,
}
SOURCE = "DeepSeek, Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview (open-infra-index, 2025-03-01)"
