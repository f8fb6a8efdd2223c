"""deploy/systemd/: the unit verified by systemd-analyze, and in step with the environment file and the code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from mode import Service

from hyperdata_sidecar.config import DEFAULTS, load_settings
from hyperdata_sidecar.publishing import STOP_GRACE_S
from hyperdata_sidecar.runtime import CLOSE_TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "hyperdata-sidecar.service"
ENVIRONMENT_FILE = REPO / "deploy" / "systemd" / "hyperdata-sidecar.env"


def unit_settings(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file as section -> key -> values (systemd allows a key more than once)."""
    sections: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    section = ""
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        sections[section][key].append(value)
    return sections


def environment_file(path: Path) -> dict[str, str]:
    pairs = (line.partition("=") for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))
    return {key: value for key, _, value in pairs}


def seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1, "min": 60}
    for suffix, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if value.endswith(suffix):
            return float(value.removesuffix(suffix)) * factor
    return float(value)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not found (Debian: apt-get install systemd)")
def test_systemd_analyze_verify_has_nothing_to_say_about_the_unit():
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "systemd_verify.py")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_stop_timeout_outlasts_the_longest_stop_the_code_allows():
    # The unit's comment spells the sum out; the measured part (a snapshot hash) is not a constant.
    longest_stop = STOP_GRACE_S + CLOSE_TIMEOUT_S + Service.shutdown_timeout
    (timeout,) = unit_settings(UNIT)["Service"]["TimeoutStopSec"]
    assert seconds(timeout) > longest_stop


def test_the_unit_opens_exactly_the_paths_the_environment_file_configures():
    service = unit_settings(UNIT)["Service"]
    env = environment_file(ENVIRONMENT_FILE)
    assert service["BindReadOnlyPaths"] == [env["WATCH_DIR"]]
    assert [f"/var/lib/{name}" for name in service["StateDirectory"]] == [env["STATE_PATH"]]
    assert service["ReadWritePaths"] == [env["BACKUP_DIR"]]
    assert service["ProtectSystem"] == ["strict"]


def test_the_environment_file_holds_valid_settings_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the service's working directory holds no faust.ini either
    env = environment_file(ENVIRONMENT_FILE)
    assert set(env) <= set(DEFAULTS)
    settings = load_settings(env)
    assert (str(settings.watch_dir), settings.web_bind) == (env["WATCH_DIR"], "127.0.0.1")


def test_a_configuration_error_is_not_restarted():
    service = unit_settings(UNIT)["Service"]
    assert service["Restart"] == ["on-failure"]
    assert service["RestartPreventExitStatus"] == ["2"]  # standalone.py: a configuration error exits 2
