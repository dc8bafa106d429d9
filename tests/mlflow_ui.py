"""Look at a study the way a person does: the MLflow UI's runs table, in headless Chromium.

    with mlflow_ui_server("sqlite:///.../mlflow.db") as base_url:   # bench/mlflow_server.py
        text = capture_runs_table(base_url, "ner_depth", "runs.png")

`capture_runs_table` opens the experiment's runs page (the "Model training" workflow), shows
the arm runs and the summary metric columns, waits for them to render, takes a full-page
screenshot and returns the table as tab-separated text (a header line, then one line per row,
as the UI shows them). The server it looks at comes from bench/mlflow_server.py.

How the MLflow 3 UI is made to show them (tried on 3.17.2):
- The experiment page opens on the GenAI workflow (a traces overview); the URL parameter
  `workflowType=machine_learning` opens the runs table, with the search facets (filter, sort)
  as URL parameters too. The assistant panel, which opens itself on a first visit and covers
  the table, is kept shut through its localStorage flags.
- Columns and expanded rows are UI state, which the UI keeps in localStorage under
  `MLflowLocalStorage-1.1-ExperimentPage-["<experiment id>"]-ReactComponentState`
  (`selectedColumns`: keys like "metrics.`f1_mean`"; `runsExpanded`: {run id: true}); no URL
  parameter sets them. The page is seeded with that state once, before it first loads.
- If seeding did not take (a later UI that stores it elsewhere), it falls back to what a person
  does: the "Columns" selector (search box, tick the metric) and the row's expander button.
- The UI nests child rows under their parents whenever the table is sorted by creation time,
  even under a search filter (the matches then show collapsed under their parents); so with
  `search_filter` (e.g. "tags.run_kind = 'arm'") the table is also sorted by run name, and the
  UI lists the matching runs flat.
- The table loads 100 runs a page, newest first; when those are all trials, the UI fetches
  their parents, so the arm runs show at the top level and the study run only after
  "Load more" (which is clicked while expected arm runs are still missing).
Only loopback is reached: every request the page makes elsewhere is aborted.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from mlflow_server import server_api

SUMMARY_METRICS = ("f1_mean", "f1_std", "n_seeds")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Search facets as the URL carries them (sorted by creation time, no filter: nested view).
DEFAULT_FACETS = {
    "orderByKey": "attributes.start_time",
    "orderByAsc": "false",
    "startTime": "ALL",
    "lifecycleFilter": "Active",
    "modelVersionFilter": "All Runs",
}
UI_STATE_KEY = 'MLflowLocalStorage-1.1-ExperimentPage-["{experiment_id}"]-ReactComponentState'
RUN_NAME_COLUMN = "attributes.`Run Name`"
# the assistant panel opens itself on a first visit and covers the page
ASSISTANT_SHUT = (
    "localStorage.setItem('mlflow.assistant.panelOpen_v1', 'false');",
    "localStorage.setItem('mlflow.assistant.fab.autoOpenedOnFirstLoad_v1', 'true');",
)
LOOPBACK = ("http://127.0.0.1", "http://localhost", "http://[::1]")
NAME_ORDER_KEY = "tags.`mlflow.runName`"


def chromium_path() -> str | None:
    """The browser to drive: $MLFLOW_UI_CHROMIUM, else Debian's `chromium` on PATH."""
    explicit = os.environ.get("MLFLOW_UI_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_unavailable_reason() -> str | None:
    """Why the UI cannot be checked here (for pytest.skip), or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; never `playwright install`)"
    if chromium_path() is None:
        return "no chromium browser (apt-get install -y chromium, or set MLFLOW_UI_CHROMIUM)"
    return None


def loopback_page(browser, viewport: dict, init: Sequence[str] = ASSISTANT_SHUT):
    """A new page that reaches only loopback (every other request is aborted) and runs the
    `init` scripts before each document loads."""
    context = browser.new_context(viewport=viewport)
    context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url.startswith(LOOPBACK) else route.abort()
        ),
    )
    context.add_init_script("\n".join(init))
    return context.new_page()


def _search_runs(base_url: str, experiment_id: str, filter_string: str, limit: int = 1000):
    runs: list[dict] = []
    token = None
    while len(runs) < limit:
        body = {"experiment_ids": [experiment_id], "filter": filter_string, "max_results": 500}
        if token:
            body["page_token"] = token
        page = server_api(base_url, "runs/search", body)
        runs.extend(page.get("runs", []))
        token = page.get("next_page_token")
        if not token:
            break
    return runs[:limit]


def _name(run: dict) -> str:
    return run["info"].get("run_name") or run["info"]["run_id"]


def _tags(run: dict) -> dict[str, str]:
    return {t["key"]: t.get("value", "") for t in run.get("data", {}).get("tags", [])}


# The rendered table (ag-grid) as rows of cell texts, matched by aria row/column indexes: the
# pinned name column and the scrolling columns are separate DOM trees.
_TABLE_JS = """() => {
  const root = document.querySelector('.ag-root-wrapper');
  if (!root) return null;
  const clean = (el) => el.innerText.replace(/\\s+/g, ' ').trim();
  // a run's name is its link; the cell also holds the hidden text of its colour chip
  const cell = (el) => clean(el.querySelector('a') ?? el);
  const heads = new Map();
  for (const h of root.querySelectorAll('.ag-header-row-column .ag-header-cell[aria-colindex]'))
    heads.set(+h.getAttribute('aria-colindex'), {id: h.getAttribute('col-id'), text: clean(h)});
  const rows = new Map();
  for (const c of root.querySelectorAll('.ag-row[row-index] .ag-cell[aria-colindex]')) {
    const r = +c.closest('.ag-row').getAttribute('row-index');
    if (!rows.has(r)) rows.set(r, {});
    rows.get(r)[+c.getAttribute('aria-colindex')] = cell(c);
  }
  const cols = [...heads.keys()].filter((k) => heads.get(k).text).sort((a, b) => a - b);
  return {
    columns: cols.map((k) => heads.get(k)),
    rows: [...rows.keys()].sort((a, b) => a - b)
      .map((r) => cols.map((k) => rows.get(r)[k] ?? '')),
  };
}"""


def _table(page) -> dict:
    return page.evaluate(_TABLE_JS) or {"columns": [], "rows": []}


def _missing(table: dict, names: Sequence[str], metrics: Sequence[str]) -> tuple[list, list]:
    ids = {c["id"] for c in table["columns"]}
    name_idx = next((i for i, c in enumerate(table["columns"]) if c["id"] == RUN_NAME_COLUMN), 0)
    shown = {row[name_idx] for row in table["rows"] if row}
    return (
        [n for n in names if n not in shown],
        [m for m in metrics if f"metrics.`{m}`" not in ids],
    )


def _wait_for(page, names, metrics, timeout_s: float) -> tuple[list, list]:
    deadline = time.monotonic() + timeout_s
    while True:
        missing = _missing(_table(page), names, metrics)
        if not any(missing) or time.monotonic() > deadline:
            return missing
        page.wait_for_timeout(250)


def _show_columns_by_clicking(page, metrics: Sequence[str]) -> None:
    page.get_by_role("button", name="Columns").click()
    search = page.get_by_placeholder("Search columns")
    for metric in metrics:
        search.fill(metric)
        node = page.locator(".du-bois-light-tree-treenode", has_text=metric)
        node.filter(has=page.get_by_text(metric, exact=True)).first.locator(
            ".du-bois-light-tree-checkbox"
        ).click()
    page.keyboard.press("Escape")


def _expand_by_clicking(page, parent_names: Sequence[str]) -> None:
    for name in parent_names:
        cell = page.locator(f'.ag-row .ag-cell[col-id="{RUN_NAME_COLUMN}"]').filter(
            has=page.get_by_role("link", name=name, exact=True)
        )
        button = cell.first.locator("button").first  # the expander, before the name
        if button.count():
            button.click()


def _fit_columns(page, col_ids: Sequence[str]) -> None:
    """Double-click each column's resize handle, as a person would: ag-grid then sizes it to
    its content, so long run names and metric names are not cut (seeding `columnWidths` alone
    does not take: the UI applies widths only together with a full `columnOrder`)."""
    for col_id in col_ids:
        handle = page.locator(f'.ag-header-cell[col-id="{col_id}"] .ag-header-cell-resize')
        if handle.count():
            handle.first.dblclick()
    page.mouse.move(0, 0)


def capture_runs_table(
    base_url: str,
    experiment_name: str,
    screenshot_path: str | Path,
    *,
    metrics: Sequence[str] = SUMMARY_METRICS,
    search_filter: str | None = None,
    expand_kind: str = "study",
    child_kind: str = "arm",
    timeout_s: float = 60.0,
    width: int | None = None,
    seed_ui_state: bool = True,
) -> str:
    """Screenshot the experiment's runs table with `metrics` as columns; return its text.

    Nested view (default): every run tagged run_kind=`expand_kind` is expanded, and the page
    waits until every run tagged run_kind=`child_kind` under them is a row. With
    `search_filter`, the UI shows the matching runs flat and the page waits for all of them.
    The text is tab-separated: the header line, then one line per rendered row.
    `seed_ui_state=False` skips the localStorage seeding and uses only clicks.
    """
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        raise RuntimeError(browser_unavailable_reason() or "no chromium")
    found = server_api(
        base_url,
        "experiments/get-by-name?" + urllib.parse.urlencode({"experiment_name": experiment_name}),
    )
    experiment_id = found["experiment"]["experiment_id"]
    if search_filter:
        parents: list[dict] = []
        expected = _search_runs(base_url, experiment_id, search_filter)
    else:
        parents = _search_runs(base_url, experiment_id, f"tags.run_kind = '{expand_kind}'")
        parent_ids = {r["info"]["run_id"] for r in parents}
        children = _search_runs(base_url, experiment_id, f"tags.run_kind = '{child_kind}'")
        expected = [r for r in children if _tags(r).get("mlflow.parentRunId") in parent_ids]
    names = [_name(r) for r in expected]
    parent_names = [_name(r) for r in parents]
    name_of = {r["info"]["run_id"]: _name(r) for r in parents}
    children_of = {name: [] for name in parent_names}
    for run in expected:
        parent = name_of.get(_tags(run).get("mlflow.parentRunId", ""))
        if parent is not None:
            children_of[parent].append(_name(run))

    facets = {**DEFAULT_FACETS, "searchFilter": search_filter or ""}
    if search_filter:  # the UI nests children whenever it sorts by creation time
        facets.update(orderByKey=NAME_ORDER_KEY, orderByAsc="true")
    ui_state = {
        **facets,
        "orderByAsc": facets["orderByAsc"] == "true",
        "datasetsFilter": [],
        "selectedColumns": [f"metrics.`{m}`" for m in metrics],
        "runsExpanded": {r["info"]["run_id"]: True for r in parents},
        "autoRefreshEnabled": False,
    }
    init = list(ASSISTANT_SHUT)
    if seed_ui_state:
        key = UI_STATE_KEY.format(experiment_id=experiment_id)
        init.append(
            f"if (!sessionStorage.getItem('seeded')) {{ sessionStorage.setItem('seeded', '1');"
            f" localStorage.setItem({json.dumps(key)}, {json.dumps(json.dumps(ui_state))}); }}"
        )
    query = urllib.parse.urlencode({"workflowType": "machine_learning", **facets})
    url = f"{base_url}/#/experiments/{experiment_id}/runs?{query}"
    rows = len(names) + len(parent_names)
    viewport = {
        "width": width or 1600 + 130 * len(metrics),
        "height": min(max(900, 420 + 34 * rows), 6000),
    }

    screenshot_path = Path(screenshot_path)
    screenshot_path.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            page = loopback_page(browser, viewport, init)
            page.goto(url)
            page.wait_for_selector(".ag-row", timeout=timeout_s * 1000)
            missing_names, missing_metrics = _wait_for(
                page, names, metrics, timeout_s / 3 if seed_ui_state else 1.0
            )
            if missing_metrics:
                _show_columns_by_clicking(page, missing_metrics)
            collapsed = [
                p for p, kids in children_of.items() if kids and set(kids) <= set(missing_names)
            ]
            if collapsed:
                _expand_by_clicking(page, collapsed)
            missing_names, missing_metrics = _wait_for(page, names, metrics, timeout_s / 3)
            for _ in range(20):  # more runs than one page: the nested rows may be further on
                more = page.get_by_role("button", name="Load more")
                if not missing_names or not more.count():
                    break
                more.first.click()
                missing_names, missing_metrics = _wait_for(page, names, metrics, timeout_s / 6)
            _fit_columns(page, [RUN_NAME_COLUMN, *(f"metrics.`{m}`" for m in metrics)])
            page.wait_for_timeout(500)  # let the last cells paint (the page never idles)
            page.screenshot(path=str(screenshot_path), full_page=True)
            table = _table(page)
        finally:
            browser.close()
    lines = ["\t".join(c["text"] for c in table["columns"])]
    lines += ["\t".join(row) for row in table["rows"]]
    return "\n".join(lines)
