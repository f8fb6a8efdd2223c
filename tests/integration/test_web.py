"""The web view of a real worker (subprocess) against the real broker, on a small generated corpus.

One worker runs for the module: it publishes three hours per table (two sealed and backed up, the
newest still tailing, the fills one ending in a partial line), with a few bad lines in the DLQ.
The tests then read /metrics, the JSON views, Faust's table view and the status page (in headless
Chromium) and compare them with the corpus, the seal topic and the files on disk.
"""

from __future__ import annotations

import asyncio
import calendar
import hashlib
import html
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from aiokafka import AIOKafkaConsumer

from hyperdata_sidecar.config import DEFAULTS
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.devkafka import free_low_port
from hyperdata_sidecar.metrics import EXPORTED
from hyperdata_sidecar.tools.generate import CorpusSummary, generate_corpus
from hyperdata_sidecar.web.charts import HEIGHT, PAD, WIDTH
from hyperdata_sidecar.web.history import EVERY_S, SPAN_S, History
from hyperdata_sidecar.web.page import render_page
from hyperdata_sidecar.web.status import BacklogStatus, EngineInfo, SidecarStatus, TableStatus, catch_up_line
from hyperdata_sidecar.web.units import hour_label, table_label

from prometheus_process import ALERTS, PrometheusProcess
from promql import exported_names, metric_names
from worker_process import (
    REPO,
    SIDECAR_APP,
    WorkerProcess,
    current_hour_minus,
    sidecar_env,
)

HOURS = 3
LINES_PER_HOUR = {"node_raw_book_diffs_streaming": 300, "node_order_statuses_streaming": 300, "node_fills_streaming": 120}
FILLS = "node_fills_streaming"
PARTIAL = b'{"local_time":"2026-'  # the node is mid-write of the fills table's newest line
ARTIFACTS = REPO / "artifacts"
DASHBOARD = REPO / "deploy" / "grafana" / "hyperdata-sidecar.json"
# The metrics of the contract (shared/reference/sidecar-contract.txt), as exported.
CONTRACT_METRICS = {
    "hyperdata_sidecar_lines_published_total",
    "hyperdata_sidecar_bytes_read_total",
    "hyperdata_sidecar_publish_lag_seconds",
    "hyperdata_sidecar_tail_offset_lag_bytes",
    "hyperdata_sidecar_seals_emitted_total",
    "hyperdata_sidecar_partial_line_held_bytes",
    "hyperdata_sidecar_state_persist_failures_total",
}
# What the dashboard's variables stand for when its queries are run here.
DASHBOARD_VARIABLES = {"instance": ".*", "table": ".*", "__rate_interval": "1m"}


@dataclass
class Run:
    worker: WorkerProcess
    corpus: CorpusSummary
    watch: Path
    bootstrap: str
    seal_topic: str
    corpus_start: float
    topics: dict[str, str]

    def files_of(self, table: str) -> list:
        return [f for f in self.corpus.files if f.table == table]

    def newest(self, table: str) -> str:
        return self.files_of(table)[-1].relpath


@pytest.fixture(scope="module")
def run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("web")
    prefix = f"t-web-{uuid.uuid4().hex[:8]}."
    settings = sidecar_env(root, kafka_bootstrap, prefix)
    watch = Path(settings["WATCH_DIR"])
    start = current_hour_minus(HOURS)
    corpus = generate_corpus(
        watch, hours=HOURS, lines_per_hour=LINES_PER_HOUR, seed=5, start=start, lines_per_block=5, bad_every=97
    )
    corpus.files.sort(key=lambda f: (f.table, int(f.relpath.split("/")[2]), int(f.relpath.split("/")[3])))
    with open(watch / [f for f in corpus.files if f.table == FILLS][-1].relpath, "ab") as newest:
        newest.write(PARTIAL)
    worker = WorkerProcess(SIDECAR_APP, settings, root)
    worker.start()
    result = Run(
        worker,
        corpus,
        watch,
        kafka_bootstrap,
        settings["TOPIC_SEALS"],
        calendar.timegm(start.timetuple()),
        {spec.dir_name: settings[spec.topic_env] for spec in TABLES},
    )
    try:
        worker.wait_until(lambda: caught_up(result), "every table published, sealed and backed up")
        yield result
    finally:
        worker.stop()


