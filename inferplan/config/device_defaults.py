"""An engine's defaults that follow the device it runs on: SGLang's `chunked_prefill_size` and its CUDA-graph batch
sizes, by the device's memory (MiB, as the driver reports it) and tp_size, per version (the engine preset's
`device_rule`). Sources: shared/engine-defaults/sglang.csv (v0.5.1, v0.5.6, v0.5.9 rows) and the SGLang wheels read
for them (0.5.1.post1 `model_executor/cuda_graph_runner.py` get_batch_sizes_to_capture; 0.5.9 `server_args.py`
`_generate_cuda_graph_batch_sizes`, L1079-1107)."""
from __future__ import annotations

MIB = 1 << 20
GIB_MIB = 1024
SGLANG_0_5_1 = "sglang_0_5_1"     # 0.5.1 .. 0.5.5
SGLANG_0_5_6 = "sglang_0_5_6"     # 0.5.6 .. 0.5.14
DEVICE_RULES = (SGLANG_0_5_1, SGLANG_0_5_6)


def sglang_chunk_tokens(gpu_mib: float, rule: str = SGLANG_0_5_6) -> int:
    """SGLang's `chunked_prefill_size` default by device memory (before any DP-attention division): 0.5.1 < 35 GiB
    2048, < 160 GiB 8192, larger 16384 (server_args.py#L406); 0.5.6+ adds 4096 below 60 GiB."""
    if gpu_mib < 35 * GIB_MIB:
        return 2048
    if gpu_mib < 60 * GIB_MIB and rule != SGLANG_0_5_1:
        return 4096
    return 8192 if gpu_mib < 160 * GIB_MIB else 16384


def sglang_graph_max_bs(gpu_mib: float, tp_size: int) -> int:
    """SGLang 0.5.6+ `cuda_graph_max_bs` default by device memory and tp_size."""
    if gpu_mib < 20 * GIB_MIB:
        return 8
    if gpu_mib < 35 * GIB_MIB:
        return 24 if tp_size < 4 else 80
    if gpu_mib < 60 * GIB_MIB:
        return 32 if tp_size < 4 else 160
    if gpu_mib < 160 * GIB_MIB:
        return 256 if tp_size < 4 else 512
    return 512


def sglang_graph_sizes(rule: str, gpu_mib: float, tp_size: int) -> tuple[int, ...]:
    """The decode batch sizes SGLang captures CUDA graphs for (no speculative decoding, padding on). 0.5.1: [1, 2,
    4, 8] + 16..160 step 8, + 168..256 step 8 above 90 GiB, + 272..512 step 16 above 160,000 MiB, cut at 8 (tp < 4)
    or 80 on devices below 35 GiB; 0.5.6+: [1, 2, 4, 8, 12] + 16..256 step 8 + 272..496 step 16 + 512.. step 32, cut
    at `cuda_graph_max_bs`."""
    if rule == SGLANG_0_5_1:
        sizes = [1, 2, 4, 8, *range(16, 161, 8)]
        if gpu_mib > 90 * GIB_MIB:
            sizes += range(168, 257, 8)
        if gpu_mib > 160 * 1000:
            sizes += range(272, 513, 16)
        top = (8 if tp_size < 4 else 80) if gpu_mib < 35 * GIB_MIB else max(sizes)
    elif rule == SGLANG_0_5_6:
        top = sglang_graph_max_bs(gpu_mib, tp_size)
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, top + 1, 32)]
    else:
        raise ValueError(f"unknown device_rule {rule!r} (one of {', '.join(DEVICE_RULES)})")
    return tuple(sorted(s for s in set(sizes) if s <= top))


def chunk_tokens(rule: str, device_bytes: float) -> int:
    """`max_num_batched_tokens` under `rule` on a device of `device_bytes` (the instance's: SGLang divides it over
    DP-attention ranks itself)."""
    if rule not in DEVICE_RULES:
        raise ValueError(f"unknown device_rule {rule!r} (one of {', '.join(DEVICE_RULES)})")
    return sglang_chunk_tokens(device_bytes / MIB, rule)
