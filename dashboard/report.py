"""The review's record: one self-contained HTML file for a run, a sweep or a plan.

    python -m dashboard.report runs/smoke/2026-11-30_10-00-00            # writes <folder>/report.html
    python -m dashboard.report multirun/2026-11-30/10-00-00 -o sweep.html

KPIs with SLO verdicts, the charts (inline SVG), tables, configuration and provenance: what the app shows, in a
file that opens anywhere without a network. The app's download buttons call the same builders. A folder that is
not a complete run, sweep or plan prints one line and exits with status 2.
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from dashboard import charts, compare, figures, htmlkit as hk, review
from dashboard.calibration import flat_items
from dashboard.data import RunData, open_run, read_plan
from dashboard.kpis import kpis, overall_verdict, slo_rows
from inferplan.errors import InputError, exit_on_input_error
from sim.results.read import try_summary
from sim.results.schema import RUN_FILES, SUMMARY


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def verdict_text(summary: dict) -> str:
    verdict = overall_verdict(summary)
    if verdict is None:
        return "This run states no SLO."
    if verdict:
        return "Every SLO is met."
    missed = [k.label for k in kpis(summary) if k.met is False]
    return "SLO missed: " + ", ".join(missed) + "."


def provenance_rows(run: RunData) -> list[tuple[str, object]]:
    s = run.summary
    rows = [("run folder", run.path.resolve()), ("scenario", s.get("scenario")), ("seed", s.get("seed")),
            ("simulated duration (s)", s.get("simulated_duration_s")), ("wall time (s)", s.get("wall_time_s"))]
    rows += [(f"cost model {k}", v) for k, v in flat_items(s.get("cost_model") or {})]
    rows += [(f"invariant {k}", v) for k, v in (s.get("invariants") or {}).items()]
    return rows + [("report written", _stamp())]


def run_sections(run: RunData) -> list[str]:
    """The body of a run's report."""
    s = run.summary
    frames = figures.run_frames(run)
    body = [f"<h1>inferplan review: {hk.esc(run.title)}</h1>",
            f'<p class="sub">{hk.esc(run.path)} · written {_stamp()}</p>']
    if review.partial_text(s):
        body.append(hk.partial_banner(review.partial_text(s)))
    body += [hk.banner(overall_verdict(s), verdict_text(s)), f'<p class="note">{hk.esc(review.provenance_text(s))}</p>']
    if review.monthly_text(s):
        body.append(f'<p class="note">{hk.esc(review.monthly_text(s))}</p>')
    body += diagnosis_sections(s)
    body += ["<h2>Key figures</h2>", hk.kpi_cards(kpis(s))]
    by_class, by_pool = review.verdict_tables(s)
    if not by_class.empty:
        body += ["<h2>Verdicts by class</h2>", hk.table(by_class), "<h2>Verdicts by class and pool</h2>",
                 hk.table(by_pool)]
    rows = slo_rows(s)
    body += ["<h2>SLO verdicts</h2>", hk.table(pd.DataFrame(rows)) if rows else
             '<p class="note">The scenario sets no SLO targets.</p>']
    body.append("<h2>Charts</h2>")
    for fig in figures.run_charts(run, frames):
        body.append(f"<h3>{hk.esc(fig.title)}</h3>")
        body.append(hk.chart(fig.chart, fig.title) if fig.chart is not None else "")
        if fig.note:
            body.append(f'<p class="note">{hk.esc(fig.note)}</p>')
    body += ["<h2>Pools</h2>", hk.table(frames.costs), "<h2>Requests not served</h2>", hk.table(frames.unserved)]
    body += ["<h2>Configuration</h2>"]
    if run.overrides:
        body.append("<p>Overrides: <code>" + hk.esc(" ".join(run.overrides)) + "</code></p>")
    body.append(f"<pre>{hk.esc(run.config_yaml)}</pre>" if run.config_yaml else
                '<p class="note">No <code>.hydra/config.yaml</code> in this run.</p>')
    body += ["<h2>Provenance</h2>", hk.pairs(provenance_rows(run))]
    return body


