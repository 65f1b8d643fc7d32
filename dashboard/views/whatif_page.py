"""What-if page: change a baseline run's load, fleet sizes and policies, simulate it here, compare."""
import traceback
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import charts, figures, htmlkit, report, review, ui, whatif
from dashboard.kpis import delta_rows
from inferplan.errors import InputError

RESULT_KEY = "whatif_result"

st.title("What-if")
runner, why_not = whatif.load_runner()
if runner is None:
    st.warning(f"What-if runs are unavailable: {why_not}.", icon=":material/warning:")
found = ui.require_root()
if found is None:
    st.stop()
runs = [f for f in found if f.kind == "run" and f.done]
if not runs:
    st.info("No complete run to start from. Run `python -m sim scenario=smoke` first.")
    st.stop()
baseline = ui.pick("Baseline run", runs, key="whatif_baseline")
try:
    base = ui.open_run(baseline.path)
except InputError as err:
    ui.show_error(err)
    st.stop()
if review.partial_text(base.summary):  # a what-if's changes would be measured against part of a window
    st.warning(review.partial_text(base.summary), icon=":material/pending:")

config = whatif.parse_config(base.config_yaml)
pools = list((base.summary.get("pools") or {}).keys())
load_key = whatif.find_load_key(config)
pool_keys = whatif.find_pool_keys(config, pools)

s = base.summary
if isinstance(s.get("wall_time_s"), (int, float)) and isinstance(s.get("simulated_duration_s"), (int, float)):
    st.caption(f"The baseline simulated {s['simulated_duration_s']:,.0f} s in {s['wall_time_s']:,.1f} s of wall time; "
               "a what-if takes about as long, longer with more load. The page waits while it runs.")

with st.form("whatif_form"):
    changes: dict[str, object] = {}
    if load_key:
        key, current = load_key
        factor = st.slider("Load multiplier (× the baseline's arrival rate)", 0.25, 4.0, 1.0, 0.05,
                           key="whatif_load", help=f"Sets `{key}` (baseline {current:g}).")
        if factor != 1.0:
            changes[key] = round(current * factor, 6)
    else:
        st.caption("The baseline's config has no load multiplier (`" + "`, `".join(whatif.LOAD_KEYS) + "`) and no "
                   "single arrival rate (`" + "`, `".join(whatif.RATE_KEYS) + "`), so load stays as it was.")
    for pool, (key, count) in pool_keys.items():
        value = st.slider(f"Instances in pool {pool}", 1, max(8, 4 * count), count, key=f"whatif_pool_{pool}",
                          help=f"Sets `{key}` (baseline {count}).")
        if value != count:
            changes[key] = value
    for pool, limits in whatif.find_limit_keys(config, pools).items():
        lo_col, hi_col = st.columns(2)
        for col, name in zip((lo_col, hi_col), whatif.LIMIT_KEYS):
            if name not in limits:
                continue
            key, was = limits[name]
            value = col.number_input(f"Autoscaler {name.replace('_', ' ')} in pool {pool}", min_value=1,
                                     max_value=max(64, 4 * was), value=was, step=1, key=f"whatif_{name}_{pool}",
                                     help=f"Sets `{key}` (baseline {was}).")
            if value != was:
                changes[key] = int(value)
    missing = [p for p in pools if p not in pool_keys]
    if missing:
        st.caption(f"No instance-count key found in the config for pool(s) {', '.join(missing)}.")
    for group in whatif.POLICY_GROUPS:
        choices = whatif.policy_choices(group)
        if not choices:
            continue
        was = whatif.baseline_choice(base.path, group)
        picked = st.selectbox(f"{group.capitalize()} policy", ["(as baseline)", *choices], key=f"whatif_{group}",
                              help=f"Baseline: {was or 'unknown'}; the choices are conf/{group}/*.yaml.")
        if picked != "(as baseline)" and picked != was:
            changes[group] = picked
    extra_text = st.text_area("More overrides, one Hydra override per line", key="whatif_extra",
                              placeholder="e.g. a shorter simulated window")
    submitted = st.form_submit_button("Run what-if", type="primary", disabled=runner is None)

if submitted and runner is not None:
    extra, rejected = whatif.parse_extra(extra_text)
    if rejected:
        st.error("Not overrides (expected `key=value`): " + ", ".join(f"`{r}`" for r in rejected))
        st.stop()
    overrides = whatif.build_overrides(base.overrides, changes, extra)
    run_dir = whatif.new_run_dir(ui.results_roots()[0], base.scenario)
    bar = st.progress(0.0, text="Simulating…")
    last = [-1.0]

    def progress(fraction: float) -> None:
        fraction = min(max(float(fraction), 0.0), 1.0)
        if fraction - last[0] >= 0.01 or fraction == 1.0:
            last[0] = fraction
            bar.progress(fraction, text=f"Simulating… {fraction:.0%} of the simulated window")

    try:
        out = runner(base.scenario, overrides, run_dir, progress=progress)
    except InputError as err:
        ui.show_error(err)
        st.stop()
    except Exception as err:  # noqa: BLE001 - a failed simulation is reported, the page stays up
        st.error(f"The simulation failed: {type(err).__name__}: {err}")
        with st.expander("Details for a bug report"):
            st.code(traceback.format_exc())
        st.stop()
    bar.progress(1.0, text="Done")
    whatif.record_overrides(Path(out or run_dir), base.scenario, overrides)
    ui.list_folders.clear()
    st.session_state[RESULT_KEY] = {"baseline": str(baseline.path), "run": str(out or run_dir),
                                    "overrides": overrides}

result = st.session_state.get(RESULT_KEY)
if not result or result["baseline"] != str(baseline.path):
    st.stop()
try:
    variant = ui.open_run(Path(result["run"]))
    frames = {"baseline": ui.run_frames(baseline.path), "what-if": ui.run_frames(variant.path)}
except InputError as err:
    ui.show_error(err)
    st.stop()

st.subheader("What-if against baseline")
st.caption(f"Run folder `{variant.path}` · overrides: `{' '.join(result['overrides']) or '(none)'}`")
st.caption(review.provenance_text(variant.summary))
ui.kpi_row(variant.summary, base=base.summary)
st.dataframe(ui.verdict_colours(pd.DataFrame(delta_rows(base.summary, variant.summary)), "SLO"), hide_index=True)
long = figures.overlay_frame(frames)
if not long.empty:
    st.altair_chart(charts.overlay(long))
ui.report_button(lambda: htmlkit.page(f"inferplan what-if: {variant.scenario}", report.run_sections(variant)),
                 f"inferplan-whatif-{variant.path.name}.html", key="whatif_report")
