"""The status page HTML: what it shows, that it escapes, and the human number formats."""

from __future__ import annotations

import html
import html.parser
import re

import pytest

from hyperdata_sidecar.core.transfer import estimate_transfer
from hyperdata_sidecar.web.page import render_page
from hyperdata_sidecar.web.status import BacklogStatus, EngineInfo, Problem, RunningBackup, SidecarStatus, TableStatus

FILLS = "node_fills_streaming"


def table(**overrides) -> TableStatus:
    fields = {
        "table": FILLS,
        "topic": "hyperliquid.fills",
        "current_file": f"{FILLS}/hourly/20260610/13",
        "current_state": "tailing",
        "lag_bytes": 2048,
        "held_bytes": 17,
        "publish_lag_s": 4.25,
        "lines_per_s": 1234.4,
        "lines_published": 98765,
        "files": 3,
        "dlq": {"blank": 2},
    }
    fields.update(overrides)
    return TableStatus(**fields)


def status(**overrides) -> SidecarStatus:
    fields = {
        "node": "node-a",
        "app_id": "hyperdata-sidecar-node-a",
        "now": 1_781_100_000.0,
        "started_at": 1_781_099_000.0,
        "ready": True,
        "not_ready": [],
        "broker_connected": True,
        "engine": EngineInfo("native", "0.1.0"),
        "tables": [table()],
        "seals": [
            {
                "path": f"{FILLS}/hourly/20260610/12",
                "sealed_at": "2026-06-10T13:00:05.120Z",
                "lines": 4321,
                "dlq_lines": 0,
                "size": 3_000_000,
                "block_range": [10, 20],
            }
        ],
        "backups": [
            {
                "path": f"{FILLS}/hourly/20260610/12",
                "status": "failed",
                "reason": "io_error",
                "attempts": 2,
                "at": "2026-06-10T13:00:06.000Z",
            }
        ],
        "problems": [],
        "config": {"watch_dir": "/watch"},
    }
    fields.update(overrides)
    return SidecarStatus(**fields)


