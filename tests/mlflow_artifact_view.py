"""Look at one artifact of a run the way a person does: the MLflow UI's artifact view, in
headless Chromium (the server is bench/mlflow_server.py's, the browser plumbing
tests/mlflow_ui.py's).

    with mlflow_ui_server("sqlite:///.../mlflow.db") as base_url:
        view = capture_html_artifact(base_url, experiment_id, run_id, "report/report.html",
                                     "report_html.png")

How the MLflow 3 UI shows it (tried on 3.17.2): the run page's Artifacts tab takes the
artifact's path in its URL (`#/experiments/<id>/runs/<run>/artifacts/<path>`) and renders an
`.html` artifact inside `iframe.mlflow-html-iframe`, loaded from a blob URL and sandboxed
(scripts only, an opaque origin): relative links to other artifacts cannot load there, which
is why the report inlines its figures. The frame is read through the browser's own frame
tree, as a person's eyes would, not by fetching the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.mlflow_ui import CHROMIUM_ARGS, browser_unavailable_reason, chromium_path, loopback_page

FRAME = "iframe.mlflow-html-iframe"
# what the rendered page holds: its text, its tables and how many images loaded with pixels
_PAGE_JS = """() => ({
  text: document.body.innerText,
  tables: document.querySelectorAll('table').length,
  images: document.images.length,
  drawn: [...document.images].filter((i) => i.complete && i.naturalWidth > 0).length,
})"""


@dataclass(frozen=True)
class RenderedPage:
    text: str
    tables: int
    images: int
    drawn: int  # images that loaded and have pixels


def capture_html_artifact(
    base_url: str,
    experiment_id: str,
    run_id: str,
    artifact_path: str,
    screenshot_path: str | Path,
    *,
    timeout_s: float = 60.0,
    viewport: tuple[int, int] = (1600, 1100),
) -> RenderedPage:
    """Open the run's artifact view on `artifact_path`, wait until the UI has rendered it in
    its HTML frame, screenshot the page and return what the frame shows."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        raise RuntimeError(browser_unavailable_reason() or "no chromium")
    url = f"{base_url}/#/experiments/{experiment_id}/runs/{run_id}/artifacts/{artifact_path}"
    screenshot_path = Path(screenshot_path)
    screenshot_path.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            page = loopback_page(browser, {"width": viewport[0], "height": viewport[1]})
            page.goto(url)
            frame = page.wait_for_selector(FRAME, timeout=timeout_s * 1000).content_frame()
            frame.wait_for_selector("h1", timeout=timeout_s * 1000)
            frame.wait_for_function(
                "() => [...document.images].every((i) => i.complete)", timeout=timeout_s * 1000
            )
            page.wait_for_timeout(500)  # let the frame paint (the page never idles)
            page.screenshot(path=str(screenshot_path))
            return RenderedPage(**frame.evaluate(_PAGE_JS))
        finally:
            browser.close()
