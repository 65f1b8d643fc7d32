"""Shared validators for the readers: each problem becomes a one-line `InputError` naming file, field and fix."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from inferplan.errors import InputError


def read_text(path: Path, what: str) -> str:
    """The file's text; missing and empty files are input errors."""
    if not path.is_file():
        raise InputError(path, "path", "file not found", f"give the {what}")
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise InputError(path, "file", "is empty", f"give the {what}")
    return text


def json_objects(path: Path, text: str) -> list[dict]:
    """One JSON object, or several (JSON Lines, as `--append-result` and SGLang write). Accepts Infinity/NaN."""
    try:
        data = json.loads(text)
        objs = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        objs = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                objs.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise InputError(path, f"line {lineno}", f"is not valid JSON ({err.msg} at column {err.colno})",
                                 "give the file exactly as the benchmark client wrote it") from None
    if not objs or not all(isinstance(o, dict) for o in objs):
        raise InputError(path, "file", "is not a JSON object or JSON Lines of objects", "give the benchmark's result file")
    return objs


def pick_run(path: Path, objs: list[dict], run: int | None, has_lists) -> tuple[dict, list[str]]:
    """The run to replay among appended results: `run` (0-based; negative counts from the end), else the last
    one that has per-request lists."""
    notes = []
    if run is not None:
        if not -len(objs) <= run < len(objs):
            raise InputError(path, "run", f"index {run} out of range: the file holds {len(objs)} runs",
                             f"give run= between 0 and {len(objs) - 1}")
        chosen = objs[run]
        if len(objs) > 1:
            notes.append(f"run {run % len(objs)} of {len(objs)} results in the file (run=)")
        return chosen, notes
    with_lists = [i for i, o in enumerate(objs) if has_lists(o)]
    i = with_lists[-1] if with_lists else len(objs) - 1
    if len(objs) > 1:
        notes.append(f"the file holds {len(objs)} results; replaying the last one with per-request lists "
                     f"(index {i}; choose with run=)")
    return objs[i], notes


def number_list(path, obj: dict, key: str, *, integer: bool = False, non_negative: bool = True,
                length: int | None = None, fix: str = "") -> np.ndarray:
    """`obj[key]` as a float64/int64 array, checking type, sign and length element by element."""
    if key not in obj:
        raise InputError(path, key, "missing", fix or f"add the `{key}` list")
    values = obj[key]
    if not isinstance(values, list):
        raise InputError(path, key, f"is not a list ({type(values).__name__})", fix or "give one value per request")
    if length is not None and len(values) != length:
        raise InputError(path, key, f"has {len(values)} entries, expected {length} (one per request)",
                         "give the lists exactly as the client wrote them")
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        out[i] = to_number(path, f"{key}[{i}]", v, integer=integer, non_negative=non_negative)
    return out.astype(np.int64) if integer else out


def to_number(path, field: str, v, *, integer: bool = False, non_negative: bool = True) -> float:
    """One numeric cell: rejects strings, booleans, NaN/inf, fractions where an integer is due, negatives.
    Messages quote the cell as written."""
    shown = v.strip() if isinstance(v, str) else v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            v = float(str(v).strip())
        except ValueError:
            raise InputError(path, field, f"is not a number: {v!r}", "give a number") from None
    if not math.isfinite(v):
        raise InputError(path, field, f"is not finite: {shown!r}", "give a finite number")
    if integer and float(v) != int(v):
        raise InputError(path, field, f"is not a whole number of tokens: {shown!r}", "give an integer")
    if non_negative and v < 0:
        raise InputError(path, field, f"is negative: {shown!r}", "lengths and times must be >= 0")
    return float(v)


def gap_lists(path, obj: dict, key: str, length: int) -> list[np.ndarray]:
    """`obj[key]` as one float array of gaps (s) per request (vLLM/SGLang `itls`)."""
    if key not in obj:
        raise InputError(path, key, "missing", f"add the `{key}` list of per-request lists")
    values = obj[key]
    if not isinstance(values, list) or len(values) != length:
        got = f"{len(values)} entries" if isinstance(values, list) else type(values).__name__
        raise InputError(path, key, f"has {got}, expected a list of {length} lists (one per request)",
                         "give the lists exactly as the client wrote them")
    out = []
    for i, gaps in enumerate(values):
        if not isinstance(gaps, list):
            raise InputError(path, f"{key}[{i}]", f"is not a list ({type(gaps).__name__})", "give one list of gaps (s) per request")
        out.append(np.array([to_number(path, f"{key}[{i}][{j}]", g) for j, g in enumerate(gaps)], dtype=np.float64))
    return out


def error_flags(path, obj: dict, key: str, length: int) -> np.ndarray:
    """True where the request failed (`errors[i]` non-empty); all false when the list is absent."""
    if key not in obj:
        return np.zeros(length, dtype=bool)
    errs = obj[key]
    if not isinstance(errs, list) or len(errs) != length:
        raise InputError(path, key, f"expected a list of {length} strings (one per request)",
                         "give the lists exactly as the client wrote them")
    return np.array([bool(e) for e in errs], dtype=bool)


def optional_number(obj: dict, key: str):
    """A run-level number that may be absent, null, a string such as "inf", or non-finite (returned as float)."""
    v = obj.get(key)
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def consistency_notes(obj: dict, ttft_s: np.ndarray, e2e_s: np.ndarray, output: np.ndarray, ok: np.ndarray) -> list[str]:
    """Our per-request reading against the log's own `mean_ttft_ms`/`mean_tpot_ms` (over successful requests;
    TPOT over outputs > 1 token). A mismatch above 1% means the file was read differently from how the client
    computed its statistics; it is reported, not fatal."""
    notes = []
    multi = ok & (output > 1)
    tpot = (e2e_s[multi] - ttft_s[multi]) / (output[multi] - 1)
    for key, values in (("mean_ttft_ms", ttft_s[ok]), ("mean_tpot_ms", tpot)):
        logged = optional_number(obj, key)
        if logged is None or not values.size:
            continue
        ours = float(values.mean()) * 1e3
        if abs(ours - logged) <= 0.01 * abs(logged) + 1e-3:
            notes.append(f"recomputed {key} matches the log ({logged:.3f})")
        else:
            notes.append(f"recomputed {key} {ours:.3f} differs from the log's {logged:.3f} by more than 1%")
    return notes
