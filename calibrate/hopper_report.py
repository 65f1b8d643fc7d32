"""`python -m calibrate.hopper_report [--write] [--vidur <folder>]`: held-out errors of the Hopper forms, before/after.

Runs the fits of `calibrate.hopper_fit` and reports, per op and GPU, the mean absolute percentage error on the
held-out rows of each table, 3-fold (`evaluate_kfold`: every interior row held out once; n counts them all) for the scalar defaults of conf/cost/roofline.yaml ("before") and the fitted forms
("after"); with `--vidur` also against Vidur-format tables (`calibrate.crosscheck`). `--write` writes the fitted
parameters, each citing its table and rows, to conf/cost/generations/hopper.yaml and the report into
docs/cost-model.md (between the hopper-fit markers).
"""
from __future__ import annotations

import argparse
import sys

import yaml

from inferplan.config.yaml_files import read_yaml_mapping
from calibrate import ops
from calibrate.hopper_fit import CUSTOM_AR_MAX_BYTES, HERE, fit_allreduce, fit_attention, fit_deepep, fit_gemm, mape
from inferplan.specs import CONF_DIR, load_hardware

OUT_YAML = CONF_DIR / "cost" / "generations" / "hopper.yaml"
DOC = HERE.parent / "docs" / "cost-model.md"
BEGIN, END = "<!-- hopper-fit:begin -->", "<!-- hopper-fit:end -->"


# -- report ------------------------------------------------------------------------------------------------------
def _scalar(cost: dict, op: str, flops: float, bytes_: float, peak: float, bw: float) -> float:
    return float(cost["launch_s"]) + max(flops / peak, bytes_ / bw) / float(cost["efficiency"][op])