def diagnosis_sections(s: dict) -> list[str]:
    """The diagnosis: one block per finding (headline, evidence, knobs to try), or why there is none."""
    body = ["<h2>Diagnosis</h2>"]
    note = review.diagnosis_note(s)
    if note:
        body.append(f'<p class="note">{hk.esc(note)}</p>')
    for f in review.findings(s):
        body.append(f"<h3>{hk.esc(f['headline'])}</h3><ul>" + "".join(f"<li>{hk.esc(e)}</li>" for e in f["evidence"])
                    + "</ul>")
        if f["try"]:
            body.append("<p>Try:</p><pre>" + hk.esc("\n".join(f["try"])) + "</pre>")
    return body


def _config_name(c: dict) -> str:
    return " ".join(c.get("override_args") or []) or "(the base configuration)"


def _check_text(c: dict) -> str:
    unit = c.get("unit") or ""
    ach, tgt = c.get("achieved"), c.get("target")
    run = "with one instance failed (N+1): " if c.get("run") == "n+1" else ""   # (plan.json, redundancy=n+1)
    if ach is None or tgt is None:
        return f"{run}{c.get('class', '')} {c.get('name', '')}: no data"
    margin = (ach - tgt) if c.get("name") == "served_fraction" else (tgt - ach)
    return run + (f"{c.get('class', '')} {c.get('name', '')}: {ach:.4g} {unit} against {tgt:.4g} {unit} "
                  f"(margin {margin:+.3g} {unit}, {margin / tgt:+.1%})" if tgt else f"{c.get('name')}: {ach:.4g}")


def plan_answer_sections(plan: dict) -> list[str]:
    """The plan's answer first: the recommended fleet, its cost (and a monthly projection), the margin to each
    SLO, and the next-cheaper configuration with why it fails. A plan.json of an older schema (no `chosen`
    configuration record) gets its raw fields only, at the end."""
    chosen, cheaper = plan.get("chosen"), plan.get("next_cheaper_failing")
    if not isinstance(chosen, dict) or ("override_args" not in chosen and chosen is not None):
        return []
    body = ["<h2>Answer</h2>"]
    if chosen is None:
        body.append(hk.banner(False, "No configuration in the search meets every SLO: widen the search."))
    else:
        fleet = ", ".join(f"{n}: {f.get('instances')} x {f.get('hardware')} ({f.get('model')} {f.get('weights_dtype')})"
                          for n, f in (chosen.get("fleet") or {}).items())
        month = chosen.get("usd_per_month_projected")
        body.append(hk.banner(True, f"Recommended: {_config_name(chosen)}"))
        body.append(hk.pairs([
            ("fleet (instances at the start)", fleet or "-"),
            ("cost of the simulated window (USD)", "-" if chosen.get("usd") is None else f"{chosen['usd']:,.2f}"),
            ("simulated window (s)", chosen.get("simulated_duration_s")),
            (f"monthly projection (USD, {chosen.get('usd_per_month_basis') or 'the window rate for 730 h'})",
             "-" if month is None else f"{month:,.0f}"),
            *[(f"margin: {c.get('class', '')} {c.get('name', '')}", _check_text(c)) for c in chosen.get("slos", [])]]))
    if cheaper:
        body.append(f"<p><b>Next cheaper, fails:</b> {hk.esc(_config_name(cheaper))} "
                    f"(USD {cheaper.get('usd') or 0:,.2f})</p><ul>"
                    + "".join(f"<li>{hk.esc(_check_text(c))}</li>" for c in cheaper.get("failed_slos", [])) + "</ul>")
    elif chosen:
        body.append('<p class="note">No cheaper configuration was evaluated.</p>')
    return body


def runs_provenance(folder: Path | None, df: pd.DataFrame) -> str:
    """The cost-model provenance of the runs behind a comparison's rows (`run_dir`, relative to `folder`)."""
    dirs = [Path(folder or ".") / str(d) for d in df["run_dir"]] if "run_dir" in df else []
    return review.provenance_across([s for s in map(try_summary, dirs) if s is not None])


