"""The local broker's bookkeeping that needs no Java: ports, pid files, missing tools."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hyperdata_sidecar import devkafka
from hyperdata_sidecar.devkafka import (
    LOW_PORTS,
    DevKafkaError,
    LocalKafka,
    ProxiedListener,
    SaslListener,
    _server_properties,
    free_low_port,
    lease_free_port,
    resolve_jars,
)

PROPERTIES_OF_A_FORMATTED_DIR = """\
# Written by devkafka on first start; its ports are fixed from then on.
process.roles=broker,controller
controller.quorum.bootstrap.servers=127.0.0.1:29101
listeners=PLAINTEXT://127.0.0.1:29100,CONTROLLER://127.0.0.1:29101
advertised.listeners=PLAINTEXT://127.0.0.1:29100
"""
PROPERTIES_OF_A_DIR_WITH_A_SASL_LISTENER = """\
controller.quorum.bootstrap.servers=127.0.0.1:29101
listeners=PLAINTEXT://127.0.0.1:29100,CONTROLLER://127.0.0.1:29101,SASL_PLAINTEXT://127.0.0.1:29102
advertised.listeners=PLAINTEXT://127.0.0.1:29100,SASL_PLAINTEXT://127.0.0.1:29102
"""


def test_fresh_data_dir_defaults_to_port_9092_and_controller_on_the_next_port(tmp_path):
    broker = LocalKafka(tmp_path)

    assert (broker.bootstrap, broker.controller_port) == ("127.0.0.1:9092", 9093)


def test_controller_port_follows_an_explicit_port(tmp_path):
    assert LocalKafka(tmp_path, port=19500).controller_port == 19501


def test_data_dir_of_an_earlier_broker_supplies_its_ports(tmp_path):
    (tmp_path / "server.properties").write_text(PROPERTIES_OF_A_FORMATTED_DIR)

    broker = LocalKafka(tmp_path)

    assert (broker.port, broker.controller_port) == (29100, 29101)


def test_the_plaintext_port_of_a_data_dir_with_a_sasl_listener_is_the_plaintext_listeners(tmp_path):
    (tmp_path / "server.properties").write_text(PROPERTIES_OF_A_DIR_WITH_A_SASL_LISTENER)

    broker = LocalKafka(tmp_path)

    assert (broker.port, broker.controller_port) == (29100, 29101)


def test_the_sasl_bootstrap_is_the_sasl_listeners_port(tmp_path):
    broker = LocalKafka(tmp_path, port=29100, sasl=SaslListener(29102, "sidecar", "pw-1"))

    assert (broker.bootstrap, broker.sasl_bootstrap) == ("127.0.0.1:29100", "127.0.0.1:29102")


def test_asking_a_broker_without_a_sasl_listener_for_its_sasl_bootstrap_is_one_clear_error(tmp_path):
    with pytest.raises(DevKafkaError, match="has no SASL listener"):
        _ = LocalKafka(tmp_path).sasl_bootstrap


@pytest.mark.parametrize("username, password", [("sidecar", 'pw"; evil'), ("side car", "pw"), ("sidecar", "")])
def test_a_sasl_user_or_password_that_would_need_quoting_is_refused(username, password):
    with pytest.raises(ValueError, match="only letters, digits"):
        SaslListener(29102, username, password)


def test_the_sasl_password_is_not_in_the_listeners_repr():
    assert "pw-1" not in repr(SaslListener(29102, "sidecar", "pw-1"))


def test_pid_file_naming_a_process_that_is_not_the_broker_is_not_running(tmp_path):
    (tmp_path / "broker.pid").write_text(f"{os.getpid()}\n")

    broker = LocalKafka(tmp_path)

    assert broker.pid() is None
    assert broker.stop() is False
    assert not (tmp_path / "broker.pid").exists()


def test_missing_maven_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    with pytest.raises(DevKafkaError, match="mvn not found on PATH"):
        resolve_jars(tmp_path / "cache")


def test_a_proxied_listener_is_bound_on_its_port_and_advertised_on_the_proxys():
    text = _server_properties(Path("/data"), 29100, 29101, proxied=ProxiedListener(29103, 29104))
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    assert values["listeners"] == "PLAINTEXT://127.0.0.1:29100,CONTROLLER://127.0.0.1:29101,PROXIED://127.0.0.1:29103"
    assert values["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29100,PROXIED://127.0.0.1:29104"
    assert values["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,PROXIED:PLAINTEXT"


def test_free_low_ports_are_below_the_ephemeral_range_and_none_is_handed_out_twice_before_it_is_bound(tmp_path, monkeypatch):
    # CI: a worker's web port found free in the ephemeral range was a Kafka client's source port by
    # the time the worker bound it; and two ports asked for before either is bound must differ.
    monkeypatch.setattr(devkafka, "PORT_LEASES", tmp_path / "ports.json")
    ports = [free_low_port() for _ in range(200)]
    assert all(port in LOW_PORTS for port in ports)
    assert len(set(ports)) == len(ports)


LEASE_IN_ANOTHER_PROCESS = """
import sys
from pathlib import Path
from hyperdata_sidecar.devkafka import lease_free_port
ports = range(int(sys.argv[1]), int(sys.argv[2]))
print(" ".join(str(lease_free_port(ports, Path(sys.argv[3]), 600.0)) for _ in range(int(sys.argv[4]))))
"""


def test_a_port_leased_by_another_process_is_not_handed_out_until_its_lease_ends(tmp_path):
    # CI: two pytest workers (processes) were handed one web port in the same second, and the
    # second worker to bind it failed to start.
    leases, ports = tmp_path / "ports.json", range(29950, 29990)
    theirs = subprocess.run(
        [sys.executable, "-c", LEASE_IN_ANOTHER_PROCESS, str(ports.start), str(ports.stop), str(leases), "20"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    ours = []
    with pytest.raises(DevKafkaError, match="no free port in 29950-29989"):
        for _ in ports:
            ours.append(lease_free_port(ports, leases, 600.0))
    assert len(theirs) == 20 and ours and not set(map(int, theirs)) & set(ours)
    # A lease that has ended is no longer held.
    port = range(ours[0], ours[0] + 1)
    assert lease_free_port(port, tmp_path / "short.json", 0.0) == lease_free_port(port, tmp_path / "short.json", 600.0)