def caught_up(run: Run) -> bool:
    files = run.worker.get_json("/sidecar/files/")["files"]
    by_path = {f["path"]: f for f in files}
    for spec in TABLES:
        for index, summary in enumerate(run.files_of(spec.dir_name)):
            row = by_path[summary.relpath]
            if index < HOURS - 1 and row["state"] != "backed_up":
                return False
            if index == HOURS - 1 and row["lines"] != summary.lines:
                return False
    return True


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(name, labels): value} of a Prometheus text exposition."""
    found = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        assert match, f"not a sample line: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        found[(match.group(1), labels)] = float(match.group(3))
    return found


def sample(found: dict, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def encoded(path: str) -> str:
    """A table key in the URL form Faust's /table route needs: every '/' percent-encoded."""
    return urllib.parse.quote(path, safe="")


# ---------------------------------------------------------------------- /metrics


def test_metrics_declare_every_metric_of_the_contract(run: Run) -> None:
    status, content_type, body = run.worker.get("/metrics")
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", body.decode(), flags=re.MULTILINE))

    assert status == 200 and content_type.startswith("text/plain; version=")
    assert {name: declared.get(name) for name in EXPORTED} == EXPORTED


def test_metrics_count_exactly_what_the_corpus_holds(run: Run) -> None:
    def scrape() -> dict:
        return samples(run.worker.get("/metrics")[2].decode())

    # The state gauges are refreshed every GAUGES_EVERY_S: the last seals may be a refresh ahead of them.
    unsealed = "hyperdata_sidecar_oldest_unsealed_finalized_age_seconds"
    run.worker.wait_until(lambda: all(sample(scrape(), unsealed, table=s.dir_name) == 0 for s in TABLES), "the gauges' refresh")
    found = scrape()
    sealed = HOURS - 1

    for spec in TABLES:
        table = spec.dir_name
        files = run.files_of(table)
        on_disk = sum((run.watch / f.relpath).stat().st_size for f in files)
        assert sample(found, "hyperdata_sidecar_lines_published_total", table=table) == sum(f.lines for f in files)
        assert sample(found, "hyperdata_sidecar_bytes_read_total", table=table) == on_disk
        assert sample(found, "hyperdata_sidecar_seals_emitted_total", table=table) == sealed
        assert sample(found, "hyperdata_sidecar_files_tailed", table=table) == HOURS
        assert sample(found, "hyperdata_sidecar_oldest_unsealed_finalized_age_seconds", table=table) == 0
        assert sample(found, "hyperdata_sidecar_poll_cycle_seconds_count", table=table) > 0
    assert sample(found, "hyperdata_sidecar_backups_total", result="ok") == sealed * len(TABLES)
    assert sample(found, "hyperdata_sidecar_backups_total", result="failed") == 0
    assert sample(found, "hyperdata_sidecar_seal_latency_seconds_count") == sealed * len(TABLES)
    assert sample(found, "hyperdata_sidecar_state_persist_failures_total") == 0
    assert sample(found, "hyperdata_sidecar_producer_retries_total") == 0
    assert sample(found, "hyperdata_sidecar_broker_connected") == 1
    assert sample(found, "hyperdata_sidecar_ready") == 1


def test_metrics_count_dlq_lines_per_table_and_reason(run: Run) -> None:
    found = samples(run.worker.get("/metrics")[2].decode())
    injected = Counter((bad.relpath.split("/")[0], bad.reason) for bad in run.corpus.bad_lines)

    exposed = {
        (dict(labels)["table"], dict(labels)["reason"]): value
        for (name, labels), value in found.items()
        if name == "hyperdata_sidecar_dlq_lines_total" and value  # every (table, reason) is exposed, from 0
    }
    assert injected and exposed == dict(injected)


