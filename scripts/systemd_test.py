"""`make systemd-test`: deploy/systemd/'s unit started for real, by systemd, in a podman container.

    Debian base with systemd -> container booted with systemd as PID 1 -> docs/operations.md's install
    -> the unit against a broker on the host -> ready -> hardening holds -> every line in Kafka
    -> systemctl stop

1. A Debian bookworm rootfs with systemd, Python 3.11 and curl, made with debootstrap and imported
   into podman (no image registry is reachable here). Made once: the tarball is kept in
   ~/.cache/hyperdata-sidecar/systemd-base/ and the image in podman's storage (scripts/podman_kit.py).
2. The project and its dependencies as wheels (pip wheel on this machine, whose pip reaches PyPI),
   so the container installs without a network: the venv at /opt/hyperdata-sidecar/venv.
3. A Kafka broker on the host (hyperdata_sidecar.devkafka) on free ports, and a generated corpus
   (2 hours x 3 tables, bad lines) as the node's data: /home/hluser/hl/data, owned by the node's
   user `hluser` (dirs 0750, files 0640, home 0700); the sidecar's user reads it through hluser's
   group.
4. The container runs /sbin/init with the host's network and CAP_SYS_ADMIN: without it systemd
   in a container skips the unit's mount namespace (ProtectSystem=, ProtectHome=, ...) and
   says nothing, which step 6 would catch.
5. docs/operations.md's steps: the sysusers entry, the unit, the environment file (this run's broker and web
   port; replication factor 1), the backup dir; systemctl start; the unit becomes active and
   /readyz (curl inside the container) answers 200.
6. The hardening, checked on the running service: its user, no capabilities, no new privileges,
   a seccomp filter; inside its mount namespace (nsenter as root, so only the mounts can refuse)
   WATCH_DIR, /opt and /etc are read-only, STATE_PATH and BACKUP_DIR writable.
7. The verifier (inside the container, with the environment file) finds every line, bad line,
   seal and backup; the journal holds the sidecar's JSON event lines.
8. systemctl stop finishes within the unit's TimeoutStopSec, the service exits 0 (no SIGKILL).
9. A bad setting in the environment file: exit 2, a journal line naming it, and the unit stays
   failed instead of restarting (RestartPreventExitStatus=2).

The container and the broker are removed on exit; logs (the journal among them) stay in
var/systemd-test/. Needs podman and runc (on this kernel with `default_ulimits = []` in
containers.conf, as .ci/run writes), debootstrap for the first run, Java and Maven for the
broker. Exits 0 when everything passed, 1 with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from podman_kit import DEADLINE_S, PODMAN, BaseImage, StepFailed, TestRun, podman, run_command, run_test, step

from hyperdata_sidecar.devkafka import free_low_port
from hyperdata_sidecar.tools.generate import generate_corpus, parse_start

REPO = Path(__file__).resolve().parents[1]
UNIT_DIR = REPO / "deploy" / "systemd"
WORK = REPO / "var" / "systemd-test"
BASE = BaseImage(
    "localhost/hyperdata-sidecar-systemd:bookworm",
    packages="systemd,systemd-sysv,dbus,python3,python3-venv,curl,ca-certificates",
    cache_dir="systemd-base",
    tarball="debian-bookworm-systemd.tar",
)
CONTAINER = f"hdsc-systemd-test-{os.getpid()}"
SERVICE = "hyperdata-sidecar.service"
VENV = "/opt/hyperdata-sidecar/venv"


def inside(script: str, *, timeout: float = DEADLINE_S, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` with bash as root in the container."""
    return run_command(
        [*PODMAN, "exec", CONTAINER, "bash", "-euo", "pipefail", "-c", script], script, timeout=timeout, check=check
    )


# ---- the steps ----------------------------------------------------------------------------------