class _Text(html.parser.HTMLParser):
    """The page's visible text and its element names (outside <style> and <script>)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._skip += tag in ("style", "script")

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "script")

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def visible(page: str) -> _Text:
    parser = _Text()
    parser.feed(page)
    return parser


def test_page_shows_each_tables_progress_in_human_units() -> None:
    text = " ".join(visible(render_page(status())).text)

    for expected in ("fills", "hyperliquid.fills", "20260610/13", "2.0 KiB", "4.2 s", "1,234", "98,765", "17 B"):
        assert expected in text


def test_page_shows_last_seals_and_backups_with_failure_reason() -> None:
    text = " ".join(visible(render_page(status())).text)

    assert "06-10 13:00:05" in text and "fills 20260610/12" in text and "4,321" in text and "10–20" in text
    assert "failed (io_error)" in text


def test_page_shows_the_running_backups_progress_rate_and_time_left() -> None:
    estimate = estimate_transfer(1024**3, 3 * 1024**3, 10.0)
    running = RunningBackup.of(f"{FILLS}/hourly/20260610/12", "local", estimate, "copy_file_range")
    text = " ".join(" ".join(visible(render_page(status(backup_running=running))).text).split())

    assert "Backing up fills 20260610/12 to local via copy_file_range: 1.0 GiB of 3.0 GiB (33%) at 102.4 MiB/s, 20 s left" in text


def test_page_says_when_no_backup_runs() -> None:
    assert "No backup running." in " ".join(visible(render_page(status())).text)


def test_page_shows_the_remote_reference_of_a_backup_done() -> None:
    done = {"path": f"{FILLS}/hourly/20260610/11", "status": "ok", "ref": "s3://archive/node-a/fills/11", "attempts": 1}
    text = " ".join(visible(render_page(status(backups=[done]))).text)

    assert "s3://archive/node-a/fills/11" in text


def test_page_lists_every_parked_backup_with_its_reason_and_error_only_when_there_is_one() -> None:
    parked = {
        "path": f"{FILLS}/hourly/20260610/9",
        "status": "parked",
        "reason": "no_space",
        "error": "no_space: cannot write backup: No space left on device",
        "attempts": 5,
        "at": "2026-06-10T10:00:06.000Z",
    }
    text = " ".join(visible(render_page(status(backups=[parked], backups_parked=[parked]))).text)

    assert "Parked backups: 1" in text and "fills 20260610/9" in text
    assert "No space left on device" in text and "parked (no_space)" in text
    assert "Parked backups" not in " ".join(visible(render_page(status())).text)


def test_page_lists_problems_and_says_not_ready() -> None:
    page = render_page(
        status(
            ready=False,
            broker_connected=False,
            problems=[Problem("error", "broker unreachable (k:9092)"), Problem("warning", "lag")],
        )
    )
    text = " ".join(visible(page).text)

    assert "NOT READY" in text and "broker unreachable (k:9092)" in text
    assert "Problems: 1 error(s), 1 warning(s)" in text
    assert '<li class="error">' in page and '<li class="warning">' in page


@pytest.mark.parametrize(
    ("engine", "shown"),
    [(EngineInfo("native", "0.1.0"), "engine native 0.1.0"), (EngineInfo("python", "0.3.0"), "engine python 0.3.0")],
)
def test_the_header_names_the_line_engine_beside_the_node(engine, shown) -> None:
    page = render_page(status(engine=engine))
    header = " ".join(visible(page[page.index("<header>") : page.index("</header>")]).text)

    assert "node node-a" in header and shown in header


def test_page_says_so_when_nothing_needs_attention() -> None:
    text = " ".join(visible(render_page(status())).text)

    assert "READY" in text and "None: nothing needs attention." in text


@pytest.mark.parametrize(
    ("block_range", "shown"),
    [([1030140001, 1030140067], "1030140001–67"), ([5, 5], "5–5"), ([98, 102], "98–102"), (None, "—")],
)
def test_block_ranges_drop_the_digits_the_last_block_shares_with_the_first(block_range, shown) -> None:
    seal = {"path": f"{FILLS}/hourly/20260610/12", "sealed_at": "2026-06-10T13:00:05.120Z", "block_range": block_range}

    assert f"<td>{shown}</td>" in render_page(status(seals=[seal]))


def test_files_carry_their_full_path_as_a_tooltip() -> None:
    assert f'title="{FILLS}/hourly/20260610/13"' in render_page(status())


def test_every_value_is_escaped() -> None:
    evil = '<img src=x onerror="alert(1)">'
    page = render_page(
        status(
            node=evil,
            problems=[Problem(evil, evil)],
            tables=[table(current_file=evil, topic=evil)],
            config={"k": evil},
            seals=[{"path": evil, "sealed_at": evil}],
            backups=[{"path": evil, "status": evil}],
        )
    )
    parsed = visible(page)

    assert "img" not in parsed.tags
    assert evil in " ".join(parsed.text)


def test_page_refreshes_itself_with_inline_script_and_no_external_assets() -> None:
    page = render_page(status())

    assert "setInterval" in page and "fetch(location.pathname" in page
    assert "src=" not in page and "<link" not in page


def test_page_charts_each_tables_last_hour_with_its_latest_and_largest_values() -> None:
    now = status().now
    fills = table(
        lines_per_s_history=[(now - 30, 10.0), (now - 15, 1234.0), (now, 500.0)],
        publish_lag_history=[(now - 30, None), (now - 15, 9.5), (now, 4.25)],
    )
    page = render_page(status(tables=[fills, table(table="node_raw_book_diffs_streaming")]))
    parsed = visible(page)
    text = " ".join(parsed.text)

    assert "Last hour" in text
    assert "now 500/s · max 1,234/s" in text and "now 4.2 s · max 9.5 s" in text
    assert page.count('<div class="sub">no samples yet</div>') == 2  # both charts of the table without samples
    assert parsed.tags.count("svg") == 4 and parsed.tags.count("polyline") == 2
    assert 'aria-label="fills lines/s, last hour: now 500/s · max 1,234/s"' in page


def test_page_shows_each_tables_backlog_and_when_it_will_be_live() -> None:
    backlog = BacklogStatus(bytes=3 * 1024**3, files=4, drain_bytes_per_s=1e6, eta_s=3_300.0, falling_behind=False)
    text = " ".join(visible(render_page(status(tables=[table(backlog=backlog)]))).text)

    assert "3.0 GiB · 4 file(s)" in text
    assert "live in 55 m 00 s" in text


def test_page_puts_the_catch_up_line_first_and_only_while_catching_up() -> None:
    line = "3.0 GiB in 4 hour file(s) not yet published; live in 55 m 00 s at the last minute's rate"
    catching_up = visible(render_page(status(catch_up=line))).text
    live = visible(render_page(status())).text

    assert catching_up.index("Catching up") < catching_up.index("Problems") and line in catching_up
    assert "Catching up" not in live


def test_a_sidecar_of_a_stream_shows_its_role_the_active_and_how_far_each_node_is_behind():
    stream = {
        "stream": "mainnet",
        "role": "standby",
        "term": None,
        "active": "node-b",
        "members": ["node-a", "node-b"],
        "elected_at": None,
        "nodes": {"node-a": {"head": 1.0, "behind_s": 42.4}, "node-b": {"head": 43.4, "behind_s": 0.0}},
    }
    page = render_page(status(role="standby", stream=stream))
    assert "stream mainnet: <b>standby</b> (active node-b; members node-a (42 s behind), node-b (0 s behind))" in page


def test_a_standby_shows_where_the_streams_newest_line_is_in_its_nodes_files():
    look = {"line_id": "x|8|0", "published_by": "node-b", "path": "p", "offset": 3, "age_s": 0.5}
    follow = {
        "node_fills_streaming": {**look, "state": "ready", "reason": None},
        "node_order_statuses_streaming": {**look, "state": "disagree", "reason": "another event <here>"},
        "node_raw_book_diffs_streaming": {**look, "state": "not_written", "path": None, "offset": None, "reason": None},
    }
    stream = {"stream": "s", "role": "standby", "active": "node-b", "members": [], "nodes": {}, "follow": follow}
    page = render_page(status(role="standby", stream=stream))
    header = html.unescape(re.sub(r"<[^>]+>", "", page.split("</header>")[0]))
    assert "the stream's newest line here: fills ready, order_statuses DISAGREES, raw_book_diffs not written here yet" in header
    assert 'title="x|8|0: another event &lt;here&gt;"' in page


def test_a_sidecar_alone_shows_no_stream():
    assert "stream " not in render_page(status()).split("</header>")[0]