def evaluate() -> tuple[dict, list[dict]]:
    """(fitted parameters for the YAML, report lines: op, gpu, table, n held out, before, after MAPE)."""
    cost = read_yaml_mapping(CONF_DIR / "cost" / "roofline.yaml")
    h800, h100, pcie = load_hardware("h800"), load_hardware("h100_sxm"), load_hardware("h100_pcie")
    g, a, ar, ep = fit_gemm(h800, h100), fit_attention(pcie, h100), fit_allreduce(), fit_deepep(h800)
    lines = []
    bw = g["bw"]
    for fmt in ("fp8", "bf16"):
        form, rows, tr, ho, peak = g[fmt]
        for src in sorted({rows[i]["src"] for i in ho}):
            hs = [i for i in ho if rows[i]["src"] == src]
            meas = [rows[i]["t"] for i in hs]
            lines.append({"op": f"gemm ({fmt})", "gpu": "H800", "table": src, "n": len(hs),
                          "before": mape([_scalar(cost, "gemm", rows[i]["flops"], rows[i]["bytes"], peak, bw) for i in hs], meas),
                          "after": mape([form.time_s(rows[i]["m"], rows[i]["n"], rows[i]["k"], rows[i]["flops"],
                                                     rows[i]["bytes"], peak, bw) for i in hs], meas)})
    for fmt, (form, rows, tr, ho, peak, wbw) in g["weight_only"].items():
        meas = [rows[i]["t"] for i in ho]
        name = "bf16, cuBLAS, m <= 4" if fmt == "bf16" else "int4_wo, Marlin W4A16, m <= 4"
        lines.append({"op": f"gemm ({name})", "gpu": "H100", "table": rows[0]["src"], "n": len(ho),
                      "before": mape([_scalar(cost, "gemm", rows[i]["flops"], rows[i]["bytes"], peak, wbw) for i in ho], meas),
                      "after": mape([form.time_s(rows[i]["m"], rows[i]["n"], rows[i]["k"], rows[i]["flops"],
                                                 rows[i]["bytes"], peak, wbw) for i in ho], meas)})
    f8 = g["fp8"][0]
    for layout, (rows, tr, ho) in g["grouped"].items():
        meas = [rows[i]["t"] for i in ho]
        lines.append({"op": f"moe_gemm ({layout}, fp8)", "gpu": "H800", "table": rows[0]["src"], "n": len(ho),
                      "before": mape([_scalar(cost, "moe_gemm", rows[i]["flops"], rows[i]["bytes"], g["fp8"][4], bw)
                                      for i in ho], meas),
                      "after": mape([f8.time_s(rows[i]["m"], rows[i]["n"], rows[i]["k"], rows[i]["flops"], rows[i]["bytes"],
                                               g["fp8"][4], bw, rows[i]["groups"], layout) for i in ho], meas)})
    f, rows, tr, ho, peak, pbw = a["prefill8"]
    meas = [rows[i]["t"] for i in ho]
    lines.append({"op": "attn_prefill (fp8)", "gpu": "H100 PCIe", "table": rows[0]["src"], "n": len(ho),
                  "before": mape([_scalar(cost, "attn_prefill", rows[i]["flops"], rows[i]["bytes"], peak, pbw) for i in ho], meas),
                  "after": mape([f.time_s(rows[i]["flops"], rows[i]["bytes"], rows[i]["s"], peak, pbw) for i in ho], meas)})
    fd, rows, tr, ho = a["decode"]
    meas = [rows[i]["t"] for i in ho]
    lines.append({"op": "attn_decode (GQA, bf16 KV)", "gpu": "H100", "table": rows[0]["src"], "n": len(ho),
                  "before": mape([_scalar(cost, "attn_decode", rows[i]["flops"], rows[i]["bytes"], h100.peak_for("bf16"),
                                          h100.mem_bandwidth_bytes_per_s) for i in ho], meas),
                  "after": mape([fd.time_s(rows[i]["flops"], rows[i]["bytes"], h100.peak_for("bf16"),
                                           h100.mem_bandwidth_bytes_per_s) for i in ho], meas)})
    rows = ar["rows"]
    link = h100.intra_node_bandwidth_bytes_per_s * float(cost["link_efficiency"])
    for p in (2, 4, 8):
        hs = [i for i in ar["held"] if rows[i]["p"] == p]
        meas = [rows[i]["t"] for i in hs]
        lines.append({"op": f"all-reduce TP{p} (custom, 2 KiB-4 MiB)", "gpu": "H100", "table": rows[0]["src"], "n": len(hs),
                      "before": mape([ops.allreduce_s(rows[i]["bytes"], p, link, h100.intra_node_latency_s) for i in hs], meas),
                      "after": mape([ar["form"].time_s(rows[i]["bytes"], p) for i in hs], meas),
                      "worst_after": max(abs(ar["form"].time_s(rows[i]["bytes"], p) / rows[i]["t"] - 1) * 100 for i in hs),
                      "ar_rows": [(rows[i]["bytes"], ar["form"].time_s(rows[i]["bytes"], p), rows[i]["t"]) for i in hs]})
    nb, na, nn = ep["normal_held"]
    lines.append({"op": "EP all-to-all, DeepEP normal (internode bw)", "gpu": "H800",
                  "table": "normal_dispatch_combine_h800.csv", "n": nn, "before": nb, "after": na})
    lb, la, ln = ep["ll_held"]
    lines.append({"op": "EP all-to-all, DeepEP low-latency", "gpu": "H800",
                  "table": "low_latency_dispatch_combine_h800.csv", "n": ln, "before": lb, "after": la})
    params = _params_yaml(g, a, ar, ep)
    return params, lines


FIXED_SPLITS = ("attn_decode", "EP all-to-all", "gemm (bf16, cuBLAS", "gemm (int4_wo")  # tables too small for
# thirds: their stated split, once


