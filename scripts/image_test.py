"""`make image-test`: the image and docker/compose.yaml, run for real with podman.

    local Debian base image -> build (the native engine compiled) -> the engine in the image ->
    broker on the host -> topics-init -> sidecar -> replay -> verify -> the sidecar recreated

1. A Debian bookworm base with Python 3.11, made with debootstrap and imported into podman, as no
   image registry is reachable here. Made once: the rootfs tarball is kept in
   ~/.cache/hyperdata-sidecar/base/ and the image in podman's storage (scripts/podman_kit.py).
2. The image, built as docker/compose.yaml's `build` section says, on that base (BASE_IMAGE): its
   engine-build stage compiles the native line engine (engine/) into a wheel with rustup's Rust
   and maturin, the final stage installs it. With ``--engine-wheel-dir DIR`` (`make image-test`
   passes the wheel `make engine` built on this bookworm host, build/engine-wheel/) that wheel
   is handed to the build as the named build context engine-wheels instead, which replaces the
   Dockerfile's stage of that name: engine-build is skipped, and the engine is compiled once per
   CI run, not twice. pip, rustup and cargo inside the build trust the CA
   certificates this machine trusts (the host's bundle is mounted for the build only). podman
   keeps the layers: a rebuild without a change to pyproject.toml reuses the dependencies' layer
   and downloads nothing; one without a change to engine/Cargo.toml or Cargo.lock reuses the
   compiled crates (OpenSSL, librdkafka), and one without a change to engine/ the engine's wheel.
3. The native engine is in the image and is the one the sidecar runs: the image's user imports
   hyperdata_sidecar_engine (engine/Cargo.toml's version, from /opt/sidecar), compose.yaml runs
   the sidecar with SIDECAR_ENGINE=native, and the running sidecar reports
   hyperdata_sidecar_engine_info{engine="native",version=<that version>} 1.
4. A Kafka broker on the host (hyperdata_sidecar.devkafka) on free ports.
5. The compose services topics-init, sidecar, replay and verify, each a podman container of that
   image whose command, environment, user and volumes are read from compose.yaml. Host dirs are
   under var/image-test/; the replay tap appends a generated corpus (3 hours x 3 tables, with bad
   lines) into the watch dir while the sidecar runs. compose.yaml's header names the only
   differences: the host broker, the host's network, the sidecar's web server on a free port.
6. Checks: every container exits 0 (the sidecar after SIGTERM); the verifier finds no line lost,
   none duplicated, every bad line in the DLQ, every finalized hour sealed and backed up; the
   watch dir holds the corpus, byte for byte.
7. The container recreated: a new sidecar container on the same state volume (so a new host
   name) catches up with every file on disk and publishes nothing, no line and no seal. The same
   container without NODE_ID, as another uid than the one that wrote the volume (SIDECAR_USER),
   and with an empty dir over the engine's package (SIDECAR_ENGINE=native without the engine),
   each stop at once with one configuration error line, exit 2.

Containers, the volume and the broker of this run are removed on exit; logs stay in
var/image-test/. Needs podman and runc (on this kernel with `default_ulimits = []` in
containers.conf, as .ci/run writes), debootstrap for the first run, Java and Maven for the broker:
`.ci/run` installs them. Exits 0 when everything passed, 1 with the reason otherwise.
"""

from __future__ import annotations

import argparse
import filecmp
import functools
import json
import os
import re
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from podman_kit import DEADLINE_S, PODMAN, BaseImage, StepFailed, TestRun, podman, run_logged, run_test, step

from hyperdata_sidecar.devkafka import free_low_port
from hyperdata_sidecar.tools.generate import generate_corpus, parse_start

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "docker" / "compose.yaml"
WORK = REPO / "var" / "image-test"
BASE = BaseImage(
    "localhost/hyperdata-sidecar-base:bookworm",
    packages="python3,python3-venv,ca-certificates",
    cache_dir="base",
    tarball="debian-bookworm-python3.tar",
)
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# The user the Dockerfile's final stage runs as (USER), and the engine version it must carry.
IMAGE_USER = "sidecar"
ENGINE_VERSION = tomllib.loads((REPO / "engine" / "Cargo.toml").read_text())["package"]["version"]
RUN_ID = f"hdsc-image-test-{os.getpid()}"
SERVICES = ("topics-init", "sidecar", "replay", "verify")
RECREATED = ("sidecar-recreated", "sidecar-without-node-id", "sidecar-other-uid", "sidecar-without-engine")


