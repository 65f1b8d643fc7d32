"""The measured rows: a table in the columns of AIConfigurator's `silicon_sample.csv` (closed-loop concurrency
sweeps from InferenceX and from AIConfigurator's own collection), read into typed `SiliconRow`s with units
converted once (ms -> s).

The default is the copy shipped in `sim/validate/data/` (its NOTICE names the source); `csv=<path>` reads any
table with these columns. Only the columns the matrix reads are required (`silicon_data_source`, where the row was
measured, is read when present: it picks the row's benchmark client, `clients.py`, and its
`silicon_concurrency=N` is the client's concurrency, `client_concurrency`); the others are ignored.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from inferplan.errors import InputError

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
CSV_PATH = DATA_DIR / "silicon-serving-runs.csv"   # shipped copy (see silicon-serving-runs.NOTICE.md)
REQUIRED = ("id", "backend", "backend_version", "model_path", "system", "precision", "mode", "isl", "osl",
            "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size", "attention_dp_size",
            "moe_tp_size", "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms")
DISAGG_WORKERS = ("prefill_num_workers", "decode_num_workers")
# A disaggregated row's workers: each phase's tp, pp, attention dp, moe tp, moe ep (read when present).
SPLIT = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
FIX_MS = "give the measured value in ms"
SOURCE_CONCURRENCY = re.compile(r"(?:^|[;\s])silicon_concurrency=(\d+)")


@dataclass(frozen=True)
class SiliconRow:
    """One measured run: a deployment, a closed loop of `clients` at fixed lengths, and its measured TTFT and TPOT
    (s; the file's statistic is most likely the median, see the data README). Missing integers are None."""

    id: str
    engine: str                     # vllm | sglang | trtllm (the `backend` column)
    engine_version: str             # "" where not recorded
    model_path: str                 # Hugging Face id
    system: str                     # h100_sxm, h200_sxm, b200_sxm, gb200, ...
    precision: str                  # fp8, fp4, int4, bf16, "" (not recorded)
    gemm_quant_mode: str
    moe_quant_mode: str
    mode: str                       # agg | disagg
    isl_tokens: int
    osl_tokens: int
    clients: int | None             # the client's --max-concurrency (`client_concurrency`: the source's, else
                                    # `batch_size`)
    tp: int | None
    pp: int | None
    attention_dp: int | None
    moe_tp: int | None
    moe_ep: int | None
    disagg_workers: tuple[int | None, int | None]  # (prefill, decode) worker counts, disagg rows only
    measured_ttft_s: float
    measured_tpot_s: float
    source: str = ""                # `silicon_data_source`: where the row was measured ("" where not given)
    batch_size: int | None = None   # the `batch_size` column as written (per attention-DP rank in some rows)
    # (prefill, decode) workers' (tp, pp, attention dp, moe tp, moe ep), disagg rows only (`prefill_tp_size`, ...)
    disagg_split: tuple[tuple[int | None, ...], tuple[int | None, ...]] = ((), ())

    @property
    def shape(self) -> str:
        return f"{self.isl_tokens}x{self.osl_tokens}"

    @property
    def model(self) -> str:
        """The model's short name (the Hugging Face id without its organisation)."""
        return self.model_path.rstrip("/").split("/")[-1]


def _int(path: Path, line: int, rec: dict, key: str) -> int | None:
    v = (rec.get(key) or "").strip()
    if not v:
        return None
    try:
        f = float(v)
    except ValueError:
        raise InputError(path, f"{key} (line {line})", f"is not a number: {v!r}", "give a whole number") from None
    if not f.is_integer():
        raise InputError(path, f"{key} (line {line})", f"is not a whole number: {v!r}", "give a whole number")
    return int(f)


def _ms(path: Path, line: int, rec: dict, key: str) -> float:
    v = (rec.get(key) or "").strip()
    try:
        f = float(v)
    except ValueError:
        raise InputError(path, f"{key} (line {line})", f"is not a number: {v!r}", FIX_MS) from None
    if not (math.isfinite(f) and f > 0):
        raise InputError(path, f"{key} (line {line})", f"must be a time > 0 ms, got {v!r}", FIX_MS)
    return f / 1e3


def client_concurrency(source: str, batch_size: int | None) -> int | None:
    """The measured client's concurrency: the `silicon_concurrency=N` its data source records, else `batch_size`.

    They differ on the rows written with an `attention_dp_size` N > 1: there the curation divided the concurrency by
    it into `batch_size` (`silicon_concurrency` = `batch_size` x `attention_dp_size` on every such row, and the row id
    names the source's, `..._c64_tp4_ep4_...`; `support._read_as_named` for what those rows ran), and on the
    aggregated rows served through Dynamo, where `batch_size` is one worker's (`support._replicas`). The source's
    number is what the client sent, so it wins."""
    found = SOURCE_CONCURRENCY.search(source)
    return int(found.group(1)) if found else batch_size


def parse_row(path: Path, line: int, rec: dict) -> SiliconRow:
    isl, osl = _int(path, line, rec, "isl"), _int(path, line, rec, "osl")
    for key, v in (("isl", isl), ("osl", osl)):
        if v is None or v < 1:
            raise InputError(path, f"{key} (line {line})", f"must be a length >= 1 token, got {rec.get(key)!r}",
                             "give the fixed input/output length")
    s = {k: (rec.get(k) or "").strip() for k in REQUIRED}
    source = (rec.get("silicon_data_source") or "").strip()
    batch_size = _int(path, line, rec, "batch_size")
    return SiliconRow(
        id=s["id"], engine=s["backend"].lower(), engine_version=s["backend_version"], model_path=s["model_path"],
        system=s["system"].lower(), precision=s["precision"].lower(), gemm_quant_mode=s["gemm_quant_mode"].lower(),
        moe_quant_mode=s["moe_quant_mode"].lower(), mode=s["mode"].lower(), isl_tokens=isl, osl_tokens=osl,
        clients=client_concurrency(source, batch_size), tp=_int(path, line, rec, "tp_size"),
        pp=_int(path, line, rec, "pp_size"), attention_dp=_int(path, line, rec, "attention_dp_size"),
        moe_tp=_int(path, line, rec, "moe_tp_size"), moe_ep=_int(path, line, rec, "moe_ep_size"),
        disagg_workers=(_int(path, line, rec, DISAGG_WORKERS[0]), _int(path, line, rec, DISAGG_WORKERS[1])),
        measured_ttft_s=_ms(path, line, rec, "silicon_ttft_ms"),
        measured_tpot_s=_ms(path, line, rec, "silicon_tpot_ms"),
        source=source, batch_size=batch_size,
        disagg_split=tuple(tuple(_int(path, line, rec, f"{phase}_{key}") for key in SPLIT)  # type: ignore[arg-type]
                           for phase in ("prefill", "decode")))


def read_table(path: Path = CSV_PATH) -> list[SiliconRow]:
    """Every row of the table, in file order; a missing file, column or bad value is an `InputError`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "path", "the measured-runs table is missing",
                         f"give csv=<a table in the columns of {CSV_PATH.name}> (the shipped copy is {CSV_PATH})")
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(path, missing[0], "column missing", f"give a table with the columns {', '.join(REQUIRED)}")
        rows = [parse_row(path, i + 2, rec) for i, rec in enumerate(reader)]
    if not rows:
        raise InputError(path, "rows", "no rows", "give the measured-runs table")
    seen: set[str] = set()
    for r in rows:
        if r.id in seen:
            raise InputError(path, "id", f"{r.id!r} names two rows", "give each row a unique id")
        seen.add(r.id)
    return rows
