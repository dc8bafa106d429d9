"""The report page as HTML, `report.html` beside `README.md`, with its figures inside it.

The MLflow UI's artifact view shows a Markdown file as raw text but renders an `.html` file
(in a sandboxed frame loaded from memory, where a relative `<img src="x.png">` cannot load):
so the page is the README's own Markdown, rendered by markdown-it-py as CommonMark with
tables (as the README reads on a code host), with each figure of the report folder inlined
as a base64 PNG. One source, two renderings: the HTML never says anything the README does not.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 76em; margin: 1.5em auto; padding: 0 1em;
       line-height: 1.45; color: #1b1f24; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #c9ced6; padding: 0.25em 0.6em; text-align: left; }
th { background: #f1f3f6; }
code { background: #f1f3f6; padding: 0 0.2em; border-radius: 3px; }
blockquote { color: #4a5360; border-left: 4px solid #c9ced6; margin: 0; padding-left: 1em; }
img { max-width: 100%; }
"""


def _inline_figures(tokens: list[Token], folder: Path) -> None:
    """Every image whose source is a PNG file of the report folder gets that file's bytes."""
    for token in tokens:
        for child in token.children or []:
            path = folder / str(child.attrGet("src") or "")
            if child.type == "image" and path.suffix == ".png" and path.is_file():
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                child.attrSet("src", f"data:image/png;base64,{data}")


def render_html(page: str, folder: Path, title: str) -> str:
    """One self-contained HTML document from the report's Markdown `page`; its figures are
    read from `folder`, where the page's image links point."""
    # raw HTML off: a study's description or a trial's error text is shown, never run
    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = renderer.parse(page)
    _inline_figures(tokens, folder)
    body = renderer.renderer.render(tokens, renderer.options, {})
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n{body}</body>\n</html>\n"
    )