# ---- compose.yaml -----------------------------------------------------------------------------

# Keys of a compose service and what this test does with each. A key not listed stops the test:
# compose.yaml would otherwise run something the test does not.
TRANSLATED_KEYS = {"image", "command", "environment", "user", "volumes"}
REPLACED_KEYS = {
    "build": "the image is built once, from this section (build_image)",
    "ports": "containers use the host's network",
    "depends_on": "this script starts the services in order",
    "restart": "a container that exits early fails the test",
    "profiles": "the test runs the services it names",
}
_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


def interpolate(value: Any, variables: Mapping[str, str]) -> Any:
    """``value`` with compose's ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}`` and ``$$``
    resolved from ``variables`` alone (not this process's environment, so the shell cannot
    change the test). Raises StepFailed for an unset ``${NAME}`` or another ``$`` form."""
    if isinstance(value, dict):
        return {key: interpolate(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, variables) for item in value]
    if not isinstance(value, str):
        return value

    def resolve(match: re.Match[str]) -> str:
        name, operator, default = match.groups()
        if name is None:
            return "\0"  # $$, a literal $ once the lone-$ check below is done
        current = variables.get(name)
        if (operator == ":-" and not current) or (operator == "-" and current is None):
            return default
        if current is None:
            raise StepFailed(f"{COMPOSE_FILE}: ${{{name}}} has no default and the test does not set it")
        return current

    resolved = _VARIABLE.sub(resolve, value)
    if "$" in resolved:
        raise StepFailed(f"{COMPOSE_FILE}: {value!r} uses a $ form this test does not resolve")
    return resolved.replace("\0", "$")


def load_compose(variables: Mapping[str, str]) -> dict[str, Any]:
    """compose.yaml with its variables resolved (YAML anchors and ``<<`` merges included)."""
    return interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), variables)


def check_translatable(compose: Mapping[str, Any], service: str) -> dict[str, Any]:
    spec = compose["services"][service]
    unknown = set(spec) - TRANSLATED_KEYS - set(REPLACED_KEYS)
    if unknown:
        raise StepFailed(
            f"{COMPOSE_FILE}: service {service} sets {sorted(unknown)}, which scripts/image_test.py "
            f"does not run; teach it to, or the test no longer runs what compose runs"
        )
    if not isinstance(spec.get("environment", {}), dict) or not isinstance(spec["command"], list):
        raise StepFailed(f"{COMPOSE_FILE}: service {service}: environment must be a map, command a list")
    return spec


def used_named_volumes(compose: Mapping[str, Any]) -> set[str]:
    """The compose file's named volumes that the tested services mount."""
    declared = set(compose.get("volumes") or {})
    sources = {v.split(":")[0] for service in SERVICES for v in compose["services"][service].get("volumes", [])}
    return declared & sources


def mount_argument(volume: str, named_volumes: Mapping[str, str]) -> str:
    """A compose short-syntax volume as podman's ``-v``: host paths resolve against compose.yaml's
    dir and must exist; named volumes map to this run's podman volumes."""
    source, target, *mode = volume.split(":")
    if source.startswith((".", "/")):
        host = (COMPOSE_FILE.parent / source).resolve()
        if not host.is_dir():
            raise StepFailed(f"volume {volume!r}: {host} is not a directory")
        source = str(host)
    elif source in named_volumes:
        source = named_volumes[source]
    else:
        raise StepFailed(f"volume {volume!r}: {source} is neither a path nor a declared volume")
    return ":".join([source, target, *mode])


