"""`python -m calibrate.import_aic <systems folder> --hardware <name> [--engine vllm|sglang|trtllm[@version]]
[--out <file>] [--report] [--write-doc]`: a measured grid profile from NVIDIA AIConfigurator's performance database.

Reads `<systems>/data/<gpu>/...` (`calibrate.aic.db`), converts GEMM, attention, MLA attention, MoE, collective,
Gated DeltaNet (`gdn_perf`) and DeepEP dispatch / combine tables to our names and units (`calibrate.aic.convert`), cross-validates the grid form per family (`calibrate.aic.crossval`) and
writes a grid profile per engine that measured the GPU (`calibrate.profile.write_grid_profile`, default
`calibrate/profiles/aic/<hardware>/<engine>.parquet`, the layout `calibrate.aic.catalogue` reads) with NOTICE.md
and the database's LICENSE beside them. `--hardware all` does the six GPUs the project ships. `--report` also prices every row
with the analytical model and prints the table; `--write-doc` puts it into docs/cost-model.md. docs/cost-model.md
("Measured grids from AIConfigurator") documents the result.
"""
from __future__ import annotations

import argparse
import datetime
import re
import shutil
import sys
from pathlib import Path


from calibrate.aic.convert import convert
from calibrate.aic.crossval import split_gemm_by_alignment
from calibrate.aic.db import AicDb
from calibrate.aic.grid import Peaks
from calibrate.aic.names import ENGINES, HARDWARE
from calibrate.aic.report import family_errors, markdown
from calibrate.profile import write_grid_profile
from inferplan.errors import InputError, exit_on_input_error
from inferplan.paths import REPO_ROOT, shown_path
from inferplan.specs import load_hardware

OUT_DIR = REPO_ROOT / "calibrate" / "profiles" / "aic"
DOC = REPO_ROOT / "docs" / "cost-model.md"
BEGIN, END = "<!-- aic-report:begin -->", "<!-- aic-report:end -->"
SOURCE = {"name": "NVIDIA AIConfigurator performance database", "repository": "ai-dynamo/aiconfigurator",
          "path": "aic-core/src/aiconfigurator_core/systems/", "licence": "Apache-2.0"}
NOTICE = """Measured grid profiles derived from NVIDIA AIConfigurator's performance database.

Source: https://github.com/ai-dynamo/aiconfigurator, commit {commit}, folder aic-core/src/aiconfigurator_core/systems/
(later folded into ai-dynamo/aisimulate, same layout). Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES.
Licensed under the Apache License, Version 2.0 (https://www.apache.org/licenses/LICENSE-2.0); the files here are
a derived work under the same licence.

Changes: per-op latencies converted to seconds and bytes, renamed to inferplan's op and format names, one row per
measured shape (repeats merged by their median, sliding-window attention and formats inferplan has no name for
left out); made by `python -m calibrate.import_aic <systems> --hardware all` (one file per GPU and engine,
<hardware>/<engine>.parquet). Each profile's metadata records the engine, versions, kernels and files of every
table it holds.
"""


def source_commit(systems: Path) -> str:
    """The database's commit as its README states it ("at commit <hex>"), else "unknown"."""
    for readme in (systems / "README.md", systems.parent / "README.md"):
        if readme.is_file():
            m = re.search(r"at commit ([0-9a-f]{7,40})", readme.read_text())
            if m:
                return m.group(1)
    return "unknown"


def peaks_of(hardware: str) -> tuple[Peaks, dict]:
    hw = load_hardware(hardware)
    peaks = Peaks(dict(hw.peak_flops_per_s), hw.mem_bandwidth_bytes_per_s, hw.intra_node_bandwidth_bytes_per_s)
    return peaks, {"flops_per_s": dict(hw.peak_flops_per_s), "mem_bytes_per_s": hw.mem_bandwidth_bytes_per_s,
                   "link_bytes_per_s": hw.intra_node_bandwidth_bytes_per_s, "source": shown_path(hw.source)}


