"""How a file is cut into the parts of a multipart upload: the part size, a pure function of the
file size.

S3 (and GCS's XML API, which speaks the same protocol) takes at most 10,000 parts of 5 MiB to 5 GiB
(the last may be smaller). Parts are at least ``MIN_PART_BYTES`` and grow, in whole MiB, so that a
file never needs more than ``TARGET_PARTS``: a 60 GB hour file goes in about 4,000 parts of 14 MiB,
well under the limit, and memory (a few parts in flight) stays in tens of MiB whatever the size. A
file of one part or less is sent in one request.
"""

from __future__ import annotations

from typing import NamedTuple

MIB = 1024 * 1024
MIN_PART_BYTES = 8 * MIB  # above S3's 5 MiB minimum; fewer, larger requests for the small files
TARGET_PARTS = 4096  # the most parts a file is cut into (S3 allows 10,000)
MAX_OBJECT_BYTES = 5 * 1024 * 1024 * MIB  # S3's largest object (5 TiB)


class UploadPlan(NamedTuple):
    """How one file of ``size`` bytes is uploaded."""

    size: int
    part_bytes: int

    @classmethod
    def for_size(cls, size: int) -> UploadPlan:
        """The plan for a file of ``size`` bytes; raises ``ValueError`` above ``MAX_OBJECT_BYTES``."""
        if size < 0:
            raise ValueError(f"a file size cannot be negative (got {size})")
        if size > MAX_OBJECT_BYTES:
            raise ValueError(f"{size} bytes is more than an object can hold ({MAX_OBJECT_BYTES} bytes)")
        per_part = -(-size // TARGET_PARTS)  # ceiling division
        whole_mib = -(-per_part // MIB) * MIB
        return cls(size, max(MIN_PART_BYTES, whole_mib))  # at most 1.25 GiB: under S3's 5 GiB

    @property
    def parts(self) -> int:
        """How many parts the file takes (1 for an empty file, sent as one request)."""
        return max(1, -(-self.size // self.part_bytes))

    @property
    def multipart(self) -> bool:
        """True when the file takes more than one part; a single part goes in one plain PUT."""
        return self.size > self.part_bytes
