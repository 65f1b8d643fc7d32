"""Hopper efficiency forms fitted to published kernel tables (the fits; `calibrate.hopper_report` runs them).

Reads the small tables shipped in `calibrate/reference_kernels/` (copied from ../shared/reference-kernels; sources
and licences in its README) and fits the forms of `calibrate.efficiency` on part of each table (every third row by
size held out, unless stated). `python -m calibrate.hopper_report [--write]` reports the held-out errors and
writes conf/cost/generations/hopper.yaml. No serving-level number is read.

Conventions: the roofline peaks are the conf/hardware datasheet's of the GPU the table was measured on (h800,
h100_sxm, h100_pcie); H800 runs throttled to ~1600 MHz under load (reference README), so fitted compute
efficiencies include that throttling, and are applied to H100/H200 as they are (assumption: they throttle alike
under sustained tensor-core load).
"""
from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from calibrate import ops
from inferplan.specs import load_hardware
from calibrate.efficiency import AllReduceForm, GemmForm, PrefillForm, RooflineForm

HERE = Path(__file__).resolve().parent
TABLES = HERE / "reference_kernels"
CUSTOM_AR_MAX_BYTES = 8 * 1024 * 1024   # vLLM / SGLang custom all-reduce default max_size (8 MiB)
AR_ELEM_BYTES = 4.0                     # PR 2904 sizes are float32 elements (reference README; assumption)


def read(name: str) -> list[dict]:
    with open(TABLES / name, newline="") as f:
        return list(csv.DictReader(f))


def nelder_mead(f, x0, iters: int = 3000, step: float = 0.2):
    """Minimise f over R^n (log-parameters) with the Nelder-Mead simplex; deterministic."""
    n = len(x0)
    pts = [np.array(x0, float)] + [np.array(x0, float) + step * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2 * (c - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0] + 0.5 * (p - pts[0]) for p in pts]
                vals = [f(p) for p in pts]
        if max(vals) - min(vals) < 1e-12:
            break
    return pts[int(np.argmin(vals))]


FOLDS = 3
FOLD = 1   # which third is held out: 1 (the shipped fit), or 2, 0 (`calibrate.hopper_report`'s 3-fold errors)


def split(rows: list, key, fold: int | None = None) -> tuple[list[int], list[int]]:
    """(train, held-out) indices: rows sorted by `key`, every third held out (position j in 1..n-2 with
    j % 3 == fold, default `FOLD`: from the second); the two ends are always fitted."""
    fold = FOLD if fold is None else fold
    order = sorted(range(len(rows)), key=lambda i: key(rows[i]))
    held = [order[j] for j in range(1, len(order) - 1) if j % FOLDS == fold]
    return [i for i in order if i not in held], sorted(held)


def mape(pred: list[float], meas: list[float]) -> float:
    return float(np.mean([abs(p / m - 1.0) * 100.0 for p, m in zip(pred, meas)])) if meas else float("nan")


def _fit(loss_rows, predict, x0):
    """Fit log-parameters minimising squared log error of predict(theta, row) over rows."""
    def f(th):
        return sum(math.log(predict(th, r) / r["t"]) ** 2 for r in loss_rows)
    return nelder_mead(f, x0)


# -- tables -> rows (measured seconds and our work formulas) -----------------------------------------------------
def gemm_rows(dtype: str) -> list[dict]:
    out = []
    if dtype == "fp8":
        for i, r in enumerate(read("fp8_gemm_dense_h800.csv")):
            if r["table_version"] == "v3_1520tflops":
                out.append(("fp8_gemm_dense_h800.csv", i + 1, int(r["m"]), int(r["n"]), int(r["k"]), float(r["tflops"])))
        name = "fp8_gemm_m8192_n8192_h800.csv"
        for i, r in enumerate(read(name)):
            if r["table_version"].startswith("v2"):
                out.append((name, i + 1, int(r["m"]), int(r["n"]), int(r["k"]), float(r["tflops"])))
        fmt = "fp8_block"
    else:
        name = "fp16_gemm_m8192_n8192_h800.csv"
        out = [(name, i + 1, int(r["m"]), int(r["n"]), int(r["k"]), float(r["tflops"])) for i, r in enumerate(read(name))]
        fmt = "bf16"
    rows = []
    for src, row, m, n, k, tf in out:
        flops, bytes_ = ops.gemm_work(m, n, k, fmt)
        rows.append({"src": src, "row": row, "m": m, "n": n, "k": k, "flops": flops, "bytes": bytes_,
                     "t": flops / (tf * 1e12), "groups": 1.0, "layout": ""})
    return rows


