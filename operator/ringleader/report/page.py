"""report.html: one self-contained page (figures as base64 PNG, inline CSS, no script, nothing fetched); used by
report.py.

It opens offline, from an MLflow artifact view, a mail attachment or a laptop without network, and
shows the same findings, tables and figures as the report's other files.
"""

from __future__ import annotations

import base64
import html
from typing import Mapping, Sequence

from ringleader.report.figures import Figure
from ringleader.report import tables

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.number { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; max-width: 60em; }
ul.findings li { margin: 0.3em 0; } .generated { color: #777; font-size: 0.8em; }
"""


def _table(table: tables.Table) -> str:
    head = "".join(f"<th>{html.escape(column)}</th>" for column in table.columns)
    body = "".join(
        "<tr>" + "".join(f'<td class="number">{html.escape(cell)}</td>' if i in table.numeric
                         else f"<td>{html.escape(cell)}</td>" for i, cell in enumerate(row)) + "</tr>\n"
        for row in table.rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.path.read_bytes()).decode("ascii")
    return (f'<figure id="{html.escape(figure.id)}">\n<h3>{html.escape(figure.title)}</h3>\n'
            f'<img src="data:image/png;base64,{data}" alt="{html.escape(figure.alt)}">\n'
            f"<figcaption>{html.escape(figure.caption)}</figcaption>\n</figure>\n")


def render(title: str, findings: Sequence[str], sections: Sequence[tuple[str, tables.Table]],
           figures: Sequence[Figure], footer: str, provenance: str | None = None,
           mlflow_pages: Mapping[str, str] | None = None) -> str:
    """The whole page: where the numbers were taken under the title, findings first, then the tables, then every
    figure with its caption."""
    taken = f'<p class="provenance">Taken on {html.escape(provenance)}</p>\n' if provenance else ""
    parts = [f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
             f"<style>{STYLE}</style>\n</head>\n<body>\n<h1>{html.escape(title)}</h1>\n{taken}",
             '<h2 id="findings">Findings</h2>\n<ul class="findings">\n',
             "".join(f"<li>{html.escape(finding)}</li>\n" for finding in findings), "</ul>\n"]
    for heading, table in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>\n{_table(table)}")
    if mlflow_pages:
        parts.append('<h2 id="mlflow">In MLflow</h2>\n<ul class="mlflow">\n')
        parts += [f'<li><a href="{html.escape(url)}">{html.escape(name)}</a></li>\n'
                  for name, url in mlflow_pages.items()]
        parts.append("</ul>\n")
    if figures:
        parts.append('<h2 id="figures">Figures</h2>\n')
        parts += [_figure(figure) for figure in figures]
    parts.append(f'<p class="generated">{html.escape(footer)}</p>\n</body>\n</html>\n')
    return "".join(parts)
