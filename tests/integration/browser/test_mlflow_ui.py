"""The MLflow UI in headless Chromium shows what `ringleader run` recorded: the sweep in the experiment's runs,
the comparison table in the sweep run's description, the report's figures rendered; the browser reaches
127.0.0.1 only. Screenshots are kept (see conftest.py); docs/e2e.md describes the test.

Heavy (a sweep, a server, a browser: about a minute): RINGLEADER_HEAVY_TESTS=1, as `make test` sets.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import mlflow.tracking
import pytest
from playwright.sync_api import Page, expect

import chromium
from ringleader.commands import ui
from ringleader.tracking import store

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("RINGLEADER_HEAVY_TESTS"),
                       reason="heavy: set RINGLEADER_HEAVY_TESTS=1 (a sweep, mlflow server and Chromium)"),
]

# --- What the UI must show: the contract of `ringleader report` and of the experiments' tags. Adjust here. ---
# MLflow 3.17's UI takes the GenAI/model-training mode from this query parameter (else the browser's last
# choice, else GenAI), not from the experiment's `mlflow.experimentKind` tag; a fresh browser needs it.
MODE = "?workflowType=machine_learning"
EXPERIMENT_PAGE = "/#/experiments/{experiment_id}" + MODE
RUN_PAGE = "/#/experiments/{experiment_id}/runs/{run_id}" + MODE
ARTIFACT_PAGE = "/#/experiments/{experiment_id}/runs/{run_id}/artifacts/{path}" + MODE
DESCRIPTION_HEADER = "trial"  # a header cell of the description's comparison table; one row per trial
REPORT_PAGE = "report/report.html"  # self-contained: its figures are inside it
REPORT_FIGURES = ["report/time.png"]  # PNG artifacts shown on their own
CHARTS_PAGE = "/#/experiments/{experiment_id}/runs/{run_id}/model-metrics" + MODE  # a run's charts tab
SECTION_HEADER = "experiment-view-compare-runs-section-header"  # MLflow's test id of a chart section's header
ONCE_SECTION = "Model metrics"  # MLflow's section of keys without "/": ringleader's values logged once
TRIAL_SECTIONS = ["throughput", "time", "train"]  # a trial's series (docs/metrics.md), sorted as MLflow sorts them
RANK_SECTIONS = ["time", "traffic", "train"]  # a worker's series under BSP (no staleness series): the phases first
TRIALS_VIEW = "/#/experiments/{experiment_id}/runs?viewStateShareKey=ringleader-trials&" + MODE[1:]
# What is cut in a cell: the text of each element in it whose text overflows the element (the cell itself overflows
# by its resize handle).
OVERFLOWS = ("cell => [...cell.querySelectorAll('*')].filter(e => e.innerText.trim() && e.scrollWidth > e.clientWidth)"
             ".map(e => e.innerText)")
TRIALS_COLUMNS = {"arch": ["1ps", "ring"], "paradigm": ["BSP", "BSP"], "workers": ["2", "2"]}  # tag: values
# --------------------------------------------------------------------------------------------------------------


def rendered_widths(frame_or_page, selector: str) -> list[int]:
    """Natural widths of the images `selector` finds once each has decoded (0: it failed; -1: not within 30 s)."""
    images = frame_or_page.locator(selector)
    expect(images.first, f"no image {selector} is shown").to_be_visible()
    return images.evaluate_all("""imgs => Promise.all(imgs.map(img => Promise.race([
        img.decode().then(() => img.naturalWidth, () => img.naturalWidth),
        new Promise(resolve => setTimeout(() => resolve(-1), 30000))])))""")


def test_the_ui_shows_the_sweep_its_comparison_table_and_the_report_figures(recorded_sweep, screenshots):
    base = recorded_sweep.server.uri
    ids = {"experiment_id": recorded_sweep.experiment_id, "run_id": recorded_sweep.sweep_run_id}

    with chromium.session(screenshots.directory) as (context, traffic):
        def visit(path: str) -> Page:
            # A new page each time: the UI reads an artifact's path when it loads, not when only the #fragment moves.
            for previous in context.pages:
                previous.close()
            page = context.new_page()
            page.goto(base + path)
            return page

        # The experiment: its runs table lists the sweep run.
        page = visit(EXPERIMENT_PAGE.format(**ids))
        try:
            expect(page.get_by_role("link", name=recorded_sweep.sweep_run_name, exact=True).first,
                   f"the runs table lists no {recorded_sweep.sweep_run_name!r}").to_be_visible()
        finally:
            screenshots.take(page, "experiment")

        # The sweep run, at the address `ringleader ui` (`make ui`) prints: the newest sweep's page. The
        # experiment list would not do: a click from it opens an experiment in the GenAI view.
        printed = ui.newest_sweep_page(store.Store(recorded_sweep.server.uri), base)
        assert printed == base + RUN_PAGE.format(**ids)
        # Its description renders as a table, one row per trial.
        page = visit(RUN_PAGE.format(**ids))
        try:
            table = page.locator("table").filter(
                has=page.get_by_role("columnheader", name=re.compile(rf"^\s*{DESCRIPTION_HEADER}\s*$")))
            expect(table.first, f"the sweep run's description shows no table with a {DESCRIPTION_HEADER!r} header"
                   ).to_be_visible()
            for trial in recorded_sweep.trials:
                expect(table.first.get_by_role("cell", name=trial, exact=True),
                       f"the description table has no row for trial {trial!r}").to_be_visible()
        finally:
            screenshots.take(page, "sweep-run")

        # The report page in the artifact viewer (an iframe): every figure in it decoded and drawn.
        page = visit(ARTIFACT_PAGE.format(**ids, path=REPORT_PAGE))
        try:
            report = page.frame_locator("iframe")
            widths = rendered_widths(report, "img")
            assert widths and all(width > 0 for width in widths), f"{REPORT_PAGE}: images' natural widths {widths}"
        finally:
            screenshots.take(page, "report")

        # Each figure on its own, as the artifact viewer shows a PNG.
        for figure in REPORT_FIGURES:
            page = visit(ARTIFACT_PAGE.format(**ids, path=figure))
            try:
                widths = rendered_widths(page, f'img[alt="{figure}"]')  # the viewer's alt text: the path
                assert widths and all(width > 0 for width in widths), f"{figure}: images' natural widths {widths}"
            finally:
                screenshots.take(page, "figure-" + pathlib.PurePosixPath(figure).stem)

    (screenshots.directory / "refused.txt").write_text("".join(f"{url}\n" for url in traffic.refused()))
    assert traffic.page_requests, "the pages' requests were not recorded"
    assert traffic.pages_outside_loopback() == []
    assert any(entry.startswith("TCP_CONNECT_ATTEMPT 127.0.0.1:") for entry in traffic.sent()), \
        "the net log shows no connection to the server: it would not show one elsewhere either"
    assert traffic.sent_outside_loopback() == []


def chart_sections(page: Page) -> list[str]:
    """The names of the run page's chart sections, top to bottom, once MLflow has laid them all out."""
    headers = page.get_by_test_id(SECTION_HEADER)
    expect(headers.filter(has_text=ONCE_SECTION).first, f"no {ONCE_SECTION!r} section").to_be_visible()
    return [text.split("\n")[0].strip() for text in headers.all_inner_texts()]


