"""A real Prometheus server (Debian's ``prometheus`` package) that scrapes one worker and loads deploy/'s alerts.

The tests read the rules back as Prometheus parsed them (``/api/v1/rules``) and run queries against
what it scraped, so every expression in deploy/ is checked by the program that will run it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from hyperdata_sidecar.devkafka import free_low_port

from worker_process import REPO, STOP_S

ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
JOB = "hyperdata-sidecar"  # the job name alerts.yml expects


class PrometheusProcess:
    """``prometheus`` scraping ``target`` every second as job hyperdata-sidecar, evaluating alerts.yml every second."""

    def __init__(self, root: Path, target: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.skip("prometheus is not installed (apt-get install -y prometheus)")
        self.binary = binary
        self.root = root
        self.port = free_low_port()
        self.log_path = root / "prometheus.log"
        config = {  # JSON is YAML: Prometheus reads it as is
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERTS)],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [target]}]}],
        }
        self.config_path = root / "prometheus.yml"
        self.config_path.write_text(json.dumps(config))
        self._process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.root / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(STOP_S)

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of a successful ``/api/v1/<path>`` answer; AssertionError with Prometheus's error otherwise."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as err:
            body = json.load(err)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
            raise AssertionError(f"prometheus does not answer {url}: {err}") from None
        assert body["status"] == "success", f"{path} {params}: {body.get('errorType')}: {body.get('error')}"
        return body["data"]

    def rules(self) -> list[dict[str, Any]]:
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]

    def ready(self) -> bool:
        """The worker scraped successfully and every rule evaluated at least once.

        For ``WorkerProcess.wait_until``: not yet is False or an AssertionError (not answering yet);
        a Prometheus that exited raises RuntimeError with its log, which ends the wait at once.
        """
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"prometheus exited ({self._process.returncode}):\n{self.log_tail()}")
        up = self.api("query", query=f'up{{job="{JOB}"}} == 1')["result"]
        rules = self.rules()
        return bool(up) and bool(rules) and all(rule["health"] != "unknown" for rule in rules)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"
