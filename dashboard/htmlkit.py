"""Pieces of a self-contained HTML page: escaped text, tables, KPI cards and charts as inline SVG.

Charts are rendered to SVG with `vl-convert-python` (through Altair's `save`), so the report needs no network
and no JavaScript. Without that package the chart's Vega-Lite spec is embedded instead, with a note saying so;
the tables still carry every figure.
"""
from __future__ import annotations

import html
import io
import json

import altair as alt
import pandas as pd

from dashboard.kpis import Kpi

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto; max-width: 1000px;
       color: #1f2328; padding: 0 1rem; }
h1 { margin-bottom: .2rem; } .sub { color: #59636e; margin-top: 0; }
h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .9rem; }
th, td { border: 1px solid #d1d9e0; padding: .3rem .6rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } th { background: #f6f8fa; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: .6rem; }
.card { border: 1px solid #d1d9e0; border-radius: 6px; padding: .6rem .8rem; }
.card .label { color: #59636e; font-size: .85rem; } .card .value { font-size: 1.35rem; font-weight: 600; }
.met { color: #1a7f37; } .missed { color: #cf222e; }
.banner { padding: .7rem 1rem; border-radius: 6px; font-weight: 600; margin: 1rem 0; }
.banner.met { background: #dafbe1; } .banner.missed { background: #ffebe9; } .banner.none { background: #f6f8fa; }
.banner.partial { background: #fff8c5; }
.note { color: #59636e; font-style: italic; } pre { background: #f6f8fa; padding: .8rem; overflow-x: auto; }
figure { margin: 1rem 0; } svg { max-width: 100%; height: auto; }
"""


VERDICT_CLASSES = {"met": "met", "yes": "met", "missed": "missed", "no": "missed"}


def esc(text: object) -> str:
    return html.escape("" if text is None else str(text))


def page(title: str, body: list[str]) -> str:
    """A complete HTML document."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<style>{CSS}</style></head><body>\n' + "\n".join(body) + "\n</body></html>\n")


def table(df: pd.DataFrame, digits: int = 3) -> str:
    """A DataFrame as an HTML table; numbers right-aligned with thousands separators."""
    if df is None or df.empty:
        return '<p class="note">No rows.</p>'
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = []
    for _, row in df.iterrows():
        cells = []
        for value in row:
            if isinstance(value, (int, float)) and not isinstance(value, bool) and pd.notna(value):
                text = f"{value:,}" if float(value).is_integer() and abs(value) >= 1 else f"{value:,.{digits}f}"
                cells.append(f'<td class="num">{esc(text)}</td>')
            elif isinstance(value, str) and value in VERDICT_CLASSES:
                cells.append(f'<td class="{VERDICT_CLASSES[value]}">{esc(value)}</td>')
            else:
                blank = value is None or (isinstance(value, float) and pd.isna(value))
                cells.append(f"<td>{esc('' if blank else value)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def pairs(items: list[tuple[str, object]]) -> str:
    """Key/value rows as a two-column table."""
    return table(pd.DataFrame(items, columns=["field", "value"]).astype(str))


def kpi_cards(items: list[Kpi]) -> str:
    cards = []
    for k in items:
        verdict = "" if k.met is None else (
            f'<div class="met">meets {esc(k.show_target())}</div>' if k.met
            else f'<div class="missed">misses {esc(k.show_target())}</div>')
        cards.append(f'<div class="card"><div class="label">{esc(k.label)}</div>'
                     f'<div class="value">{esc(k.show())}</div>{verdict}</div>')
    return f'<div class="cards">{"".join(cards)}</div>'


def banner(met: bool | None, text: str) -> str:
    cls = "none" if met is None else ("met" if met else "missed")
    return f'<div class="banner {cls}">{esc(text)}</div>'


def partial_banner(text: str) -> str:
    """A warning above everything else: the figures below cover only part of the run."""
    return f'<div class="banner partial">{esc(text)}</div>'


def svg_renderer_available() -> bool:
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        return False
    return True


def chart(chart_obj: alt.TopLevelMixin, title: str) -> str:
    """A chart as inline SVG; where it cannot be drawn (no vl-convert-python), its Vega-Lite spec and a note."""
    reason = "the machine that wrote this report lacks vl-convert-python"
    if svg_renderer_available():
        buf = io.StringIO()
        try:
            chart_obj.save(buf, format="svg")
        except (ImportError, RuntimeError, ValueError) as err:  # too old a vl-convert, or it rejected the spec
            reason = f"vl-convert failed ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
        else:
            svg = buf.getvalue()
            return f'<figure aria-label="{esc(title)}">{svg[svg.find("<svg"):]}</figure>'
    spec = json.dumps(chart_obj.to_dict(), indent=None)
    return (f'<figure><p class="note">Chart “{esc(title)}” not drawn: {esc(reason)}. Its Vega-Lite spec (data '
            f'included) follows; the key figures are in the tables.</p>'
            f'<details><summary>Vega-Lite spec</summary><pre>{esc(spec)}</pre></details></figure>')