def test_metrics_show_the_current_files_lag_and_held_partial_line(run: Run) -> None:
    found = samples(run.worker.get("/metrics")[2].decode())

    for spec in TABLES:
        table, current = spec.dir_name, run.newest(spec.dir_name)
        expected = len(PARTIAL) if table == FILLS else 0
        assert sample(found, "hyperdata_sidecar_tail_offset_lag_bytes", table=table, file=current) == expected
        assert sample(found, "hyperdata_sidecar_partial_line_held_bytes", table=table, file=current) == expected
    per_file = [name for (name, labels) in found if name == "hyperdata_sidecar_tail_offset_lag_bytes"]
    assert len(per_file) == len(TABLES)  # one series per table: earlier files' series are gone


def test_publish_lag_is_the_age_of_the_newest_published_block(run: Run) -> None:
    found = samples(run.worker.get("/metrics")[2].decode())
    oldest_possible = time.time() - run.corpus_start  # every block_time of the corpus is after its start

    for spec in TABLES:
        lag = sample(found, "hyperdata_sidecar_publish_lag_seconds", table=spec.dir_name)
        assert 0 < lag < oldest_possible


def test_the_oldest_unsealed_hour_is_the_newest_files_as_the_older_ones_are_sealed(run: Run) -> None:
    newest_hour_end = run.corpus_start + HOURS * 3600

    def newest_is_oldest_unsealed() -> bool:
        # The gauges refresh on a 1 s timer: a look right after the older files' seals may still
        # show one of them (seen under a loaded CI); wait for the refresh, never for a wrong value.
        before = time.time()
        found = samples(run.worker.get("/metrics")[2].decode())
        after = time.time()
        ages = [sample(found, "hyperdata_sidecar_oldest_unsealed_hour_age_seconds", table=spec.dir_name) for spec in TABLES]
        return all(before - newest_hour_end <= age <= after - newest_hour_end for age in ages)

    run.worker.wait_until(newest_is_oldest_unsealed, "the newest hour file to be each table's oldest unsealed one")
    found = samples(run.worker.get("/metrics")[2].decode())
    assert sample(found, "hyperdata_sidecar_lag_warn_bytes") == int(DEFAULTS["LAG_WARN_BYTES"])


# ---------------------------------------------------------------------- deploy/: alerts and dashboard