def boot_container() -> None:
    # CAP_SYS_ADMIN: without it systemd skips the units' mount namespaces and says nothing.
    # CAP_SYS_PTRACE: for nsenter into the service's namespace (check_hardening).
    capabilities = "SYS_ADMIN,SYS_PTRACE"
    podman(
        "run",
        "--detach",
        "--name",
        CONTAINER,
        "--systemd=always",
        "--cap-add",
        capabilities,
        "--network=host",
        BASE.name,
        "/sbin/init",
    )
    began, state = time.monotonic(), ""
    # systemctl cannot answer until systemd has opened its socket: ask again until it can.
    while state not in ("running", "degraded"):
        if time.monotonic() - began > DEADLINE_S:
            raise StepFailed(f"systemd in the container did not come up: {state!r}")
        time.sleep(1)
        state = inside("systemctl is-system-running --wait", check=False).stdout.strip()
    print(f"systemd is PID 1 in {CONTAINER}: {state}")


def install(wheels: Path, corpus: Path, bootstrap: str, web_port: int) -> dict[str, str]:
    """docs/operations.md's install, as root in the container; returns the environment file's settings."""
    podman("cp", str(wheels), f"{CONTAINER}:/tmp/wheels")
    podman("cp", str(UNIT_DIR), f"{CONTAINER}:/tmp/systemd")
    # The node's user and its data, as on a node host: a private home, group-readable files.
    inside("useradd --create-home hluser && chmod 0700 /home/hluser && mkdir -p /home/hluser/hl/data")
    podman("cp", f"{corpus}/.", f"{CONTAINER}:/home/hluser/hl/data")
    inside(
        f"""
        chown -R hluser:hluser /home/hluser/hl
        find /home/hluser/hl -type d -exec chmod 0750 {{}} +
        find /home/hluser/hl -type f -exec chmod 0640 {{}} +
        python3 -m venv {VENV}
        {VENV}/bin/pip install --quiet --no-index --find-links /tmp/wheels hyperdata-sidecar
        install -D -m 0644 /tmp/systemd/hyperdata-sidecar.sysusers /etc/sysusers.d/hyperdata-sidecar.conf
        systemd-sysusers
        usermod --append --groups hluser hyperdata-sidecar
        install -m 0644 /tmp/systemd/hyperdata-sidecar.service /etc/systemd/system/
        install -d -m 0755 /etc/hyperdata-sidecar
        install -m 0600 /tmp/systemd/hyperdata-sidecar.env /etc/hyperdata-sidecar/sidecar.env
        sed -i -e 's|^KAFKA_BOOTSTRAP=.*|KAFKA_BOOTSTRAP={bootstrap}|' -e 's|^WEB_PORT=.*|WEB_PORT={web_port}|' \\
            -e 's|^TOPIC_REPLICATION_FACTOR=.*|TOPIC_REPLICATION_FACTOR=1|' /etc/hyperdata-sidecar/sidecar.env
        install -d -m 0750 -o hyperdata-sidecar -g hyperdata-sidecar /srv/hyperdata-sidecar/backups
        systemctl daemon-reload
        """,
        timeout=300,
    )
    text = inside("cat /etc/hyperdata-sidecar/sidecar.env").stdout
    return dict(line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))


def wait_until_ready(web_port: int) -> float:
    began = time.monotonic()
    while time.monotonic() - began < DEADLINE_S:
        state = inside(f"systemctl is-active {SERVICE} || true").stdout.strip()
        if state in ("failed", "inactive"):
            raise StepFailed(f"{SERVICE} is {state}:\n{journal(lines=40)}")
        if inside(f"curl -fsS -o /dev/null http://127.0.0.1:{web_port}/readyz", check=False).returncode == 0:
            return time.monotonic() - began
        time.sleep(1)
    raise StepFailed(f"/readyz did not answer 200 within {DEADLINE_S:.0f}s:\n{journal(lines=40)}")


def journal(lines: int | None = None) -> str:
    limit = f"-n {lines}" if lines else ""
    return inside(f"journalctl -u {SERVICE} --no-pager -o cat {limit}", check=False).stdout


