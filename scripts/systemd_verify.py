"""`make systemd-verify`: deploy/systemd/'s service units checked by ``systemd-analyze verify``.

verify insists that ExecStart's program exists. The unit runs the faust console script of the
venv docs/operations.md installs into (/opt/hyperdata-sidecar/venv), which a build machine does not have:
the unit is verified as a copy whose only change is that prefix, pointed at this checkout's venv
(`make venv`), which holds the same console script. A unit that does not start its program from
the documented venv fails here rather than being verified unchanged.

verify exits 0 after warnings (an unknown key, a value it cannot parse: "ignoring"), so any line
it prints fails the check. Exits 0 when every unit passed, 1 with verify's lines otherwise, 2 when
systemd-analyze is missing (Debian: apt-get install systemd).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UNIT_DIR = REPO / "deploy" / "systemd"
INSTALLED_VENV = "/opt/hyperdata-sidecar/venv"
CHECKOUT_VENV = REPO / ".venv"


def verify(unit: Path, venv: Path = CHECKOUT_VENV) -> list[str]:
    """What ``systemd-analyze verify`` says about ``unit`` run from ``venv``; empty when nothing."""
    text = unit.read_text()
    if f"ExecStart={INSTALLED_VENV}/bin/" not in text:
        return [f"{unit}: ExecStart does not run a program of {INSTALLED_VENV} (docs/operations.md's install)"]
    with tempfile.TemporaryDirectory(prefix="systemd-verify-") as scratch:
        # The unit's name is its file name: the copy keeps it.
        copy = Path(scratch) / unit.name
        copy.write_text(text.replace(f"{INSTALLED_VENV}/", f"{venv}/"))
        result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)], capture_output=True, text=True, timeout=60)
        said = (result.stdout + result.stderr).replace(str(copy), str(unit))
    lines = [line for line in said.splitlines() if line.strip()]
    if result.returncode != 0 and not lines:
        lines = [f"{unit}: systemd-analyze verify exited {result.returncode}"]
    return lines


def main() -> int:
    if shutil.which("systemd-analyze") is None:
        print("systemd-verify: systemd-analyze not found; Debian: apt-get install systemd", file=sys.stderr)
        return 2
    units = sorted(UNIT_DIR.glob("*.service"))
    if not units:
        print(f"systemd-verify: no *.service in {UNIT_DIR}", file=sys.stderr)
        return 1
    failed = False
    for unit in units:
        findings = verify(unit)
        failed |= bool(findings)
        for line in findings:
            print(line, file=sys.stderr)
        print(f"systemd-verify: {unit.relative_to(REPO)}: {'FAILED' if findings else 'OK'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