@pytest.fixture(scope="module")
def prometheus(run: Run, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    """A real Prometheus that scrapes this worker and has evaluated every rule of alerts.yml."""
    server = PrometheusProcess(tmp_path_factory.mktemp("prometheus"), f"127.0.0.1:{run.worker.port}")
    server.start()
    try:
        run.worker.wait_until(server.ready, "Prometheus to scrape the worker and evaluate every rule")
        yield server
    finally:
        server.stop()


def worker_exports(run: Run) -> set[str]:
    """What a query may select: the worker's metrics, and ``up``, which Prometheus records for every target."""
    return exported_names(run.worker.get("/metrics")[2].decode()) | {"up"}


def dashboard_queries() -> list[str]:
    """Every PromQL query of the dashboard (panel targets and variables), its variables filled in."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", ())]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            selector = re.fullmatch(r"label_values\((.+), *\w+\)", variable["query"]["query"])
            assert selector, f"variable {variable['name']}: not a label_values() query"
            exprs.append(selector.group(1))
    return [re.sub(r"\$\{?(\w+)\}?", lambda m: DASHBOARD_VARIABLES[m.group(1)], expr) for expr in exprs]


def test_every_alert_names_only_metrics_the_worker_exports(run: Run, prometheus: PrometheusProcess) -> None:
    exported = worker_exports(run)
    rules = prometheus.rules()

    assert len(rules) == ALERTS.read_text().count("- alert: ")  # every rule of the file loaded
    assert {rule["name"]: sorted(metric_names(rule["query"]) - exported) for rule in rules} == {
        rule["name"]: [] for rule in rules
    }


def test_every_alert_evaluates_on_the_scraped_worker(prometheus: PrometheusProcess) -> None:
    rules = prometheus.rules()

    assert {rule["name"]: (rule["health"], rule.get("lastError", "")) for rule in rules} == {
        rule["name"]: ("ok", "") for rule in rules
    }


def test_every_dashboard_query_names_only_metrics_the_worker_exports(run: Run) -> None:
    exported = worker_exports(run)
    queries = dashboard_queries()
    used = set().union(*(metric_names(query) for query in queries))

    assert {query: sorted(metric_names(query) - exported) for query in queries} == {query: [] for query in queries}
    assert used >= CONTRACT_METRICS


def test_every_dashboard_query_runs_on_the_scraped_worker(prometheus: PrometheusProcess) -> None:
    for query in dashboard_queries():
        prometheus.api("query", query=query)  # fails naming the query and Prometheus's error


# ---------------------------------------------------------------------- health


def test_worker_is_live_and_ready(run: Run) -> None:
    assert run.worker.get("/healthz")[0] == 200
    assert run.worker.get_json("/readyz") == {"ready": True, "reasons": []}


# ---------------------------------------------------------------------- JSON views and Faust's table view


def test_files_view_agrees_with_the_offsets_seals_and_backups_tables(run: Run) -> None:
    files = run.worker.get_json("/sidecar/files/")["files"]

    assert sorted(f["path"] for f in files) == sorted(f.relpath for f in run.corpus.files)
    for row in files:
        key = encoded(row["path"])
        cursor = run.worker.get_json(f"/table/sidecar-offsets/{key}/")
        assert (row["offset"], row["lines"], row["dlq_lines"]) == (cursor["byte_offset"], cursor["lines"], cursor["dlq_lines"])
        if row["state"] == "backed_up":
            assert row["sealed_at"] == run.worker.get_json(f"/table/sidecar-seals/{key}/")["sealed_at"]
            backup = run.worker.get_json(f"/table/sidecar-backups/{key}/")
            assert row["backup"]["ref"] == backup["ref"] and backup["status"] == "ok"
        else:
            assert row["state"] == "tailing" and row["path"] in {run.newest(s.dir_name) for s in TABLES}


def test_files_view_reports_size_lag_and_held_bytes_of_the_file_being_written(run: Run) -> None:
    rows = {f["path"]: f for f in run.worker.get_json("/sidecar/files/")["files"]}
    fills = rows[run.newest(FILLS)]
    size = (run.watch / fills["path"]).stat().st_size

    assert (fills["size"], fills["offset"], fills["lag_bytes"], fills["held_bytes"]) == (
        size,
        size - len(PARTIAL),
        len(PARTIAL),
        len(PARTIAL),
    )


def test_faust_table_route_needs_the_slashes_of_a_key_percent_encoded(run: Run) -> None:
    path = run.newest(FILLS)

    assert run.worker.get(f"/table/sidecar-offsets/{encoded(path)}/")[0] == 200
    assert run.worker.get(f"/table/sidecar-offsets/{path}/")[0] == 404


async def test_seals_view_lists_what_the_seal_topic_holds_newest_first(run: Run) -> None:
    consumer = AIOKafkaConsumer(
        run.seal_topic, bootstrap_servers=run.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        on_topic = []
        while len(on_topic) < (HOURS - 1) * len(TABLES):
            batches = await consumer.getmany(timeout_ms=2000)
            on_topic += [json.loads(r.value) for records in batches.values() for r in records]
    finally:
        await consumer.stop()
    seals = run.worker.get_json("/sidecar/seals/")["seals"]

    assert sorted((s["path"], s["sha256"], s["lines"]) for s in seals) == sorted(
        (s["path"], s["sha256"], s["lines"]) for s in on_topic
    )
    for seal in seals:
        assert seal["sha256"] == hashlib.sha256((run.watch / seal["path"]).read_bytes()).hexdigest()
    assert [s["sealed_at"] for s in seals] == sorted((s["sealed_at"] for s in seals), reverse=True)
    assert len(run.worker.get_json("/sidecar/seals/?limit=2")["seals"]) == 2


def test_dlq_view_counts_the_injected_bad_lines(run: Run) -> None:
    dlq = run.worker.get_json("/sidecar/dlq/")
    injected = Counter(bad.relpath.split("/")[0] for bad in run.corpus.bad_lines)

    assert dlq["tracked_files"] == {spec.dir_name: injected[spec.dir_name] for spec in TABLES}
    assert dlq["since_start_total"] == len(run.corpus.bad_lines)


# ---------------------------------------------------------------------- the status page


def chromium_flags(tmp_path: Path) -> list[str]:
    """Headless Chromium with no network of its own; skips the test when Chromium is not installed."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "--window-size=1280,900",
    ]


