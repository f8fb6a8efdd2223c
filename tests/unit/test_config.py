"""Settings: faust.ini defaults, environment overrides, one clear error naming the setting."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from hyperdata_sidecar.config import DEFAULTS, ConfigError, check_runtime, load_settings, prepare_state_path

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_faust_ini_holds_exactly_the_built_in_defaults():
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(REPO / "faust.ini")
    assert dict(parser["sidecar"]) == DEFAULTS


def test_contract_defaults_apply_without_any_configuration(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings({})
    assert settings.watch_dir == Path("/watch")
    assert settings.kafka_bootstrap == "kafka:29092"
    assert settings.poll_interval_s == 0.25
    assert settings.backup_sink == "local"
    assert settings.topics["node_fills_streaming"] == "hyperliquid.fills"
    assert settings.node_id  # the host name
    assert settings.web_bind == "127.0.0.1"  # the web views are unauthenticated: loopback unless told
    assert (settings.late_append_watch_s, settings.backup_max_tries) == (7200.0, 20)


def test_late_appends_can_be_left_unwatched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_settings({"LATE_APPEND_WATCH_S": "0"}).late_append_watch_s == 0.0


def test_environment_overrides_the_config_file(tmp_path):
    ini = tmp_path / "sidecar.ini"
    ini.write_text("[sidecar]\nPOLL_INTERVAL_MS = 500\nNODE_ID = from-file\n")
    settings = load_settings({"SIDECAR_CONFIG": str(ini), "NODE_ID": "from-env"})
    assert settings.poll_interval_s == 0.5
    assert settings.node_id == "from-env"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("POLL_INTERVAL_MS", "fast"),
        ("POLL_INTERVAL_MS", "0"),
        ("BACKUP_SINK", "s3"),
        ("INITIAL_POSITION", "middle"),
        ("WEB_PORT", "70000"),
        ("NODE_ID", "node/1"),
        ("TOPICS_APPLY_ON_START", "maybe"),
        ("KAFKA_SECURITY_PROTOCOL", "SASL_SSL"),  # without a mechanism
        ("BACKUP_MAX_TRIES", "0"),
        ("LATE_APPEND_WATCH_S", "-1"),
        ("SIDECAR_ENGINE", "rust"),
    ],
)
def test_a_bad_value_is_one_error_naming_its_setting(name, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_settings({name: value})
    expected = "KAFKA_SASL_MECHANISM" if name == "KAFKA_SECURITY_PROTOCOL" else name
    assert err.value.setting == expected
    assert str(err.value).startswith(f"{expected}: ") and "\n" not in str(err.value)


def test_an_unregistered_backup_sink_is_an_error_listing_the_registered_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_settings({"BACKUP_SINK": "s3"})

    assert err.value.setting == "BACKUP_SINK"
    assert "local, none" in str(err.value) and "'s3'" in str(err.value)


@pytest.mark.parametrize("sink", ["local", "none", "object_store"])
def test_every_built_in_backup_sink_is_accepted(sink, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_settings({"BACKUP_SINK": sink, "BACKUP_URL": "s3://bucket"}).backup_sink == sink


def test_the_line_engine_is_chosen_automatically_unless_told(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_settings({}).engine == "auto"


@pytest.mark.parametrize("engine", ["auto", "native", "python"])
def test_every_engine_choice_is_accepted_and_shown_in_the_summary(engine, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"SIDECAR_ENGINE": engine})
    assert (settings.engine, settings.public_summary()["engine"]) == (engine, engine)


def test_an_unknown_engine_is_an_error_listing_the_choices(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_settings({"SIDECAR_ENGINE": "Native"})
    assert str(err.value) == "SIDECAR_ENGINE: must be one of auto, native, python (got 'Native')"


@pytest.mark.parametrize(
    ("codec", "level"),
    [("zstd", "-1"), ("zstd", "3"), ("zstd", "22"), ("lz4", "0"), ("lz4", "12"), ("gzip", "9"), ("none", "-1")],
)
def test_a_compression_codec_and_a_level_it_knows_are_taken(codec, level, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"PRODUCER_COMPRESSION": codec, "PRODUCER_COMPRESSION_LEVEL": level})
    assert (settings.producer_compression, settings.producer_compression_level) == (codec, int(level))


@pytest.mark.parametrize(
    ("codec", "level", "message"),
    [
        ("zstd", "23", "PRODUCER_COMPRESSION_LEVEL: 23 is not a level of zstd: -1 or 0..22"),
        ("lz4", "13", "PRODUCER_COMPRESSION_LEVEL: 13 is not a level of lz4: -1 or 0..12"),
        ("snappy", "1", "PRODUCER_COMPRESSION_LEVEL: 1 is not a level of snappy: -1 (the codec has no levels)"),
        ("brotli", "-1", "PRODUCER_COMPRESSION: must be one of zstd, lz4, snappy, gzip, none (got 'brotli')"),
    ],
)
def test_an_unknown_codec_or_a_level_it_does_not_know_is_an_error(codec, level, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_settings({"PRODUCER_COMPRESSION": codec, "PRODUCER_COMPRESSION_LEVEL": level})
    assert str(err.value) == message


def test_an_unknown_key_in_the_config_file_is_an_error(tmp_path):
    ini = tmp_path / "sidecar.ini"
    ini.write_text("[sidecar]\nPOLL_INTERVAL = 5\n")
    with pytest.raises(ConfigError, match="POLL_INTERVAL"):
        load_settings({"SIDECAR_CONFIG": str(ini)})


def test_a_missing_watch_dir_stops_the_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="WATCH_DIR"):
        check_runtime(load_settings({"WATCH_DIR": str(tmp_path / "nope")}))


def test_a_backup_dir_inside_the_watch_dir_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="BACKUP_DIR"):
        check_runtime(load_settings({"WATCH_DIR": str(tmp_path), "BACKUP_DIR": str(tmp_path / "backups")}))


def test_a_required_node_id_left_unset_stops_the_worker_naming_node_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID_REQUIRED": "true"})
    assert settings.node_id  # the host name, for the commands that import the app
    with pytest.raises(ConfigError) as err:
        check_runtime(settings)
    assert err.value.setting == "NODE_ID" and "\n" not in str(err.value)


@pytest.mark.parametrize(("required", "node_id"), [("true", "node-7"), ("false", "")])
def test_a_set_or_unrequired_node_id_lets_the_worker_start(required, node_id, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_runtime(load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID_REQUIRED": required, "NODE_ID": node_id}))


def test_loading_the_settings_creates_nothing_the_worker_creates_the_state_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"STATE_PATH": str(tmp_path / "deep" / "state")})
    assert not (tmp_path / "deep").exists()
    prepare_state_path(settings, settings.state_path / "hyperdata-sidecar-unit")
    assert settings.state_path.is_dir()


def test_a_state_path_that_cannot_be_created_is_one_error_naming_state_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    settings = load_settings({"STATE_PATH": str(tmp_path / "a-file" / "state")})
    with pytest.raises(ConfigError) as err:
        prepare_state_path(settings, settings.state_path / "hyperdata-sidecar-unit")
    assert err.value.setting == "STATE_PATH" and "a-file" in str(err.value) and "\n" not in str(err.value)


def test_the_public_summary_never_shows_the_sasl_password(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings(
        {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_PASSWORD": "hunter2"}
    )
    assert "hunter2" not in repr(settings.public_summary()) and "hunter2" not in repr(settings)


def test_repeated_client_log_lines_are_held_back_and_counted():
    import logging

    from hyperdata_sidecar.logs import RepeatFilter

    repeats = RepeatFilter(every_s=3600)

    def record(name: str, msg: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, None, None)

    assert repeats.filter(record("aiokafka.conn", "Unable connect to node %s"))
    assert not repeats.filter(record("aiokafka.conn", "Unable connect to node %s"))
    assert repeats.filter(record("aiokafka", "Unable to update metadata"))
    assert repeats.filter(record("faust.app", "Unable connect to node %s"))  # other loggers pass
    assert repeats.filter(record("faust.app", "Unable connect to node %s"))


# -- BACKUP_SINK=object_store's settings ------------------------------------------------------


def test_the_object_store_settings_are_read_into_its_target(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings(
        {
            "BACKUP_SINK": "object_store",
            "BACKUP_URL": "s3://node-archive/hyperliquid/node-1/",
            "BACKUP_ENDPOINT": "http://127.0.0.1:9000/",
            "BACKUP_REGION": "eu-west-1",
            "BACKUP_PATH_STYLE": "yes",
            "BACKUP_MAX_BYTES_PER_S": "50000000",
        }
    )

    target = settings.backup_store
    assert target is not None
    assert (target.location.scheme, target.location.bucket, target.location.prefix) == (
        "s3",
        "node-archive",
        "hyperliquid/node-1",
    )
    assert (target.endpoint, target.region, target.path_style, target.max_bytes_per_s) == (
        "http://127.0.0.1:9000",
        "eu-west-1",
        True,
        50_000_000,
    )
    assert settings.public_summary()["backup_store"] == {
        "url": "s3://node-archive/hyperliquid/node-1",
        "endpoint": "http://127.0.0.1:9000",
        "region": "eu-west-1",
        "path_style": True,
        "max_bytes_per_s": 50_000_000,
    }


def test_the_object_store_settings_are_not_read_for_another_sink(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"BACKUP_SINK": "local", "BACKUP_URL": "ftp://nowhere"})

    assert settings.backup_store is None


@pytest.mark.parametrize(
    ("overrides", "setting", "problem"),
    [
        ({}, "BACKUP_URL", "required with BACKUP_SINK=object_store"),
        ({"BACKUP_URL": "https://bucket/prefix"}, "BACKUP_URL", "must be s3://bucket/prefix or gs://bucket/prefix"),
        ({"BACKUP_URL": "s3://Bucket_With_Capitals"}, "BACKUP_URL", "is not a bucket name"),
        ({"BACKUP_URL": "s3://bucket/a/../b"}, "BACKUP_URL", "'..' segment"),
        ({"BACKUP_URL": "s3://bucket", "BACKUP_ENDPOINT": "minio:9000"}, "BACKUP_ENDPOINT", "must be an http:// or https:// URL"),
        ({"BACKUP_URL": "s3://bucket", "BACKUP_PATH_STYLE": "maybe"}, "BACKUP_PATH_STYLE", "must be true or false"),
        ({"BACKUP_URL": "s3://bucket", "BACKUP_MAX_BYTES_PER_S": "-1"}, "BACKUP_MAX_BYTES_PER_S", "must not be negative"),
        ({"BACKUP_URL": "gs://bucket", "BACKUP_REGION": "eu-west-1"}, "BACKUP_REGION", "applies to s3:// only"),
        ({"BACKUP_URL": "gs://bucket", "BACKUP_PATH_STYLE": "true"}, "BACKUP_PATH_STYLE", "applies to s3:// only"),
    ],
)
def test_a_wrong_object_store_setting_is_one_error_naming_it(overrides, setting, problem, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_settings({"BACKUP_SINK": "object_store", **overrides})

    assert err.value.setting == setting
    assert problem in str(err.value) and "\n" not in str(err.value)
