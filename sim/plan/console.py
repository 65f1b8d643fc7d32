"""What the planner shows: a progress bar over simulations (when stderr is a terminal, or `progress=true`) and the
closing report: the verdict first (`PASS`, or `FAIL: ...` when no configuration meets every SLO), then the answer
(the chosen configuration with its margins and monthly projection, with redundancy its N+1 run's margins too, the
next-cheaper one and why it fails), then every configuration by cost (with redundancy, its N+1 run beside it)."""
from __future__ import annotations

import sys

from rich.console import Console

from sim.plan.slo import SloCheck
from sim.results.gate import MAX_LISTED, versus
from sim.results.text import wrap
from sim.terminal import compact_table, console as make_console, knob_header, ms, served_percent


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


def _objective(x) -> str:
    """The objective in the table: cents from 10 up (the chosen line keeps four decimals), else 4 digits."""
    return "-" if x is None else (f"{x:,.2f}" if abs(x) >= 10 else f"{x:.4g}")


def _check_line(c: dict) -> str:
    return SloCheck(c["name"], c["class"], c["target"], c["achieved"], c["unit"], c["met"]).describe()


def _band_phrase(c: dict) -> list[str]:
    """A latency check's error band: `at confidence: 0.41 s (x2.1 vllm/hopper/* engine+hardware class, 21 rows,
    +18%)`; nothing when the check has no band."""
    b = c.get("band")
    if not b or c.get("achieved_at_confidence") is None:
        return []
    raw = "" if b["factor"] == b["factor_raw"] else f", raw x{b['factor_raw']:.3g} < 1 applied as 1"
    return [f"at confidence: {c['achieved_at_confidence']:.4g} s",
            f"(x{b['factor']:.3g} {b['partition']} {b['level']}, {b['rows']} rows{raw},",
            f"{c['margin_at_confidence_pct']:+.1f}%)"]


def _check_phrases(c: dict) -> list[str]:
    """An SLO check as two phrases: the values, then the margin in parentheses (an N+1 run's check, plan.json
    `"run": "n+1"`, says so first), then its band at the plan's confidence when it has one."""
    line = _check_line(c)
    head, sep, tail = line.partition(" (")
    where = ["with one instance failed (N+1):"] if c.get("run") == "n+1" else []
    return ([*where, head, sep.strip() + tail] if sep else [*where, line]) + _band_phrase(c)


def _seed_lines(seeds: dict, point: bool = False) -> list[list[str]]:
    """A configuration's seed runs: the verdict per seed (at the plan's confidence; `point`: at the point
    estimate), then per class the spread of its latency P99s (served fractions: plan.json `seeds.spread`)."""
    meets = "meets_at_point_estimate" if point else "meets"
    verdicts = ", ".join(f"{r['seed']} {'met' if r[meets] else 'missed'}" for r in seeds["runs"])
    head = ["seeds" + (" (at the point estimate):" if point else ":"), f"{verdicts}",
            "· every seed meets" if all(r[meets] for r in seeds["runs"]) else "· FAILS ON A SEED"]
    by_class: dict[str, list[str]] = {}
    for name, v in seeds["spread"].items():
        where, _, check = name.rpartition(" ")
        if check != "served_fraction":
            by_class.setdefault(where, []).append(
                f"{check} {v['min'] * 1e3:.1f} / {v['median'] * 1e3:.1f} / {v['max'] * 1e3:.1f} ms"
                f" (target {v['target'] * 1e3:,.0f} ms)")
    return [head] + [[f"spread {where} (min / median / max):", *(f"{p}," for p in phrases[:-1]), phrases[-1]]
                     for where, phrases in by_class.items()]


