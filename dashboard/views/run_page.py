"""Run page: one run's KPIs against its SLO, its time series, where the time went and what was not served."""
import pandas as pd
import streamlit as st

from dashboard import figures, htmlkit, report, ui
from dashboard.kpis import overall_verdict, slo_rows
from inferplan.errors import InputError

st.title("Run")
found = ui.require_root()
if found is None:
    st.stop()
runs = sorted((f for f in found if f.kind == "run"), key=lambda f: not f.done)  # complete ones first, newest first
if not runs:
    st.info("No run folders here (a run folder holds `summary.json`); sweeps and plans are on the Compare page.")
    st.stop()

choice = ui.pick("Run", runs, key="run_pick", help="Newest first; incomplete runs are marked.")
try:
    run = ui.open_run(choice.path)
    frames = ui.run_frames(choice.path)
except InputError as err:
    ui.show_error(err)
    st.stop()

s = run.summary
model = s.get("cost_model") or {}
facts = [f"Scenario **{run.scenario}**", f"seed {s.get('seed', 'unknown')}"]
if isinstance(s.get("simulated_duration_s"), (int, float)):
    facts.append(f"{s['simulated_duration_s']:,.0f} s simulated" + (
        f" in {s['wall_time_s']:,.1f} s" if isinstance(s.get("wall_time_s"), (int, float)) else ""))
facts.append(f"cost model: {model.get('kind', 'unknown')}" + (f" ({model['profile']})" if model.get("profile") else ""))
st.caption(" · ".join(facts))
verdict = overall_verdict(s)
(st.info if verdict is None else st.success if verdict else st.error)(report.verdict_text(s))

ui.kpi_row(s)
rows = slo_rows(s)
if rows:
    st.dataframe(ui.verdict_colours(pd.DataFrame(rows), "verdict"), hide_index=True)

for fig in figures.run_charts(run, frames):
    st.subheader(fig.title)
    if fig.chart is not None:
        st.altair_chart(fig.chart)
    if fig.note:
        (st.caption if fig.chart is not None else st.info)(fig.note)

st.subheader("Pools")
st.dataframe(frames.costs, hide_index=True, column_config={
    "usd": st.column_config.NumberColumn("cost (USD)", format="%.2f"),
    "node_hours": st.column_config.NumberColumn("node-hours (h)", format="%.2f"),
    "instances_max": st.column_config.NumberColumn("max instances"),
    "requests_completed": st.column_config.NumberColumn("requests completed")})

with st.expander("Configuration"):
    if run.overrides:
        st.markdown("Overrides: `" + " ".join(run.overrides) + "`")
    if run.config_yaml:
        st.code(run.config_yaml, language="yaml")
    else:
        st.caption("No `.hydra/config.yaml` in this run.")
with st.expander("Provenance and invariants"):
    st.dataframe(pd.DataFrame(report.provenance_rows(run), columns=["field", "value"]).astype(str), hide_index=True)

ui.report_button(lambda: htmlkit.page(f"inferplan review: {run.scenario}", report.run_sections(run)),
                 f"inferplan-{run.scenario}-{run.path.name}.html", key="run_report")