def service_property(name: str) -> str:
    return inside(f"systemctl show -p {name} --value {SERVICE}").stdout.strip()


def check_hardening(settings: dict[str, str]) -> None:
    pid = service_property("MainPID")
    status = dict(line.split(":", 1) for line in inside(f"cat /proc/{pid}/status").stdout.splitlines() if ":" in line)
    user = inside(f"stat -c %U /proc/{pid}").stdout.strip()  # a process owns its /proc dir
    facts = {
        "user": user,
        "CapEff": status["CapEff"].strip(),
        "NoNewPrivs": status["NoNewPrivs"].strip(),
        "Seccomp": status["Seccomp"].strip(),
    }
    wanted = {"user": "hyperdata-sidecar", "CapEff": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
    if facts != wanted:
        raise StepFailed(f"the running service is {facts}, expected {wanted}")
    refused = [settings["WATCH_DIR"], settings["WATCH_DIR"] + "/node_fills_streaming", VENV, "/etc", "/var/lib"]
    writable = [settings["STATE_PATH"], settings["BACKUP_DIR"]]
    for path in refused + writable:
        # As root in the service's mount namespace: permissions would let root write anywhere, so
        # only a read-only mount can refuse.
        probe = shlex.quote(f"{path}/.systemd-test-probe")
        result = inside(f"nsenter --target {pid} --mount sh -c 'touch {probe} && rm {probe}'", check=False)
        if path in refused and "Read-only file system" not in result.stderr:
            raise StepFailed(f"the service could write {path}: {result.returncode} {result.stderr.strip()}")
        if path in writable and result.returncode != 0:
            raise StepFailed(f"the service cannot write {path}: {result.stderr.strip()}")
    print(f"pid {pid}: {facts}; read-only: {', '.join(refused)}; writable: {', '.join(writable)}")
    exposure = inside(f"systemd-analyze security {SERVICE} --no-pager | tail -1", check=False).stdout.strip()
    print(f"systemd-analyze security: {exposure}")


def check_published(settings: dict[str, str]) -> None:
    """The verifier, run as docs/operations.md says commands run on the host: as root with the environment file."""
    report = inside(
        f"cd /tmp && set -a && . /etc/hyperdata-sidecar/sidecar.env && set +a && "
        f"{VENV}/bin/faust -A hyperdata_sidecar verify --backup-dir {settings['BACKUP_DIR']} --timeout 120",
        timeout=300,
        check=False,
    )
    (WORK / "verify.log").write_text(report.stdout + report.stderr)
    if report.returncode != 0 or not re.search(r"^OK: 0 lost, 0 failing findings, 0 duplicates", report.stdout, re.MULTILINE):
        raise StepFailed(f"the verifier did not pass (log: {WORK / 'verify.log'}):\n{report.stdout[-3000:]}")
    print(report.stdout.strip().splitlines()[-1])
    events = []
    for line in journal().splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line)["event"])
    if "startup" not in events or "seal" not in events:
        raise StepFailed(f"the journal lacks the sidecar's JSON startup and seal lines (found {sorted(set(events))})")
    print(f"the journal holds {len(events)} JSON event lines of the sidecar ({len(set(events))} kinds)")


def stop_timeout_s() -> float:
    """The unit's TimeoutStopSec as systemd read it."""
    span = inside(f"systemd-analyze timespan {service_property('TimeoutStopUSec')}").stdout
    microseconds = re.search(r"μs: (\d+)", span)
    if microseconds is None:
        raise StepFailed(f"systemd-analyze timespan said {span!r}")
    return int(microseconds.group(1)) / 1e6


def stop_service() -> float:
    """systemctl stop; returns how long it took. Raises unless the worker exited 0 by itself."""
    began = time.monotonic()
    inside(f"systemctl stop {SERVICE}", timeout=300)
    took = time.monotonic() - began
    result, status = service_property("Result"), service_property("ExecMainStatus")
    if (result, status) != ("success", "0"):
        raise StepFailed(f"the stop ended with Result={result} ExecMainStatus={status}:\n{journal(lines=30)}")
    return took