def import_one(db: AicDb, hardware: str, engine: str | None, out: Path | None,
               analytical=None) -> tuple[str, list, int]:
    """Convert, cross-validate and (unless `out` is None) write one GPU's profile; (engine label, report lines,
    rows)."""
    columns, prov = convert(db, hardware, engine)
    peaks, peak_meta = peaks_of(hardware)
    columns, split = split_gemm_by_alignment(columns, peaks)
    if "gemm" in prov["families"] and split:
        prov["families"]["gemm"]["m_alignment_split"] = split
    lines = family_errors(columns, peaks, hardware, analytical=analytical)
    eng = prov["engine"]
    versions = sorted({p["version"] for p in prov["families"].values()
                       if "version" in p and p.get("framework") == eng["framework"]})
    label = f"{eng['framework']} {'/'.join(versions)}"
    if out is not None:
        devices = sorted({d for p in prov["families"].values() for d in p.get("device", [])})
        meta = {"hardware": hardware, "device": ", ".join(devices) or prov["system"],
                "date": datetime.date.today().isoformat(), "peaks": peak_meta,
                "source": {**SOURCE, "commit": source_commit(db.root), "system": prov["system"]},
                "engine": eng, "provenance": prov["families"],
                "units": {"latency_s": "seconds", "bytes": "bytes (message_size elements x format width)"},
                "fit": {ln["name"]: {k: v for k, v in ln.items() if k not in ("family", "name")} for ln in lines}}
        write_grid_profile(out, columns, meta)
        top = out.parent.parent if out.parent.name == hardware else out.parent  # the folder of all the GPUs
        (top / "NOTICE.md").write_text(NOTICE.format(commit=source_commit(db.root)))
        for licence in (db.root / "LICENSE", db.root.parent / "LICENSE"):  # the licence travels with the tables
            if licence.is_file():
                shutil.copyfile(licence, top / "LICENSE")
                break
    return label, lines, len(columns["latency_s"])


def engines_of(db: AicDb, hardware: str, asked: str | None) -> list[str]:
    """The engines to import for one GPU: the one asked (`name[@version]`), else every engine with measured rows
    on it (one profile each: `cost.profile=auto` prices a pool from its own engine's measurements)."""
    if asked is not None:
        return [asked]
    _, counts = db.default_engine(db.system(hardware))
    return [e for e in ENGINES if counts.get(e, 0) > 0]


def out_path(out: str | None, hardware: str, engine: str, single: bool) -> Path:
    """Where one profile goes: `--out` itself when it names a .parquet file (one GPU, one engine), else
    `<folder>/<hardware>/<engine>.parquet` under `--out` (default calibrate/profiles/aic), `@` keeping an asked
    version in the name."""
    if out is not None and single:
        return Path(out)
    return (OUT_DIR if out is None else Path(out)) / hardware / f"{engine}.parquet"


def write_doc(table: str, command: str) -> None:
    text = DOC.read_text()
    block = f"{BEGIN}\n\n`{command}` (written {datetime.date.today().isoformat()}):\n\n{table}\n\n{END}"
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(text)


def main(argv: list[str] | None = None, analytical=None, prog: str = "python -m calibrate.import_aic") -> int:
    """The command; `analytical` (from the simulator's side, `python -m sim.validate.op_accuracy`) adds the
    analytical model's error on the same rows to the report: calibration itself never imports the simulator."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("systems", help="AIConfigurator's systems folder (<gpu>.yaml, data/<gpu>/...)")
    parser.add_argument("--hardware", required=True,
                        help=f"conf/hardware name ({', '.join(HARDWARE.values())}) or `all`")
    parser.add_argument("--engine", default=None, help="vllm, sglang or trtllm, optionally @version (default: every "
                        "engine that measured the GPU, one profile each, at its newest versions)")
    parser.add_argument("--out", default=None, help="a .parquet file (one GPU, one engine), or a folder (default "
                        "calibrate/profiles/aic) that gets <hardware>/<engine>.parquet")
    parser.add_argument("--no-write", action="store_true", help="write no profile (with --report: the table only)")
    parser.add_argument("--report", action="store_true", help="print each family's cross-validated error (with the "
                        "analytical model's beside it: python -m sim.validate.op_accuracy)")
    parser.add_argument("--write-doc", action="store_true", help="put the table into docs/cost-model.md")
    args = parser.parse_args(argv)
    with exit_on_input_error():
        db = AicDb(args.systems)
        names = list(HARDWARE.values()) if args.hardware == "all" else [args.hardware]
        if args.hardware != "all" and args.hardware not in HARDWARE.values():
            raise InputError("--hardware", "hardware", f"{args.hardware!r} is not in the database's map",
                             f"valid: {', '.join(HARDWARE.values())}, all")
        report = []
        for hw in names:
            one_file = args.out is not None and args.out.endswith(".parquet")
            if one_file and args.hardware == "all":
                raise InputError("--out", "out", "one file for every GPU", "give a folder, or one --hardware")
            # (one file and no --engine: the GPU's engine with the most measured rows, `AicDb.default_engine`)
            engines = [db.default_engine(db.system(hw))[0]] if one_file and args.engine is None else \
                engines_of(db, hw, args.engine)
            for engine in engines:
                out = None if args.no_write else out_path(args.out, hw, engine, single=one_file)
                label, lines, rows = import_one(db, hw, engine, out, analytical)
                report.append((hw, label, lines))
                where = f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB)" if out is not None else "not written"
                print(f"{hw}: {label}: {rows} rows; {where}", file=sys.stderr)
        table = markdown(report)
        print(table)
        if args.write_doc:
            engine = f" --engine {args.engine}" if args.engine else ""
            write_doc(table, f"{prog} <systems> --hardware {args.hardware}{engine} --report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
