"""Golden outputs: every scenario and every policy, run small, hashed.

Refactors of the engine must leave what a run writes unchanged. Each case is a short run of a shipped config; its
fingerprint is the SHA-256 of every Parquet file in the run folder (with each column's hash and sum, to say which
column changed and by how much) and the summary's values restricted to the keys it had when the golden file was
written (new keys may be added; the values of existing ones may not change). `wall_time_s` is measured, not
simulated, and is left out. A difference is reported as the columns and summary values that changed.

    python tests/golden/cases.py            # compare with tests/golden/outputs.json
    python tests/golden/cases.py --write    # rewrite it (only for an intended change of output; say why)
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

GOLDEN = Path(__file__).with_name("outputs.json")
SMALL = ["++scenario.traffic.num_requests=300", "metrics.progress=false"]
SMOKE = ["scenario=smoke", "metrics.progress=false"]
VOLATILE = {"wall_time_s"}

CASES: dict[str, list[str]] = {
    **{f"scenario/{name}": [f"scenario={name}", *SMALL]
       for name in ["smoke", "chat_diurnal", "code_assistant", "ecommerce_peak", "long_context_rag", "batch_offline",
                    "deepseek_v3_day"]},
    **{f"batching/{name}": [*SMOKE, f"batching={name}", "scenario.pools.main.instances=2"]
       for name in ["continuous", "chunked_prefill", "static", "dynamic"]},
    **{f"router/{name}": [*SMOKE, f"router={name}", "scenario.pools.main.instances=3",
                          "++scenario.pools.main.prefix_caching=true"]
       for name in ["least_outstanding", "round_robin", "least_kv", "length_aware", "prefix_affinity"]},
    **{f"autoscaler/{name}": [*SMOKE, f"autoscaler={name}"] for name in ["fixed", "reactive", "predictive",
                                                                         "scheduled"]},
    **{f"engine/{name}": [*SMOKE, f"engine={name}"] for name in ["generic", "vllm_v0", "vllm_v1", "sglang", "trtllm"]},
    "cost/constant": [*SMOKE, "cost=constant"],
    "kv/small_preempt": [*SMOKE, "++scenario.pools.main.num_gpu_blocks_override=300"],
}


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _column_facts(table) -> dict:
    """Per column: SHA-256 of its values and, for numbers, their sum (what a difference report shows)."""
    import numpy as np
    import pyarrow as pa

    facts = {}
    for name in table.column_names:
        col = table.column(name)
        numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
        if numeric:
            values = col.to_numpy(zero_copy_only=False)
            facts[name] = {"sha256": hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest(),
                           "sum": float(np.nansum(values.astype(np.float64)))}
        else:
            facts[name] = {"sha256": hashlib.sha256(_canonical([str(v) for v in col.to_pylist()])).hexdigest()}
    return facts


def fingerprint(run_dir: Path, summary_keys: list[str] | None = None) -> dict:
    """{"files": {Parquet path: SHA-256}, "columns": {path: {column: facts}}, "summary": {key: value}} over the
    listed summary keys (default: every key the summary has but the volatile ones). The files' hashes decide
    equality; the columns and the summary values say what changed when they differ."""
    import pyarrow.parquet as pq

    parquet = sorted(run_dir.rglob("*.parquet"))
    summary = json.loads((run_dir / "summary.json").read_text())
    keys = sorted(summary_keys if summary_keys is not None else set(summary) - VOLATILE)
    return {"files": {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in parquet},
            "columns": {str(p.relative_to(run_dir)): _column_facts(pq.read_table(p)) for p in parquet},
            "summary": {k: summary.get(k) for k in keys}}


def summary_keys(entry: dict) -> list[str]:
    return sorted(entry.get("summary", {}))


def _leaves(old, new, path: str):
    """(path, old, new) for every differing leaf of two JSON values."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            yield from _leaves(old.get(k), new.get(k), f"{path}.{k}")
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            yield from _leaves(a, b, f"{path}[{i}]")
    elif old != new:
        yield path, old, new


def differences(golden: dict, now: dict, limit: int = 20) -> list[str]:
    """What differs between a recorded fingerprint and a new one, as readable lines (empty: equal)."""
    if "error" in now:
        return [f"error: {now['error']}"]
    lines = []
    for path, sha in golden.get("files", {}).items():
        if now["files"].get(path) != sha:
            old_cols, new_cols = golden.get("columns", {}).get(path, {}), now["columns"].get(path, {})
            changed = [c for c in sorted(set(old_cols) | set(new_cols)) if old_cols.get(c) != new_cols.get(c)]
            detail = ", ".join(f"{c} (sum {old_cols.get(c, {}).get('sum')} -> {new_cols.get(c, {}).get('sum')})"
                               if "sum" in old_cols.get(c, {}) or "sum" in new_cols.get(c, {}) else c
                               for c in changed) or "the bytes (no column's values)"
            lines.append(f"{path}: {detail}")
    for key, old in golden.get("summary", {}).items():
        lines += [f"summary{p}: {a!r} -> {b!r}" for p, a, b in _leaves(old, now["summary"].get(key), f".{key}")]
    return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])


def run_case(overrides: list[str], run_dir: Path) -> Path:
    from sim.api import run_composed
    from sim.compose import compose_config

    _, out = run_composed(compose_config(overrides), run_dir, lambda f: None)
    return out


def compute(names=None, golden: dict | None = None) -> dict:
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or CASES:
            try:
                out = run_case(CASES[name], Path(tmp) / name.replace("/", "_"))
            except Exception as err:  # noqa: BLE001 (reported per case by main)
                result[name] = {"error": f"{type(err).__name__}: {err}"}
                continue
            keys = summary_keys(golden[name]) if golden and name in golden else None
            result[name] = fingerprint(out, keys)
    return result


def main(argv: list[str]) -> int:
    if "--write" in argv:
        computed = compute()
        if any("error" in v for v in computed.values()):
            print({n: v["error"] for n, v in computed.items() if "error" in v})
            return 1
        GOLDEN.write_text(json.dumps(computed, indent=1, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN}")
        return 0
    golden = json.loads(GOLDEN.read_text())
    now = compute(golden=golden)
    bad = [n for n in CASES if differences(golden.get(n, {}), now[n])]
    for n in bad:
        print(f"{n}:\n  " + "\n  ".join(differences(golden.get(n, {}), now[n])))
    print("golden outputs:", "all equal" if not bad else f"{len(bad)} of {len(CASES)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    raise SystemExit(main(sys.argv[1:]))
