"""The terminal summary of a calibration: per-op fit errors (held out and in-sample), baselines, what was skipped."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from calibrate.run import RunResult, overall_error


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def fit_table(result: RunResult) -> Table:
    rep = result.report
    table = Table(title=f"calibration of {result.model} on {result.hardware}: profile curves "
                        f"(every {rep.holdout_every}th shape held out)")
    for col, justify in (("op/dtype", "left"), ("implementations (points)", "left"), ("fit on", "right"),
                         ("held out", "right"), ("launch µs", "right"), ("efficiency", "right"),
                         ("held-out MAPE %", "right"), ("worst %", "right"), ("fit MAPE %", "right")):
        table.add_column(col, justify=justify)
    for (op, dt), fit in sorted(rep.profile.items()):
        impls = ", ".join(f"{k} ({v})" for k, v in sorted(rep.impls_in_profile[(op, dt)].items()))
        eff = fit.curve.efficiency
        table.add_row(f"{op}/{dt}", impls, str(fit.n_train), str(fit.n_held_out), f"{fit.curve.launch_s * 1e6:.1f}",
                      f"{min(eff):.2g}-{max(eff):.2g}", _pct(fit.held_out_mape_pct), _pct(fit.held_out_max_abs_pct),
                      _pct(fit.train_mape_pct))
    return table


def wide_console() -> Console:
    """Stdout console; 150 columns when not a terminal (logs, pipes) so tables are not squeezed to 80."""
    console = Console()
    return console if console.is_terminal else Console(width=150)


def print_report(result: RunResult, console: Console | None = None) -> None:
    console = console or wide_console()
    sw = result.sweep
    console.print(fit_table(result))
    overall = overall_error(result.report)
    console.print(f"held-out error over all curves: MAPE {_pct(overall['held_out_mape_pct'])}%, worst "
                  f"{_pct(overall['held_out_max_abs_pct'])}% ({overall['held_out_points']} points)")
    for name, ratio in result.report.ratio_to_primary.items():
        console.print(f"baseline {name}: {ratio:.2f}x the primary's time (median over shared shapes)")
    console.print(f"measured {sw.measured} new points, reused {sw.reused}, in {sw.elapsed_s:.1f} s"
                  + (f"; budget reached with {sw.remaining} left (re-run to continue)" if sw.stopped_by_budget else ""))
    for name, info in sorted(result.skipped.items()):
        console.print(f"skipped {name}: {info['points']} points ({info['reason']})")
    for name, info in sorted(sw.failed.items()):
        console.print(f"[red]failed[/red] {name}: {info['points']} points ({info['reason']})")
    if result.rehearsal:
        console.print("[yellow]rehearsal: GPU code timed on the CPU; the profile is for testing only[/yellow]")
    console.print(f"wrote {result.measurements_path}, {result.fit_path}"
                  + (f", {result.profile_path}" if result.profile_path else " (no profile: nothing measured)")
                  + (f"; installed {result.installed_path}" if result.installed_path else ""))
