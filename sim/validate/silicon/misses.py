"""What a partition beyond the TTFT limit shows in its own rows: the evidence a reviewer needs to tell a model error
from runs that were not what their columns record.

Three signs, each computed from the matrix's records of the partition (nothing about any partition is written in):

* `decode_off`: rows whose simulated TPOT misses the measured one by more than `DECODE_OFF_PCT` (the fits leave them
  out for the same reason: a decode step off by more than half says the run was not what its columns record).
* `queued`: rows whose measured TTFT exceeds `QUEUE_PREFILLS` prefills of their mean prompt alone (rows.csv
  `sim_prefill_alone_s`) and twice the simulated TTFT: the server held requests back (KV cache, batch limit) far
  longer than the engine's defaults let the simulated one (rounds that queue in both, SGLang's bursts, are not it).
* `falls_with_clients`: within one deployment (tp, deployment, engine version), a measured TTFT that is more than
  `FALL_PCT` below the one at fewer clients. More clients can only add queueing, so such pairs are run-to-run
  noise of the size the partition's median is made of.

`diagnose(records, partitions, limit_pct)` gives one record per partition; `lines(diagnoses)` the text the targets print.
"""
from __future__ import annotations

import math

from sim.validate.silicon.fit_terms import DECODE_OFF_PCT, decode_is_off
from sim.validate.silicon.metrics import partition, summarize

QUEUE_PREFILLS = 10.0   # measured TTFT beyond this many prefills of the prompt alone: the server queued requests
FALL_PCT = 10.0         # a measured TTFT this much below the one at fewer clients (same deployment): noise


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _falls(rows: list[dict]) -> tuple[list[dict], set[str]]:
    """Pairs of rows of one deployment whose measured TTFT falls as the clients rise (each row against the
    highest TTFT measured at fewer clients), and the ids of the rows that fell."""
    by_deployment: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (str(r.get("tp")), str(r.get("deployment")), str(r.get("engine_version")), str(r.get("preset")))
        by_deployment.setdefault(key, []).append(r)
    out, fell = [], set()
    for group in by_deployment.values():
        group = sorted(group, key=lambda r: (int(_num(r["clients"])), _num(r["measured_ttft_s"])))
        peak = None
        for r in group:
            ttft = _num(r["measured_ttft_s"])
            if peak is not None and int(_num(r["clients"])) > int(_num(peak["clients"])) \
                    and ttft < _num(peak["measured_ttft_s"]) * (1 - FALL_PCT / 100):
                out.append({"clients": [int(_num(peak["clients"])), int(_num(r["clients"]))],
                            "measured_ttft_s": [_num(peak["measured_ttft_s"]), ttft]})
                fell.add(r["id"])
            if peak is None or ttft > _num(peak["measured_ttft_s"]):
                peak = r
    return _distinct(sorted(out, key=lambda p: (p["clients"], p["measured_ttft_s"]))), fell


def _distinct(items: list[dict]) -> list[dict]:
    """`items` without repeats (the table records some runs twice: twin rows give the same evidence)."""
    out: list[dict] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def diagnose(records: list[dict], partitions: list[str], limit_pct: float) -> list[dict]:
    """Per partition (in the order given), its figures, the three signs of the module docstring, and how many of
    its rows beyond `limit_pct` (TTFT) show one: where that is fewer than half, the signs do not explain the
    partition's median and the rest is the model's error."""
    simulated = [r for r in records if r.get("status") == "simulated"]
    out = []
    for name in partitions:
        rows = sorted((r for r in simulated if partition(r) == name), key=lambda r: (int(_num(r["clients"])), r["id"]))
        s = summarize(rows)
        off = [r for r in rows if decode_is_off(r)]
        queued = [r for r in rows if _num(r["measured_ttft_s"]) > max(QUEUE_PREFILLS * _num(r["sim_prefill_alone_s"]),
                                                                         2 * _num(r["sim_ttft_p50_s"]))]
        falls, fell = _falls(rows)
        beyond = [r for r in rows if abs(_num(r["ttft_error_pct"])) > limit_pct]
        signed = {r["id"] for r in off + queued} | fell
        out.append({
            "partition": name, "rows": len(rows), "ttft_median_abs_pct": round(s["ttft"]["median_abs_pct"], 1),
            "ttft_bias_pct": round(s["ttft"]["bias_pct"], 1),
            "tpot_median_abs_pct": round(s["tpot"]["median_abs_pct"], 1),
            "beyond_limit": len(beyond), "beyond_limit_with_a_sign": sum(r["id"] in signed for r in beyond),
            "decode_off": len(off),
            "queued": _distinct([{"clients": int(_num(r["clients"])),
                                  "measured_ttft_s": round(_num(r["measured_ttft_s"]), 3),
                                  "simulated_ttft_s": round(_num(r["sim_ttft_p50_s"]), 3),
                                  "prefills": round(_num(r["measured_ttft_s"]) / _num(r["sim_prefill_alone_s"]), 1)}
                                 for r in queued]),
            "falls_with_clients": falls})
    return out


def lines(diagnoses: list[dict]) -> list[str]:
    """One line per partition: its figures, then the signs it shows."""
    out = []
    for d in diagnoses:
        signs = []
        if d["decode_off"]:
            signs.append(f"{d['decode_off']} of its rows' simulated TPOT off by more than {DECODE_OFF_PCT:g}%")
        if d["queued"]:
            q = d["queued"]
            signs.append(f"the server queued beyond {QUEUE_PREFILLS:g} prefills, twice the simulated TTFT ("
                         + ", ".join(f"{x['clients']} clients: {x['measured_ttft_s']:g} s measured, "
                                     f"{x['simulated_ttft_s']:g} s simulated" for x in q[:3])
                         + (", ..." if len(q) > 3 else "") + ")")
        if falls := d["falls_with_clients"]:
            signs.append("measured TTFT falls as clients rise (" + ", ".join(
                f"{f['measured_ttft_s'][0]:.3g} s at {f['clients'][0]} -> {f['measured_ttft_s'][1]:.3g} s at "
                f"{f['clients'][1]}" for f in falls[:3]) + (", ..." if len(falls) > 3 else "") + ")")
        n, k = d["beyond_limit"], d["beyond_limit_with_a_sign"]
        verdict = (f"{k} of its {n} rows beyond the limit show a sign"
                   + ("" if 2 * k >= n else ": the rest is the model's error"))
        out.append(f"    {d['partition']}: {d['rows']} rows, TTFT {d['ttft_median_abs_pct']:.1f}% "
                   f"(bias {d['ttft_bias_pct']:+.1f}), TPOT {d['tpot_median_abs_pct']:.1f}%; {verdict}"
                   + ("; " + "; ".join(signs) if signs else ""))
    return out