def test_a_trial_run_and_a_rank_run_open_on_their_series_and_end_on_what_was_logged_once(recorded_sweep, screenshots):
    client = mlflow.tracking.MlflowClient(recorded_sweep.server.uri)
    [trial, *_] = client.search_runs([recorded_sweep.experiment_id], "tags.`ringleader.kind` = 'trial'",
                                     order_by=["tags.`ringleader.trial`"])
    workers = client.search_runs([recorded_sweep.experiment_id], "tags.`ringleader.kind` = 'rank' and "
                                 "tags.`ringleader.role` = 'worker' and tags.`mlflow.parentRunId` = "
                                 f"'{trial.info.run_id}'")
    with chromium.session(screenshots.directory / "charts") as (context, _):
        for name, run, first in (("trial", trial, TRIAL_SECTIONS), ("rank", workers[0], RANK_SECTIONS)):
            page = context.new_page()
            page.goto(recorded_sweep.server.uri + CHARTS_PAGE.format(experiment_id=recorded_sweep.experiment_id,
                                                                     run_id=run.info.run_id))
            try:
                sections = chart_sections(page)
            finally:
                screenshots.take(page, f"{name}-run-charts")
            # The series first, in the order MLflow sorts their sections; what was logged once last of all.
            assert sections[:len(first)] == first, sections
            assert sections[-1] == ONCE_SECTION and sections.count(ONCE_SECTION) == 1, sections
            page.close()