def grouped_rows(layout: str) -> list[dict]:
    name = f"fp8_grouped_gemm_{layout}_h800.csv"
    rows = []
    for i, r in enumerate(read(name)):
        if layout == "contiguous" and r["table_version"] != "v3_1520tflops":
            continue
        if layout == "masked" and r["table_version"] != "v3_1520tflops":
            continue
        g, m, n, k = int(r["num_groups"]), int(r["m_per_group"]), int(r["n"]), int(r["k"])
        flops, bytes_ = ops.moe_gemm_work(g * m, g, n, k, "fp8_block")
        rows.append({"src": name, "row": i + 1, "m": m, "n": n, "k": k, "flops": flops, "bytes": bytes_,
                     "t": flops / (float(r["tflops"]) * 1e12), "groups": float(g), "layout": layout})
    return rows


# -- fits --------------------------------------------------------------------------------------------------------
def fit_gemm(h800, h100) -> dict:
    peak8, peak16, bw = h800.peak_for("fp8"), h800.peak_for("bf16"), h800.mem_bandwidth_bytes_per_s
    r8 = gemm_rows("fp8")
    tr8, ho8 = split(r8, lambda r: r["flops"])

    def form8(th):
        return GemmForm(1 / (1 + math.exp(-th[0])), math.exp(th[1]), 1 / (1 + math.exp(-th[2])), math.exp(th[3]))

    th8 = _fit([r8[i] for i in tr8], lambda th, r: form8(th).time_s(r["m"], r["n"], r["k"], r["flops"], r["bytes"],
                                                                     peak8, bw), [0.8, math.log(128), 0.8, math.log(4e-6)])
    f8 = form8(th8)
    r16 = gemm_rows("bf16")
    tr16, ho16 = split(r16, lambda r: r["flops"])

    def form16(th):
        return replace(f8, compute_eff=1 / (1 + math.exp(-th[0])), k_overhead=math.exp(th[1]))

    th16 = _fit([r16[i] for i in tr16], lambda th, r: form16(th).time_s(r["m"], r["n"], r["k"], r["flops"], r["bytes"],
                                                                        peak16, bw), [0.8, math.log(128)])
    f16 = form16(th16)
    grouped = {}
    layouts = {}
    for layout in ("contiguous", "masked"):
        rg = grouped_rows(layout)
        trg, hog = split(rg, lambda r: (r["m"], r["n"]))

        def formg(th, layout=layout):
            return replace(f8, layout_eff=((layout, math.exp(th[0])),))

        thg = _fit([rg[i] for i in trg], lambda th, r: formg(th).time_s(r["m"], r["n"], r["k"], r["flops"], r["bytes"],
                                                                        peak8, bw, r["groups"], r["layout"]), [0.0])
        layouts[layout] = math.exp(thg[0])
        grouped[layout] = (rg, trg, hog)
    f8 = replace(f8, layout_eff=tuple(sorted(layouts.items())))
    wo = fit_weight_only(h100, f8, f16)  # (the bf16 form's memory efficiency comes from there)
    return {"fp8": (f8, r8, tr8, ho8, peak8), "bf16": (wo["bf16"][0], r16, tr16, ho16, peak16), "grouped": grouped,
            "bw": bw, "weight_only": wo}


# The memory-bound GEMMs of one weight shape (n = k = 8192) at m = 1, 2, 4 on an H100: cuBLAS in FP16 (torch) and
# Marlin W4A16, the kernel vLLM and SGLang run for GPTQ/AWQ 4-bit weights (vLLM may pick Machete on Hopper; no
# table times it: assumption, no faster at m <= 4). The three rows take the same time, so they fix one memory
# efficiency per format and nothing else: m = 1 and 4 fitted, m = 2 held out (a stated split, as the paged decode).
WEIGHT_ONLY_COLUMNS = (("bf16", "torch_w16a16_tflops"), ("int4_wo", "marlin_w4a16_tflops"))


def weight_only_rows(fmt: str) -> list[dict]:
    name = "h100_dense_n8192_k8192_humming_pr2.csv"
    col = dict(WEIGHT_ONLY_COLUMNS)[fmt]
    rows = []
    for i, r in enumerate(read(name)):
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        flops, bytes_ = ops.gemm_work(m, n, k, fmt)
        rows.append({"src": name, "row": i + 1, "m": m, "n": n, "k": k, "flops": flops, "bytes": bytes_,
                     "t": flops / (float(r[col]) * 1e12), "groups": 1.0, "layout": "", "column": col})
    return rows