def podman_run_arguments(
    compose: Mapping[str, Any],
    service: str,
    image: str,
    named_volumes: Mapping[str, str],
    extra_env: Mapping[str, str] | None = None,
) -> list[str]:
    """``podman run`` arguments (after ``run``) for one compose service on the host's network."""
    spec = check_translatable(compose, service)
    args = ["--name", f"{RUN_ID}-{service}", "--network=host"]
    if "user" in spec:
        args += ["--user", str(spec["user"])]
    for key, value in {**spec.get("environment", {}), **(extra_env or {})}.items():
        args += ["--env", f"{key}={value}"]
    for volume in spec.get("volumes", []):
        args += ["--volume", mount_argument(volume, named_volumes)]
    return args + [image, *map(str, spec["command"])]


# ---- the image ---------------------------------------------------------------------------------


def build_image(compose: Mapping[str, Any], engine_wheel_dir: Path | None = None) -> tuple[str, str]:
    """Build the image of the one service with a ``build`` section; returns (tag, image id).

    Every service must use that tag. The containers run the image id, so a concurrent build
    that moves the tag cannot change what this run tests. With ``engine_wheel_dir`` (a dir
    holding the engine's one wheel), that wheel is the engine-wheels stage (a named build
    context) instead of the one the Dockerfile's engine-build stage compiles."""
    built = [(name, spec) for name, spec in compose["services"].items() if "build" in spec]
    if len(built) != 1:
        raise StepFailed(f"{COMPOSE_FILE}: expected one service with a build section, found {len(built)}")
    spec = built[0][1]
    tag = spec["image"]
    for service in SERVICES:
        if compose["services"][service]["image"] != tag:
            raise StepFailed(f"{COMPOSE_FILE}: service {service} runs another image than the one built ({tag})")
    context = (COMPOSE_FILE.parent / spec["build"]["context"]).resolve()
    args = ["build", "--file", str(context / spec["build"]["dockerfile"]), "--tag", tag]
    for key, value in spec["build"].get("args", {}).items():
        args += ["--build-arg", f"{key}={value}"]
    if engine_wheel_dir is not None:
        wheels = sorted(engine_wheel_dir.glob("*.whl"))
        if len(wheels) != 1:
            raise StepFailed(f"{engine_wheel_dir}: expected the engine's one wheel (make engine builds it), found {len(wheels)}")
        args += ["--build-context", f"engine-wheels={engine_wheel_dir.resolve()}"]
        print(f"the engine's wheel from the host: {wheels[0]}")
    if HOST_CA_BUNDLE.exists():
        # This machine may reach PyPI through a TLS-inspecting proxy whose CA only the host trusts.
        args += ["--volume", f"{HOST_CA_BUNDLE}:/etc/ssl/certs/ca-certificates.crt:ro"]
    iidfile = WORK / "image.id"
    # A build without cached layers compiles OpenSSL and librdkafka in the engine's build stage:
    # minutes on a small machine shared with other work.
    command = [*PODMAN, *args, "--iidfile", str(iidfile), str(context)]
    run_logged(command, "podman build", WORK / "build.log", timeout=1800)
    return tag, iidfile.read_text().strip()


def check_native_engine(compose: Mapping[str, Any], image: str) -> str:
    """The image's user imports the native engine built from engine/ (its version is
    engine/Cargo.toml's) from the sidecar's install, and compose runs the sidecar with
    SIDECAR_ENGINE=native, so the worker refuses to start without it. Returns the engine's
    package dir in the image."""
    asked = compose["services"]["sidecar"].get("environment", {}).get("SIDECAR_ENGINE")
    if asked != "native":
        raise StepFailed(f"{COMPOSE_FILE}: the sidecar runs with SIDECAR_ENGINE={asked}, not native")
    probe = "import hyperdata_sidecar_engine as engine; print(engine.__version__, engine.__file__)"
    result = podman("run", "--rm", "--user", IMAGE_USER, image, "python", "-c", probe, check=False)
    if result.returncode != 0:
        raise StepFailed(f"the image's user cannot import hyperdata_sidecar_engine:\n{result.stderr.strip()}")
    version, path = result.stdout.split()
    if version != ENGINE_VERSION or not path.startswith("/opt/sidecar/"):
        raise StepFailed(f"the image holds engine {version} at {path}; expected {ENGINE_VERSION} under /opt/sidecar/")
    print(f"{IMAGE_USER} imports hyperdata_sidecar_engine {version} from {path}; the sidecar runs with SIDECAR_ENGINE=native")
    return path.rsplit("/", 1)[0]