def test_status_page_renders_the_live_state_in_headless_chromium(run: Run, tmp_path: Path) -> None:
    chromium, *flags = chromium_flags(tmp_path)
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "status-page.png"
    screenshot.unlink(missing_ok=True)
    url = run.worker.url + "/"

    dom = subprocess.run([chromium, *flags, "--dump-dom", url], capture_output=True, timeout=120, check=True).stdout.decode()
    subprocess.run([chromium, *flags, f"--screenshot={screenshot}", url], capture_output=True, timeout=120, check=True)

    assert "READY" in dom and "broker connected" in dom
    for spec in TABLES:
        assert run.topics[spec.dir_name] in dom
        for summary in run.files_of(spec.dir_name)[:-1]:
            assert f"{table_label(spec.dir_name)} {hour_label(summary.relpath)}" in dom  # in last seals
    assert "line(s) sent to the DLQ" in dom


def test_status_page_charts_the_sampled_last_hour_in_headless_chromium(run: Run, tmp_path: Path) -> None:
    chromium, *flags = chromium_flags(tmp_path)
    run.worker.wait_until(
        lambda: all(len(t["lines_per_s_history"]) >= 2 for t in run.worker.get_json("/sidecar/status/")["tables"]),
        "two lines/s samples of every table",
    )

    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", run.worker.url + "/"], capture_output=True, timeout=120, check=True
    ).stdout.decode()

    charts = dict(re.findall(r'<svg class="chart"[^>]* aria-label="([^",]+),[^"]*">(.*?)</svg>', dom))
    for spec in TABLES:
        for name in (f"{table_label(spec.dir_name)} lines/s", f"{table_label(spec.dir_name)} publish lag"):
            lines = re.findall(r'<polyline points="([^"]*)"', charts[name])
            assert len(lines) == 1 and len(lines[0].split()) >= 2, f"{name}: {charts[name]}"


# Run in Chromium after the page loads: what it made of each chart, as JSON in <pre id="probe">.
CHART_PROBE = """<script>
addEventListener("load", function () {
  var charts = Array.from(document.querySelectorAll("svg.chart")).map(function (svg) {
    var box = svg.getBoundingClientRect();
    return {
      label: svg.getAttribute("aria-label"), namespace: svg.namespaceURI, width: box.width, height: box.height,
      lines: Array.from(svg.querySelectorAll("polyline")).map(function (line) {
        return Array.from({length: line.points.numberOfItems}, function (_, i) {
          var point = line.points.getItem(i);
          return [point.x, point.y];
        });
      })
    };
  });
  var probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify(charts);
  document.body.appendChild(probe);
});
</script>"""


def published_in_interval(k: int) -> int:
    """Lines published in the k-th 15 s interval of the synthetic hour: a varying, known rate."""
    return 600 + 450 * (k % 7)