def comparison_sections(df: pd.DataFrame, title: str, source: str, notes: list[str],
                        cost: str = "usd_per_million_output_tokens", latency: str = "ttft_p99_s",
                        folder: Path | None = None) -> list[str]:
    """The body of a comparison (a sweep, a plan's sweep, or runs chosen in the app); `folder` is where the rows'
    `run_dir`s are (None: they are absolute)."""
    body = [f"<h1>{hk.esc(title)}</h1>", f'<p class="sub">{hk.esc(source)} · {len(df)} configurations · '
            f"written {_stamp()}</p>", f'<p class="note">{hk.esc(runs_provenance(folder, df))}</p>']
    if df.empty:
        return body + ['<p class="note">Nothing to compare.</p>'] + [f"<p>{hk.esc(n)}</p>" for n in notes]
    cost = cost if cost in df else next((c for c in compare.COSTS if c in df), cost)
    latency = latency if latency in df else next((c for c in compare.LATENCIES if c in df), latency)
    ann = compare.annotate(df, cost, latency)
    best = ann[ann["cheapest"]]
    if not best.empty:
        row = best.iloc[0]
        body.append(hk.banner(True, f"Cheapest configuration meeting the SLO: {row['label']} "
                                    f"({compare.COSTS.get(cost, cost)}: {row[cost]:,.3f})"))
    else:
        body.append(hk.banner(False if ann["meets_slo"].notna().any() else None,
                              "No configuration meets the SLO." if ann["meets_slo"].notna().any()
                              else "The runs state no SLO verdicts."))
    body += ["<h2>Side by side</h2>", hk.table(compare.display_table(ann))]
    if cost in ann and latency in ann:
        lat_title, scale, target = compare.LATENCIES[latency]
        slo = ann[target].dropna().iloc[0] if target and target in ann and ann[target].notna().any() else None
        body += ["<h2>Cost against latency</h2>", hk.chart(charts.pareto(
            ann, cost, compare.COSTS[cost], latency, lat_title, scale, slo), "Pareto frontier")]
    bars = compare.bars_long(ann, ["ttft_p99_s", "tpot_p99_s", "attainment", "usd_per_million_output_tokens"])
    if not bars.empty:
        body += ["<h2>Metrics per configuration</h2>", hk.chart(charts.metric_bars(bars), "Side by side")]
    overrides = compare.override_columns(df.drop(columns=["label"], errors="ignore"))
    if overrides:
        body += ["<h2>Configuration</h2>", hk.table(df[["label", *overrides]].astype(str))]
    if notes:
        body += ["<h2>Jobs that could not be read</h2>"] + [f"<p>{hk.esc(n)}</p>" for n in notes]
    return body


def build(folder: Path) -> str:
    """The HTML report of a run, sweep or plan folder; `InputError` when it is none of them (or broken)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "folder", "not found", "give a run, sweep or plan folder")
    if (folder / "plan.json").is_file():
        plan = read_plan(folder)
        body = ["<h1>inferplan plan</h1>", f'<p class="sub">{hk.esc(folder)} · written {_stamp()}</p>']
        body += plan_answer_sections(plan)
        if (folder / "sweep.parquet").is_file():
            df, notes = compare.sweep_frame(folder)
            body += comparison_sections(df, "Configurations searched", str(folder), notes, folder=folder)[2:]
        body += ["<h2>plan.json</h2>", "<details><summary>every field</summary>", hk.pairs(flat_items(plan)),
                 "</details>"]
        return hk.page(f"inferplan plan: {folder.name}", body)
    if (folder / "sweep.parquet").is_file():
        df, notes = compare.sweep_frame(folder)
        return hk.page(f"inferplan sweep: {folder.name}",
                       comparison_sections(df, f"inferplan sweep: {folder.name}", str(folder), notes,
                                           folder=folder))
    if not any((folder / name).exists() for name in (*RUN_FILES, ".hydra")):
        raise InputError(folder, "folder", f"is not a run, sweep or plan folder (no {SUMMARY}, sweep.parquet or "
                         "plan.json)", "give a folder written by `python -m sim` or `python -m sim.plan`")
    run = open_run(folder)
    return hk.page(f"inferplan review: {run.title}", run_sections(run))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboard.report", description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="a run, sweep or plan folder")
    parser.add_argument("-o", "--output", type=Path, help="HTML file to write (default: <folder>/report.html)")
    args = parser.parse_args(argv)
    with exit_on_input_error():
        text = build(args.folder)
        out = args.output or args.folder / "report.html"
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as err:
            raise InputError(out, "output", f"cannot write ({err.strerror})", "choose another path with -o") from None
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
