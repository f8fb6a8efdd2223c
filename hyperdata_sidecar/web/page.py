"""The human status page served at ``/``: one server-rendered screen, no external assets.

Every value that comes from the sidecar is HTML-escaped. A few lines of inline JavaScript re-fetch
the page every few seconds and swap its main element, so it stays current without flicker; if a
refresh fails the page says so instead of silently showing stale numbers. The last hour's charts
are inline SVG drawn on the server (``charts.py``): they need no script.
"""

from __future__ import annotations

import html
import time
from typing import Any

from hyperdata_sidecar.core.backup_status import BackupStatus, status_of
from hyperdata_sidecar.web.charts import line_chart, visible
from hyperdata_sidecar.web.history import SPAN_S, Point
from hyperdata_sidecar.web.status import BacklogStatus, RunningBackup, SidecarStatus, TableStatus
from hyperdata_sidecar.web.units import duration, hour_label, size, table_label

REFRESH_MS = 3000

# Cells stay on one line, except names (paths, topics, lists) and badges, which wrap rather than
# push a card wider than its screen; seals and backups sit side by side only where both fit.
_STYLE = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;gap:12px;align-items:center;flex-wrap:wrap}
header h1{font-size:18px;margin:0 8px 0 0}
header .meta{color:#b8c0cf}
main{padding:14px 24px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:10px 16px;margin-bottom:14px}
h2{font-size:15px;margin:0 0 6px}
table{border-collapse:collapse;width:100%;table-layout:auto}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eceef2;white-space:nowrap}
th{font-weight:600;color:#5a6272;font-size:11px;text-transform:uppercase;letter-spacing:.03em}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.sub{color:#5a6272;font-size:12px}
.badge{display:inline-block;padding:2px 10px;border-radius:10px;font-weight:600;font-size:12px}
.ok{background:#d9f2e3;color:#14603a}.bad{background:#fbe0e0;color:#8f1d1d}.warn{background:#fff1cc;color:#7a5400}
.problems{margin:0;padding-left:0;list-style:none}.problems li{margin:2px 0}.none{color:#14603a}
.problems .error{color:#8f1d1d}.problems .warning{color:#7a5400}
.level{display:inline-block;width:64px;font-size:11px;font-weight:700;text-transform:uppercase}
.cols{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:14px}.cols section{margin-bottom:0}
.path{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.path,.sub,.wrap{white-space:normal;overflow-wrap:anywhere}td .badge{white-space:normal}
@media (max-width:1500px){.cols{grid-template-columns:minmax(0,1fr)}}
.chart{display:block;background:#f8f9fb}
.chart polyline{fill:none;stroke:#2f6fd6;stroke-width:1.5;stroke-linejoin:round}.chart circle{fill:#2f6fd6}
.chart .base{stroke:#dde1e8;stroke-width:1}
footer{padding:0 24px 16px;color:#5a6272;font-size:12px;overflow-wrap:anywhere}
#stale{display:none}
"""

_SCRIPT = """
(function(){
  setInterval(function(){
    fetch(location.pathname,{cache:"no-store"}).then(function(r){
      if(!r.ok){throw new Error(r.status);}
      return r.text();
    }).then(function(text){
      var next=new DOMParser().parseFromString(text,"text/html");
      document.querySelector("main").replaceWith(next.querySelector("main"));
      document.querySelector("header").replaceWith(next.querySelector("header"));
    }).catch(function(){
      var stale=document.getElementById("stale");
      if(stale){stale.style.display="inline-block";}
    });
  },REFRESH_MS);
})();
""".replace("REFRESH_MS", str(REFRESH_MS))


def render_page(status: SidecarStatus) -> str:
    """The complete HTML document for ``status``."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>hyperdata-sidecar {_e(status.node)}</title>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<style>{_STYLE}</style></head><body>"
        f"{_header(status)}<main>{_catch_up(status)}{_problems(status)}{_tables(status.tables)}{_charts(status)}"
        f'<div class="cols">{_seals(status.seals)}{_backups(status.backups, status.backup_running)}</div>'
        f"{_parked(status.backups_parked)}{_snapshots(status.snapshots)}</main>"
        f"{_footer(status)}<script>{_SCRIPT}</script></body></html>"
    )


# ---------------------------------------------------------------------- sections


def _stream(stream: dict[str, Any] | None) -> str:
    """`` · stream <id>: <role>`` with the active and the members, for a sidecar of a stream."""
    if stream is None:
        return ""
    nodes = stream.get("nodes") or {}
    members = ", ".join(_node(name, nodes.get(name)) for name in stream["members"]) or "none known yet"
    return (
        f" · stream {_e(stream['stream'])}: <b>{_e(stream['role'])}</b> (active {_e(stream['active'] or '?')}; members {members})"
        f"{_following(stream.get('follow'))}"
    )


FOLLOW_WORDS = {"ready": "ready", "not_written": "not written here yet", "disagree": "DISAGREES", "unreadable": "unreadable"}


def _following(follow: dict[str, dict[str, Any]] | None) -> str:
    """`` · the stream's line here: fills ready, …`` for a standby (its last look per table)."""
    if not follow:
        return ""
    looks = ", ".join(
        f'<span title="{_e(look["line_id"])}: {_e(look.get("reason") or look.get("path") or "")}">'
        f"{_e(table_label(table))} {_e(FOLLOW_WORDS.get(look['state'], look['state']))}</span>"
        for table, look in follow.items()
    )
    return f" · the stream's newest line here: {looks}"


def _node(name: str, head: dict[str, Any] | None) -> str:
    """A member of the stream, with how far its node's head is behind the newest one's, when known."""
    behind = head.get("behind_s") if head is not None else None
    return _e(name) if behind is None else f"{_e(name)} ({behind:.0f} s behind)"


def _header(status: SidecarStatus) -> str:
    ready = _badge("READY", "ok") if status.ready else _badge("NOT READY", "bad")
    broker = _badge("broker connected", "ok") if status.broker_connected else _badge("broker unreachable", "bad")
    updated = time.strftime("%H:%M:%S", time.gmtime(status.now))
    return (
        f"<header><h1>hyperdata-sidecar</h1>{ready}{broker}"
        f'<span class="meta">node {_e(status.node)} · app {_e(status.app_id)} · engine {_e(status.engine.label())}'
        f"{_stream(status.stream)}"
        f" · up {_e(duration(status.now - status.started_at))}"
        f" · updated {updated} UTC</span>"
        f'<span id="stale" class="badge warn">refresh failed: showing the last good data</span></header>'
    )


def _catch_up(status: SidecarStatus) -> str:
    if status.catch_up is None:
        return ""
    return f'<section><h2>Catching up</h2><div class="wrap">{_e(status.catch_up)}</div></section>'


def _problems(status: SidecarStatus) -> str:
    if not status.problems:
        return '<section><h2>Problems</h2><div class="none">None: nothing needs attention.</div></section>'
    items = "".join(
        f'<li class="{_e(p.level)}"><span class="level">{_e(p.level)}</span>{_e(p.text)}</li>' for p in status.problems
    )
    errors = sum(1 for p in status.problems if p.level == "error")
    title = f"Problems: {errors} error(s), {len(status.problems) - errors} warning(s)"
    return f'<section><h2>{title}</h2><ul class="problems">{items}</ul></section>'


def _tables(tables: list[TableStatus]) -> str:
    numeric = range(3, 11)
    head = _row(
        ["Table", "Current file", "State", "Tail lag", "Backlog", "Publish lag", "Lines/s", "Published", "Held", "Files", "DLQ"],
        header=True,
        numeric=numeric,
    )
    rows = "".join(
        _row(
            [
                f'{_e(table_label(t.table))} <span class="sub">→ {_e(t.topic)}</span>',
                _file(t.current_file),
                t.current_state or "—",
                size(t.lag_bytes),
                _backlog(t.backlog),
                duration(t.publish_lag_s) if t.publish_lag_s is not None else "—",
                f"{t.lines_per_s:,.0f}" if t.lines_per_s is not None else "—",
                f"{t.lines_published:,}",
                size(t.held_bytes),
                str(t.files),
                f"{sum(t.dlq.values()):,}",
            ],
            numeric=numeric,
            raw={0, 1, 4},
        )
        for t in tables
    )
    return f"<section><h2>Tables</h2><table>{head}{rows}</table></section>"


def _charts(status: SidecarStatus) -> str:
    head = _row(["Table", "Lines/s", "Publish lag"], header=True)
    rows = "".join(
        _row(
            [
                table_label(t.table),
                _chart(t.lines_per_s_history, status.now, f"{table_label(t.table)} lines/s", lambda v: f"{v:,.0f}/s"),
                _chart(t.publish_lag_history, status.now, f"{table_label(t.table)} publish lag", duration),
            ],
            raw={1, 2},
        )
        for t in status.tables
    )
    return f"<section><h2>Last hour</h2><table>{head}{rows}</table></section>"


def _chart(points: list[Point], now: float, name: str, show: Any) -> str:
    """A chart of the last hour of ``points`` with its latest and largest values, ``show`` formatting them."""
    known = [value for _at, value in visible(points, now=now, span_s=SPAN_S) if value is not None]
    if known:
        caption = f"now {show(known[-1])} · max {show(max(known))}"
    else:
        caption = "no samples yet"
    label = f"{name}, last hour: {caption}"
    return f'{line_chart(points, now=now, span_s=SPAN_S, label=label)}<div class="sub">{_e(caption)}</div>'


def _seals(seals: list[dict[str, Any]]) -> str:
    numeric = range(2, 5)
    head = _row(["Sealed at", "File", "Lines", "DLQ", "Size", "Blocks"], header=True, numeric=numeric)
    rows = "".join(
        _row(
            [
                _clock(s.get("sealed_at")),
                _file(s.get("path"), with_table=True),
                f"{s.get('lines', 0):,}",
                str(s.get("dlq_lines", 0)),
                size(s.get("size", 0)),
                _blocks(s.get("block_range")),
            ],
            numeric=numeric,
            raw={1},
        )
        for s in seals
    )
    body = rows or _empty(6, "no seals yet")
    return f"<section><h2>Last seals</h2><table>{head}{body}</table></section>"


def _backups(backups: list[dict[str, Any]], running: RunningBackup | None) -> str:
    head = _row(["At", "File", "Result", "Tries", "Copy"], header=True, numeric={3})
    rows = "".join(
        _row(
            [
                _clock(b.get("at")),
                _file(b.get("path"), with_table=True),
                _result(b),
                str(b.get("attempts", "—")),
                f'<span class="path">{_e(b["ref"])}</span>' if b.get("ref") else "—",
            ],
            numeric={3},
            raw={1, 2, 4},
        )
        for b in backups
    )
    body = rows or _empty(5, "no backups yet")
    return f"<section><h2>Last backups</h2>{_running(running)}<table>{head}{body}</table></section>"


def _running(running: RunningBackup | None) -> str:
    """The backup attempt running now, above the last ones."""
    if running is None:
        return '<div class="sub">No backup running.</div>'
    via = f" via {running.via}" if running.via else ""
    return (
        f'<div class="wrap">Backing up {_file(running.path, with_table=True)} to {_e(running.sink)}{_e(via)}:'
        f" {_e(running.line())}</div>"
    )


def _parked(parked: list[dict[str, Any]]) -> str:
    """Every parked backup with its reason; nothing when none is."""
    if not parked:
        return ""
    head = _row(["Parked at", "File", "Reason", "Tries", "Error"], header=True, numeric={3})
    rows = "".join(
        _row(
            [
                _clock(b.get("at")),
                _file(b.get("path"), with_table=True),
                str(b.get("reason", "?")),
                str(b.get("attempts", "—")),
                f'<span class="wrap">{_e(b.get("error", ""))}</span>',
            ],
            numeric={3},
            raw={1, 4},
        )
        for b in parked
    )
    retry = "Each is tried again on the next start, or now with: faust -A hyperdata_sidecar backup-retry PATH"
    return f'<section><h2>Parked backups: {len(parked)}</h2><div class="sub">{retry}</div><table>{head}{rows}</table></section>'


def _snapshots(snapshots: list[dict[str, Any]]) -> str:
    numeric = {0, 2}
    head = _row(["Height", "Published at", "Size", "sha256", "Partial", "Backup"], header=True, numeric=numeric)
    rows = "".join(
        _row(
            [
                str(s.get("height", "")),
                _clock(s.get("published_at")),
                size(s.get("size", 0)),
                _e(str(s.get("sha256", ""))[:12]),
                f'<span class="wrap">{_e(", ".join(s.get("partial", [])) or "—")}</span>',
                _e(s.get("backup", "")),
            ],
            numeric=numeric,
            raw={3, 4, 5},
        )
        for s in snapshots
    )
    body = rows or _empty(6, "no node snapshots yet")
    return f"<section><h2>Last node snapshots</h2><table>{head}{body}</table></section>"


def _footer(status: SidecarStatus) -> str:
    links = " · ".join(
        f'<a href="{href}">{href}</a>'
        for href in (
            "/metrics",
            "/sidecar/files/",
            "/sidecar/seals/",
            "/sidecar/snapshots/",
            "/sidecar/dlq/",
            "/healthz",
            "/readyz",
            "/table/",
        )
    )
    config = " · ".join(f"{_e(k)}={_e(_flat(v))}" for k, v in status.config.items())
    return f"<footer>Read-only. JSON: {links}<br>Config: {config}</footer>"


# ---------------------------------------------------------------------- formatting


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}→{v}" for k, v in value.items())
    return str(value)


def _badge(text: str, kind: str) -> str:
    return f'<span class="badge {kind}">{_e(text)}</span>'


def _file(path: str | None, *, with_table: bool = False) -> str:
    """A file as ``<date>/<hour>`` (prefixed with its short table name if asked); the full path as tooltip."""
    if not path:
        return "—"
    label = hour_label(path)
    if with_table and label != path:
        label = f"{table_label(path.split('/', 1)[0])} {label}"
    return f'<span class="path" title="{_e(path)}">{_e(label)}</span>'


def _backlog(backlog: BacklogStatus | None) -> str:
    """A table's backlog (bytes, hour files) over when it will be live."""
    if backlog is None:
        return "—"
    return f'{_e(size(backlog.bytes))} · {backlog.files} file(s)<div class="sub">{_e(backlog.live_in())}</div>'


def _clock(iso: str | None) -> str:
    """``2026-06-10T14:00:03.120Z`` → ``06-10 14:00:03``."""
    if not iso or len(iso) < 19:
        return iso or "—"
    return f"{iso[5:10]} {iso[11:19]}"


def _blocks(block_range: Any) -> str:
    """``[1030140001, 1030140067]`` → ``1030140001–67``: the last block without the digits it shares."""
    if not block_range:
        return "—"
    first, last = str(block_range[0]), str(block_range[1])
    if len(first) == len(last):
        shared = 0
        while shared < len(last) - 1 and first[shared] == last[shared]:
            shared += 1
        last = last[shared:]
    return f"{first}–{last}"


def _result(backup: dict[str, Any]) -> str:
    result = str(backup.get("status", "?"))
    kind = {BackupStatus.OK: "ok", BackupStatus.FAILED: "bad"}.get(status_of(backup), "warn")
    failed = status_of(backup) in (BackupStatus.FAILED, BackupStatus.PARKED)
    reason = f" ({backup['reason']})" if failed and backup.get("reason") else ""
    return _badge(result + reason, kind)


def _row(cells: list[str], *, header: bool = False, numeric: Any = (), raw: Any = ()) -> str:
    """One table row; cells are escaped unless their index is in ``raw`` (already HTML)."""
    tag = "th" if header else "td"
    out = []
    for index, cell in enumerate(cells):
        css = ' class="num"' if index in numeric else ""
        out.append(f"<{tag}{css}>{cell if index in raw else _e(cell)}</{tag}>")
    return f"<tr>{''.join(out)}</tr>"


def _empty(span: int, text: str) -> str:
    return f'<tr><td colspan="{span}" class="none">{_e(text)}</td></tr>'