def fit_weight_only(h100, f8: GemmForm, f16: GemmForm) -> dict:
    """Per format, (form, rows, train, held out, peak, bandwidth): the bf16 form's memory efficiency from cuBLAS,
    and an `int4_wo` form (the bf16 one with Marlin's memory efficiency); the launch stays the fp8 fit's (one
    weight shape cannot separate a launch from a bandwidth)."""
    peak, bw = h100.peak_for("bf16"), h100.mem_bandwidth_bytes_per_s
    out = {}
    for fmt, _ in WEIGHT_ONLY_COLUMNS:
        rows = weight_only_rows(fmt)
        order = sorted(range(len(rows)), key=lambda i: rows[i]["m"])
        tr, ho = [order[0], order[-1]], order[1:-1]

        def form(th):
            return replace(f16, memory_eff=1 / (1 + math.exp(-th[0])), launch_s=f8.launch_s)

        th = _fit([rows[i] for i in tr], lambda th, r: form(th).time_s(r["m"], r["n"], r["k"], r["flops"], r["bytes"],
                                                                      peak, bw), [0.5])
        out[fmt] = (form(th), rows, tr, ho, peak, bw)
    return out


def fit_attention(h100_pcie, h100) -> dict:
    name = "fa3_fp8_fwd_h100_pcie_pr1075.csv"
    rows = []
    for i, r in enumerate(read(name)):
        if r["implementation"] != "flash3_fp8":
            continue
        b, s, d = int(r["batch"]), int(r["seqlen"]), int(r["headdim"])
        t = float(r["time_ms"]) * 1e-3
        flops = float(r["tflops"]) * 1e12 * t
        heads = flops / (4.0 * b * s * s * d)
        rows.append({"src": name, "row": i + 1, "s": s, "flops": flops, "bytes": 4.0 * b * s * heads * d, "t": t})
    tr, ho = split(rows, lambda r: r["s"])
    peak8, bw = h100_pcie.peak_for("fp8"), h100_pcie.mem_bandwidth_bytes_per_s

    def form(th):
        return PrefillForm(1 / (1 + math.exp(-th[0])), math.exp(th[1]), math.exp(th[2]))

    th = _fit([rows[i] for i in tr], lambda th, r: form(th).time_s(r["flops"], r["bytes"], r["s"], peak8, bw),
              [0.5, math.log(256), math.log(5e-6)])
    f8 = form(th)
    t2 = read("fa3_paper_table2_pipelining_ablation_h100.csv")[0]  # FlashAttention-3 (full)
    s2 = float(t2["seqlen"])
    e16 = float(t2["tflops"]) * 1e12 / h100.peak_for("bf16") * (s2 + f8.seq_half) / s2
    f16 = replace(f8, compute_eff=e16)
    # decode (GQA, paged, bf16 KV): issue 1572, rows by KV length; the middle one held out
    name = "fa3_paged_decode_mha_h100_issue1572.csv"
    drows = []
    for i, r in enumerate(read(name)):
        b, c, h, kv, d = int(r["batch"]), int(r["seqlen_kv"]), int(r["nheads_q"]), int(r["nheads_kv"]), int(r["headdim"])
        flops, bytes_ = ops.attn_decode_work(b, b * c, h, kv, d, 2.0)
        drows.append({"src": name, "row": i + 1, "c": c, "flops": flops, "bytes": bytes_, "t": float(r["time_us"]) * 1e-6})
    dtr, dho = [0, 2], [1]
    bw100 = h100.mem_bandwidth_bytes_per_s

    def dform(th):
        return RooflineForm(e16, 1 / (1 + math.exp(-th[0])), math.exp(th[1]))

    dth = _fit([drows[i] for i in dtr], lambda th, r: dform(th).time_s(r["flops"], r["bytes"], h100.peak_for("bf16"),
                                                                       bw100), [1.0, math.log(5e-6)])
    fd = dform(dth)
    mla = read("headline_figures_h800.csv")
    mem = next(r for r in mla if r["source_commit"] == "414a2f3eedeb" and r["metric"] == "peak_mem_bw")
    comp = next(r for r in mla if r["source_commit"] == "c2067be3eaa0" and r["metric"] == "peak_tflops")
    h800 = load_hardware("h800")
    fm = RooflineForm(float(comp["value"]) * 1e12 / h800.peak_for("bf16"),
                      float(mem["value"]) * 1e9 / h800.mem_bandwidth_bytes_per_s, fd.launch_s)
    return {"prefill8": (f8, rows, tr, ho, peak8, bw), "prefill": f16, "prefill_row": 1, "decode": (fd, drows, dtr, dho),
            "mla": fm, "mla_rows": (mla.index(mem) + 1, mla.index(comp) + 1)}


