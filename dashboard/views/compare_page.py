"""Compare page: runs or a sweep side by side, and the Pareto frontier of cost against P99 latency."""
import streamlit as st

from dashboard import charts, compare, deployment, htmlkit, report, review, ui
from dashboard.calibration import flat_items
from dashboard.data import read_plan
from inferplan.errors import InputError
from sim.results.read import try_summary

st.title("Compare")
found = ui.require_root()
if found is None:
    st.stop()
runs = [f for f in found if f.kind == "run" and f.done]
sweeps = [f for f in found if f.kind in ("sweep", "plan")]

modes = [m for m, ok in (("Runs", runs), ("Sweep or plan", sweeps)) if ok]
if not modes:
    st.info("Nothing to compare yet: no complete runs and no sweeps here.")
    st.stop()
mode = st.radio("Compare", modes, horizontal=True, key="compare_mode")

try:
    if mode == "Runs":
        # Runs are comparable only on the same traffic: one scenario at a time (the run folder's parent,
        # runs/<scenario>/<time>), unless the user asks for every scenario.
        scen_of = {f.path: f.path.parent.name for f in runs}
        scenarios = list(dict.fromkeys(scen_of[f.path] for f in runs))  # newest run's scenario first
        left, right = st.columns([3, 1])
        scenario = left.selectbox("Scenario", scenarios, key="compare_scenario",
                                  help="Runs of different scenarios serve different traffic: their costs and "
                                       "latencies are not comparable.")
        mixed = right.checkbox("Every scenario", key="compare_mixed", help="Allow runs of different scenarios.")
        pool = runs if mixed else [f for f in runs if scen_of[f.path] == scenario]
        # Partial (interrupted) runs cover only part of the window: never beside complete ones unless picked.
        complete = [f for f in pool if not f.partial]
        chosen = st.multiselect("Runs", pool, default=complete[:4], format_func=ui.folder_label, key="compare_runs",
                                help="The newest complete runs by default; partial (interrupted) runs can be added "
                                     "and are marked.")
        if mixed and len({scen_of[f.path] for f in chosen}) > 1:
            st.warning("These runs are of different scenarios: no cheapest one is named across them.",
                       icon=":material/warning:")
        if not chosen:
            st.info("Pick at least one run.")
            st.stop()
        df, notes = ui.runs_frame(chosen)
        run_dirs = [f.path for f in chosen]
        title, source = "inferplan comparison", ", ".join(map(ui.folder_label, chosen))
    else:
        folder = ui.pick("Sweep or plan", sweeps, key="compare_sweep")
        title, source = f"inferplan {folder.kind}: {folder.label}", str(folder.path)
        if folder.kind == "plan":
            with st.expander("Plan", expanded=True):
                st.dataframe([{"field": k, "value": v} for k, v in flat_items(read_plan(folder.path))],
                             hide_index=True)
            deployment.section(folder.path, read_plan(folder.path))
            if not (folder.path / "sweep.parquet").is_file():
                st.info("This plan folder has no `sweep.parquet`, so there are no configurations to compare.")
                st.stop()
        df, notes = ui.sweep_frame(folder.path)
        run_dirs = [folder.path / str(d) for d in df["run_dir"]] if "run_dir" in df else []
except InputError as err:
    ui.show_error(err)
    st.stop()

for note in notes:
    st.warning(note, icon=":material/warning:")
st.caption(review.provenance_across([s for s in map(try_summary, run_dirs) if s is not None]))
if df.empty:
    st.info("None of the chosen runs could be read.")
    st.stop()

costs = {k: v for k, v in compare.COSTS.items() if k in df}
lats = {k: v for k, v in compare.LATENCIES.items() if k in df}
if not costs or not lats:
    st.warning("These results carry no cost or no P99 latency column, so there is no frontier to draw.")
    st.dataframe(df, hide_index=True)
    st.stop()
left, right = st.columns(2)
cost = left.selectbox("Cost", list(costs), format_func=costs.get, key="compare_cost")
latency = right.selectbox("Latency", list(lats), format_func=lambda k: lats[k][0], key="compare_latency")
ann = compare.annotate(df, cost, latency)

best = ann[ann["cheapest"]]
across = mode == "Runs" and len({scen_of[f.path] for f in chosen}) > 1
if across:  # no "cheapest" across different traffic
    st.info("Different scenarios: compare them side by side; no cheapest configuration across them.")
elif not best.empty:
    st.success(f"Cheapest configuration meeting the SLO: **{best.iloc[0]['label']}** "
               f"({costs[cost]}: {best.iloc[0][cost]:,.3f})")
elif ann["meets_slo"].notna().any():
    st.error("No configuration meets the SLO.")
else:
    st.info("These results carry no SLO verdicts.")

st.subheader("Side by side")
table = compare.display_table(ann)
st.dataframe(ui.verdict_colours(table, "meets SLO"), hide_index=True, column_config={
    c: st.column_config.NumberColumn(c, format="%.3f") for c in table.columns if "(" in c})

lat_title, scale, target = lats[latency]
slo = ann[target].dropna().iloc[0] if target in ann and ann[target].notna().any() else None
st.altair_chart(charts.pareto(ann, cost, costs[cost], latency, lat_title, scale, slo))

shown = [m for m in compare.SHOWN if m in ann]
metrics = st.multiselect("Metrics to chart", shown, default=[m for m in ("ttft_p99_s", "tpot_p99_s", "attainment",
                         "usd_per_million_output_tokens") if m in shown], format_func=lambda m: compare.SHOWN[m][0],
                         key="compare_metrics")
if metrics:
    st.altair_chart(charts.metric_bars(compare.bars_long(ann, metrics)))

ui.report_button(lambda: htmlkit.page(title, report.comparison_sections(
                     df, title, source, notes, cost, latency, folder=None if mode == "Runs" else folder.path)),
                 "inferplan-comparison.html", key="compare_report")
