"""What the planner shows: a progress bar over simulations (when stderr is a terminal, or `progress=true`) and the
closing report: the answer first (the chosen configuration with its margins and monthly projection, the
next-cheaper one and why it fails), then every configuration by cost."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from sim.plan.slo import SloCheck


class PlanProgress:
    """A rich bar of simulations done out of those started, and the count of cache hits; silent when off."""

    def __init__(self, setting: str) -> None:
        on = setting == "true" or (setting == "auto" and sys.stderr.isatty())
        self._bar = None
        if on:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[cached]} cached"), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task("plan", total=0, cached=0)
            self._bar.start()

    def started(self, n: int) -> None:
        if self._bar:
            self._bar.update(self._task, total=self._bar.tasks[0].total + n)

    def simulated(self) -> None:
        if self._bar:
            self._bar.advance(self._task)

    def reused(self) -> None:
        if self._bar:
            self._bar.update(self._task, cached=self._bar.tasks[0].fields["cached"] + 1)

    def close(self) -> None:
        if self._bar:
            self._bar.stop()


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:,.1f}"


def _check_line(c: dict) -> str:
    return SloCheck(c["name"], c["class"], c["target"], c["achieved"], c["unit"], c["met"]).describe()


def print_plan(plan: dict, plan_path) -> None:
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    varying = [d["key"] for d in plan["search"] if len(d["values"]) > 1]
    front = set(plan["frontier"]["ttft_p99_s"]) | set(plan["frontier"]["tpot_p99_s"])
    chosen = plan["chosen"]["id"] if plan["chosen"] else None
    t = Table(title=f"inferplan plan · {plan['scenario']} · cheapest by {plan['objective']}")
    t.add_column("#", justify="right")
    for key in varying:
        t.add_column(key.removeprefix("scenario.pools."))
    for head in (plan["objective"], "ttft_p99_ms", "tpot_p99_ms", "served", "SLOs", ""):
        t.add_column(head, justify="right")
    for c in plan["configurations"]:
        verdict = "invalid" if c["status"] != "completed" else ("met" if c["meets_slos"] else "missed")
        mark = "← chosen" if c["id"] == chosen else ("frontier" if c["id"] in front else "")
        served = "-" if c["served_fraction"] is None else f"{c['served_fraction']:.4%}"
        t.add_row(str(c["id"]), *(str(c["overrides"].get(k, "")) for k in varying),
                  "-" if c["objective"] is None else f"{c['objective']:,.4f}", _ms(c["ttft_p99_s"]),
                  _ms(c["tpot_p99_s"]), served, verdict, mark + (" (cached)" if c["cached"] else ""))
    if plan["chosen"]:
        c = plan["chosen"]
        month = c.get("usd_per_month_projected")
        console.print(f"chosen: #{c['id']} {' '.join(c['override_args']) or '(base)'} · {plan['objective']} "
                      f"{c['objective']:,.4f} · meets every SLO")
        if month is not None:
            console.print(f"  monthly projection: ${month:,.0f} (the window's rate for 730 h)")
        for check in c["slos"]:
            console.print(f"  margin: {_check_line(check)}")
    else:
        console.print("[red]no configuration in the search meets the SLOs[/red]: widen the search (more instances)")
    if plan["next_cheaper_failing"]:
        c = plan["next_cheaper_failing"]
        console.print(f"next cheaper, fails: #{c['id']} {' '.join(c['override_args'])} · {plan['objective']} "
                      f"{c['objective']:,.4f}")
        for check in c["failed_slos"]:
            console.print(f"  fails: {_check_line(check)}")
    elif plan["chosen"]:
        console.print("next cheaper, fails: none evaluated (the chosen one is the cheapest configuration searched)")
    console.print(t)
    for note in plan["notes"]:
        console.print(f"note: {note}")
    j = plan["jobs"]
    console.print(f"{j['configurations']} configurations: {j['simulated']} simulated, {j['cached']} cached, "
                  f"{j['invalid']} invalid · {j['backend']} x{j['workers']} · {j['wall_time_s']:.1f} s")
    console.print(f"plan: {plan_path}")