def ar_rows() -> list[dict]:
    name = "allreduce_custom_h100_sglang_pr2904.csv"
    return [{"src": name, "row": i + 1, "p": int(r["tp_size"]), "bytes": float(r["data_size_elements"]) * AR_ELEM_BYTES,
             "t": float(r["latency_ms"]) * 1e-3}
            for i, r in enumerate(read(name)) if r["implementation"].startswith("sglang")]


def fit_allreduce() -> dict:
    rows = ar_rows()
    tr, ho = [], []
    for p in (2, 4, 8):
        idx = [i for i, r in enumerate(rows) if r["p"] == p]
        a, b = split([rows[i] for i in idx], lambda r: r["bytes"])
        tr += [idx[j] for j in a]
        ho += [idx[j] for j in b]

    def form(th):
        return AllReduceForm(math.exp(th[0]), math.exp(th[1]), math.exp(th[2]), CUSTOM_AR_MAX_BYTES)

    th = _fit([rows[i] for i in tr], lambda th, r: form(th).time_s(r["bytes"], r["p"]),
              [math.log(3e-6), math.log(2e-7), math.log(2e11)])
    return {"form": form(th), "rows": rows, "train": sorted(tr), "held": sorted(ho)}


def fit_deepep(h800) -> dict:
    normal = [r for r in read("normal_dispatch_combine_h800.csv") if r["table_version"] == "v3_corrected"]
    intra = [r for r in normal if r["type"] == "intranode"]
    inter = [r for r in normal if r["type"] == "internode"]
    bw = lambda r: (float(r["dispatch_bottleneck_bw_gbps"]) + float(r["combine_bottleneck_bw_gbps"])) / 2 * 1e9
    intra_eff = float(np.mean([bw(r) for r in intra])) / h800.intra_node_bandwidth_bytes_per_s
    inter_train, inter_held = inter[:2], inter[2:]
    inter_eff = float(np.mean([bw(r) for r in inter_train])) / h800.inter_node_bandwidth_bytes_per_s
    held_err = mape([inter_eff * h800.inter_node_bandwidth_bytes_per_s] * len(inter_held), [bw(r) for r in inter_held])
    ll = [r for r in read("low_latency_dispatch_combine_h800.csv") if r["table_version"] == "v1_initial"]
    pts = []
    for r in ll:  # 128 tokens x top-8 x hidden 7168 per rank; dispatch FP8 (+ 1/128 scales), combine BF16
        pts.append({"bytes": 128 * 8 * 7168 * (1 + 4 / 128), "t": float(r["dispatch_latency_us"]) * 1e-6,
                    "ep": int(r["dispatch_num_ep_ranks"])})
        pts.append({"bytes": 128 * 8 * 7168 * 2.0, "t": float(r["combine_latency_us"]) * 1e-6,
                    "ep": int(r["combine_num_ep_ranks"])})
    tr = [i for i, p in enumerate(pts) if p["ep"] in (8, 32, 128)]
    ho = [i for i, p in enumerate(pts) if p["ep"] not in (8, 32, 128)]
    th = _fit([pts[i] for i in tr], lambda th, r: math.exp(th[0]) + r["bytes"] / math.exp(th[1]),
              [math.log(1e-5), math.log(4e10)])
    lat, bps = math.exp(th[0]), math.exp(th[1])
    ll_err = mape([lat + pts[i]["bytes"] / bps for i in ho], [pts[i]["t"] for i in ho])
    ll_before = mape([pts[i]["bytes"] / (h800.inter_node_bandwidth_bytes_per_s * 0.75) + h800.inter_node_latency_s
                      for i in ho], [pts[i]["t"] for i in ho])
    normal_before = mape([0.75 * h800.inter_node_bandwidth_bytes_per_s] * len(inter_held), [bw(r) for r in inter_held])
    return {"intra_eff": intra_eff, "inter_eff": inter_eff, "ll_latency_s": lat, "ll_bytes_per_s": bps,
            "normal_held": (normal_before, held_err, len(inter_held)), "ll_held": (ll_before, ll_err, len(ho))}
