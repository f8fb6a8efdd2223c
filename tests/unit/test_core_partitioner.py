import pytest
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.partitioner import murmur2, partition_for

# (key, Utils.murmur2(key), partition of 6, partition of 3), computed with the Java client itself
# (kafka-clients 4.1.1, org.apache.kafka.common.utils.Utils.murmur2 and Utils.toPositive) by a
# single-file program run as `java -cp "<kafka libs>/*" Murmur.java <hex keys>`. The keys cover
# every tail length (0..3 bytes past a 4-byte word), bytes >= 0x80 (sign extension in Java), the
# vectors of Kafka's own UtilsTest.testMurmur2, and real coin names.
JAVA_VECTORS = [
    (b"", 275646681, 3, 0),
    (b"a", -1563381124, 4, 1),
    (b"ab", 316155434, 2, 2),
    (b"abc", 479470107, 3, 0),
    (b"abcd", -1323649548, 2, 2),
    (b"21", -973932308, 0, 0),
    (b"foobar", -790332482, 0, 0),
    (b"a-little-bit-long-string", -985981536, 2, 2),
    (b"a-little-bit-longer-string", -1486304829, 5, 2),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, 5, 2),
    (b"BTC", 904285642, 4, 1),
    (b"ETH", -1495638463, 1, 1),
    (b"xyz:TSLA", -1483978748, 0, 0),
    (b"cash:USD", 716283482, 2, 2),
    (b"HYPE", -1562833506, 2, 2),
    (b"@107", -1404024101, 3, 0),
    (bytes.fromhex("ff8000017f"), -1604635108, 4, 1),
    (bytes.fromhex("fffefdfc"), 2136149935, 1, 1),
    (bytes.fromhex("fb"), -1945629538, 4, 1),
    (bytes.fromhex("00"), 375494588, 2, 2),
    (bytes.fromhex("0000"), 595382058, 0, 0),
    (bytes.fromhex("000000"), 1013532917, 5, 2),
    ("€".encode(), -1352192002, 4, 1),
]


@pytest.mark.parametrize(("key", "java_hash", "of_6", "of_3"), JAVA_VECTORS, ids=repr)
def test_murmur2_equals_the_java_clients_signed_result(key, java_hash, of_6, of_3):
    assert murmur2(key) == java_hash


@pytest.mark.parametrize(("key", "java_hash", "of_6", "of_3"), JAVA_VECTORS, ids=repr)
def test_partition_for_equals_the_java_clients_choice(key, java_hash, of_6, of_3):
    assert partition_for(key, 6) == of_6
    assert partition_for(key, 3) == of_3
    assert partition_for(key, 1) == 0


_ORACLE = settings(max_examples=500, deadline=None)


@_ORACLE
@given(st.binary(max_size=64))
def test_murmur2_matches_aiokafka_on_any_bytes(key):
    assert murmur2(key) & 0xFFFFFFFF == aiokafka_murmur2(key)
    assert -(2**31) <= murmur2(key) < 2**31


@_ORACLE
@given(st.binary(max_size=64), st.integers(1, 1000))
def test_partition_for_matches_aiokafkas_default_partitioner_on_any_bytes(key, num_partitions):
    partitions = list(range(num_partitions))
    assert partition_for(key, num_partitions) == DefaultPartitioner()(key, partitions, partitions)


@_ORACLE
@given(st.text(max_size=16), st.integers(1, 64))
def test_partition_of_a_coin_key_matches_aiokafka(coin, num_partitions):
    key = coin.encode("utf-8", "surrogatepass")
    partitions = list(range(num_partitions))
    assert partition_for(key, num_partitions) == DefaultPartitioner()(key, partitions, partitions)


@pytest.mark.parametrize("num_partitions", [0, -1])
def test_partition_for_rejects_fewer_than_one_partition(num_partitions):
    with pytest.raises(ValueError):
        partition_for(b"BTC", num_partitions)
