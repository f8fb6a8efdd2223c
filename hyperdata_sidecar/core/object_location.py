"""Where the object-store sink puts a file: ``BACKUP_URL`` parsed, and a file's key and ref in it.

``s3://bucket/prefix`` (S3 and S3-compatible stores) or ``gs://bucket/prefix`` (Google Cloud
Storage). A file backed up as ``<relpath>`` is the object ``<prefix>/<relpath>``; its ref, recorded
in ``sidecar-backups``, is ``<scheme>://<bucket>/<key>``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

SCHEMES = ("s3", "gs")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")  # S3's and GCS's bucket names, loosely


class ObjectLocation(NamedTuple):
    """A bucket and a key prefix in one object store."""

    scheme: str  # "s3" or "gs"
    bucket: str
    prefix: str  # "" or "a/b", no slash at either end

    @classmethod
    def parse(cls, url: str) -> ObjectLocation:
        """``s3://bucket[/prefix]`` or ``gs://bucket[/prefix]``; raises ``ValueError`` saying what is wrong."""
        scheme, sep, rest = url.strip().partition("://")
        if not sep or scheme not in SCHEMES:
            raise ValueError(f"must be s3://bucket/prefix or gs://bucket/prefix (got {url!r})")
        bucket, _, prefix = rest.partition("/")
        if not _BUCKET.fullmatch(bucket):
            raise ValueError(f"{bucket!r} is not a bucket name (3 or more lower-case letters, digits, '.', '-', '_')")
        segments = prefix.strip("/").split("/") if prefix.strip("/") else []
        if any(s in ("", ".", "..") for s in segments):
            raise ValueError(f"the prefix {prefix!r} has an empty, '.' or '..' segment")
        return cls(scheme, bucket, "/".join(segments))

    def key(self, parts: tuple[str, ...]) -> str:
        """The object key of a file whose relative path has the components ``parts``."""
        return "/".join((self.prefix, *parts) if self.prefix else parts)

    def ref(self, key: str) -> str:
        """The URL naming the object ``key``, as ``sidecar-backups`` records it."""
        return f"{self.scheme}://{self.bucket}/{key}"

    def s3_endpoint(self, endpoint: str, *, path_style: bool) -> str:
        """The endpoint an S3 client is given for a server at ``endpoint`` (``http[s]://host[:port]``).

        Path-style requests (``<endpoint>/<bucket>/<key>``) take it as it is; virtual-hosted ones
        (``<bucket>.<host>/<key>``) take it with the bucket in front of the host name, which is how
        the client expects a custom endpoint in that style.
        """
        if path_style:
            return endpoint
        scheme, sep, host = endpoint.partition("://")
        return f"{scheme}{sep}{self.bucket}.{host}"

    def __str__(self) -> str:
        return self.ref(self.prefix) if self.prefix else f"{self.scheme}://{self.bucket}"
