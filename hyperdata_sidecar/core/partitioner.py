"""Kafka's default partitioner for keyed records, computed exactly as the Java client does.

The sidecar picks data-message partitions itself (it batches per partition), so the choice must
match what any Kafka client would make for the same key.
"""

from __future__ import annotations

import functools
import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    """MurmurHash2 of ``data`` with Kafka's seed, as ``org.apache.kafka.common.utils.Utils.murmur2``
    computes it: a signed 32-bit int equal to the Java result."""
    length = len(data)
    whole = length & ~3
    # Java's int arithmetic wraps at 32 bits; masking after each multiply reproduces it, and on
    # the unsigned value Python's >> is Java's >>>.
    h = (_SEED ^ length) & _MASK32
    for (k,) in _WORDS.iter_unpack(data[:whole]):
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length - whole
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=65536)
def partition_for(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives ``key``:
    ``(murmur2(key) & 0x7fffffff) % num_partitions``.

    Cached: keys are coins, a few hundred distinct values on the hot path.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
