"""End to end in a real headless browser: the app served by `streamlit run` on a free loopback port, every page
visited with Playwright driving Debian's Chromium, key text and drawn charts checked, screenshots saved
under tests/artifacts/dashboard/. The server this test starts is always stopped."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts" / "dashboard"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
# page url path, texts that must show, minimum number of drawn charts
PAGES = [
    ("run", "", ["Every SLO is met.", "Arrival rate against capacity", "Where the time goes", "TTFT P99",
                 "Verdicts by class", "Verdicts by class and pool", "Nothing to diagnose",
                 "No number here was measured on a GPU"], 8),
    ("run-url", "run", ["Every SLO is met.", "Verdicts by class and pool"], 8),
    ("run-missed", "run?run=2026-11-30_08-00-00", ["SLO missed", "Diagnosis",
                                                   "TTFT P99 missed: default on main", "cause: queueing",
                                                   "scenario.pools.main.instances=2", "Verdicts by class and pool"],
     8),
    ("run-partial", "run?run=2026-11-30_08-30-00", ["Partial run: interrupted at simulated t = 300.0 s",
                                                    "requests unfinished; latencies and costs cover only what was",
                                                    "Partial run: no cause is named"], 8),
    ("compare", "compare", ["Cheapest configuration meeting the SLO", "Side by side"], 2),
    ("calibration", "calibration", ["Measured against fitted", "Roofline", "Error per op", "Provenance"], 3),
    ("whatif", "whatif", ["Baseline run", "Instances in pool main", "Run what-if"], 0),
]
# page name -> texts that must not show: a partial run's diagnosis names no cause and suggests no knob
ABSENT = {"run-partial": ["cause:", "Try:", "scenario.pools.main.instances="]}

if not CHROMIUM.exists():
    pytest.skip("needs Debian's chromium at /usr/bin/chromium (`apt-get install -y chromium`)", allow_module_level=True)
sync_playwright = pytest.importorskip("playwright.sync_api", reason="needs the playwright package").sync_playwright


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(results, tmp_path):
    """`streamlit run dashboard/streamlit_app.py` over the fixture folders; yields its URL, then stops it."""
    port = free_port()
    log = open(tmp_path / "streamlit.log", "w")
    env = {**os.environ, "INFERPLAN_RUNS_DIR": f"{results['runs']},{results['multirun']}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(REPO / "dashboard" / "streamlit_app.py"),
         "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=results["base"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not come up:\n{(tmp_path / 'streamlit.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


# A chart counts as drawn when Vega has put data marks in it: `.role-mark` groups with children in its SVG
# (Streamlit 1.67 renders Vega as SVG), or a non-blank canvas (the canvas renderer; a blank one encodes tiny).
DRAWN_CHARTS = """(n) => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].filter(el =>
  el.querySelector('svg .role-mark > *') ||
  [...el.querySelectorAll('canvas')].some(c => c.width > 0 && c.toDataURL().length > 3000)).length >= n"""
# Streamlit scrolls inside its main block and draws a chart only once it is near the view: a window as tall as the
# page draws every chart, and the screenshot then holds the whole page.
PAGE_HEIGHT = """() => document.querySelector('[data-testid="stMainBlockContainer"]').scrollHeight"""


def test_every_page_renders_in_a_real_browser(server, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1400, "height": 6000})
        try:
            page = context.new_page()
            for name, path, expected, charts in PAGES:
                page.set_viewport_size({"width": 1400, "height": 6000})
                page.goto(f"{server}/{path}", wait_until="domcontentloaded")
                for text in expected:
                    try:
                        page.get_by_text(text, exact=False).filter(visible=True).first.wait_for(timeout=20_000)
                    except Exception:
                        page.screenshot(path=str(ARTIFACTS / f"{name}-failed.png"))
                        raise AssertionError(f"page {name}: {text!r} not shown (screenshot {name}-failed.png)")
                page.wait_for_function(DRAWN_CHARTS, arg=charts, timeout=20_000)
                for text in ABSENT.get(name, []):
                    assert page.get_by_text(text, exact=False).count() == 0, f"page {name}: {text!r} shown"
                assert page.locator('[data-testid="stException"]').count() == 0, name
                assert page.get_by_text("Page not found").count() == 0, name
                if name == "run-partial":  # the run picker names it partial (the value of its combobox input)
                    picker = page.get_by_role("combobox", name="Run")
                    picker.wait_for(timeout=20_000)
                    assert picker.input_value() == "runs/smoke/2026-11-30_08-30-00 (partial)", picker.input_value()
                if name == "run-missed":  # the verdict tables' cells (the grid draws on a canvas; cells in the DOM)
                    cells = page.locator('[data-testid^="glide-cell"]')
                    for text in ("missed", "main", "TTFT P99"):  # attached (drawn on the canvas, so not "visible")
                        cells.filter(has_text=text).first.wait_for(state="attached", timeout=20_000)
                page.set_viewport_size({"width": 1400, "height": min(int(page.evaluate(PAGE_HEIGHT)) + 120, 6000)})
                page.wait_for_timeout(300)  # let the tables' canvases repaint after the resize
                page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
        finally:
            context.close()
