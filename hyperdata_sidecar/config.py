"""Settings: ``faust.ini`` holds the defaults, environment variables override them.

Every setting has one name, used both as the ``faust.ini`` key (section ``[sidecar]``) and as the
environment variable. Invalid values raise :class:`ConfigError`, whose message names the setting,
so the worker can stop with one clear line instead of a traceback.
"""

from __future__ import annotations

import configparser
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from hyperdata_sidecar.core.object_location import ObjectLocation
from hyperdata_sidecar.core.tables import TABLES, TableSpec
from hyperdata_sidecar.engines import ENGINE_CHOICES
from hyperdata_sidecar.topics import ContractError, load_contract

CONFIG_FILE_ENV = "SIDECAR_CONFIG"
SECTION = "sidecar"

#: The built-in defaults. ``faust.ini`` at the repo root ships exactly these (a test keeps them equal).
DEFAULTS: dict[str, str] = {
    "WATCH_DIR": "/watch",
    "KAFKA_BOOTSTRAP": "kafka:29092",
    "TOPIC_BOOK_DIFFS": "hyperliquid.book-diffs",
    "TOPIC_ORDER_STATUSES": "hyperliquid.order-statuses",
    "TOPIC_FILLS": "hyperliquid.fills",
    "TOPIC_SEALS": "hyperliquid.node-files",
    "TOPIC_DLQ": "hyperliquid.sidecar-dlq",
    "TOPIC_SNAPSHOTS": "hyperliquid.node-snapshots",
    "TOPIC_REPLICATION_FACTOR": "1",
    "TOPICS_APPLY_ON_START": "true",
    "POLL_INTERVAL_MS": "250",
    "READ_BUDGET_BYTES": "4194304",
    "MAX_LINE_BYTES": "8388608",
    "INITIAL_POSITION": "beginning",
    "SEAL_GRACE_MS": "3000",
    "LATE_APPEND_WATCH_S": "7200",
    "SNAPSHOT_GRACE_MS": "10000",
    "SNAPSHOT_OFFSETS_WAIT_S": "120",
    "STATE_PATH": "/state",
    "BACKUP_SINK": "local",
    "BACKUP_DIR": "/backups",
    "BACKUP_MAX_TRIES": "20",
    "BACKUP_URL": "",
    "BACKUP_ENDPOINT": "",
    "BACKUP_REGION": "",
    "BACKUP_PATH_STYLE": "false",
    "BACKUP_MAX_BYTES_PER_S": "0",
    "NODE_ID": "",
    "NODE_ID_REQUIRED": "false",
    "STREAM_ID": "",
    "STREAM_YIELD_LAG_S": "30",
    "WEB_BIND": "127.0.0.1",
    "WEB_PORT": "6066",
    "LAG_WARN_SECONDS": "30",
    "LAG_WARN_BYTES": "268435456",
    "PRODUCER_LINGER_MS": "50",
    "PRODUCER_BATCH_BYTES": "1048576",
    "PRODUCER_COMPRESSION": "zstd",
    "PRODUCER_COMPRESSION_LEVEL": "-1",
    "SIDECAR_ENGINE": "auto",
    "DELIVERY": "at_least_once",
    "TXN_MAX_MS": "250",
    "TXN_MAX_BYTES": "33554432",
    "TXN_TIMEOUT_MS": "60000",
    "KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
    "KAFKA_SASL_MECHANISM": "",
    "KAFKA_SASL_USERNAME": "",
    "KAFKA_SASL_PASSWORD": "",
    "KAFKA_SSL_CAFILE": "",
    "KAFKA_SSL_CERTFILE": "",
    "KAFKA_SSL_KEYFILE": "",
}