def _month_lines(c: dict) -> list[list[str]]:
    """The month from the traffic curve, its assumptions, and the window x 730 h figure labelled."""
    m = c.get("month")
    month = c.get("usd_per_month_projected")
    if month is None:
        return []
    if not m:
        basis = c.get("usd_per_month_basis") or "the window's rate for 730 h"
        return [[f"monthly projection: ${month:,.0f}", f"({basis})"]]
    lines = [[f"monthly from the traffic curve: ${month:,.0f}", f"(${m['usd_per_hour_average']:,.2f}/h average;",
              f"{c['usd_per_month_basis']})"]]
    for name, p in m["pools"].items():
        hours = p["instances_by_hour"]
        cap = p["capacity_per_instance_per_s"]
        lines.append([f"{name}:", f"{min(hours)}-{max(hours)} instances by hour,",
                      f"{p['instance_hours_per_day']} instance-h/day x ${p['usd_per_instance_hour']:.4g}",
                      f"({p['pricing']})", f"= ${p['usd_per_month']:,.0f}/month;",
                      "fixed size" if p["fixed"] else (f"{cap:.3g} req/s per instance at the run's busiest minute"
                                                      if cap else "no requests: its floor all day")
                      + (" (demand above max_instances in some hours)" if p["demand_above_max_instances"] else "")])
    lines += [["month traffic:", *m["traffic"]], ["month assumptions:", *m["assumptions_short"],
                                                   "(plan.json chosen.month.assumptions)"]]
    if m.get("window_usd_per_month") is not None:
        lines.append([f"if the simulated window ran all month: ${m['window_usd_per_month']:,.0f}",
                      "(the window's bill x 730 h; not the month)"])
    return lines


def _miss(c: dict) -> str:
    """A failed check (plan.json `failed_slos`) as the gate words it: `tpot_p99 default 176 ms > 25 ms`."""
    where = f"{c['name']} {'fleet' if c['class'] == '*' else c['class']}"
    if c.get("run") == "n+1":
        where = f"with one instance failed (N+1): {where}"
    a, t = c.get("achieved"), c["target"]
    if a is None:
        return f"{where} no data"
    return f"{where} {a:.2%} < {t:.2%}" if c["unit"] == "fraction" else f"{where} {versus(a, t)}"


def plan_verdict(plan: dict) -> str:
    """The plan's first line: `PASS` when a configuration meets every SLO, else `FAIL: ...` with what the cheapest
    completed configuration misses."""
    if plan["chosen"]:
        return "PASS"
    done = [c for c in plan["configurations"] if c["status"] == "completed"]
    if not done:
        return f"FAIL: no configuration completed ({len(plan['configurations'])} invalid)"
    c = done[0]  # (configurations are ranked cheapest first)
    misses = [_miss(f) for f in c["failed_slos"]]
    more = f"; +{len(misses) - MAX_LISTED} more" if len(misses) > MAX_LISTED else ""
    return (f"FAIL: no configuration meets every SLO; the cheapest, #{c['id']} "
            f"({' '.join(c['override_args']) or 'base'}), misses " + "; ".join(misses[:MAX_LISTED]) + more)


def _say_point_choice(plan: dict, say) -> None:
    """The cheapest configuration at the point estimate beside the chosen one, and what the difference costs."""
    p, c = plan.get("point_estimate_choice"), plan["chosen"]
    if not p:
        say(["at the point estimate: no configuration meets every SLO"])
        return
    if p["id"] == c["id"]:
        say([f"at the point estimate: the same choice, #{p['id']}", "· the confidence costs nothing here"])
        return
    per_h, per_m = plan.get("confidence_cost_usd_per_hour"), plan.get("confidence_cost_usd_per_month")
    say([f"at the point estimate: #{p['id']}", *(p["override_args"] or ["(base)"]),
         f"· {plan['objective']} {p['objective']:,.4f}",
         *([f"· month ${p['usd_per_month_projected']:,.0f}"] if p.get("usd_per_month_projected") is not None
           else [])])
    say(["the confidence costs", f"${per_h:+,.2f}/h" if per_h is not None else "$?/h",
         "(the simulated windows' bills per hour)",
         f"and ${per_m:+,.0f}/month" if per_m is not None else "", "(from the traffic curve)"], "  ")
    if p.get("seeds"):
        for line in _seed_lines(p["seeds"], point=True):
            say(line, "  ")


