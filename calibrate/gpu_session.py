"""The prepared script for one borrowed CUDA GPU: everything in one call of at most 8 minutes, results in $OUT.

    bash calibrate/gpu_session.sh                              # on the GPU machine (OUT set by the tool)
    python -m calibrate.gpu_session --out DIR [--total-s 450]  # the same, directly
    python -m calibrate.gpu_session --out DIR --dry-run        # rehearsal on a CPU (Triton interpreter, toy sizes)

Steps, each in its own process with its own timeout (a hung compile or a crash costs that step only):
  env          nvidia-smi, library versions, CPU             -> env.txt
  adapters     our kernel calls vs the kernels' references   -> summary.json
  calibrate    deepseek_v3, then llama3_8b, on the hardware entry (default h200), pooled into one profile
               -> <hw>/measurements.parquet, <hw>/fit.json, <hw>/<hw>.parquet
  bench        python -m kernels.bench (GEMM+MoE group, then attention group) in the time left; the groups'
               Parquets are merged                          -> kernels_bench.parquet
  summary      what ran, how long, exit codes, headline errors -> summary.json; the whole log -> session.log
At most 7 files come back. The dry run uses toy models (`calibrate.tiny_models`) and `kernels.bench --quick`, with
the CUDA implementation table timed on the CPU: the same code path, minutes shorter, and its profile is marked as
a rehearsal.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = ("deepseek_v3", "llama3_8b")
# GEMM weight formats timed per model: DeepSeek-V3 is served in FP8 (its native format); Llama-3-8B in every format
# we have kernels for. The profile pools both models' points.
DTYPES = {"deepseek_v3": ("bf16", "fp8_block"), "llama3_8b": ("bf16", "fp8_block", "int8", "int4_wo")}
BENCH_GROUPS = {"gemm": "gemm_fp8_block,gemm_int8,gemm_int4_wo,moe_grouped_gemm",
                "attention": "attn_prefill,attn_paged_decode,attn_mla_decode"}
# Planned seconds per step on an H200 (budget_s of the calibrations; bench groups get what is left).
PLAN_S = {"env": 20, "adapters": 60, "deepseek_v3": 120, "llama3_8b": 100}
CALIBRATION_SLACK_S = 45      # start-up, ceilings, fit and writing on top of a calibration's budget
RESERVE_S = 10                # kept for the summary


class Session:
    def __init__(self, out: Path, hardware: str, total_s: float, dry_run: bool) -> None:
        self.out, self.hardware, self.dry_run = out, hardware, dry_run
        self.deadline = time.monotonic() + total_s
        self.work = Path(tempfile.mkdtemp(prefix="gpu_session_"))  # scratch outside $OUT (files count there)
        self.log = (out / "session.log").open("a", buffering=1)
        self.steps: list[dict] = []
        self.min_step_s = 5.0  # a step given less time than this is skipped, not started
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        if dry_run:
            self.env["TRITON_INTERPRET"] = "1"
        else:
            self.env.pop("TRITON_INTERPRET", None)
            self.env["TRITON_CACHE_AUTOTUNING"] = "1"  # the bench reuses the calibration's tunings from disk

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")

    def left_s(self) -> float:
        return self.deadline - time.monotonic() - RESERVE_S

    def run(self, name: str, argv: list[str], timeout_s: float) -> int | None:
        """Run one step as a child process, its output into the log; returns the exit code (None: timed out)."""
        timeout_s = min(timeout_s, self.left_s())
        if timeout_s < self.min_step_s:
            self.say(f"== {name}: skipped (session time spent)")
            self.steps.append({"step": name, "rc": None, "seconds": 0.0, "skipped": True})
            return None
        self.say(f"== {name} (timeout {timeout_s:.0f} s): {' '.join(argv)}")
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        rc: int | None
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the step and any compiler processes it started
            out, _ = proc.communicate()
            rc = None
        for line in (out or "").splitlines():
            self.say(f"  {line}")
        seconds = time.monotonic() - start
        self.say(f"== {name}: {'TIMED OUT' if rc is None else f'exit {rc}'} after {seconds:.0f} s")
        self.steps.append({"step": name, "rc": rc, "seconds": round(seconds, 1), "timed_out": rc is None})
        return rc

    def python(self, *args: str) -> list[str]:
        return [sys.executable, *args]


def _step_env(out: Path) -> int:
    import platform

    import torch

    lines = [f"python {platform.python_version()} torch {torch.__version__} cuda {torch.version.cuda}"]
    try:
        import triton
        lines.append(f"triton {triton.__version__}")
    except ImportError:
        lines.append("triton absent")
    for cmd in (["nvidia-smi"], ["nvidia-smi", "-q", "-d", "CLOCK,POWER,PERFORMANCE"], ["lscpu"]):
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
            lines += [f"$ {' '.join(cmd)}", res.stdout.strip()]
        except (OSError, subprocess.SubprocessError) as err:
            lines.append(f"$ {' '.join(cmd)}: {type(err).__name__}")
    (out / "env.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:2]))
    return 0


def _step_adapters(work: Path) -> int:
    import torch

    from calibrate.adapter_check import check_adapters

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = check_adapters(device)
    for r in rows:
        print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['impl']:<26} {r['shape']:<40} rel_err {r['rel_err']:.2e} "
              f"(tol {r['tolerance']:.0e}) {r['error']}")
    (work / "adapters.json").write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


def _step_calibrate(work: Path, out: Path, hardware: str, model: str, budget_s: float, dry_run: bool) -> int:
    from calibrate.report import print_report
    from calibrate.run import Settings, overall_error, run_calibration
    from calibrate.tiny_models import STANDS_FOR, write_tiny_model

    if dry_run:
        source = str(write_tiny_model(STANDS_FOR[model], work))
        settings = Settings(hardware=hardware, model=source, out_dir=out / hardware, grid="tiny", budget_s=budget_s,
                            dtypes=DTYPES[model], device="cpu", impls="cuda", threads=2, progress=False)
    else:
        settings = Settings(hardware=hardware, model=model, out_dir=out / hardware, budget_s=budget_s,
                            dtypes=DTYPES[model], progress=False)
    result = run_calibration(settings)
    print_report(result)
    sw = result.sweep
    (work / f"calibrate_{model}.json").write_text(json.dumps({
        "model": model, "measured": sw.measured, "reused": sw.reused, "remaining": sw.remaining,
        "stopped_by_budget": sw.stopped_by_budget, "failed": sw.failed, "overall": overall_error(result.report),
        "profile": str(result.profile_path)}, indent=1, default=str))
    return 0


def _merge_bench(parts: list[Path], dest: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in parts if p.exists()]
    if not tables:
        return 0
    merged = pa.concat_tables(tables, promote_options="default")
    pq.write_table(merged.replace_schema_metadata(tables[0].schema.metadata), dest)
    return merged.num_rows


def _summary(session: Session) -> dict:
    doc: dict = {"hardware": session.hardware, "dry_run": session.dry_run, "steps": session.steps}
    for name in ("adapters.json", *(f"calibrate_{m}.json" for m in MODELS)):
        path = session.work / name
        if path.exists():
            doc[name.removesuffix(".json")] = json.loads(path.read_text())
    fit = session.out / session.hardware / "fit.json"
    if fit.exists():
        f = json.loads(fit.read_text())
        doc["profile_fit"] = {"overall": f["overall"], "models": f["models"],
                              "per_op": {k: {"held_out_mape_pct": v["held_out_mape_pct"],
                                             "held_out_max_abs_pct": v["held_out_max_abs_pct"], "impls": v["impls"]}
                                         for k, v in f["profile"].items()},
                              "baselines": {k: v["ratio_to_primary"] for k, v in f["impls"].items()
                                            if not v["primary"]}}
    bench = session.out / "kernels_bench.parquet"
    if bench.exists():
        import pyarrow.parquet as pq
        rows = pq.read_table(bench).to_pylist()
        doc["kernels_bench"] = {"rows": len(rows), "not_correct": [f"{r.get('kernel')}/{r.get('variant')}"
                                                                    for r in rows if not r.get("correct", True)]}
    return doc


def orchestrate(out: Path, hardware: str, total_s: float, dry_run: bool) -> int:
    out.mkdir(parents=True, exist_ok=True)
    s = Session(out, hardware, total_s, dry_run)
    common = ["--out", str(out), "--work", str(s.work), "--hardware", hardware] + (["--dry-run"] if dry_run else [])
    me = ["-m", "calibrate.gpu_session"]
    s.run("env", s.python(*me, "--step", "env", *common), PLAN_S["env"])
    s.run("adapters", s.python(*me, "--step", "adapters", *common), PLAN_S["adapters"])
    for model in MODELS:
        budget = PLAN_S[model] if not dry_run else 20
        budget = min(budget, s.left_s() - CALIBRATION_SLACK_S)
        if budget >= 10:
            s.run(f"calibrate {model}", s.python(*me, "--step", "calibrate", "--model", model, "--budget-s",
                                                 str(int(budget)), *common), budget + CALIBRATION_SLACK_S)
        else:
            s.run(f"calibrate {model}", [], 0)  # recorded as skipped
    parts = []
    for i, (group, names) in enumerate(BENCH_GROUPS.items()):
        part = s.work / f"bench_{group}.parquet"
        share = 0.6 if i == 0 else 1.0
        argv = s.python("-m", "kernels.bench", "--out", str(part), "--only", names, *(["--quick"] if dry_run else []))
        s.run(f"bench {group}", argv, s.left_s() * share)
        parts.append(part)
    rows = _merge_bench(parts, out / "kernels_bench.parquet")
    s.say(f"== kernels_bench.parquet: {rows} rows")
    summary = _summary(s)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    s.say(f"== done: {len(files)} files under {out}: {', '.join(files)}")
    s.log.close()
    shutil.rmtree(s.work, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calibrate.gpu_session", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu_session_out"), help="results folder ($OUT)")
    parser.add_argument("--hardware", default="h200", help="conf/hardware entry of the GPU")
    parser.add_argument("--total-s", type=float, default=450.0, help="wall-clock budget of the whole session")
    parser.add_argument("--dry-run", action="store_true", help="rehearse on a CPU: interpreter, toy models")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--budget-s", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    if args.step is None:
        return orchestrate(out, args.hardware, args.total_s, args.dry_run)
    work = Path(args.work)
    if args.step == "env":
        return _step_env(out)
    if args.step == "adapters":
        return _step_adapters(work)
    if args.step == "calibrate":
        return _step_calibrate(work, out, args.hardware, args.model, args.budget_s, args.dry_run)
    raise SystemExit(f"unknown step {args.step}")


if __name__ == "__main__":
    sys.exit(main())
