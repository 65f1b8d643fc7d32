"""Rebuild the shipped traces under `scenarios/data/traces/` from full copies of the public traces.

Run `python scenarios/data/make_data.py [SHARED_TRACES]` (default `$INFERPLAN_SHARED_ROOT/traces`, else
`../shared/traces`). Output is byte-reproducible: gzip level 9 with no file name and mtime 0.

- Azure LLM 2023 code/conv CSVs and the Mooncake conversation JSONL: gzipped unchanged (lossless), so a run on the
  shipped copy reads exactly the rows of the full one.
- ServeGen `reason/deepseek-r1`: every client's `chunk-<id>-trace.csv` gzipped unchanged; every
  `chunk-<id>-dataset.json` keeps only the fields the loader reads (`input_tokens`, `output_tokens`, their dict
  strings verbatim) and drops `reason_ratio`, re-serialised compactly and gzipped.

Not imported by the package; `tests/scenarios/test_data.py` checks that a rebuild equals the shipped bytes.
"""
from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOSSLESS = ("azure-llm-2023/AzureLLMInferenceTrace_code.csv", "azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
            "mooncake/conversation_trace.jsonl")
SERVEGEN_POOL = "servegen/reason/deepseek-r1"
SERVEGEN_FIELDS = ("input_tokens", "output_tokens")  # what scenarios/loaders/servegen.py reads of a language pool


def gz(data: bytes) -> bytes:
    """gzip bytes that depend only on `data` (no name, mtime 0)."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def reduced_dataset(raw: bytes) -> bytes:
    """A `chunk-<id>-dataset.json` cut to `SERVEGEN_FIELDS`, window order and dict strings kept."""
    data = json.loads(raw)
    kept = {w: {f: v for f, v in fields.items() if f in SERVEGEN_FIELDS} for w, fields in data.items()}
    return json.dumps(kept, separators=(",", ":"), ensure_ascii=True).encode()


def build(traces: Path) -> dict[str, bytes]:
    """Shipped file (relative to `scenarios/data/traces/`) -> its bytes, from the full copies in `traces`."""
    out = {f"{rel}.gz": gz((traces / rel).read_bytes()) for rel in LOSSLESS}
    for path in sorted((traces / SERVEGEN_POOL).glob("chunk-*-trace.csv")):
        out[f"{SERVEGEN_POOL}/{path.name}.gz"] = gz(path.read_bytes())
    for path in sorted((traces / SERVEGEN_POOL).glob("chunk-*-dataset.json")):
        out[f"{SERVEGEN_POOL}/{path.name}.gz"] = gz(reduced_dataset(path.read_bytes()))
    return out


def main(argv: list[str]) -> int:
    root = os.environ.get("INFERPLAN_SHARED_ROOT") or str(HERE.parents[2] / "shared")
    traces = Path(argv[0]) if argv else Path(root) / "traces"
    for rel, data in build(traces).items():
        target = HERE / "traces" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    print(f"wrote {HERE / 'traces'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
