"""A front-end fit written into the serving presets it was fitted for (`python -m sim.validate.silicon.fit ...
write=true`): each preset's `# Front-end time` block, from that line to the end of conf/engine/<preset>.yaml, is
replaced by the values with the command, the rows and the errors, so a plain run uses them."""
from __future__ import annotations

import textwrap
from pathlib import Path

from sim.validate.silicon.fit_terms import DECODE_OFF_PCT, KEYS

# engine -> its serving presets (conf/engine/*_serve.yaml; `support.SERVE_PRESETS` picks a row's by its version):
# each preset gets the fit on the rows it served (`fit_engine`)
PRESETS = {"vllm": ("vllm_v1_serve", "vllm_v1_async_serve"), "sglang": ("sglang_v05_serve", "sglang_v059_serve"),
           "trtllm": ("trtllm_v1_serve",)}
MARK = "# Front-end time (sim/core/instance/frontend.py)"


def preset_block(engine: str, preset: str, fit: dict, command: str) -> str:
    """The yaml block of one serving preset's fitted front-end time (`fit`: its engine's document), documented."""
    mine = fit["presets"][preset]
    v, ins, out = mine["values"], mine["in_sample"], mine["held_out"]
    held = "leave-one-model-out" if fit["held_out_by"] == "model" else "leave-one-ISL-out: one model in the data"
    across = sorted(m for m, e in mine["held_out_each"].items() if e.get("fitted_on") == "engine")
    off = (f"\n# ({fit['decode_off']} {engine} rows left out: simulated TPOT off by more than {DECODE_OFF_PCT:g}%).\n"
           if fit.get("decode_off") else ".\n")
    other = f", {', '.join(across)} on the engine's other presets' rows: no other model here" if across else ""
    return (f"{MARK}: no published per-request measurement for these\n"
            "# versions, so FITTED, one fit per serving preset (the engine versions it serves; never per model):\n"
            f"# {command}\n"
            f"# Rows: {mine['rows']} simulated H100/H200 {engine} rows of this preset, models "
            f"{', '.join(mine['models'])}{off}"
            f"# TTFT median |err| {mine['before']['median_abs_pct']}% (no front-end time) -> "
            f"{ins['median_abs_pct']}% in sample, {out['median_abs_pct']}% held out\n"
            + "".join(f"# {line}\n" for line in textwrap.wrap(
                f"({held}{other}; held-out bias {out['bias_pct']}%; additive predictions of the linear fit).", 110))
            + _search_note(fit)
            + "".join(f"# {line}\n" for line in textwrap.wrap(f"Fitted: {', '.join(fit['terms'])}; the other keys 0.",
                                                               110))
            + "# No term scales a kernel time: the per-step terms "
            "count the instance's iterations (frontend.py), the per-prefill\n# ones follow the prompt's own prefill "
            "price.\n" + "".join(f"{k}: {v[k]:.4g}\n" for k in KEYS))


def _search_note(fit: dict) -> str:
    search = fit.get("scale_search")
    if not search:
        return ""
    chosen = next(c for c in search["candidates"] if c["scale"] == search["chosen"])
    return (f"# Scale search (simulated, {chosen['rows']} rows): the linear fit x {search['chosen']} "
            f"(of {', '.join(str(c['scale']) for c in search['candidates'])}): TTFT {chosen['ttft_median_abs_pct']}%, "
            f"TPOT {chosen['tpot_median_abs_pct']}% on those rows.\n"
            + (f"# {search['note']}\n" if search.get("note") else ""))


def write_presets(doc: dict, command: str) -> list[Path]:
    from sim.resolve import ENGINE_DIR

    written = []
    for engine, fit in doc["engines"].items():
        for preset in fit["presets"]:
            path = ENGINE_DIR / f"{preset}.yaml"
            text = path.read_text()
            head = text[:text.index(MARK)] if MARK in text else text
            path.write_text(head + preset_block(engine, preset, fit, command))
            written.append(path)
    return written