#: Backup sinks are plug-ins: a distribution registers a ``BackupSink`` class in this entry-point
#: group under the name ``BACKUP_SINK`` selects (this project registers ``local`` and ``none``).
BACKUP_SINK_GROUP = "hyperdata_sidecar.backup_sinks"
INITIAL_POSITIONS = ("beginning", "end")
DELIVERY_CHOICES = ("at_least_once", "exactly_once")
#: librdkafka refuses a message.timeout.ms above transaction.timeout.ms; the broker's default cap on
#: transaction.timeout.ms (transaction.max.timeout.ms) is 15 minutes.
TXN_TIMEOUT_RANGE_MS = (1000, 900_000)
COMPRESSION_CODECS = ("zstd", "lz4", "snappy", "gzip", "none")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class ConfigError(ValueError):
    """A setting has an invalid value. ``str(err)`` is one line that names the setting."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting


@dataclass(frozen=True)
class KafkaSecurity:
    """Client security settings passed through to every Kafka client the sidecar creates."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka clients (producer, consumer, admin)."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context

            kwargs["ssl_context"] = create_ssl_context(
                cafile=self.ssl_cafile or None,
                certfile=self.ssl_certfile or None,
                keyfile=self.ssl_keyfile or None,
            )
        if self.protocol.startswith("SASL_"):
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password
        return kwargs

    def librdkafka_config(self) -> dict[str, str]:
        """The same settings for librdkafka clients (the data-plane producer)."""
        config = {"security.protocol": self.protocol.lower()}
        optional = {
            "ssl.ca.location": self.ssl_cafile,
            "ssl.certificate.location": self.ssl_certfile,
            "ssl.key.location": self.ssl_keyfile,
        }
        if self.protocol.startswith("SASL_"):
            optional.update(
                {"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.sasl_username, "sasl.password": self.sasl_password}
            )
        config.update({name: value for name, value in optional.items() if value})
        return config


@dataclass(frozen=True)
class ObjectStoreTarget:
    """Where ``BACKUP_SINK=object_store`` uploads, and how fast. Credentials are not settings: the
    store's client reads them from its standard chain."""

    location: ObjectLocation  # BACKUP_URL
    endpoint: str = ""  # BACKUP_ENDPOINT: an S3-compatible server's URL, or a GCS emulator's; "" for the cloud's own
    region: str = ""  # BACKUP_REGION (S3); "" for the client's default
    path_style: bool = False  # BACKUP_PATH_STYLE: https://host/bucket/key instead of https://bucket.host/key (S3)
    max_bytes_per_s: int = 0  # BACKUP_MAX_BYTES_PER_S; 0: no limit

    def summary(self) -> dict[str, object]:
        return {
            "url": str(self.location),
            "endpoint": self.endpoint,
            "region": self.region,
            "path_style": self.path_style,
            "max_bytes_per_s": self.max_bytes_per_s,
        }


@dataclass(frozen=True)
class Settings:
    """The sidecar's effective configuration."""

    watch_dir: Path
    kafka_bootstrap: str
    topics: Mapping[str, str]  # table dir name -> data topic
    topic_seals: str
    topic_dlq: str
    topic_snapshots: str
    topic_replication_factor: int
    topics_apply_on_start: bool
    poll_interval_s: float
    read_budget_bytes: int
    max_line_bytes: int
    initial_position: str
    seal_grace_s: float
    late_append_watch_s: float
    snapshot_grace_s: float
    snapshot_offsets_wait_s: float
    state_path: Path
    backup_sink: str
    backup_dir: Path
    backup_max_tries: int
    backup_store: ObjectStoreTarget | None  # BACKUP_SINK=object_store's target; None for the other sinks
    node_id: str
    node_id_from_host_name: bool  # NODE_ID was not set
    node_id_required: bool
    stream_id: str | None  # several sidecars (one per node host) publish one stream; None: this one alone
    stream_yield_lag_s: float  # the active yields when a standby's node is this many seconds of blocks ahead
    web_bind: str
    web_port: int
    lag_warn_seconds: float
    lag_warn_bytes: int
    producer_linger_ms: int
    producer_batch_bytes: int
    producer_compression: str  # librdkafka's compression.type of the data plane
    producer_compression_level: int  # its compression.level (-1: the codec's default)
    engine: str  # the line engine asked for (auto, native or python); the worker chooses at start
    delivery: str  # at_least_once | exactly_once (the data plane's producer transactional)
    txn_max_s: float  # exactly_once: a transaction is committed once it is this old ...
    txn_max_bytes: int  # ... or once its reads handed over this many bytes
    txn_timeout_ms: int  # exactly_once: librdkafka's transaction.timeout.ms (the broker aborts a transaction open longer)
    security: KafkaSecurity

    @property
    def exactly_once(self) -> bool:
        """True with ``DELIVERY=exactly_once``: records and their progress are written in transactions."""
        return self.delivery == "exactly_once"

    def topic_for(self, spec: TableSpec) -> str:
        return self.topics[spec.dir_name]

    def topic_names(self) -> dict[str, str]:
        """Topic names by their setting (``TOPIC_*``), as the topic contract resolves them."""
        names = {spec.topic_env: self.topics[spec.dir_name] for spec in TABLES}
        return {**names, "TOPIC_SEALS": self.topic_seals, "TOPIC_DLQ": self.topic_dlq, "TOPIC_SNAPSHOTS": self.topic_snapshots}

    def contract_topics(self) -> list[str]:
        """Every topic the sidecar writes to: the data topics, the seal topic, the DLQ and the snapshot topic."""
        return list(self.topic_names().values())

    def public_summary(self) -> dict[str, object]:
        """The configuration in effect, safe to log or serve (no secrets)."""
        return {
            "watch_dir": str(self.watch_dir),
            "kafka_bootstrap": self.kafka_bootstrap,
            "topics": dict(self.topics),
            "topic_seals": self.topic_seals,
            "topic_dlq": self.topic_dlq,
            "topic_snapshots": self.topic_snapshots,
            "poll_interval_ms": round(self.poll_interval_s * 1000),
            "read_budget_bytes": self.read_budget_bytes,
            "max_line_bytes": self.max_line_bytes,
            "initial_position": self.initial_position,
            "seal_grace_ms": round(self.seal_grace_s * 1000),
            "late_append_watch_s": round(self.late_append_watch_s),
            "snapshot_grace_ms": round(self.snapshot_grace_s * 1000),
            "snapshot_offsets_wait_s": round(self.snapshot_offsets_wait_s),
            "state_path": str(self.state_path),
            "backup_sink": self.backup_sink,
            "backup_dir": str(self.backup_dir),
            "backup_max_tries": self.backup_max_tries,
            "node_id": self.node_id,
            **({"stream_id": self.stream_id, "stream_yield_lag_s": self.stream_yield_lag_s} if self.stream_id else {}),
            "web": f"{self.web_bind}:{self.web_port}",
            "engine": self.engine,
            "delivery": self.delivery,
            **(
                {
                    "txn_max_ms": round(self.txn_max_s * 1000),
                    "txn_max_bytes": self.txn_max_bytes,
                    "txn_timeout_ms": self.txn_timeout_ms,
                }
                if self.exactly_once
                else {}
            ),
            "security_protocol": self.security.protocol,
            **({"backup_store": self.backup_store.summary()} if self.backup_store else {}),
        }


class _CaseKeepingParser(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr  # keep keys upper-case, as the env vars are


def read_config_file(env: Mapping[str, str]) -> dict[str, str]:
    """Values from the ``faust.ini`` in effect: ``$SIDECAR_CONFIG``, else ``./faust.ini`` if present."""
    explicit = env.get(CONFIG_FILE_ENV)
    path = Path(explicit) if explicit else Path("faust.ini")
    if not path.is_file():
        if explicit:
            raise ConfigError(CONFIG_FILE_ENV, f"config file {path} does not exist")
        return {}
    parser = _CaseKeepingParser(interpolation=None)
    parser.read(path)
    if not parser.has_section(SECTION):
        return {}
    unknown = sorted(set(parser[SECTION]) - set(DEFAULTS))
    if unknown:
        raise ConfigError(unknown[0], f"unknown setting in {path}")
    return dict(parser[SECTION])


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build :class:`Settings` from defaults, the config file and ``env`` (``os.environ`` by default)."""
    env = os.environ if env is None else env
    raw = {**DEFAULTS, **read_config_file(env)}
    raw.update({name: env[name] for name in DEFAULTS if name in env})
    return _parse(raw)


def _parse(raw: Mapping[str, str]) -> Settings:
    security = KafkaSecurity(
        protocol=_choice(raw, "KAFKA_SECURITY_PROTOCOL", SECURITY_PROTOCOLS),
        sasl_mechanism=_choice(raw, "KAFKA_SASL_MECHANISM", SASL_MECHANISMS),
        sasl_username=raw["KAFKA_SASL_USERNAME"],
        sasl_password=raw["KAFKA_SASL_PASSWORD"],
        ssl_cafile=raw["KAFKA_SSL_CAFILE"],
        ssl_certfile=raw["KAFKA_SSL_CERTFILE"],
        ssl_keyfile=raw["KAFKA_SSL_KEYFILE"],
    )
    if security.protocol.startswith("SASL_") and not security.sasl_mechanism:
        raise ConfigError("KAFKA_SASL_MECHANISM", f"required with KAFKA_SECURITY_PROTOCOL={security.protocol}")
    settings = Settings(
        watch_dir=Path(_nonempty(raw, "WATCH_DIR")),
        kafka_bootstrap=_nonempty(raw, "KAFKA_BOOTSTRAP"),
        topics={spec.dir_name: _nonempty(raw, spec.topic_env) for spec in TABLES},
        topic_seals=_nonempty(raw, "TOPIC_SEALS"),
        topic_dlq=_nonempty(raw, "TOPIC_DLQ"),
        topic_snapshots=_nonempty(raw, "TOPIC_SNAPSHOTS"),
        topic_replication_factor=_positive_int(raw, "TOPIC_REPLICATION_FACTOR"),
        topics_apply_on_start=_bool(raw, "TOPICS_APPLY_ON_START"),
        poll_interval_s=_positive_int(raw, "POLL_INTERVAL_MS") / 1000,
        read_budget_bytes=_positive_int(raw, "READ_BUDGET_BYTES"),
        max_line_bytes=_positive_int(raw, "MAX_LINE_BYTES"),
        initial_position=_choice(raw, "INITIAL_POSITION", INITIAL_POSITIONS),
        seal_grace_s=_non_negative_int(raw, "SEAL_GRACE_MS") / 1000,
        late_append_watch_s=float(_non_negative_int(raw, "LATE_APPEND_WATCH_S")),
        snapshot_grace_s=_non_negative_int(raw, "SNAPSHOT_GRACE_MS") / 1000,
        snapshot_offsets_wait_s=float(_non_negative_int(raw, "SNAPSHOT_OFFSETS_WAIT_S")),
        state_path=Path(_nonempty(raw, "STATE_PATH")),
        backup_sink=_backup_sink(raw),
        backup_dir=Path(_nonempty(raw, "BACKUP_DIR")),
        backup_max_tries=_positive_int(raw, "BACKUP_MAX_TRIES"),
        backup_store=_backup_store(raw),
        node_id=_node_id(raw["NODE_ID"]),
        node_id_from_host_name=not raw["NODE_ID"].strip(),
        node_id_required=_bool(raw, "NODE_ID_REQUIRED"),
        stream_id=_stream_id(raw),
        stream_yield_lag_s=float(_positive_int(raw, "STREAM_YIELD_LAG_S")),
        web_bind=_nonempty(raw, "WEB_BIND"),
        web_port=_port(raw, "WEB_PORT"),
        lag_warn_seconds=_positive_int(raw, "LAG_WARN_SECONDS"),
        lag_warn_bytes=_positive_int(raw, "LAG_WARN_BYTES"),
        producer_linger_ms=_non_negative_int(raw, "PRODUCER_LINGER_MS"),
        producer_batch_bytes=_positive_int(raw, "PRODUCER_BATCH_BYTES"),
        producer_compression=_choice(raw, "PRODUCER_COMPRESSION", COMPRESSION_CODECS),
        producer_compression_level=_compression_level(raw),
        engine=_choice(raw, "SIDECAR_ENGINE", ENGINE_CHOICES),
        delivery=_choice(raw, "DELIVERY", DELIVERY_CHOICES),
        txn_max_s=_positive_int(raw, "TXN_MAX_MS") / 1000,
        txn_max_bytes=_positive_int(raw, "TXN_MAX_BYTES"),
        txn_timeout_ms=_txn_timeout_ms(raw),
        security=security,
    )
    try:
        load_contract(settings.topic_names())
    except ContractError as exc:
        raise ConfigError(exc.setting, exc.problem) from None
    return settings


def _nonempty(raw: Mapping[str, str], name: str) -> str:
    value = raw[name].strip()
    if not value:
        raise ConfigError(name, "must not be empty")
    return value


def _int(raw: Mapping[str, str], name: str) -> int:
    value = raw[name].strip()
    try:
        return int(value)
    except ValueError:
        raise ConfigError(name, f"must be an integer (got {value!r})") from None


def _positive_int(raw: Mapping[str, str], name: str) -> int:
    value = _int(raw, name)
    if value <= 0:
        raise ConfigError(name, f"must be greater than 0 (got {value})")
    return value


def _compression_level(raw: Mapping[str, str]) -> int:
    """librdkafka's ``compression.level``: -1 (the codec's default) or a level the codec knows
    (zstd 0-22, lz4 0-12, gzip 0-9; snappy and none have none)."""
    level = _int(raw, "PRODUCER_COMPRESSION_LEVEL")
    limits = {"zstd": 22, "lz4": 12, "gzip": 9, "snappy": -1, "none": -1}
    codec = raw["PRODUCER_COMPRESSION"].strip()
    high = limits.get(codec, 22)
    if level != -1 and not 0 <= level <= high:
        choice = f"-1 or 0..{high}" if high >= 0 else "-1 (the codec has no levels)"
        raise ConfigError("PRODUCER_COMPRESSION_LEVEL", f"{level} is not a level of {codec}: {choice}")
    return level


def _txn_timeout_ms(raw: Mapping[str, str]) -> int:
    """``TXN_TIMEOUT_MS``: within what librdkafka and the broker's default accept, and above ``TXN_MAX_MS``
    (a transaction must be able to close before the broker aborts it)."""
    value = _int(raw, "TXN_TIMEOUT_MS")
    low, high = TXN_TIMEOUT_RANGE_MS
    if not low <= value <= high:
        raise ConfigError("TXN_TIMEOUT_MS", f"must be {low}..{high} (got {value})")
    if value < 4 * _positive_int(raw, "TXN_MAX_MS"):
        raise ConfigError("TXN_TIMEOUT_MS", f"must be at least 4 x TXN_MAX_MS (got {value})")
    return value


def _non_negative_int(raw: Mapping[str, str], name: str) -> int:
    value = _int(raw, name)
    if value < 0:
        raise ConfigError(name, f"must not be negative (got {value})")
    return value


def _port(raw: Mapping[str, str], name: str) -> int:
    value = _int(raw, name)
    if not 0 < value < 65536:
        raise ConfigError(name, f"must be a TCP port 1-65535 (got {value})")
    return value


def _bool(raw: Mapping[str, str], name: str) -> bool:
    value = raw[name].strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(name, f"must be true or false (got {raw[name]!r})")


def _choice(raw: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = raw[name].strip()
    if value not in choices:
        shown = ", ".join(c or "''" for c in choices)
        raise ConfigError(name, f"must be one of {shown} (got {value!r})")
    return value


def backup_sink_names() -> tuple[str, ...]:
    """The ``BACKUP_SINK`` values the installed distributions register, sorted."""
    return tuple(sorted({ep.name for ep in entry_points(group=BACKUP_SINK_GROUP)}))


def _backup_sink(raw: Mapping[str, str]) -> str:
    names = backup_sink_names()
    if not names:
        raise ConfigError(
            "BACKUP_SINK",
            f"no backup sink is registered in entry-point group {BACKUP_SINK_GROUP}: is hyperdata-sidecar installed?",
        )
    return _choice(raw, "BACKUP_SINK", names)


def _backup_store(raw: Mapping[str, str]) -> ObjectStoreTarget | None:
    """The object store's settings, read (and checked) only when ``BACKUP_SINK=object_store``."""
    if raw["BACKUP_SINK"].strip() != "object_store":
        return None
    url = raw["BACKUP_URL"].strip()
    if not url:
        raise ConfigError("BACKUP_URL", "required with BACKUP_SINK=object_store: s3://bucket/prefix or gs://bucket/prefix")
    try:
        location = ObjectLocation.parse(url)
    except ValueError as exc:
        raise ConfigError("BACKUP_URL", str(exc)) from None
    endpoint = raw["BACKUP_ENDPOINT"].strip().rstrip("/")
    if endpoint and not endpoint.startswith(("https://", "http://")):
        raise ConfigError("BACKUP_ENDPOINT", f"must be an http:// or https:// URL (got {endpoint!r})")
    target = ObjectStoreTarget(
        location=location,
        endpoint=endpoint,
        region=raw["BACKUP_REGION"].strip(),
        path_style=_bool(raw, "BACKUP_PATH_STYLE"),
        max_bytes_per_s=_non_negative_int(raw, "BACKUP_MAX_BYTES_PER_S"),
    )
    if location.scheme == "gs" and target.region:
        raise ConfigError("BACKUP_REGION", "applies to s3:// only; a GCS bucket's location is its own")
    if location.scheme == "gs" and target.path_style:
        raise ConfigError("BACKUP_PATH_STYLE", "applies to s3:// only")
    return target


def _node_id(value: str) -> str:
    node = value.strip() or socket.gethostname()
    if not all(c.isalnum() or c in "-_." for c in node):
        raise ConfigError("NODE_ID", f"may only contain letters, digits, '-', '_' and '.' (got {node!r})")
    return node


def _stream_id(raw: Mapping[str, str]) -> str | None:
    stream = raw["STREAM_ID"].strip()
    if not stream:
        return None
    if not all(c.isalnum() or c in "-_." for c in stream):
        raise ConfigError("STREAM_ID", f"may only contain letters, digits, '-', '_' and '.' (got {stream!r})")
    if _choice(raw, "DELIVERY", DELIVERY_CHOICES) != "exactly_once":
        # The stream's transactional.id is what fences a former active before the new one's first record.
        raise ConfigError(
            "STREAM_ID", "needs DELIVERY=exactly_once: a new active fences the old one with the stream's transactional.id"
        )
    return stream


def check_runtime(settings: Settings) -> None:
    """Checks that need the file system, or only matter to the worker; run when the worker starts,
    not on import (every other command imports the app too)."""
    if settings.node_id_required and settings.node_id_from_host_name:
        # A container's host name changes whenever it is recreated: a new app id, empty state, and
        # every hour file on disk published again.
        raise ConfigError(
            "NODE_ID",
            "must be set here (NODE_ID_REQUIRED=true): the host name changes with every new container, "
            "and a new NODE_ID publishes every file on disk again",
        )
    if not settings.watch_dir.is_dir():
        raise ConfigError("WATCH_DIR", f"{settings.watch_dir} is not a directory")
    if not os.access(settings.watch_dir, os.R_OK | os.X_OK):
        raise ConfigError("WATCH_DIR", f"{settings.watch_dir} is not readable")
    if settings.backup_sink == "local":
        watch, backups = settings.watch_dir.resolve(), settings.backup_dir.resolve()
        if backups == watch or watch in backups.parents:
            raise ConfigError("BACKUP_DIR", f"{settings.backup_dir} is inside WATCH_DIR; the sidecar never writes there")


def prepare_state_path(settings: Settings, data_dir: Path) -> None:
    """Create ``STATE_PATH`` (the worker does, at start; no other command touches it) and check that
    the worker can write it and its app's data dir ``data_dir``, as far as they exist.

    Raises :class:`ConfigError` naming ``STATE_PATH``: a path that cannot be created, or a state dir
    another user wrote (a container volume written under another uid), stops the start with one line
    instead of a traceback from RocksDB.
    """
    try:
        settings.state_path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError("STATE_PATH", f"cannot create {settings.state_path}: {exc.strerror or exc}") from None
    for directory in (settings.state_path, data_dir, *data_dir.glob("**/")):
        if directory.is_dir() and not os.access(directory, os.W_OK | os.X_OK):
            owner = directory.stat().st_uid
            raise ConfigError(
                "STATE_PATH",
                f"{directory} belongs to uid {owner} and is not writable by uid {os.getuid()}, which runs the worker",
            )