def evaluate_kfold() -> tuple[dict, list[dict]]:
    """`evaluate` over the 3 folds of `hopper_fit.split` (each interior row held out once, by a fit on the other
    two thirds and the ends): per line, n = rows held out over all folds, MAPE over all of them, worst the max.
    The parameters are fold 1's (the shipped fit)."""
    from calibrate import hopper_fit

    saved = hopper_fit.FOLD
    merged: dict[tuple, dict] = {}
    params: dict = {}
    try:
        for fold in (1, 2, 0):
            hopper_fit.FOLD = fold
            p, lines = evaluate()
            params = params or p
            for r in lines:
                if fold != 1 and r["op"].startswith(FIXED_SPLITS):
                    continue
                key = (r["op"], r["gpu"], r["table"])
                m = merged.setdefault(key, {**r, "n": 0, "before": 0.0, "after": 0.0, "folds": 0})
                if r["n"]:
                    m["before"] += r["before"] * r["n"]
                    m["after"] += r["after"] * r["n"]
                    m["n"] += r["n"]
                    m["folds"] += 1
                if "ar_rows" in r:
                    m["ar_rows"] = (m["ar_rows"] if m["folds"] > 1 else []) + r["ar_rows"]
                if "worst_after" in r:
                    m["worst_after"] = max(m.get("worst_after", 0.0) if m["folds"] > 1 else 0.0, r["worst_after"])
    finally:
        hopper_fit.FOLD = saved
    out = []
    for m in merged.values():
        n = max(m["n"], 1)
        out.append({**m, "before": m["before"] / n, "after": m["after"] / n})
    return params, out


def _rows(idx: list[int], rows: list[dict]) -> str:
    by = {}
    for i in idx:
        by.setdefault(rows[i]["src"], []).append(rows[i]["row"])
    return "; ".join(f"{s} rows {','.join(map(str, sorted(v)))}" for s, v in sorted(by.items()))


def _params_yaml(g, a, ar, ep) -> dict:
    def v(x, basis):
        return {"value": float(f"{x:.6g}"), "basis": basis}

    f8, r8, tr8, _, _ = g["fp8"]
    f16, r16, tr16, _, _ = g["bf16"]
    gtrain = "; ".join(_rows(tr, rows) for rows, tr, _ in g["grouped"].values())
    pre8, prows, ptr, _, _, _ = a["prefill8"]
    fd, drows, dtr, _ = a["decode"]
    fa, arows, atr = ar["form"], ar["rows"], ar["train"]
    gemm = {}
    for fmt, f, basis in (("fp8", f8, _rows(tr8, r8)), ("bf16", f16, _rows(tr16, r16))):
        gemm[fmt] = {"compute_eff": v(f.compute_eff, f"fit: {basis}"), "k_overhead": v(f.k_overhead, f"fit: {basis}"),
                     "memory_eff": v(f.memory_eff, f"fit: {_rows(tr8, r8)}"),
                     "launch_s": v(f.launch_s, f"fit: {_rows(tr8, r8)}"),
                     "tile_m": 128, "tile_n": 128, "sms": 132}
    memory = {}
    for fmt, (f, rows, tr, *_) in g["weight_only"].items():
        memory[fmt] = v(f.memory_eff, f"fit: {_rows(tr, rows)} ({rows[0]['column']}, launch_s fixed)")
    gemm["bf16"]["memory_eff"] = memory["bf16"]
    gemm["int4_wo"] = {k: dict(x) if isinstance(x, dict) else x for k, x in gemm["bf16"].items()}  # (no YAML aliases)
    gemm["int4_wo"]["memory_eff"] = memory["int4_wo"]
    gemm["int4_wo"]["compute_eff"]["basis"] = "as bf16 (no compute-bound W4A16 table: assumption)"
    gemm["fp8"]["layout_eff"] = {k: float(f"{x:.6g}") for k, x in f8.layout_eff}
    gemm["fp8"]["layout_eff_basis"] = f"fit (dense fp8 form fixed): {gtrain}"
    t2 = "fa3_paper_table2_pipelining_ablation_h100.csv row 1 (FlashAttention-3 full, fp16, s=8448)"
    return {
        "generation": "hopper",
        "written_by": "python -m calibrate.hopper_report --write (do not edit by hand)",
        "tables": "calibrate/reference_kernels/ (README: sources, licences)",
        "gemm": gemm,
        "attn_prefill": {"compute_eff": v(a["prefill"].compute_eff, f"{t2}, at the seq_half below"),
                         "seq_half": v(pre8.seq_half, f"fit: {_rows(ptr, prows)}"),
                         "launch_s": v(pre8.launch_s, f"fit: {_rows(ptr, prows)}")},
        "attn_decode": {"compute_eff": v(fd.compute_eff, f"as attn_prefill ({t2})"),
                        "memory_eff": v(fd.memory_eff, f"fit: {_rows(dtr, drows)}"),
                        "launch_s": v(fd.launch_s, f"fit: {_rows(dtr, drows)}")},
        "attn_mla_decode": {"compute_eff": v(a["mla"].compute_eff, f"headline_figures_h800.csv row {a['mla_rows'][1]} "
                                                                    "(660 TFLOPS / H800 bf16 peak)"),
                            "memory_eff": v(a["mla"].memory_eff, f"headline_figures_h800.csv row {a['mla_rows'][0]} "
                                                                  "(3000 GB/s / 3.35 TB/s)"),
                            "launch_s": v(a["mla"].launch_s, "as attn_decode")},
        "allreduce": {"lat_base_s": v(fa.lat_base_s, f"fit: {_rows(atr, arows)} (float32 elements, no CUDA graphs)"),
                      "lat_per_rank_s": v(fa.lat_per_rank_s, "fit: as lat_base_s"),
                      "bytes_per_s": v(fa.bytes_per_s, "fit: as lat_base_s"),
                      "max_bytes": v(CUSTOM_AR_MAX_BYTES, "vLLM / SGLang custom all-reduce default max_size (8 MiB); "
                                                          "NCCL ring above")},
        "all_to_all": {"normal_intra_eff": v(ep["intra_eff"], "normal_dispatch_combine_h800.csv v3_corrected intranode "
                                                              "(mean of dispatch, combine) / h800 NVLink 200 GB/s"),
                       "normal_inter_eff": v(ep["inter_eff"], "normal_dispatch_combine_h800.csv v3_corrected EP16, EP32 "
                                                              "(mean) / 50 GB/s NIC"),
                       "ll_latency_s": v(ep["ll_latency_s"], "fit: low_latency_dispatch_combine_h800.csv v1_initial "
                                                             "EP8, 32, 128 (dispatch fp8, combine bf16)"),
                       "ll_bytes_per_s": v(ep["ll_bytes_per_s"], "fit: as ll_latency_s")},
    }


