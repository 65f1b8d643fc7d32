"""Launch plumbing shared by the kernel modules: interpreter detection, input checks, scratch buffers, errors.

Every wrapper in this package follows Triton tutorial 03: (1) check shapes and dtypes, raising `ValueError`s that
name the argument and the expected value; (2) allocate the output (or take a caller's `out=`); (3) launch either the
fixed interpreter config (`TRITON_INTERPRET=1`, where multi-config autotune fails) or the autotuned kernel.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

import torch

FP8_DTYPE = torch.float8_e4m3fn
"""The FP8 format of every kernel here: e4m3 'fn' (no infinities, max 448), Triton's `tl.float8e4nv`."""


def interpreting() -> bool:
    """True when Triton runs in its CPU interpreter (`TRITON_INTERPRET=1`), read at call time, not import time.

    Under the interpreter (triton 3.7.1) a bf16 `tl.dot` returns wrong results, so wrappers pass `DOT_FP32=True`
    and kernels upcast both dot operands to fp32 first; autotune lists are bypassed for one fixed config.
    """
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def bf16_store_rounding() -> float:
    """The largest relative error of storing an fp32 value as bf16 (`.to(tl.bfloat16)`): 2^-8 on a GPU (round to
    nearest even); under the interpreter (triton 3.7.1) the cast truncates toward zero, so up to 2^-7 (18.1149 is
    stored as 18.0, not 18.125). Kernel tests size their tolerances from it."""
    return 2.0 ** -7 if interpreting() else 2.0 ** -8


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors on `device` (132 on an H200 SXM); 4 for the CPU interpreter (keeps grids tiny)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def next_pow2(x: int) -> int:
    """Smallest power of two >= max(x, 1); used for constexpr tile sizes and autotune key buckets."""
    return 1 << max(int(x) - 1, 0).bit_length()


def scratch(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialised work buffer on the GPU; NaN-filled under the interpreter so that a partial result the
    kernel forgot to write poisons the output and fails the tests."""
    if interpreting():
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def check_tensor(name: str, t: object, dtypes: Iterable[torch.dtype], ndim: int) -> torch.Tensor:
    """Raise `ValueError` unless `t` is a tensor of one of `dtypes` with `ndim` dimensions; return it."""
    dtypes = tuple(dtypes)
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        names = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ValueError(f"{name} must have dtype {names}, got {str(t.dtype).removeprefix('torch.')}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
    return t


def check_shape(name: str, t: torch.Tensor, expected: tuple[int, ...], meaning: str = "") -> None:
    """Raise `ValueError` unless `t.shape == expected`; `meaning` spells the expected shape, e.g. '[M, ceil(K/128)]'."""
    if tuple(t.shape) != tuple(expected):
        what = f" {meaning}" if meaning else ""
        raise ValueError(f"{name} must have shape {tuple(expected)}{what}, got {tuple(t.shape)}")


def check_same_device(**tensors: torch.Tensor | None) -> torch.device:
    """Raise `ValueError` unless all given tensors live on one device; return it."""
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        raise ValueError(f"all tensors must be on one device, got {devices}")
    return next(iter(devices.values()))


def check_out(out: torch.Tensor | None, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
              ) -> torch.Tensor:
    """Return a caller's `out` after checking it (contiguous, `shape`, `dtype`), or a fresh uninitialised tensor."""
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {str(dtype).removeprefix('torch.')} tensor of shape "
                         f"{tuple(shape)}, got {str(out.dtype).removeprefix('torch.')} {tuple(out.shape)}")
    if out.device != device:
        raise ValueError(f"out must be on {device}, got {out.device}")
    return out


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64 (Frobenius norm); NaN anywhere in `out` gives NaN, which fails `<`."""
    out64, ref64 = out.to(torch.float64), ref.to(torch.float64)
    denom = torch.linalg.vector_norm(ref64).item()
    return torch.linalg.vector_norm(out64 - ref64).item() / max(denom, 1e-300)