def check_engine_in_use(metrics_url: str) -> None:
    """The worker reports the native engine of engine/Cargo.toml's version as the one it runs."""
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    series = [line for line in text.splitlines() if line.startswith("hyperdata_sidecar_engine_info{")]
    expected = f'hyperdata_sidecar_engine_info{{engine="native",version="{ENGINE_VERSION}"}} 1.0'
    if series != [expected]:
        raise StepFailed(f"{metrics_url}: expected {expected}, found {series}")
    print(f"the sidecar runs the native engine: {expected}")


# ---- steps --------------------------------------------------------------------------------------


def wait_until_ready(url: str, container: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if podman("inspect", "--format", "{{.State.Running}}", container).stdout.strip() != "true":
            raise StepFailed(f"the sidecar container exited before it was ready:\n{container_log_tail(container)}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # not up yet, or not ready (503)
        time.sleep(1)
    raise StepFailed(f"{url} did not answer 200 within {DEADLINE_S:.0f}s:\n{container_log_tail(container)}")


def container_log_tail(container: str, lines: int = 30) -> str:
    result = podman("logs", "--tail", str(lines), container, check=False)
    return (result.stdout + result.stderr).rstrip()


def check_replayed(corpus: Path, watch: Path) -> int:
    """The watch dir holds exactly the corpus's files, byte for byte (else the verifier could pass
    on a tree the replay never filled). Returns the number of files."""
    corpus_files = sorted(p.relative_to(corpus) for p in corpus.rglob("*") if p.is_file())
    watch_files = sorted(p.relative_to(watch) for p in watch.rglob("*") if p.is_file())
    if corpus_files != watch_files or not all(filecmp.cmp(corpus / f, watch / f, shallow=False) for f in corpus_files):
        raise StepFailed(f"the replay container did not reproduce {corpus} in {watch}")
    return len(corpus_files)


# ---- the run ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    """The compose services of one run: compose.yaml resolved, the image id, this run's volumes,
    and where the image holds the native engine's package."""

    compose: Mapping[str, Any]
    image: str
    named_volumes: Mapping[str, str]
    engine_dir: str

    def run_arguments(self, service: str, extra_env: Mapping[str, str] | None = None) -> list[str]:
        return podman_run_arguments(self.compose, service, self.image, self.named_volumes, extra_env)

    def sidecar_arguments(self, name: str, web_port: int, *, mounts: Sequence[str] = (), **changes: str) -> list[str]:
        """The sidecar service as container ``name`` (web server on 127.0.0.1:``web_port``), with
        podman's ``--mount`` of each of ``mounts``; a ``user`` in ``changes`` replaces compose's,
        the rest are environment variables."""
        user = changes.pop("user", None)
        args = self.run_arguments("sidecar", {"WEB_BIND": "127.0.0.1", "WEB_PORT": str(web_port), **changes})
        args[args.index(f"{RUN_ID}-sidecar")] = f"{RUN_ID}-{name}"
        if user is not None:
            args[args.index("--user") + 1] = user
        image_at = args.index(self.image)
        args[image_at:image_at] = [f"--mount={mount}" for mount in mounts]
        return args

    def run_to_completion(self, service: str) -> str:
        """Runs a one-shot service; returns its output. Raises StepFailed unless it exits 0."""
        command = [*PODMAN, "run", "--rm", *self.run_arguments(service)]
        return run_logged(command, f"the {service} container", WORK / f"{service}.log", show=True)


def run_services(stack: Stack) -> None:
    """topics-init, the sidecar until ready, the replay tap, the verifier; then SIGTERM to the sidecar."""
    step("5/8 topics-init, then the sidecar")
    stack.run_to_completion("topics-init")
    web_port = free_low_port()
    sidecar = f"{RUN_ID}-sidecar"
    podman("run", "--detach", *stack.sidecar_arguments("sidecar", web_port))
    wait_until_ready(f"http://127.0.0.1:{web_port}/readyz", sidecar)
    print(f"the sidecar is ready: http://127.0.0.1:{web_port}/readyz answers 200")
    check_engine_in_use(f"http://127.0.0.1:{web_port}/metrics")

    step("6/8 the replay tap appends the corpus into the watch dir")
    stack.run_to_completion("replay")

    step("7/8 the verifier")
    report = stack.run_to_completion("verify")
    if not re.search(r"^OK: 0 lost, 0 failing findings, 0 duplicates", report, re.MULTILINE):
        raise StepFailed("the verifier exited 0 without its 'OK: 0 lost, 0 failing findings, 0 duplicates' verdict")
    stop_sidecar(sidecar)


def stop_sidecar(container: str) -> None:
    podman("stop", "--time", "60", container, timeout=90)
    exit_code = podman("inspect", "--format", "{{.State.ExitCode}}", container).stdout.strip()
    if exit_code != "0":
        raise StepFailed(f"the sidecar container exited {exit_code} on SIGTERM:\n{container_log_tail(container)}")


def recreate_sidecar(stack: Stack, files: int) -> None:
    """A new sidecar container on the same state volume publishes nothing; one without NODE_ID,
    run as a uid that cannot write the volume, or without the native engine, stops with one
    configuration error line."""
    step("8/8 the sidecar container recreated on the same state volume")
    web_port = free_low_port()
    container = f"{RUN_ID}-sidecar-recreated"
    podman("run", "--detach", *stack.sidecar_arguments("sidecar-recreated", web_port))
    base = f"http://127.0.0.1:{web_port}"
    wait_until_ready(f"{base}/readyz", container)
    wait_until_caught_up(f"{base}/sidecar/files/", files, container)
    published = metric_sum(f"{base}/metrics", "hyperdata_sidecar_lines_published_total")
    sealed = metric_sum(f"{base}/metrics", "hyperdata_sidecar_seals_emitted_total")
    if published or sealed:
        raise StepFailed(f"the recreated sidecar published {published:.0f} lines and {sealed:.0f} seals again")
    stop_sidecar(container)
    print(f"the recreated container caught up with the {files} files on disk and published nothing")
    expect_configuration_error(stack, "sidecar-without-node-id", "NODE_ID", NODE_ID="")
    expect_configuration_error(stack, "sidecar-other-uid", "STATE_PATH", user="1000")
    # An empty dir over the engine's package: what an image built without the engine would run.
    # notmpcopyup: podman otherwise copies the image's files into a tmpfs mounted over them.
    hidden = f"type=tmpfs,destination={stack.engine_dir},notmpcopyup"
    expect_configuration_error(stack, "sidecar-without-engine", "SIDECAR_ENGINE", mounts=[hidden])


def wait_until_caught_up(url: str, files: int, container: str) -> None:
    """Until the worker lists ``files`` hour files, each read to its end and sealed unless it is
    its table's newest (the last hour of the corpus stays open)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=5) as response:
            rows = json.loads(response.read())["files"]
        if len(rows) == files and all(row["lag_bytes"] == 0 for row in rows):
            open_files = [row for row in rows if row["state"] not in ("sealed", "backed_up")]
            if len(open_files) == len({row["path"].split("/")[0] for row in rows}):
                return
        time.sleep(1)
    raise StepFailed(f"{url} did not list {files} caught-up files within {DEADLINE_S:.0f}s:\n{container_log_tail(container)}")


def metric_sum(url: str, name: str) -> float:
    """The sum of every series of ``name`` in the Prometheus text at ``url``."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith((f"{name}{{", f"{name} ")))


def expect_configuration_error(stack: Stack, name: str, setting: str, *, mounts: Sequence[str] = (), **changes: str) -> None:
    """The sidecar container as ``name`` with ``mounts`` and ``changes`` (as
    :meth:`Stack.sidecar_arguments` takes them) exits 2 with one line naming ``setting``."""
    container = f"{RUN_ID}-{name}"
    # The attached run's own output: podman attaches before the container starts, while `podman
    # logs` came back empty once (CI) for a container that exited within a second of starting.
    run = podman("run", *stack.sidecar_arguments(name, free_low_port(), mounts=mounts, **changes), check=False, timeout=120)
    exit_code = podman("inspect", "--format", "{{.State.ExitCode}}", container).stdout.strip()
    output = (run.stdout + run.stderr).rstrip()
    errors = [line for line in output.splitlines() if "configuration error" in line]
    if exit_code != "2" or len(errors) != 1 or setting not in errors[0] or "Traceback" in output:
        raise StepFailed(f"{name}: expected exit 2 and one configuration error naming {setting}, got {exit_code}:\n{output}")
    print(f"{name}: exit 2, {errors[0]}")


def image_test(test_run: TestRun, engine_wheel_dir: Path | None = None) -> str:
    """The steps of the module's docstring; returns what passed."""
    dirs = {name: WORK / name for name in ("watch", "backups", "corpus", "kafka")}
    for path in dirs.values():
        path.mkdir()

    step(f"1/8 base image {BASE.name}")
    print(f"from {BASE.ensure(WORK)} ({test_run.seconds():.0f}s)")

    broker = test_run.broker(dirs["kafka"])
    compose = load_compose(
        {
            "BASE_IMAGE": BASE.name,
            "SIDECAR_KAFKA_BOOTSTRAP": broker.bootstrap,
            "WATCH_HOST_DIR": str(dirs["watch"]),
            "BACKUP_HOST_DIR": str(dirs["backups"]),
            "REPLAY_HOST_DIR": str(dirs["corpus"]),
            "REPLAY_SPEED": "1200",  # a corpus hour every 3 s: the sidecar tails growing files and rotations
        }
    )
    step("2/8 the image, as compose.yaml builds it")
    tag, image = build_image(compose, engine_wheel_dir)
    print(f"{tag} = {image.removeprefix('sha256:')[:12]} ({test_run.seconds():.0f}s)")

    step("3/8 the native engine in the image")
    engine_dir = check_native_engine(compose, image)

    step(f"4/8 a Kafka broker on the host at {broker.bootstrap}, and a corpus")
    broker.start()
    summary = generate_corpus(
        dirs["corpus"], hours=3, lines_per_hour=6000, seed=13, start=parse_start("20260610/22"), bad_every=700
    )
    print(f"{len(summary.files)} hour files, {summary.lines:,} lines, {len(summary.bad_lines)} bad")
    named_volumes = {name: create_volume(test_run, f"{RUN_ID}-{name}") for name in used_named_volumes(compose)}
    test_run.cleanup.callback(remove_containers)

    stack = Stack(compose, image, named_volumes, engine_dir)
    run_services(stack)
    files = check_replayed(dirs["corpus"], dirs["watch"])
    recreate_sidecar(stack, files)
    return (
        f"the image carries the native engine and the sidecar runs it (and stops without it), "
        f"the replay container reproduced the corpus's {files} files, the verifier found them all in "
        f"Kafka, sealed and backed up, and the sidecar container stopped with exit code 0; recreated, "
        f"it published nothing again"
    )


def create_volume(test_run: TestRun, name: str) -> str:
    """A podman volume, removed when the run ends (after the containers that mount it)."""
    volume = podman("volume", "create", name).stdout.strip()
    test_run.cleanup.callback(podman, "volume", "rm", "--force", volume, check=False)
    return volume


def remove_containers() -> None:
    """Every container this run may have made, the sidecar's log kept in var/image-test/ first."""
    if podman("container", "exists", f"{RUN_ID}-sidecar", check=False).returncode == 0:
        (WORK / "sidecar.log").write_text(container_log_tail(f"{RUN_ID}-sidecar", 1_000_000))
    for service in (*SERVICES, *RECREATED):
        podman("rm", "--force", f"{RUN_ID}-{service}", check=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The image and docker/compose.yaml, run for real with podman.")
    parser.add_argument(
        "--engine-wheel-dir",
        type=Path,
        help="a dir holding the native engine's wheel built on this host (make engine: build/engine-wheel), "
        "installed into the image instead of compiling the engine in the Dockerfile's engine-build stage",
    )
    options = parser.parse_args()
    sys.exit(run_test("image-test", WORK, functools.partial(image_test, engine_wheel_dir=options.engine_wheel_dir)))