def test_a_request_beyond_loopback_is_refused_in_the_browser_and_recorded(recorded_sweep, screenshots):
    # What the main test relies on: a page asking for another host gets an error from the browser itself
    # (no name resolves but 127.0.0.1; no DNS query is sent) and the record shows the request.
    with chromium.session(screenshots.directory / "refusal") as (context, traffic):
        page = context.new_page()
        page.goto(recorded_sweep.server.uri + "/health")
        error = page.evaluate("""() => fetch('http://ringleader-test.invalid/').then(
                                   response => 'answered ' + response.status, error => String(error))""")

    assert error.startswith("TypeError"), error
    assert traffic.pages_outside_loopback() == ["http://ringleader-test.invalid/"]
    assert traffic.sent_outside_loopback() == []


def test_the_trials_view_lists_each_trials_topology_in_columns_whose_values_are_not_cut(recorded_sweep, screenshots):
    with chromium.session(screenshots.directory / "trials") as (context, _):
        page = context.new_page()
        page.set_viewport_size({"width": 1920, "height": 900})
        page.goto(recorded_sweep.server.uri + TRIALS_VIEW.format(experiment_id=recorded_sweep.experiment_id))
        try:
            for tag, values in TRIALS_COLUMNS.items():
                header = page.locator(f'.ag-header-cell[col-id="tags.`{tag}`"]')
                expect(header, f"the trials view has no column {tag!r}").to_be_visible()
                cells = page.locator(f'.ag-cell[col-id="tags.`{tag}`"]')
                expect(cells, f"column {tag!r}: one cell per trial").to_have_count(len(values))
                # In trial order (the view sorts by trial index), and each drawn whole within MLflow's fixed width
                # (the run names beside them are cut: their text overflows an element inside the cell).
                assert [text.strip() for text in cells.all_inner_texts()] == values, tag
                assert tag in header.inner_text(), tag
                assert header.evaluate(OVERFLOWS) == [], f"column {tag!r}: its header is cut"
                assert cells.evaluate_all(f"cells => cells.flatMap({OVERFLOWS})") == [], (f"column {tag!r}: "
                                                                                          "a value is cut")
        finally:
            screenshots.take(page, "trials-view")


def test_a_report_from_the_tracking_server_links_each_trial_and_rank_to_its_run_page(recorded_sweep, screenshots,
                                                                                      tmp_path):
    made = subprocess.run([sys.executable, "-m", "ringleader.cli", "report", "default/ui", "--no-attach",
                           "--tracking-uri", recorded_sweep.server.uri, "-o", str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert made.returncode == 0, made.stderr
    page_html = (tmp_path / "report.html").read_text()
    assert "Taken on " in page_html  # the sweep run's provenance, read back from its tags
    linked = dict((name, href.replace("&amp;", "&")) for href, name in
                  re.findall(r'<li><a href="([^"]+)">([^<]+)</a></li>', page_html))
    assert [name for name in linked if "/" not in name] == recorded_sweep.trials
    assert all(href.startswith(recorded_sweep.server.uri + "/#/experiments/") for href in linked.values())

    client = mlflow.tracking.MlflowClient(recorded_sweep.server.uri)
    with chromium.session(screenshots.directory / "links") as (context, traffic):
        for name in [*recorded_sweep.trials, next(name for name in linked if "/" in name)]:
            page = context.new_page()
            page.goto(linked[name])
            run_id = re.search(r"/runs/([0-9a-f]+)", linked[name]).group(1)
            run_name = client.get_run(run_id).info.run_name
            assert run_name.startswith(name), (name, run_name)  # the link leads to that trial's (or rank's) run
            try:
                expect(page.get_by_role("heading", name=run_name, exact=True).first,
                       f"{linked[name]} does not open run {run_name!r}").to_be_visible()
            finally:
                screenshots.take(page, "linked-" + name.replace("/", "-"))
            page.close()
    assert traffic.pages_outside_loopback() == []
