"""A real S3 server for the object-store sink's tests and the backup bench: moto in server mode
(the ``test`` extra), as a subprocess on a loopback port, started and stopped like the broker of
:mod:`hyperdata_sidecar.devkafka` (MinIO is AGPL: not used here).

moto keeps its buckets in memory: a server started again on the same port is an empty one. Every
client the tests make gets explicit credentials, so no client ever falls back to the instance
metadata address.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from hyperdata_sidecar.devkafka import free_low_port

ACCESS_KEY = "AKIAHYPERDATATEST000"  # moto takes any key while it does not authenticate
SECRET_KEY = "hyperdata-sidecar-test-secret"
REGION = "us-east-1"
START_S = 30.0


class MotoS3:
    """One moto server; ``start()`` and ``stop()`` may be called again (same port, empty state)."""

    def __init__(self, log_dir: Path, port: int | None = None) -> None:
        self.port = port or free_low_port()
        self.log_path = log_dir / f"moto-{self.port}.log"
        self._process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_S
        while not self._serving():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto did not start on port {self.port}; see {self.log_path}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill the server at once (SIGKILL): whatever it was serving breaks off mid-request."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)
        self._process = None

    def require_authentication(self) -> None:
        """From now on every request must be signed by a known access key allowed the action."""
        self._reset_auth(0)

    def accept_any_credentials(self) -> None:
        """Undo :meth:`require_authentication`: requests go unchecked again (for the next billion)."""
        self._reset_auth(10**9)

    def _reset_auth(self, unchecked_requests: int) -> None:
        """Let the next ``unchecked_requests`` go without authentication, then check every one."""
        # Not form-encoded: moto reads the count from the raw body, which Flask empties for a form.
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=str(unchecked_requests).encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass

    def client(self, service: str = "s3", **credentials: str) -> Any:
        """A boto3 client of this server, with the test's credentials unless others are given."""
        import boto3  # moto's own dependency, in the test extra

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=credentials.get("key", ACCESS_KEY),
            aws_secret_access_key=credentials.get("secret", SECRET_KEY),
        )

    def _serving(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            return False


def credentials_env(key: str = ACCESS_KEY, secret: str = SECRET_KEY) -> dict[str, str]:
    """The environment the sink's client reads its credentials and region from."""
    return {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": REGION}
