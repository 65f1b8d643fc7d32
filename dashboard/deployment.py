"""A plan's answer as a review reads it, and its deployment: the confidence the plan chose at and what it costs,
the seeds' verdicts, the month from the traffic curve, and a button that writes the chosen configuration's
deployment files (`sim.api.write_plan_deployment`, the same files as `python -m sim.plan ... deploy=<dir>`)."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from inferplan.errors import InputError


def answer_lines(plan: dict) -> list[str]:
    """The plan's answer in words: chosen configuration, confidence and its cost, seeds, month."""
    c = plan.get("chosen")
    if not c:
        return ["No configuration meets every SLO at the plan's confidence: nothing to deploy."]
    label = " ".join(c.get("override_args") or []) or "(the base configuration)"
    lines = [f"Chosen: #{c['id']} {label}" if c.get("id") is not None else f"Chosen: {label}"]
    conf = (plan.get("confidence") or {}).get("level")
    if conf:
        point = plan.get("point_estimate_choice") or {}
        per_h, per_month = plan.get("confidence_cost_usd_per_hour"), plan.get("confidence_cost_usd_per_month")
        same = point.get("id") == c.get("id")
        cost = ("costs nothing here (the point estimate chooses the same)" if same or not per_h else
                f"costs ${per_h:+,.2f}/h" + (f", ${per_month:+,.0f}/month" if per_month is not None else ""))
        lines.append(f"Meets every SLO at confidence {conf} (the validation matrix's error bands); the confidence "
                     f"{cost}.")
    seeds = c.get("seeds") or {}
    if seeds.get("runs"):
        ok = sum(1 for r in seeds["runs"] if r.get("meets"))
        lines.append(f"Traffic seeds: {ok} of {len(seeds['runs'])} meet every SLO.")
    month = c.get("month") or {}
    if month.get("usd_per_month") is not None:
        basis = c.get("usd_per_month_basis")
        figure = f"Month from the traffic curve: ${month['usd_per_month']:,.0f}"
        lines.append(f"{figure} ({basis})." if basis else f"{figure}.")
    return lines


def section(plan_folder: Path, plan: dict) -> None:
    """The plan's answer and its deployment button (writes `<plan folder>/deploy`)."""
    with st.expander("Answer and deployment", expanded=True):
        for line in answer_lines(plan):
            st.markdown(f"- {line}")
        if not plan.get("chosen"):
            return
        out = plan_folder / "deploy"
        if st.button(f"Write deployment files to {out}", key="write_deployment"):
            from sim.api import write_plan_deployment
            try:
                files = write_plan_deployment(plan_folder, out)
            except InputError as err:
                st.error(str(err))
                return
            st.success(f"{len(files)} files written (README.md lists them).")
        if out.is_dir():
            st.dataframe([{"file": str(p.relative_to(out))} for p in sorted(out.rglob("*")) if p.is_file()],
                         hide_index=True)
