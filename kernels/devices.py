"""Peak rates per GPU (datasheet, dense: no 2:4 sparsity) and the provenance of a benchmark run.

Datasheet peaks are the roofline's ceilings; they are leads, not measurements (a copy kernel or a library GEMM
measured on the same card is the honest ceiling, and the benchmark's baselines give that context).
"""
from __future__ import annotations

import datetime
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch
import triton


@dataclass(frozen=True)
class DevicePeaks:
    """Dense peak rates of one GPU model: tensor-core TFLOP/s per operand type and HBM bandwidth in GB/s."""
    name: str
    bf16_tflops: float
    fp8_tflops: float  # NaN where the card has no FP8 tensor cores
    int8_tops: float
    hbm_gb_per_s: float

    def flops_per_s(self, precision: str) -> float:
        """Peak FLOP/s for 'bf16', 'fp8' or 'int8' tensor-core work."""
        tera = {"bf16": self.bf16_tflops, "fp8": self.fp8_tflops, "int8": self.int8_tops}[precision]
        return tera * 1e12


_NAN = float("nan")
# Ordered: the first entry whose key is a substring of torch.cuda.get_device_name() wins (specific names first).
PEAKS: tuple[tuple[str, DevicePeaks], ...] = (
    # NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200), H200 NVL column: 1,671 / 3,341 TFLOPS
    # bf16 / fp8 with sparsity, halved for dense; 4.8 TB/s HBM3e
    ("H200 NVL", DevicePeaks("H200 NVL", 835.5, 1670.5, 1670.5, 4800.0)),
    # same datasheet, H200 SXM column: 1,979 / 3,958 TFLOPS bf16 / fp8 (and INT8 TOPS) with sparsity -> dense
    # 989.5 / 1,979; 4.8 TB/s
    ("H200", DevicePeaks("H200 SXM", 989.5, 1979.0, 1979.0, 4800.0)),
    # NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100), PCIe column: 1,513 / 3,026 sparse -> 756 /
    # 1,513 dense; 2.0 TB/s HBM2e
    ("H100 PCIe", DevicePeaks("H100 PCIe", 756.5, 1513.0, 1513.0, 2000.0)),
    # same datasheet, H100 NVL column: 1,671 / 3,341 sparse -> 835.5 / 1,670.5 dense; 3.9 TB/s
    ("H100 NVL", DevicePeaks("H100 NVL", 835.5, 1670.5, 1670.5, 3900.0)),
    # same datasheet, H100 SXM column ("NVIDIA H100 80GB HBM3"): 1,979 / 3,958 sparse -> 989.5 / 1,979; 3.35 TB/s
    ("H100", DevicePeaks("H100 SXM", 989.5, 1979.0, 1979.0, 3350.0)),
    # NVIDIA H800 SXM5 datasheet: tensor rates as the H100 SXM (FP64 and NVLink are cut), 3.35 TB/s HBM3
    ("H800", DevicePeaks("H800 SXM", 989.5, 1979.0, 1979.0, 3350.0)),
    # NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100): 312 TFLOPS bf16 and 624 TOPS int8 dense, no FP8;
    # 80 GB SXM 2,039 GB/s, 80 GB PCIe 1,935 GB/s, 40 GB 1,555 GB/s
    ("A100-SXM4-80GB", DevicePeaks("A100 SXM 80GB", 312.0, _NAN, 624.0, 2039.0)),
    ("A100 80GB PCIe", DevicePeaks("A100 PCIe 80GB", 312.0, _NAN, 624.0, 1935.0)),
    ("A100", DevicePeaks("A100 40GB", 312.0, _NAN, 624.0, 1555.0)),
)
UNKNOWN = DevicePeaks("unknown", _NAN, _NAN, _NAN, _NAN)


def peaks_for(device_name: str) -> DevicePeaks:
    """The datasheet peaks of a device by its `torch.cuda.get_device_name()`; all-NaN `UNKNOWN` if not listed."""
    return next((peaks for key, peaks in PEAKS if key in device_name), UNKNOWN)


def _nvidia_smi(index: int) -> dict[str, str]:
    fields = ["driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "power.limit"]
    try:
        line = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
                               "-i", str(index)], capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(zip(fields, (v.strip() for v in line.strip().split(",")), strict=False))


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                              text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _as_float(text: str | None) -> float:
    try:
        return float(text) if text else _NAN
    except ValueError:  # nvidia-smi prints "[N/A]" where a clock is not reported
        return _NAN


def provenance(device: torch.device) -> dict[str, object]:
    """Where and with what a run was measured: GPU, driver, clocks (nvidia-smi, when present), library versions,
    UTC date and git commit ('' when not in a git checkout or before the first commit)."""
    on_gpu = device.type == "cuda"
    smi = _nvidia_smi(device.index or 0) if on_gpu else {}
    return {
        "gpu_name": torch.cuda.get_device_name(device) if on_gpu else "cpu (Triton interpreter)",
        "driver_version": smi.get("driver_version", ""),
        "cuda_version": torch.version.cuda or "",
        "sm_clock_mhz": _as_float(smi.get("clocks.sm")),
        "mem_clock_mhz": _as_float(smi.get("clocks.mem")),
        "max_sm_clock_mhz": _as_float(smi.get("clocks.max.sm")),
        "power_limit_w": _as_float(smi.get("power.limit")),
        "torch_version": torch.__version__,
        "triton_version": triton.__version__,
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--", "kernels")),
    }
