"""The page frame and the small pieces every page uses: escaping, links, times, sparklines.

Every value that comes from a job, a queue or a request goes through `e` (html.escape with
quotes), so an input or error holding `<script>` is shown as text, never run.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d232b;background:#f6f7f9}
header{background:#1d232b;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}
header a{color:#cfe3ff;text-decoration:none}header b{margin-right:12px}
main{padding:12px 16px}table{border-collapse:collapse;background:#fff;margin:8px 0}
th,td{border:1px solid #dde1e6;padding:4px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.flash{background:#e3f6e8;border:1px solid #8fd19e;padding:6px 10px;margin:8px 0}
.err{background:#fdecec;border:1px solid #f1a7a7;padding:6px 10px;margin:8px 0}
.warn{color:#9a5b00}.muted{color:#6b7480}code,pre{font-family:ui-monospace,monospace}
pre{background:#fff;border:1px solid #dde1e6;padding:6px;overflow:auto;max-height:240px}
.gantt{position:relative;background:#fff;border:1px solid #dde1e6;margin:8px 0}
.lane{position:relative;height:22px;border-bottom:1px solid #f0f2f4}
.lane span.label{position:absolute;left:4px;top:2px;font-size:12px;z-index:1}
.bar{position:absolute;top:3px;height:16px;border-radius:3px;opacity:.85;min-width:2px}
.s-completed{background:#4caf50}.s-failed{background:#e53935}.s-running{background:#1e88e5}
.s-sleeping,.s-waiting{background:#fbc02d}.bar.other{background:#90a4ae}
form.inline{display:inline}button{cursor:pointer}
"""


def e(value: Any) -> str:
    """`value` as HTML text (quotes too, so it is safe inside an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def link(href: str, text: Any, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{e(v)}"' for k, v in attrs.items())
    return f'<a href="{e(href)}"{extra}>{e(text)}</a>'


def path(prefix: str, *parts: str, query: Mapping[str, str | None] | None = None) -> str:
    """A URL under the dashboard's prefix; each part is percent-encoded (ids, queue names)."""
    url = prefix + "/" + "/".join(quote(p, safe="") for p in parts)
    kept = {k: v for k, v in (query or {}).items() if v}
    return url + ("?" + urlencode(kept) if kept else "")


def when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def age(ms: int) -> str:
    """A duration for people: 850 ms, 12.3 s, 4 min, 2.5 h."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms // 60_000} min"
    return f"{ms / 3_600_000:.1f} h"


def as_json(value: Any) -> str:
    return e(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def table(head: Sequence[str], rows: Iterable[str], **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{e(v)}"' for k, v in attrs.items())
    heads = "".join(f"<th>{e(h)}</th>" for h in head)
    thead = f"<thead><tr>{heads}</tr></thead>" if any(head) else ""
    return f"<table{extra}>{thead}<tbody>{''.join(rows)}</tbody></table>"


def sparkline(values: Sequence[float], testid: str, width: int = 120, height: int = 24) -> str:
    """An inline SVG polyline of `values` scaled to the box (flat when all are equal)."""
    top = max(values, default=0) or 1
    step = width / max(len(values) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - (v / top) * (height - 2) - 1:.1f}" for i, v in enumerate(values)
    )
    last = values[-1] if values else 0
    return (
        f'<svg data-testid="{e(testid)}" data-points="{len(values)}" data-last="{e(last)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f'<polyline fill="none" stroke="#1e88e5" stroke-width="1.5" points="{points}"/></svg>'
    )


def error_box(error: Mapping[str, Any]) -> str:
    """A structured error: its code (`data-testid="error-code"`), cause and fix."""
    return (
        '<div class="err">'
        f'<b data-testid="error-code">{e(error.get("code"))}</b> {e(error.get("title") or "")}'
        f'<div>cause: <span data-testid="error-cause">{e(error.get("cause"))}</span></div>'
        f'<div>fix: <code data-testid="error-fix">{e(error.get("fix"))}</code></div></div>'
    )


def notice_box(notice: Mapping[str, Any]) -> str:
    """A warning an operation returned with its answer (a finding): code, cause and fix."""
    code = notice.get("code")
    return (
        f'<div class="err" data-testid="notice:{e(code)}"><b>{e(notice.get("severity"))} '
        f"{e(code)}</b><div>cause: {e(notice.get('cause'))}</div>"
        f'<div>fix: <code data-testid="notice-fix">{e(notice.get("fix"))}</code></div></div>'
    )


NAV = (
    ("", "Queues"),
    ("jobs", "Jobs"),
    ("dead", "Dead letters"),
    ("backfills", "Backfills"),
    ("workers", "Workers"),
)
# Pages of the operator's machines, which serve every tenant: no link for a pinned reader.
SPANS_TENANTS = frozenset({"workers"})

# Reload the overview every `data-reload-ms` unless the person is typing in a form. One fixed
# text, so the Content-Security-Policy (headers.py) allows exactly it by its hash.
RELOAD_JS = """
setTimeout(function(){var a=document.activeElement;if(!a||a.tagName!=='INPUT')location.reload()},
+document.body.dataset.reloadMs);
"""


def frame(
    title: str,
    body: str,
    *,
    prefix: str,
    flash: str | None = None,
    refresh_ms: int | None = None,
    retry_after_s: int | None = None,
    read_only: bool = True,
    pinned: bool = False,
) -> str:
    """The page: nav under `prefix` (less what spans tenants when `pinned`), `flash`, `body`.
    `refresh_ms`: reload by script (not while typing); `retry_after_s`: reload by a meta
    refresh, script or not, since browsers ignore a 503's Retry-After and a wall screen would
    stay on the error page."""
    shown_nav = [(p, label) for p, label in NAV if not (pinned and p in SPANS_TENANTS)]
    nav = "".join(link(path(prefix, p) if p else prefix + "/", label) for p, label in shown_nav)
    mode = '<span class="muted">read-only</span>' if read_only else ""
    shown = f'<div class="flash" data-testid="flash">{e(flash)}</div>' if flash else ""
    script = f"<script>{RELOAD_JS}</script>" if refresh_ms else ""
    reload = f' data-reload-ms="{refresh_ms}"' if refresh_ms else ""
    again = f'<meta http-equiv="refresh" content="{retry_after_s}">' if retry_after_s else ""
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8>{again}"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{e(title)} · mcp-jobs</title><style>{CSS}</style></head><body{reload}>"
        f"<header><b>mcp-jobs</b>{nav}{mode}</header><main><h1>{e(title)}</h1>{shown}{body}"
        f"</main>{script}</body></html>"
    )
