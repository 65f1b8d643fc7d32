"""Run page: one run's KPIs against its SLO, its time series, where the time went and what was not served."""
import pandas as pd
import streamlit as st

from dashboard import figures, htmlkit, report, review, ui
from dashboard.kpis import overall_verdict, slo_rows
from inferplan.errors import InputError
from sim.results.schema import SUMMARY

st.title("Run")
found = ui.require_root()
if found is None:
    st.stop()
runs = sorted((f for f in found if f.kind == "run"), key=lambda f: not f.done)  # complete ones first, newest first
if not runs:
    st.info(f"No run folders here (a run folder holds `{SUMMARY}`); sweeps and plans are on the Compare page.")
    st.stop()

wanted = st.query_params.get("run")  # `/run?run=<folder name>` opens that run (a link that can be shared)
if wanted and "run_pick" not in st.session_state:
    named = [f for f in runs if f.path.name == wanted]
    runs = named + [f for f in runs if f not in named]
choice = ui.pick("Run", runs, key="run_pick",
                 help="Newest first; incomplete runs and partial (interrupted) runs are marked.")
try:
    run = ui.open_run(choice.path)
    frames = ui.run_frames(choice.path)
except InputError as err:
    ui.show_error(err)
    st.stop()

s = run.summary
if review.partial_text(s):
    st.warning(review.partial_text(s), icon=":material/pending:")
model = s.get("cost_model") or {}
facts = [f"Scenario **{run.scenario}**", f"seed {s.get('seed', 'unknown')}"]
if isinstance(s.get("simulated_duration_s"), (int, float)):
    facts.append(f"{s['simulated_duration_s']:,.0f} s simulated" + (
        f" in {s['wall_time_s']:,.1f} s" if isinstance(s.get("wall_time_s"), (int, float)) else ""))
facts.append(f"cost model: {model.get('kind', 'unknown')}" + (f" ({model['profile']})" if model.get("profile") else ""))
st.caption(" · ".join(facts))
st.caption(review.provenance_text(s))
if review.monthly_text(s):
    st.caption(review.monthly_text(s))
verdict = overall_verdict(s)
(st.info if verdict is None else st.success if verdict else st.error)(report.verdict_text(s))

st.subheader("Diagnosis")
note = review.diagnosis_note(s)
if note:
    st.caption(note)
for f in review.findings(s):
    with st.container(border=True):
        st.markdown(f"**{f['headline']}**")
        st.markdown("\n".join(f"- {e}" for e in f["evidence"]))
        if f["try"]:
            st.markdown("Try:")
            st.code("\n".join(f["try"]), language="bash")
by_class, by_pool = review.verdict_tables(s)
if not by_class.empty:
    st.subheader("Verdicts by class")
    st.dataframe(ui.verdict_colours(by_class, "verdict"), hide_index=True)
    st.subheader("Verdicts by class and pool")
    st.dataframe(ui.verdict_colours(by_pool, "verdict"), hide_index=True)

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

ui.report_button(lambda: htmlkit.page(f"inferplan review: {run.title}", report.run_sections(run)),
                 f"inferplan-{run.scenario}-{run.path.name}.html", key="run_report")