async def test_chromium_draws_the_charts_where_the_samples_put_them(tmp_path: Path) -> None:
    now = 1_781_100_000.0
    start = now - SPAN_S
    history = History()
    published = 0
    for k in range(int(SPAN_S // EVERY_S) + 1):
        published += published_in_interval(k) if k else 0
        history.record(start + k * EVERY_S, {FILLS: published}, {FILLS: None if k < 10 else float(k % 13)})
    fills = TableStatus(
        table=FILLS,
        topic="t",
        current_file=None,
        current_state=None,
        lag_bytes=0,
        held_bytes=0,
        publish_lag_s=None,
        lines_per_s=None,
        lines_published=published,
        files=0,
        dlq={},
        lines_per_s_history=history.lines_per_s(FILLS),
        publish_lag_history=history.publish_lag(FILLS),
    )
    page = render_page(
        SidecarStatus(
            node="n",
            app_id="a",
            now=now,
            started_at=start,
            ready=True,
            not_ready=[],
            broker_connected=True,
            engine=EngineInfo("native", "0.1.0"),
            tables=[fills],
            seals=[],
            backups=[],
            problems=[],
        )
    )

    dom = await browse(tmp_path, [(200, page.replace("</body>", CHART_PROBE + "</body>"))])

    rate, lag = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.DOTALL).group(1)))
    assert rate["namespace"] == lag["namespace"] == "http://www.w3.org/2000/svg"
    assert (rate["width"], rate["height"]) == (lag["width"], lag["height"]) == (WIDTH, HEIGHT)
    expected = [(start + k * EVERY_S, published_in_interval(k) / EVERY_S) for k in range(1, int(SPAN_S // EVERY_S) + 1)]
    (drawn,) = rate["lines"]
    assert len(drawn) == len(expected)
    top = max(value for _at, value in expected)
    for (x, y), (at, value) in zip(drawn, expected, strict=True):
        assert start + x / WIDTH * SPAN_S == pytest.approx(at, abs=SPAN_S / WIDTH * 0.06)
        assert (HEIGHT - PAD - y) / (HEIGHT - 2 * PAD) * top == pytest.approx(value, abs=top / (HEIGHT - 2 * PAD) * 0.06)
    (lag_line,) = lag["lines"]  # the unknown lags before the first line are left out
    assert len(lag_line) == int(SPAN_S // EVERY_S) + 1 - 10
    assert start + lag_line[0][0] / WIDTH * SPAN_S == pytest.approx(start + 10 * EVERY_S, abs=SPAN_S / WIDTH * 0.06)


def page_for(node: str) -> str:
    return render_page(
        SidecarStatus(
            node=node,
            app_id="a",
            now=0.0,
            started_at=0.0,
            ready=True,
            not_ready=[],
            broker_connected=True,
            engine=EngineInfo("native", "0.1.0"),
            tables=[],
            seals=[],
            backups=[],
            problems=[],
        )
    )


async def browse(tmp_path: Path, responses: list[tuple[int, str]]) -> str:
    """Serve ``responses`` in turn (the last one repeats) and return the DOM Chromium ends with
    after ten seconds of its virtual time, during which the page's script keeps refreshing."""
    served = iter(responses)
    last = responses[-1]

    async def handle(request: web.Request) -> web.Response:
        status, body = next(served, last)
        return web.Response(status=status, text=body, content_type="text/html")

    command = chromium_flags(tmp_path)
    server = web.Application()
    server.router.add_get("/", handle)
    runner = web.AppRunner(server)
    await runner.setup()
    port = free_low_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        browser = await asyncio.create_subprocess_exec(
            *command,
            "--virtual-time-budget=10000",
            "--dump-dom",
            f"http://127.0.0.1:{port}/",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        dom, _ = await asyncio.wait_for(browser.communicate(), 120)
    finally:
        await runner.cleanup()
    return dom.decode()


async def test_status_page_refreshes_itself_in_place(tmp_path: Path) -> None:
    dom = await browse(tmp_path, [(200, page_for("first-load")), (200, page_for("refreshed"))])

    assert "node refreshed" in dom and "node first-load" not in dom


async def test_status_page_says_when_a_refresh_fails_and_keeps_the_last_data(tmp_path: Path) -> None:
    dom = await browse(tmp_path, [(200, page_for("first-load")), (503, "unavailable")])

    assert "node first-load" in dom
    assert 'id="stale" class="badge warn" style="display: inline-block;"' in dom


# Run in Chromium after the page loads: the window's width and, per card, how wide its content is
# against how wide the card is, as JSON in <pre id="probe">.
CARD_PROBE = """<script>
addEventListener("load", function () {
  var cards = Array.from(document.querySelectorAll("main section")).map(function (card) {
    return {title: card.querySelector("h2").textContent, content: card.scrollWidth, card: card.clientWidth};
  });
  var probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({window: innerWidth, page: document.documentElement.scrollWidth, cards: cards});
  document.body.appendChild(probe);
});
</script>"""
# Names as long as a real deployment makes them: prefixed topics, snapshot paths in the backups, a
# snapshot that waited for every table, backups that failed with their reason.
LONG_TOPIC_PREFIX = "prod-eu-west-1.node-fra-07."
SNAPSHOT_PATHS = [f"periodic_abci_states/20260610/10301{n}0000.rmp" for n in range(40, 45)]


def status_with_long_names() -> SidecarStatus:
    now = 1_781_100_000.0
    tables = [
        TableStatus(
            table=spec.dir_name,
            topic=LONG_TOPIC_PREFIX + spec.default_topic,
            current_file=f"{spec.dir_name}/hourly/20260610/23",
            current_state="backup_parked",
            lag_bytes=15_320_775_857,
            held_bytes=8_388_608,
            publish_lag_s=86_399.0,
            lines_per_s=123_456.0,
            lines_published=84_512_345_678,
            files=144,
            dlq={"malformed": 1_234_567},
            backlog=BacklogStatus(bytes=3_456_789_012_345, files=1_440, drain_bytes_per_s=-1.0, eta_s=None, falling_behind=True),
        )
        for spec in TABLES
    ]
    hour_files = [f"{spec.dir_name}/hourly/20260610/{hour}" for spec in TABLES for hour in (21, 22, 23)]
    seals = [
        {
            "sealed_at": "2026-06-10T23:00:03.120Z",
            "path": path,
            "lines": 84_512_345,
            "dlq_lines": 12_345,
            "size": 52_123_456_789,
            "block_range": [1030140001, 1030196121],
        }
        for path in hour_files
    ]
    backups = [
        {"at": "2026-06-10T23:00:04.120Z", "path": path, "status": "failed", "reason": "hash_mismatch", "attempts": 20}
        for path in SNAPSHOT_PATHS + hour_files
    ]
    snapshots = [
        {
            "height": 1030140000 + n,
            "published_at": "2026-06-10T23:00:05.120Z",
            "size": 1_312_345_678,
            "sha256": "c0" * 32,
            "partial": [spec.dir_name for spec in TABLES],
            "backup": "parked",
        }
        for n in range(5)
    ]
    return SidecarStatus(
        node="node-fra-07.example.internal",
        app_id="hyperdata-sidecar-node-fra-07.example.internal",
        now=now,
        started_at=now - 86_400,
        ready=False,
        not_ready=["waiting for Kafka"],
        broker_connected=False,
        engine=EngineInfo("native", "0.1.0"),
        tables=tables,
        seals=seals,
        backups=backups,
        problems=[],
        snapshots=snapshots,
        catch_up=catch_up_line(tables),
    )


async def test_no_card_overflows_at_1280_px_with_long_names(tmp_path: Path) -> None:
    page = render_page(status_with_long_names())

    dom = await browse(tmp_path, [(200, page.replace("</body>", CARD_PROBE + "</body>"))])

    layout = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.DOTALL).group(1)))
    assert layout["window"] == 1280
    assert {card["title"] for card in layout["cards"]} >= {
        "Catching up",
        "Tables",
        "Last seals",
        "Last backups",
        "Last node snapshots",
    }
    assert [card for card in layout["cards"] if card["content"] > card["card"]] == []
    assert layout["page"] <= layout["window"]
