"""A self-contained HTML report: one file, plots embedded as base64 PNG, every text escaped."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from knockout.errors import ConfigError
from knockout.reports._tables import Table

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;color:#222;
line-height:1.4;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}
.note{color:#555;font-size:.85rem;margin-top:-.6rem}.warn{background:#fff3cd;border:1px solid #e0c36b;padding:.5rem}
figure{display:inline-block;margin:.5rem 1rem .5rem 0}figcaption{font-size:.85rem;color:#555}
img{max-width:100%;border:1px solid #eee}
"""


def e(text: object) -> str:
    return html.escape(str(text), quote=True)


def table_html(t: Table) -> str:
    head = "".join(f"<th>{e(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in t.rows)
    note = f'<p class="note">{e(t.note)}</p>' if t.note else ""
    return f"<h2>{e(t.title)}</h2>\n<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}\n"


def figure_html(title: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{e(title)}">'
            f"<figcaption>{e(title)}</figcaption></figure>\n")


def viewer_links(base: str, run_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(label, URL) of each run's page in the transcript viewer served at ``base`` (``knockout serve``, e.g.
    ``http://127.0.0.1:8000``, or the app's public URL behind a proxy)."""
    from urllib.parse import quote, urlsplit

    parts = urlsplit(base.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"--viewer-url must be an http(s) URL of the web app, got {base!r}")
    root = base.strip().rstrip("/")
    return [(f"run {r}", f"{root}/runs/{quote(r, safe='')}") for r in run_ids]


def links_html(links: Sequence[tuple[str, str]]) -> str:
    items = "".join(f'<li><a href="{e(url)}">{e(label)}</a></li>' for label, url in links)
    note = "every judge request and raw reply, in the web app's viewer (log in as a viewer or an organizer)"
    return f'<h2>transcripts</h2><p class="note">{e(note)}</p><ul class="viewer">{items}</ul>\n'


def page(title: str, tables: Sequence[Table], plots: Mapping[str, bytes], warnings: Sequence[str] = (),
         links: Sequence[tuple[str, str]] = ()) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{e(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1><p class=\"note\">made by knockout on {e(when)}</p>",
    ]
    parts += [f'<p class="warn">{e(w)}</p>' for w in warnings]
    if tables:
        parts.append(table_html(tables[0]))
    if links:
        parts.append(links_html(links))
    if plots:
        parts.append("<h2>plots</h2><div>")
        parts += [figure_html(k, v) for k, v in plots.items()]
        parts.append("</div>")
    parts += [table_html(t) for t in tables[1:]]
    parts.append("</body></html>\n")
    return "\n".join(parts)
