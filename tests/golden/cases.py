"""Golden outputs: every scenario and every policy, run small, hashed.

The refactors of the engine (issue 19) and its speed work must leave what a run writes unchanged. Each case is a
short run of a shipped config; its fingerprint is the SHA-256 of every Parquet file in the run folder and of the
summary restricted to the keys it had when the golden file was written (new keys may be added; the values of
existing ones may not change). `wall_time_s` is measured, not simulated, and is left out.

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


def fingerprint(run_dir: Path, summary_keys: list[str] | None = None) -> dict:
    """{relative Parquet path: SHA-256, "summary.<key>": SHA-256 of that key's value} over the listed keys (default:
    every key the summary has but the volatile ones), so that a difference names the section that changed."""
    out = {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
           for p in sorted(run_dir.rglob("*.parquet"))}
    summary = json.loads((run_dir / "summary.json").read_text())
    keys = sorted(summary_keys if summary_keys is not None else set(summary) - VOLATILE)
    out.update({f"summary.{k}": hashlib.sha256(_canonical(summary.get(k))).hexdigest() for k in keys})
    return out


def summary_keys(entry: dict) -> list[str]:
    return sorted(k.removeprefix("summary.") for k in entry if k.startswith("summary."))


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
    bad = [n for n in CASES if now[n] != golden.get(n)]
    for n in bad:
        diff = now[n].get("error") or ", ".join(k for k in now[n] if now[n][k] != golden.get(n, {}).get(k))
        print(f"{n}: differs in {diff}")
    print("golden outputs:", "all equal" if not bad else f"{len(bad)} of {len(CASES)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    raise SystemExit(main(sys.argv[1:]))
