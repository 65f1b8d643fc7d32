"""Mooncake FAST'25 JSONL traces: one `{"timestamp", "input_length", "output_length", "hash_ids"}` per line.

`timestamp` is milliseconds (arrivals become seconds from the first line); `hash_ids` name the prompt's
512-token KV blocks (equal id = reusable block). Mooncake lists ceil(input_length / 512) ids, so the last id may
cover a partial block; a prefix cache should count at most `prompt_tokens // 512` blocks as hits. Lines must be
in time order (equal timestamps are common and fine).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from inferplan.errors import InputError
from scenarios.loaders.checks import UNREADABLE, check_sorted, open_text, raise_zero_lengths
from scenarios.workload import Workload

MOONCAKE_BLOCK_TOKENS = 512
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def _bad(path: Path, line: int, field: str, problem: str, fix: str) -> InputError:
    return InputError(path, f"line {line}, field {field}", problem, fix)


def load_mooncake(path: str | Path) -> Workload:
    """Load a Mooncake JSONL trace (gzipped when named `*.gz`) as a Workload with `prefix_hashes` (512-token blocks)."""
    path = Path(path)
    try:
        return _load(path)
    except (*UNREADABLE, UnicodeDecodeError) as err:
        raise InputError(path, "file", f"cannot be read ({err})", "restore the file from its source") from None


def _load(path: Path) -> Workload:
    ts, prompt, output, hashes = [], [], [], []
    with open_text(path) as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise _bad(path, line_no, "(line)", f"is not valid JSON ({err.msg})",
                           "write one JSON object per line") from None
            if not isinstance(row, dict):
                raise _bad(path, line_no, "(line)", "is not a JSON object", "write one {...} object per line")
            for name in FIELDS:
                if name not in row:
                    raise _bad(path, line_no, name, "is missing", f"every line needs {', '.join(FIELDS)}")
            for name in FIELDS[:3]:
                v = row[name]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
                    raise _bad(path, line_no, name, f"{v!r} is not a number", f"write {name} as a number")
                if v < 0:
                    raise _bad(path, line_no, name, f"{v} is negative", f"{name} must be >= 0")
                if name != "timestamp" and v != int(v):
                    raise _bad(path, line_no, name, f"{v} is not a whole number of tokens", "write an integer")
            ids = row["hash_ids"]
            if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
                raise _bad(path, line_no, "hash_ids", "is not a list of integers", "write e.g. [0, 1, 2]")
            ts.append(row["timestamp"])
            prompt.append(row["input_length"])
            output.append(row["output_length"])
            hashes.append(ids)
    if not ts:
        raise InputError(path, "file", "is empty", "write one JSON request per line")
    t = np.asarray(ts, dtype=np.float64)
    check_sorted(path, t, "timestamp", first_line=1)
    p, o, raised = raise_zero_lengths(np.asarray(prompt, dtype=np.int64), np.asarray(output, dtype=np.int64))
    return Workload.from_columns(
        (t - t[0]) / 1000.0, p, o, prefix_hashes=[np.asarray(h, dtype=np.int64) for h in hashes],
        hash_block_tokens=MOONCAKE_BLOCK_TOKENS, source=f"mooncake:{path}",
        metadata={"format": "mooncake", "raised_zero_lengths": raised})
