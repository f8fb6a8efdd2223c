"""A local single-node Apache Kafka 4.1.1 broker (KRaft) from Maven Central jars.

For tests, the demo and benchmarks on a machine with Java 17+ and Maven but no Docker:

    python -m hyperdata_sidecar.devkafka ensure --port 9092 --data-dir var/kafka

The jars of ``org.apache.kafka:kafka_2.13`` and its runtime dependencies (plus a log4j2
binding) are resolved once with Maven into a cache outside the repo
(``$HYPERDATA_KAFKA_CACHE``, default ``~/.cache/hyperdata-sidecar/kafka-4.1.1``); later
runs reuse it. The data dir holds everything of one broker::

    <data-dir>/server.properties   written on first start, reused after (ports are fixed then)
    <data-dir>/log4j2.properties
    <data-dir>/logs/               the Kafka log dirs (formatted once)
    <data-dir>/broker.log          the broker's own log
    <data-dir>/broker.out          JVM stdout/stderr (start-up failures land here)
    <data-dir>/broker.pid

The broker combines the broker and controller roles, listens on 127.0.0.1 only, and uses
single-node replication settings so that consumer groups and transactions work. It can be
stopped and started again on the same data dir; its topics and messages survive.

Tests of a client's login ask for one more listener (``LocalKafka(..., sasl=SaslListener(...))``):
SASL_PLAINTEXT on a port of its own, one user whose password works with the mechanisms PLAIN and
SCRAM-SHA-256. The PLAINTEXT listener stays as it is, so the broker's own checks need no login.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

KAFKA_VERSION = "4.1.1"
_ARTIFACTS = (
    ("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
    # The broker logs through slf4j; kafka_2.13 alone would pull slf4j 1.7, which cannot
    # see a log4j2 slf4j2 binding, so the 2.x API and the binding are pinned together.
    ("org.slf4j", "slf4j-api", "2.0.17"),
    ("org.apache.logging.log4j", "log4j-slf4j2-impl", "2.24.3"),
    ("org.apache.logging.log4j", "log4j-core", "2.24.3"),
)
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_JVM_OPTIONS = ("-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true")
_MAIN_CLASS = "kafka.Kafka"


class DevKafkaError(RuntimeError):
    """A local broker could not be resolved, started or stopped; the message says why."""


# --------------------------------------------------------------------------- jars


def default_cache_dir() -> Path:
    """Where the broker's jars are cached: ``$HYPERDATA_KAFKA_CACHE`` or under ``~/.cache``."""
    configured = os.environ.get("HYPERDATA_KAFKA_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "hyperdata-sidecar" / f"kafka-{KAFKA_VERSION}"


def _pom() -> str:
    dependencies = "\n".join(
        f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version></dependency>"
        for group, artifact, version in _ARTIFACTS
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.hyperdata-sidecar</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>{KAFKA_VERSION}</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""


def resolve_jars(cache_dir: Path | None = None) -> Path:
    """Return the directory holding the broker's runtime jars, resolving them with Maven once.

    A finished resolution is marked by ``<cache>/libs/.complete``; a half-finished one is
    redone. Concurrent callers serialise on a lock file in the cache.
    Raises DevKafkaError when Maven is missing or fails.
    """
    cache = cache_dir or default_cache_dir()
    libs = cache / "libs"
    if (libs / ".complete").exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevKafkaError(
            f"mvn not found on PATH: install Maven, needed once to fetch the Kafka {KAFKA_VERSION} jars into {cache}"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (libs / ".complete").exists():
            return libs
        (cache / "pom.xml").write_text(_pom())
        staging = cache / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        result = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(cache / "pom.xml"),
                f"{_DEPENDENCY_PLUGIN}:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={staging}",
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip().splitlines()[-15:]
            raise DevKafkaError("Maven could not resolve the Kafka jars:\n" + "\n".join(output))
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
        (libs / ".complete").touch()
    return libs


# --------------------------------------------------------------------------- config


#: What a user name or password of the SASL listener may hold: nothing that needs quoting in a
#: JAAS option (``user_<name>="<password>"``) or in ``kafka-storage format --add-scram``'s list.
_SASL_WORD = re.compile(r"[A-Za-z0-9._-]+")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256")


@dataclass(frozen=True)
class SaslListener:
    """A SASL_PLAINTEXT listener on ``port`` where one user logs in with PLAIN or SCRAM-SHA-256.

    Raises ValueError when the user name or password holds anything but letters, digits, ``.``,
    ``_`` and ``-``.
    """

    port: int
    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        for what, word in (("username", self.username), ("password", self.password)):
            if not _SASL_WORD.fullmatch(word):
                raise ValueError(f"SASL listener {what}: only letters, digits, '.', '_' and '-'")

    def server_properties(self) -> str:
        """The listener's part of server.properties (the broker-side JAAS configuration)."""
        plain = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{self.username}="{self.password}";'
        return f"""# The SASL listener: PLAIN checks the password given here, SCRAM-SHA-256 the credential
# written into the metadata when the storage was formatted.
listener.name.sasl_plaintext.sasl.enabled.mechanisms={",".join(SASL_MECHANISMS)}
listener.name.sasl_plaintext.plain.sasl.jaas.config={plain}
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
"""

    def scram_credential(self) -> str:
        """The user's SCRAM-SHA-256 credential as ``kafka-storage format --add-scram`` takes it."""
        return f"SCRAM-SHA-256=[name={self.username},password={self.password}]"


@dataclass(frozen=True)
class ProxiedListener:
    """A PLAINTEXT listener on ``port`` that tells its clients to connect to ``advertised_port``
    instead, where a TCP proxy forwards to ``port``: a client that bootstraps from the proxy reaches
    the broker only through it, so closing the proxy cuts that client off alone."""

    port: int
    advertised_port: int


def _listeners(
    port: int, controller_port: int, sasl: SaslListener | None, proxied: ProxiedListener | None = None
) -> dict[str, int]:
    """Listener name → port (each is named after its security protocol, CONTROLLER and PROXIED aside)."""
    listeners = {"PLAINTEXT": port, "CONTROLLER": controller_port}
    if sasl is not None:
        listeners["SASL_PLAINTEXT"] = sasl.port
    if proxied is not None:
        listeners["PROXIED"] = proxied.port
    return listeners


def _server_properties(
    data_dir: Path, port: int, controller_port: int, sasl: SaslListener | None = None, proxied: ProxiedListener | None = None
) -> str:
    listeners = _listeners(port, controller_port, sasl, proxied)
    bound = ",".join(f"{name}://127.0.0.1:{listener_port}" for name, listener_port in listeners.items())
    shown = {**listeners, **({"PROXIED": proxied.advertised_port} if proxied is not None else {})}
    advertised = ",".join(f"{name}://127.0.0.1:{listener_port}" for name, listener_port in shown.items() if name != "CONTROLLER")
    protocols = ",".join(f"{name}:{'PLAINTEXT' if name in ('CONTROLLER', 'PROXIED') else name}" for name in listeners)
    return f"""# Written by devkafka on first start; its ports are fixed from then on.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners={bound}
advertised.listeners={advertised}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map={protocols}
{sasl.server_properties() if sasl is not None else ""}log.dirs={data_dir / "logs"}
# One node: every internal topic has one replica, or groups and transactions never start.
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# Fewer internal partitions than the production defaults (50): their first use is faster.
offsets.topic.num.partitions=10
transaction.state.log.num.partitions=10
# A dev broker has one consumer per group most of the time: do not hold the first join back.
group.initial.rebalance.delay.ms=0
num.partitions=1
auto.create.topics.enable=true
"""


def _log4j_properties(data_dir: Path) -> str:
    return f"""status = warn
appender.broker.type = File
appender.broker.name = broker
appender.broker.fileName = {data_dir / "broker.log"}
appender.broker.append = true
appender.broker.layout.type = PatternLayout
appender.broker.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.broker.ref = broker
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


def _read_listeners(properties: Path) -> dict[str, int]:
    """The listeners of a written server.properties: name → port."""
    values = dict(line.split("=", 1) for line in properties.read_text().splitlines() if "=" in line and not line.startswith("#"))
    listeners = {}
    for listener in values["listeners"].split(","):
        name, address = listener.split("://", 1)
        listeners[name] = int(address.rsplit(":", 1)[1])
    return listeners


LOW_PORTS = range(29000, 32000)
PORT_LEASES = Path(tempfile.gettempdir()) / f"hyperdata-sidecar-ports-{os.getuid()}.json"
PORT_LEASE_S = 3600.0


def free_low_port(exclude: frozenset[int] | set[int] = frozenset()) -> int:
    """A free local port below the kernel's ephemeral range (32768+), for a broker that tests stop
    and start: a client retrying against a stopped broker on an ephemeral port can be handed that
    very port as its own source port (a TCP self-connection) and keep it, and the broker then cannot
    bind it again. ``connect()`` never picks a port from this range. Servers of the tests (a
    worker's web view, proxies) take theirs here too: an ephemeral port found free can be some
    client's source port by the time the server binds it.

    A port found free is leased for ``PORT_LEASE_S`` to the caller in a file every process of this
    user on this machine shares: until then no process is handed it again, though its owner may
    not have bound it yet (CI: two pytest workers were handed one web port in the same second)."""
    return lease_free_port(LOW_PORTS, PORT_LEASES, PORT_LEASE_S, exclude)


def lease_free_port(ports: range, leases: Path, lease_s: float, exclude: frozenset[int] | set[int] = frozenset()) -> int:
    """The first port of ``ports``, from a random place, that is not in ``exclude``, not leased in
    the JSON file ``leases`` (port → until, epoch seconds) and free to bind; leased there for
    ``lease_s``. Callers serialise on a lock file beside ``leases``."""
    leases.parent.mkdir(parents=True, exist_ok=True)
    with open(leases.with_name(leases.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now = time.time()
        try:
            held = {int(port): until for port, until in json.loads(leases.read_text()).items() if until > now}
        except (FileNotFoundError, ValueError):
            held = {}
        start = uuid.uuid4().int % len(ports)
        for i in range(len(ports)):
            port = ports[(start + i) % len(ports)]
            if port in exclude or port in held:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            held[port] = now + lease_s
            staged = leases.with_name(f"{leases.name}.{os.getpid()}")
            staged.write_text(json.dumps(held))
            staged.replace(leases)
            return port
    raise DevKafkaError(f"no free port in {ports.start}-{ports.stop - 1} ({len(held)} ports leased in {leases})")


def _random_cluster_id() -> str:
    """A Kafka cluster id, as ``StorageTool random-uuid`` makes one (without starting a JVM)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


# --------------------------------------------------------------------------- broker


class LocalKafka:
    """One single-node KRaft broker on 127.0.0.1 whose state lives in ``data_dir``.

    ``port`` (default: the data dir's, else 9092) and ``controller_port`` (default
    ``port + 1``) are written into the data dir on the first start, and so is ``sasl``, an
    extra listener for clients that log in (default none), and ``proxied``, one for clients that
    go through a TCP proxy (default none); a later start with other listeners
    raises DevKafkaError rather than silently moving the broker. Only one broker may use a
    data dir at a time.

    ``start()`` and ``stop()`` block; from async code call them through
    ``asyncio.to_thread`` so that clients in the same event loop keep running while the
    broker goes down or comes back.
    """

    def __init__(
        self,
        data_dir: Path | str,
        port: int | None = None,
        controller_port: int | None = None,
        cache_dir: Path | None = None,
        sasl: SaslListener | None = None,
        proxied: ProxiedListener | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        if port is None and self._properties_path.exists():
            formatted = _read_listeners(self._properties_path)
            port, controller_port = formatted["PLAINTEXT"], formatted["CONTROLLER"]
        self.port = port if port is not None else 9092
        self.controller_port = controller_port if controller_port is not None else self.port + 1
        self.cache_dir = cache_dir
        self.sasl = sasl
        self.proxied = proxied
        self._process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        """The bootstrap address clients use: ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The bootstrap address of the SASL listener: ``127.0.0.1:<sasl port>``.

        Raises DevKafkaError when this broker was not given one.
        """
        if self.sasl is None:
            raise DevKafkaError(f"the broker of {self.data_dir} has no SASL listener: pass sasl=SaslListener(...)")
        return f"127.0.0.1:{self.sasl.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def _pid_path(self) -> Path:
        return self.data_dir / "broker.pid"

    @property
    def _properties_path(self) -> Path:
        return self.data_dir / "server.properties"

    # ---- state

    def pid(self) -> int | None:
        """The pid of this data dir's broker process if it is alive, else None."""
        try:
            pid = int(self._pid_path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        if self._process is not None and self._process.pid == pid:
            return pid if self._process.poll() is None else None
        return pid if _is_broker_process(pid, self._properties_path) else None

    def is_running(self) -> bool:
        return self.pid() is not None

    # ---- lifecycle

    def start(self, timeout: float = 120.0) -> None:
        """Start the broker in the background and return once it serves metadata.

        Resolves the jars (first run only), writes the config and formats the storage on
        the first start. Raises DevKafkaError if it is already running, if a port is taken,
        if Java is missing, or if it does not serve within ``timeout`` seconds.
        """
        if self.is_running():
            raise DevKafkaError(f"Kafka is already running (pid {self.pid()}) for {self.data_dir}")
        java = shutil.which("java")
        if java is None:
            raise DevKafkaError("java not found on PATH: install a Java 17+ runtime to run the local Kafka broker")
        libs = resolve_jars(self.cache_dir)
        self._check_ports()
        self._prepare_data_dir(java, libs)
        self._launch(java, libs)
        self._wait_until_serving(timeout)

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the broker: SIGTERM (a controlled shutdown), then SIGKILL after ``timeout``.

        Returns False if it was not running. Safe to call twice.
        """
        pid = self.pid()
        if pid is None:
            self._pid_path.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        if not self._wait_for_exit(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            self._wait_for_exit(pid, 10.0)
        self._pid_path.unlink(missing_ok=True)
        self._process = None
        return True

    def ensure(self, timeout: float = 120.0) -> bool:
        """Start the broker unless it already runs; True if this call started it."""
        if self.is_running():
            return False
        self.start(timeout)
        return True

    # ---- internals

    def _check_ports(self) -> None:
        wanted = _listeners(self.port, self.controller_port, self.sasl, self.proxied)
        if self._properties_path.exists():
            formatted = _read_listeners(self._properties_path)
            if formatted != wanted:
                raise DevKafkaError(
                    f"{self.data_dir} belongs to a broker with the listeners {_describe(formatted)}, "
                    f"not {_describe(wanted)}: use those or another data dir"
                )
        for port in wanted.values():
            if _accepts_connections(port):
                raise DevKafkaError(f"port {port} on 127.0.0.1 is in use by another process")

    def _prepare_data_dir(self, java: str, libs: Path) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self._properties_path.exists():
            self._properties_path.write_text(
                _server_properties(self.data_dir, self.port, self.controller_port, self.sasl, self.proxied)
            )
        (self.data_dir / "log4j2.properties").write_text(_log4j_properties(self.data_dir))
        if not (self.data_dir / "logs" / "meta.properties").exists():
            self._format_storage(java, libs)

    def _format_storage(self, java: str, libs: Path) -> None:
        result = subprocess.run(
            [
                java,
                "-cp",
                f"{libs}/*",
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                "--ignore-formatted",
                "-t",
                _random_cluster_id(),
                "-c",
                str(self._properties_path),
                # SCRAM credentials live in the cluster's metadata: written here, once.
                *(["--add-scram", self.sasl.scram_credential()] if self.sasl is not None else []),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise DevKafkaError(
                f"formatting Kafka storage in {self.data_dir / 'logs'} failed: {(result.stdout + result.stderr).strip()}"
            )

    def _launch(self, java: str, libs: Path) -> None:
        command = [
            java,
            *_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            f"{libs}/*",
            _MAIN_CLASS,
            str(self._properties_path),
        ]
        with open(self.data_dir / "broker.out", "ab") as out:
            # A session of its own: Ctrl-C in the terminal that started it must not reach it.
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )
        self._pid_path.write_text(f"{self._process.pid}\n")

    def _wait_until_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_running():
                raise DevKafkaError(f"Kafka exited during start-up; see {self.log_path} and {self.data_dir / 'broker.out'}")
            if _accepts_connections(self.port) and _serves_metadata(self.bootstrap):
                return
            time.sleep(0.25)
        self.stop()
        raise DevKafkaError(f"Kafka did not serve on {self.bootstrap} within {timeout:.0f}s; see {self.log_path}")

    def _wait_for_exit(self, pid: int, timeout: float) -> bool:
        if self._process is not None and self._process.pid == pid:
            try:
                self._process.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _is_broker_process(pid, self._properties_path):
                return True
            time.sleep(0.1)
        return False


def _describe(listeners: dict[str, int]) -> str:
    return ", ".join(f"{name} {port}" for name, port in listeners.items())


def _is_broker_process(pid: int, properties: Path) -> bool:
    """Is ``pid`` alive and the broker of this config (not a recycled pid)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:
        # No /proc (macOS): fall back to "some process has this pid".
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 0)
            return True
        return False
    return _MAIN_CLASS.encode() in cmdline and str(properties).encode() in cmdline


def _accepts_connections(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _serves_metadata(bootstrap: str) -> bool:
    """One admin metadata round trip listing a broker, run on a loop of its own.

    A thread of its own keeps this callable from inside a running event loop too.
    """

    async def round_trip() -> bool:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        try:
            await admin.start()
            cluster = await admin.describe_cluster()
            return bool(cluster["brokers"])
        except Exception:  # noqa: BLE001 - whatever fails, the broker is not up (yet)
            return False
        finally:
            await admin.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, round_trip()).result()


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hyperdata_sidecar.devkafka",
        description=f"A local single-node Apache Kafka {KAFKA_VERSION} broker (KRaft) on "
        "127.0.0.1. "
        "Needs Java 17+; Maven once, to fetch the jars into $HYPERDATA_KAFKA_CACHE "
        f"(default {default_cache_dir()}).",
    )
    parser.add_argument(
        "command",
        choices=("start", "stop", "status", "ensure"),
        help="start; stop (SIGTERM, then SIGKILL); status (exit 0 running, 3 not); ensure (start unless running)",
    )
    parser.add_argument("--port", type=int, default=None, help="client port (default: the data dir's, else 9092)")
    parser.add_argument("--controller-port", type=int, default=None, help="KRaft controller port (default: port + 1)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("var/kafka"),
        help="config, storage, logs and pid file; relative to the current directory (default var/kafka)",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the broker to serve (default 120)")
    args = parser.parse_args(argv)
    broker = LocalKafka(args.data_dir, args.port, args.controller_port)
    try:
        return _run(args.command, broker, args.timeout)
    except DevKafkaError as error:
        print(f"devkafka: {error}", file=sys.stderr)
        return 1


def _run(command: str, broker: LocalKafka, timeout: float) -> int:
    where = f"{broker.bootstrap} (data dir {broker.data_dir})"
    if command == "status":
        pid = broker.pid()
        print(f"running, pid {pid}, on {where}" if pid else f"not running: {where}")
        return 0 if pid else 3
    if command == "stop":
        print(f"stopped {where}" if broker.stop() else f"not running: {where}")
        return 0
    if command == "start" and broker.is_running():
        print(f"devkafka: already running, pid {broker.pid()}, on {where}", file=sys.stderr)
        return 1
    if broker.ensure(timeout):
        print(f"Kafka {KAFKA_VERSION} ready on {where}, pid {broker.pid()}, log {broker.log_path}")
    else:
        print(f"already running, pid {broker.pid()}, on {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