def report_md(lines: list[dict], bands: list[dict] | None = None) -> str:
    out = [BEGIN, "", "Held-out MAPE (%) of the analytical model against each published kernel table, 3-fold on "
           "the kernel tables (rows by size, every third held out in turn, ends always fitted; each interior row "
           "counted once; the paged-decode and DeepEP tables keep their single stated split; the shipped parameters "
           "are fold 1's fit) "
           "(`python -m calibrate.hopper_report --write --vidur ../shared/reference-profiles/vidur`; before = scalar "
           "defaults of conf/cost/roofline.yaml, after = with conf/cost/generations/<generation>.yaml; Vidur rows: "
           "GEMMs, elementwise and attention on the rows `calibrate.ampere_fit` held out, all-reduce on the rows `calibrate.nccl_fit` held out, every point otherwise):", "",
           "| op | GPU | table (calibrate/reference_kernels/) | held out | before | after |", "|---|---|---|---|---|---|"]
    for r in lines:
        worst = f" (worst {r['worst_after']:.0f})" if "worst_after" in r else ""
        out.append(f"| {r['op']} | {r['gpu']} | `{r['table']}` | {r['n']} | {r['before']:.1f} | {r['after']:.1f}{worst} |")
    if bands:
        from calibrate.allreduce_bands import bands_md

        out += ["", "All-reduce by message size (`calibrate.allreduce_bands`): per group the held-out rows in ten "
                "bands of equal count by size (PR 2904: one band per held-out size, 3-fold). Noise floors (%): `noise "
                "rep` = the 3 timed iterations of each Vidur size against their median (the best constant predictor "
                "of that size); `noise nbr` = each size's median against the median of it and its 2 neighbours on "
                "either side; `monotone` = the least MAPE any non-decreasing function of size reaches when fitted to "
                "the band's held-out rows themselves (an oracle: the lower bound for a size-monotone form). Model "
                "MAPE (%): against each size's median (`model/med`, the whole-group figure above), "
                "against the 3 iterations (`model/raw`), against the neighbour median (`model/nbr`, like for like "
                "with `noise nbr`).", "", bands_md(bands)]
    out += ["", END]
    return "\n".join(out)


