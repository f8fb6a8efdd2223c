//! Kafka records for an hour file's lines, as `core/records.py`'s `RecordWriter` builds them.
//!
//! A good line: value = the line, key = its coin, partition = murmur2 of the key, headers `line_id`,
//! `source`, `offset`. A line that cannot be published: a dead letter on the DLQ topic, key = the
//! table's dir name, headers `source`, `offset`, `reason`, `detail` (at most 1024 bytes), value =
//! the line, or for a line not carried (`oversize`) a JSON reference to it.
//!
//! Records stay Rust values in a `Batch`: the producer sends them from here, and Python sees
//! them only when it asks (tests, the differential check).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::murmur2::partition_for;
use crate::sequencer::Regression;
use crate::splitter::hex;

/// Longest `detail` header kept, in bytes (cut as `detail.encode()[:1024]` cuts it).
const MAX_DETAIL_BYTES: usize = 1024;

/// Which of the table's two topics a record goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    Data,
    DeadLetters,
}

/// A record as it is handed over: borrowed from the line and the engine's buffers, so the hot
/// path allocates nothing for it (the producer copies what it queues).
pub struct RecordRef<'a> {
    pub destination: Destination,
    pub partition: u32,
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// In the order they are sent.
    pub headers: &'a [(&'a str, &'a [u8])],
}

impl RecordRef<'_> {
    pub fn to_owned(&self) -> Record {
        Record {
            destination: self.destination,
            partition: self.partition,
            key: self.key.to_vec(),
            value: self.value.to_vec(),
            headers: self
                .headers
                .iter()
                .map(|(name, value)| ((*name).to_owned(), value.to_vec()))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub destination: Destination,
    pub partition: u32,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// In the order they are sent.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Record {
    /// This record as the producer takes it.
    pub fn send_with<R>(&self, send: impl FnOnce(&RecordRef<'_>) -> R) -> R {
        let headers: Vec<(&str, &[u8])> = self
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_slice()))
            .collect();
        send(&RecordRef {
            destination: self.destination,
            partition: self.partition,
            key: &self.key,
            value: &self.value,
            headers: &headers,
        })
    }
}

/// What one read (one `feed`, or one `resume` after an undecided line) handed over.
#[derive(Debug, Default)]
pub struct Batch {
    /// Every record, data and dead letters, in file order.
    pub records: Vec<Record>,
    pub lines: u64,
    pub dlq: u64,
    pub regressions: Vec<Regression>,
    /// (reason, offset) of each dead letter, for metrics and logs.
    pub dead_letters: Vec<(String, u64)>,
    /// The last good line (its block_time is the newest).
    pub last_line: Option<Vec<u8>>,
    /// Why the read stopped before its end, if a record was refused (the rest waits in the engine).
    pub refusal: Option<crate::producer::Refusal>,
    /// The line the native inspection could not decide (its offset and bytes, newline excluded):
    /// the read stopped there until Python gives its verdict.
    pub undecided: Option<(u64, Vec<u8>)>,
}

impl Batch {
    /// Every record handed over (data and dead letters).
    pub fn produced(&self) -> u64 {
        self.lines + self.dlq
    }
}

/// Where one table's records go and how they are keyed.
pub struct RecordBuilder {
    data_partitions: u32,
    dlq_partition: u32,
    table: Vec<u8>,
    source: String,
    /// Partition of each coin seen (a table has a few hundred coins).
    routes: HashMap<Vec<u8>, u32>,
}

impl RecordBuilder {
    pub fn new(table: &str, source: String, data_partitions: u32, dlq_partition: u32) -> Self {
        RecordBuilder {
            data_partitions,
            dlq_partition,
            table: table.as_bytes().to_vec(),
            source,
            routes: HashMap::new(),
        }
    }

    /// The partition of `coin`'s records (cached per coin).
    pub fn partition(&mut self, coin: &[u8]) -> u32 {
        match self.routes.get(coin) {
            Some(&partition) => partition,
            None => *self
                .routes
                .entry(coin.to_vec())
                .or_insert(partition_for(coin, self.data_partitions)),
        }
    }

    pub fn source(&self) -> &[u8] {
        self.source.as_bytes()
    }

