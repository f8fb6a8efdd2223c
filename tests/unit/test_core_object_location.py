"""BACKUP_URL parsed, and where a file goes in it."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.core.object_location import ObjectLocation


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://archive", ("s3", "archive", "")),
        ("s3://archive/", ("s3", "archive", "")),
        ("gs://archive/node-1", ("gs", "archive", "node-1")),
        ("s3://my.archive-1/hl/node-1/", ("s3", "my.archive-1", "hl/node-1")),
        ("  s3://archive//  ", ("s3", "archive", "")),
    ],
)
def test_a_bucket_url_is_parsed_into_scheme_bucket_and_prefix(url, expected):
    assert tuple(ObjectLocation.parse(url)) == expected


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("archive/prefix", "must be s3://bucket/prefix or gs://bucket/prefix"),
        ("az://archive", "must be s3://bucket/prefix or gs://bucket/prefix"),
        ("s3://", "is not a bucket name"),
        ("s3://ab", "is not a bucket name"),
        ("s3://Archive", "is not a bucket name"),
        ("s3://archive/a//b", "empty, '.' or '..' segment"),
        ("s3://archive/./b", "empty, '.' or '..' segment"),
        ("gs://archive/../other", "empty, '.' or '..' segment"),
    ],
)
def test_a_url_that_names_no_bucket_or_an_unsafe_prefix_is_refused(url, problem):
    with pytest.raises(ValueError, match=problem.replace(".", r"\.").replace("(", r"\(")):
        ObjectLocation.parse(url)


def test_a_file_key_is_its_relative_path_below_the_prefix():
    location = ObjectLocation.parse("s3://archive/hl/node-1")

    key = location.key(("node_fills_streaming", "hourly", "20260610", "13"))

    assert key == "hl/node-1/node_fills_streaming/hourly/20260610/13"
    assert location.ref(key) == "s3://archive/hl/node-1/node_fills_streaming/hourly/20260610/13"


def test_without_a_prefix_the_key_is_the_relative_path():
    location = ObjectLocation.parse("gs://archive")

    assert location.ref(location.key(("a", "b"))) == "gs://archive/a/b"
    assert str(location) == "gs://archive"


@pytest.mark.parametrize(
    ("endpoint", "path_style", "expected"),
    [
        ("http://127.0.0.1:9000", True, "http://127.0.0.1:9000"),
        ("https://minio.example.net", False, "https://archive.minio.example.net"),
        ("https://acct.r2.cloudflarestorage.com:443", False, "https://archive.acct.r2.cloudflarestorage.com:443"),
    ],
)
def test_a_custom_s3_endpoint_names_the_bucket_in_the_host_only_in_virtual_hosted_style(endpoint, path_style, expected):
    assert ObjectLocation.parse("s3://archive/p").s3_endpoint(endpoint, path_style=path_style) == expected