def check_configuration_error_is_not_restarted() -> None:
    """A bad setting: one line in the journal, exit 2, and the unit stays failed (no restart loop)."""
    inside("sed -i 's|^NODE_ID=.*|&\\nINITIAL_POSITION=middle|' /etc/hyperdata-sidecar/sidecar.env")
    inside(f"systemctl start {SERVICE}")
    began, state = time.monotonic(), ""
    while state not in ("failed", "auto-restart"):
        if time.monotonic() - began > DEADLINE_S:
            raise StepFailed(f"a bad setting left {SERVICE} in {state!r}")
        time.sleep(0.5)
        state = service_property("SubState")
    status, restarts = service_property("ExecMainStatus"), service_property("NRestarts")
    said = [line for line in journal(lines=5).splitlines() if "INITIAL_POSITION" in line]
    if (state, status, restarts) != ("failed", "2", "0") or not said:
        raise StepFailed(f"a bad setting: SubState={state} ExecMainStatus={status} NRestarts={restarts}, journal {said}")
    print(f"failed with exit status 2, not restarted; the journal says: {said[-1]}")


def systemd_test(test_run: TestRun) -> str:
    """The steps of the module's docstring; returns what passed."""
    step(f"1/9 base image {BASE.name}")
    print(f"from {BASE.ensure(WORK)} ({test_run.seconds():.0f}s)")

    step("2/9 the project as wheels")
    run_command(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(WORK / "wheels"), str(REPO)],
        "pip wheel",
        timeout=600,
    )
    print(f"{len(list((WORK / 'wheels').glob('*.whl')))} wheels ({test_run.seconds():.0f}s)")

    step("3/9 a Kafka broker on the host, and the node's data")
    broker = test_run.broker(WORK / "kafka")
    broker.start()
    summary = generate_corpus(
        WORK / "corpus", hours=2, lines_per_hour=3000, seed=21, start=parse_start("20260610/22"), bad_every=500
    )
    print(f"{broker.bootstrap}; {len(summary.files)} hour files, {summary.lines:,} lines, {len(summary.bad_lines)} bad")

    step("4/9 a container booted with systemd as PID 1")
    test_run.cleanup.callback(remove_container)
    boot_container()

    step("5/9 docs/operations.md's install, then systemctl start")
    web_port = free_low_port({broker.port, broker.controller_port})
    settings = install(WORK / "wheels", WORK / "corpus", broker.bootstrap, web_port)
    inside(f"systemctl start {SERVICE}")
    print(f"active, /readyz 200 after {wait_until_ready(web_port):.1f}s")

    step("6/9 the hardening holds")
    check_hardening(settings)

    step("7/9 every line in Kafka, JSON lines in the journal")
    check_published(settings)

    step("8/9 systemctl stop")
    timeout_s = stop_timeout_s()
    took = stop_service()
    if took >= timeout_s:
        raise StepFailed(f"the stop took {took:.1f}s, not less than TimeoutStopSec ({timeout_s:.0f}s)")
    print(f"stopped in {took:.1f}s (TimeoutStopSec {timeout_s:.0f}s), exit status 0")

    step("9/9 a configuration error is not restarted")
    check_configuration_error_is_not_restarted()
    return (
        f"the unit ran hardened, every line reached Kafka, systemctl stop took {took:.1f}s with exit 0, "
        f"and a bad setting left it failed, not restarted"
    )


def remove_container() -> None:
    """The container, its whole journal kept in var/systemd-test/ first."""
    if podman("container", "exists", CONTAINER, check=False).returncode == 0:
        (WORK / "journal.log").write_text(inside("journalctl --no-pager", check=False).stdout)
        podman("rm", "--force", CONTAINER, check=False)


if __name__ == "__main__":
    sys.exit(run_test("systemd-test", WORK, systemd_test))