def print_plan(plan: dict, plan_path, width: int | None = None) -> None:
    """The verdict first, then the answer, then every configuration by cost; lines break only between phrases."""
    console = make_console(width)
    console.print(plan_verdict(plan), markup=False, soft_wrap=True)
    cols = console.width
    varying = [d["key"] for d in plan["search"] if len(d["values"]) > 1]
    front = set(plan["frontier"]["ttft_p99_s"]) | set(plan["frontier"]["tpot_p99_s"])
    chosen = plan["chosen"]["id"] if plan["chosen"] else None
    n_plus_1 = plan.get("redundancy") is not None   # each configuration also ran with an instance failed
    rows = []
    for c in plan["configurations"]:
        verdict = "invalid" if c["status"] != "completed" else ("met" if c["meets_slos"] else "missed")
        point_id = (plan.get("point_estimate_choice") or {}).get("id")
        mark = "← chosen" if c["id"] == chosen else ("← point estimate" if c["id"] == point_id and plan.get(
            "confidence") else ("frontier" if c["id"] in front else ""))
        served = served_percent(c["served_fraction"])
        n1 = c.get("n_plus_1") or {}
        beside = [ms(n1.get("ttft_p99_s")), "-" if not n1 else ("met" if n1["meets_slos"] else "missed")
                  ] if n_plus_1 else []   # (its served fraction and every check: plan.json `n_plus_1`)
        point = ["-" if c["status"] != "completed" else ("met" if c.get("meets_at_point_estimate") else "missed")
                 ] if plan.get("confidence") else []
        rows.append([str(c["id"]), *(str(c["overrides"].get(k, "")) for k in varying),
                     _objective(c["objective"]), ms(c["ttft_p99_s"]),
                     ms(c["tpot_p99_s"]), served, *beside, *point, verdict, mark])
    heads = ["#", *(knob_header(k) for k in varying), plan["objective"], "TTFT P99 ms", "TPOT P99 ms", "served %",
             *(["N+1 TTFT P99 ms", "N+1"] if n_plus_1 else []),
             *(["point est."] if plan.get("confidence") else []),
             f"SLOs at {plan['confidence']['level']:g}" if plan.get("confidence") else "SLOs", ""]
    t = compact_table(f"inferplan plan · {plan['scenario']} · cheapest by {plan['objective']}", heads, rows,
                      left=(len(heads) - 1,))

    def say(phrases: list[str], indent: str = "") -> None:
        for i, line in enumerate(wrap(phrases, cols - 2, indent, sep=" ")):
            console.print(line if i == 0 else "  " + line, markup=False, soft_wrap=True)

    conf = plan.get("confidence")
    if conf:
        say([f"confidence {conf['level']:g}:", "every latency x its error band from the validation matrix",
             "(the nearest partition's measured/simulated quantile, at least 1;", f"{conf['assumption']});",
             "confidence=0 for the point estimate"])
    if plan["chosen"]:
        c = plan["chosen"]
        at = f" at confidence {conf['level']:g}" if conf else ""
        say([f"chosen: #{c['id']}", *(c["override_args"] or ["(base)"]),
             f"· {plan['objective']} {c['objective']:,.4f}", f"· meets every SLO{at}"])
        for line in _month_lines(c):
            say(line, "  ")
        for check in c["slos"]:
            say(["margin:", *_check_phrases(check)], "  ")
        if c.get("n_plus_1"):
            n1 = c["n_plus_1"]
            say(["with one instance of each n+1 pool failed at the peak:", "meets every SLO",
                 f"· {n1.get('requests_failed_over') or 0} requests failed over"], "  ")
            for check in n1["slos"]:
                say(["N+1 margin:", *_check_phrases(check)], "  ")
        if c.get("seeds"):
            for line in _seed_lines(c["seeds"]):
                say(line, "  ")
        if conf:
            _say_point_choice(plan, say)
    else:
        console.print("[red]no configuration in the search meets the SLOs[/red]: widen the search (more instances)")
    if plan["next_cheaper_failing"]:
        c = plan["next_cheaper_failing"]
        say([f"next cheaper, fails: #{c['id']}", *c["override_args"], f"· {plan['objective']} {c['objective']:,.4f}"])
        for check in c["failed_slos"]:
            say(["fails:", *_check_phrases(check)], "  ")
    elif plan["chosen"]:
        say(["next cheaper, fails: none evaluated", "(the chosen one is the cheapest configuration searched)"])
    console.print(t)
    for note in plan["notes"]:
        say(f"note: {note}".split(" "))
    j = plan["jobs"]
    say([f"{j['configurations']} configurations: {j['simulated']} simulated, {j['cached']} cached, "
         f"{j['invalid']} invalid", f"· {j['backend']} x{j['workers']}", f"· {j['wall_time_s']:.1f} s"])
    console.print(f"plan: {plan_path}", markup=False, soft_wrap=True)
