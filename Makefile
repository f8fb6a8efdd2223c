# The project's commands. `make test` is what CI runs (.ci/run), on a fresh clone with
# Python 3.11 to 3.13, Java 17+ and Maven: everything else (the venv, the Kafka jars) is made here.

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
# Written after a successful install; older than pyproject.toml means "install again".
STAMP := $(VENV)/.installed-from-pyproject

.PHONY: venv engine engine-test lint lint-engine test pytest unit alerts-test systemd-verify systemd-test kafka-up kafka-down demo bench drills image-test image-test-run

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "make: $(PYTHON) is older than Python 3.11; run make PYTHON=python3.11 $(MAKECMDGOALS)" >&2; exit 1; }
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

# The native line engine (engine/, Rust: PyO3 + maturin) built in release mode as a wheel in
# $(ENGINE_WHEEL_DIR) and installed into the venv as the distribution hyperdata-sidecar-engine
# (module hyperdata_sidecar_engine). Needs cargo; crates come from the registry. Without it the
# sidecar's Python engine is used. The same wheel goes into the image in `make image-test`; it
# shares the release profile of the target dir (engine/target, or CARGO_TARGET_DIR: .ci/run keeps
# it between runs) with lint-engine and engine-test, so the bundled
# librdkafka and OpenSSL are compiled once for all three.
ENGINE_WHEEL_DIR := build/engine-wheel
engine: venv
	@command -v cargo >/dev/null || { echo "make engine: cargo not found; install Rust (rustup, or the distribution's cargo)" >&2; exit 1; }
	$(VPY) -m pip install --quiet --disable-pip-version-check 'maturin>=1.9,<2'
	rm -rf $(ENGINE_WHEEL_DIR)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/maturin build --release -m engine/Cargo.toml --out $(ENGINE_WHEEL_DIR)
	$(VPY) -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall $(ENGINE_WHEEL_DIR)/*.whl

# The engine's Rust: rustfmt's check and clippy with every warning an error. In the release
# profile, like the build: the bundled librdkafka and OpenSSL are compiled once for both.
lint-engine:
	@command -v cargo >/dev/null || { echo "make lint-engine: cargo not found; install Rust (rustup, or the distribution's cargo)" >&2; exit 1; }
	cargo fmt --manifest-path engine/Cargo.toml --check
	cargo clippy --release --manifest-path engine/Cargo.toml --all-targets -- -D warnings

# The engine's own Rust tests (what Python cannot reach: a sink that refuses records).
engine-test:
	cargo test --release --manifest-path engine/Cargo.toml

# lint-engine, then ruff (lint, then the format check) and mypy (strict on hyperdata_sidecar/core). mypy checks the
# package as it is installed, agents/ as hyperdata_sidecar.agents: $(TYPECHECK_TREE) is that layout
# made of symbolic links to the sources (its messages name the links; each resolves to its source).
TYPECHECK_TREE := build/typecheck
lint: venv lint-engine
	$(VENV)/bin/ruff check .
	rm -rf $(TYPECHECK_TREE)/hyperdata_sidecar && mkdir -p $(TYPECHECK_TREE)/hyperdata_sidecar
	ln -s $(CURDIR)/hyperdata_sidecar/* $(CURDIR)/agents $(TYPECHECK_TREE)/hyperdata_sidecar/
	cd $(TYPECHECK_TREE) && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml -p hyperdata_sidecar
	$(VENV)/bin/ruff format --check .

# Lint, the native engine, then the unit and integration tests (make pytest; the engine's
# differential tests must run here, not skip); the integration tests start a local Kafka broker
# themselves (or use HYPERDATA_TEST_BOOTSTRAP=HOST:PORT). pytest exits 5 when it collected no
# test: that means nothing ran, and counts as a failure.
test: venv lint engine engine-test pytest

# The tests in PYTEST_WORKERS pytest-xdist worker processes: most of the suite's time is spent
# waiting (for a broker, for worker processes, through the drills' outages), not computing. On a
# 2-core machine the tests took about 10% longer each with 4 workers than with one, and the suite a
# quarter of the time. Each worker starts its own broker; each integration module's tests run on
# one worker in their order, each drill and unit test wherever a worker is free (tests/conftest.py
# schedules them). PYTEST_WORKERS=0 runs them in this process, one after another.
PYTEST_WORKERS ?= 4
pytest: venv
	@status=0; HYPERDATA_ENGINE_REQUIRED=1 $(VPY) -m pytest -q -n $(PYTEST_WORKERS) || status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests (exit 5); nothing ran" >&2; fi; \
	exit $$status

unit: venv
	$(VPY) -m pytest -q tests/unit -m "not kafka"

# The alerting rules (deploy/prometheus/) checked and unit-tested with promtool, which comes with
# Prometheus (Debian: apt-get install prometheus). tests/prometheus/alerts.test.yml holds the cases.
alerts-test:
	@command -v promtool >/dev/null || { echo "make alerts-test: promtool not found; install Prometheus (Debian: apt-get install -y prometheus)" >&2; exit 1; }
	promtool check config deploy/prometheus/prometheus.yml
	promtool test rules tests/prometheus/alerts.test.yml

# The systemd unit (deploy/systemd/) checked by systemd-analyze verify (Debian: apt-get install
# systemd); scripts/systemd_verify.py says how it is verified on a machine without the install.
systemd-verify: venv
	$(VPY) scripts/systemd_verify.py

kafka-up: venv
	$(VPY) -m hyperdata_sidecar.devkafka ensure --port 9092 --data-dir var/kafka

kafka-down: venv
	$(VPY) -m hyperdata_sidecar.devkafka stop --data-dir var/kafka

demo: venv engine
	bash scripts/demo.sh

bench: venv
	bash scripts/bench.sh

drills: venv
	bash scripts/drills.sh

# The image (docker/Dockerfile) and docker/compose.yaml's services, run with podman against a local
# broker: build, topics-init, sidecar, replay, verify (scripts/image_test.py says what and how).
# The image gets `make engine`'s wheel instead of compiling the engine again (a bookworm host, like
# the test's base image); `$(VPY) scripts/image_test.py` alone tests the Dockerfile's own build.
# image-test-run is the test alone, on the wheel already built (.ci/run runs it while the tests
# run: make engine would reinstall the engine under them).
image-test: venv engine image-test-run

image-test-run: venv
	$(VPY) scripts/image_test.py --engine-wheel-dir $(ENGINE_WHEEL_DIR)

# The systemd unit started for real: a podman container booted with systemd as PID 1, docs/operations.md's
# install, the unit against a local broker, its hardening checked (scripts/systemd_test.py).
systemd-test: venv
	$(VPY) scripts/systemd_test.py