    /// The DLQ record of the line at `offset` (`value`: the line or its reference).
    pub fn dead_letter(&self, reason: &str, offset: u64, value: Vec<u8>, detail: &str) -> Record {
        let detail = &detail.as_bytes()[..detail.len().min(MAX_DETAIL_BYTES)];
        let headers = vec![
            ("source".to_owned(), self.source.as_bytes().to_vec()),
            ("offset".to_owned(), decimal(offset)),
            ("reason".to_owned(), reason.as_bytes().to_vec()),
            ("detail".to_owned(), detail.to_vec()),
        ];
        self.to_dead_letters(value, headers)
    }

    /// The DLQ record that stands for the data record of the line at `offset` (`value`, its line)
    /// that the broker refused for good: reason `rejected`, the broker's `error` name in a header
    /// of its own, and a reference to the line as its value (`RecordWriter.rejection`).
    pub fn rejection(&self, offset: u64, value: &[u8], error: &str, detail: &str) -> Record {
        let sha256 = hex(&Sha256::digest(value));
        let reference = self.reference(offset, value.len() as u64, &sha256);
        let mut record = self.dead_letter("rejected", offset, reference, detail);
        record.headers.push(("error".to_owned(), error.as_bytes().to_vec()));
        record
    }

    fn to_dead_letters(&self, value: Vec<u8>, headers: Vec<(String, Vec<u8>)>) -> Record {
        Record {
            destination: Destination::DeadLetters,
            partition: self.dlq_partition,
            key: self.table.clone(),
            value,
            headers,
        }
    }

    /// The DLQ value that stands for a line not carried, byte for byte as `records.reference`
    /// writes it with `orjson.dumps`: `{"source":…,"offset":…,"length":…,"sha256":…}`.
    pub fn reference(&self, offset: u64, length: u64, sha256: &str) -> Vec<u8> {
        let mut json = Vec::with_capacity(self.source.len() + sha256.len() + 64);
        json.extend_from_slice(b"{\"source\":");
        json_string(&mut json, &self.source);
        json.extend_from_slice(b",\"offset\":");
        json.extend_from_slice(&decimal(offset));
        json.extend_from_slice(b",\"length\":");
        json.extend_from_slice(&decimal(length));
        json.extend_from_slice(b",\"sha256\":");
        json_string(&mut json, sha256);
        json.push(b'}');
        json
    }
}

/// `number` in decimal ASCII, written into `out` (cleared first).
pub fn decimal_into(number: u64, out: &mut Vec<u8>) {
    out.clear();
    push_decimal(out, number);
}

fn decimal(number: u64) -> Vec<u8> {
    let mut text = Vec::with_capacity(20);
    push_decimal(&mut text, number);
    text
}

/// Appends `number` in decimal, as `{number}` writes it, without the formatting machinery (it
/// runs twice per line: the offset header and the line id's sequence).
pub fn push_decimal(out: &mut Vec<u8>, number: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = number;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

/// Appends a block number in decimal, as `{block}` writes it (a block is a JSON integer of any
/// size; the ones a node writes fit in 64 bits, the rest takes the slow path).
pub fn push_block(out: &mut Vec<u8>, block: i128) {
    match u64::try_from(block) {
        Ok(block) => push_decimal(out, block),
        Err(_) => {
            use std::io::Write;
            // Writing to a Vec cannot fail.
            let _ = write!(out, "{block}");
        }
    }
}

/// A JSON string as orjson writes it: UTF-8 kept as is; `"` and `\` escaped; control characters
/// as their short escapes where JSON has one, else `\u00xx` in lower-case hex.
fn json_string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    for &byte in text.as_bytes() {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            0x00..=0x1F => out.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_as_rust_formats_them() {
        let mut numbers: Vec<u64> = (0..=1000).collect();
        numbers.extend((1..20).flat_map(|power| {
            let ten = 10u64.pow(power);
            [ten - 1, ten, ten + 1]
        }));
        numbers.push(u64::MAX);
        for number in numbers {
            let mut text = b"x".to_vec();
            push_decimal(&mut text, number);
            assert_eq!(text, format!("x{number}").into_bytes());
        }
    }

    #[test]
    fn blocks_of_any_size_are_written_as_rust_formats_them() {
        for block in [
            0,
            1,
            873_123_456,
            i128::from(u64::MAX),
            i128::from(u64::MAX) + 1,
            -1,
            i128::MIN,
            i128::MAX,
        ] {
            let mut text = Vec::new();
            push_block(&mut text, block);
            assert_eq!(text, block.to_string().into_bytes());
        }
    }
}