def vidur_lines(folder: str) -> list[dict]:
    """Per Vidur op and device: the analytical model against Vidur-format tables (`calibrate.crosscheck`), with
    the scalar defaults (before) and with the device generation's forms where it has them (after). The elementwise kernels and attention are fitted on these tables
    (`calibrate.ampere_fit`): their rows are the ones it held out; every other point counts."""
    from collections import defaultdict

    from calibrate.crosscheck import AnalyticalModel, _load_cost
    from calibrate.vidur import load_reference

    cost = _load_cost(CONF_DIR / "cost" / "roofline.yaml")
    points, _ = load_reference(folder)
    tokens = sorted({p.tokens for p in points if p.op == "elementwise"})
    held = {t for i, t in enumerate(tokens) if i % 4 == 2}  # calibrate.ampere_fit's held-out token counts
    attn_held = set()  # calibrate.ampere_fit's held-out attention rows: every fourth per op, in load order
    for op in ("attn_prefill", "attn_decode"):
        attn_held |= {id(p) for i, p in enumerate([q for q in points if q.op == op and q.hardware == "a100_80gb"])
                      if i % 4 == 2}
    from calibrate.nccl_fit import held_out_ids

    ar_held = held_out_ids(points)  # calibrate.nccl_fit's held-out all-reduce rows
    points = [p for p in points if (p.op != "allreduce" or id(p) in ar_held) and (p.op not in ("elementwise", "gemm") or p.hardware != "a100_80gb" or p.tokens in held)
              and (p.op not in ("attn_prefill", "attn_decode") or p.hardware != "a100_80gb" or id(p) in attn_held)]
    models: dict[str, tuple] = {}
    cells: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for p in points:
        if p.hardware not in models:
            hw = load_hardware(p.hardware)
            models[p.hardware] = (AnalyticalModel(hw, cost, generation=False), AnalyticalModel(hw, cost))
        before, after = models[p.hardware]
        cells[(p.vidur_op, p.hardware)].append((before.time_s(p), after.time_s(p), p.measured_s))
    return [{"op": f"{op} (Vidur)", "gpu": hw, "table": f"vidur {sorted({p.source for p in points if p.vidur_op == op})[0].split('/')[0]}/...",
             "n": len(v), "before": mape([b for b, _, _ in v], [m for _, _, m in v]),
             "after": mape([a for _, a, _ in v], [m for _, _, m in v])} for (op, hw), v in sorted(cells.items())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calibrate.hopper_report", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write conf/cost/generations/hopper.yaml and the "
                                                             "report in docs/cost-model.md")
    parser.add_argument("--vidur", default=None, help="also report against Vidur-format tables in this folder "
                                                      "(e.g. ../shared/reference-profiles/vidur)")
    args = parser.parse_args(argv)
    params, lines = evaluate_kfold()
    from calibrate.allreduce_bands import custom_bands, vidur_bands

    bands = custom_bands({int(r["op"].split("TP")[1].split()[0]): r["ar_rows"] for r in lines if "ar_rows" in r})
    if args.vidur:
        lines += vidur_lines(args.vidur)
        bands += vidur_bands(args.vidur)
    md = report_md(lines, bands)
    print(md)
    if args.write:
        OUT_YAML.parent.mkdir(parents=True, exist_ok=True)
        OUT_YAML.write_text("# Hopper (H100 / H800 / H200) analytical efficiency forms (calibrate/efficiency.py), "
                            "fitted to published kernel tables.\n" + yaml.safe_dump(params, sort_keys=False, width=200))
        doc = DOC.read_text()
        if BEGIN in doc:
            doc = doc[:doc.index(BEGIN)] + md + doc[doc.index(END) + len(END):]
        else:
            doc += "\n" + md + "\n"
        DOC.write_text(doc)
        print(f"wrote {OUT_YAML} and {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
