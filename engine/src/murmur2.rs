//! Kafka's default partitioner for keyed records, as the Java client computes it
//! (`org.apache.kafka.common.utils.Utils.murmur2`), so the partition the engine picks is the one
//! any Kafka client would pick for the same key.

const SEED: u32 = 0x9747_B28C;
const M: u32 = 0x5BD1_E995;

/// MurmurHash2 of `data` with Kafka's seed: the Java client's signed 32-bit result.
pub fn murmur2(data: &[u8]) -> i32 {
    // Java's int arithmetic wraps at 32 bits and its >>> is a shift of the unsigned value.
    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = words.remainder();
    if rest.len() == 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner gives `key`: `(murmur2(key) & 0x7fffffff) % partitions`.
pub fn partition_for(key: &[u8], partitions: u32) -> u32 {
    (murmur2(key) as u32 & 0x7FFF_FFFF) % partitions
}
