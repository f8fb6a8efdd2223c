//! One hour file's line engine: split, inspect, sequence and build the records of each read.
//!
//! A read runs through its lines in file order. A line the native inspection cannot decide stops
//! it: the batch so far is returned with that line as `undecided`, the rest of the read waits here,
//! and `resume` takes Python's verdict on the line and carries on. So every line is handed over
//! exactly once, in file order, whoever decided it.
//!
//! Records go to a [`Sink`]: the producer (each record queued on librdkafka as it is built), or a
//! collector (tests and the differential check). A record the sink refuses stops the read the same
//! way: the line stays first in line, every state as if it had not been seen, the refusal is in the
//! batch, and `proceed` carries on once the caller has waited for room or held the table.

use std::collections::VecDeque;
use std::fmt;

use crate::inspect::{inspect, CoinLocation};
use crate::producer::Refusal;
use crate::records::{decimal_into, Batch, Destination, Record, RecordBuilder, RecordRef};
use crate::sequencer::Sequencer;
use crate::splitter::{Item, LineSplitter};

/// Python's verdict on an undecided line (`inspect_line`'s `LineInfo` or `Rejection`).
pub enum Verdict {
    Good {
        coin: Vec<u8>,
        block_number: i128,
        n_events: u64,
    },
    Rejected {
        reason: String,
        detail: String,
    },
}

/// A call made in the wrong state of the round trip (a bug of the caller, not of the data).
#[derive(Debug, PartialEq, Eq)]
pub enum Misuse {
    /// `feed`, `proceed` or `flush_partial` while a line waits for its verdict.
    VerdictPending,
    /// A verdict given while no line waits for one.
    NothingUndecided,
    /// `feed` or `flush_partial` while lines of the last read wait after a refusal.
    LinesWaiting,
}

/// Where a read's records go, in file order.
pub trait Sink {
    /// Hands `record` over, or refuses it (then nothing of it was taken).
    fn send(&mut self, record: &RecordRef<'_>) -> Result<(), Refusal>;
}

/// A sink that keeps the records (tests, the differential check, `bench`).
#[derive(Default)]
pub struct Collector {
    pub records: Vec<Record>,
}

impl Sink for Collector {
    fn send(&mut self, record: &RecordRef<'_>) -> Result<(), Refusal> {
        self.records.push(record.to_owned());
        Ok(())
    }
}

/// The `detail` of an unterminated line's dead letter (`records.UNTERMINATED`).
pub const UNTERMINATED: &str = "the file was finalized without a newline after its last line";

/// The unterminated last line of a finalized file.
pub enum Unterminated {
    Line { offset: u64, data: Vec<u8> },
    Oversize { offset: u64, length: u64, sha256: String },
}

/// The last good line handed over by a call: in the read buffer, or owned (decided by Python).
enum LastLine {
    Range(usize, usize),
    Owned(Vec<u8>),
}

/// A line of the read not handed over yet: as split, or with Python's verdict on it.
enum Pending {
    Split(Item),
    Decided { offset: u64, line: Vec<u8>, verdict: Verdict },
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Misuse::VerdictPending => "a line is waiting for its verdict: call accept() or reject() first",
            Misuse::NothingUndecided => "no line is waiting for a verdict",
            Misuse::LinesWaiting => "lines of the last read wait after a refusal: call proceed() first",
        })
    }
}

pub struct LineEngine {
    location: CoinLocation,
    splitter: LineSplitter,
    pub sequencer: Sequencer,
    builder: RecordBuilder,
    /// Where the next line handed over starts (the resume point for the cursor).
    offset: u64,
    /// The current read's bytes (the lines of `pending` are ranges of it).
    buffer: Vec<u8>,
    /// The lines of the current read not handed over yet.
    pending: VecDeque<Pending>,
    undecided: Option<(u64, Vec<u8>)>,
    /// The line id and the offset header of the record being built (reused: no allocation per line).
    line_id: Vec<u8>,
    offset_text: Vec<u8>,
}

impl LineEngine {
    pub fn new(location: CoinLocation, splitter: LineSplitter, sequencer: Sequencer, builder: RecordBuilder) -> Self {
        let offset = splitter.offset();
        LineEngine {
            location,
            splitter,
            sequencer,
            builder,
            offset,
            buffer: Vec::new(),
            pending: VecDeque::new(),
            undecided: None,
            line_id: Vec::with_capacity(64),
            offset_text: Vec::with_capacity(20),
        }
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn held_bytes(&self) -> u64 {
        self.splitter.held_bytes()
    }

    /// Lines of the current read not handed over yet (after a refusal).
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Splits `chunk` and hands over its complete lines, up to the first undecided one.
    pub fn feed(&mut self, chunk: &[u8], sink: &mut dyn Sink) -> Result<Batch, Misuse> {
        if self.undecided.is_some() {
            return Err(Misuse::VerdictPending);
        }
        if !self.pending.is_empty() {
            return Err(Misuse::LinesWaiting);
        }
        let mut items = Vec::new();
        self.splitter.feed(chunk, &mut self.buffer, &mut items);
        self.pending.extend(items.into_iter().map(Pending::Split));
        Ok(self.write_pending(sink))
    }

    /// Hands over the rest of the read after a refusal.
    pub fn proceed(&mut self, sink: &mut dyn Sink) -> Result<Batch, Misuse> {
        if self.undecided.is_some() {
            return Err(Misuse::VerdictPending);
        }
        Ok(self.write_pending(sink))
    }

    /// Applies Python's verdict to the undecided line and hands over the rest of the read.
    pub fn resume(&mut self, verdict: Verdict, sink: &mut dyn Sink) -> Result<Batch, Misuse> {
        let (offset, line) = self.undecided.take().ok_or(Misuse::NothingUndecided)?;
        self.pending.push_front(Pending::Decided { offset, line, verdict });
        Ok(self.write_pending(sink))
    }

    /// The held unterminated tail (the file is finalized), the offset moved past it; None if empty.
    pub fn flush_partial(&mut self) -> Result<Option<Unterminated>, Misuse> {
        if self.undecided.is_some() {
            return Err(Misuse::VerdictPending);
        }
        if !self.pending.is_empty() {
            return Err(Misuse::LinesWaiting);
        }
        let item = self.splitter.flush_partial(&mut self.buffer);
        self.offset = self.splitter.offset();
        Ok(item.map(|item| match item {
            Item::Line { offset, start, end } => Unterminated::Line {
                offset,
                data: self.buffer[start..end].to_vec(),
            },
            Item::Oversize { offset, length, sha256 } => Unterminated::Oversize { offset, length, sha256 },
        }))
    }

    /// Sends the dead letter of `item` (what `flush_partial` gave: the file was finalized without a
    /// newline after it), reason `unterminated`, its value the line or, for an oversize one, its
    /// reference. The offset stays where `flush_partial` moved it; a refusal is in the batch, and
    /// the same call is made again once there is room.
    pub fn write_unterminated(&self, item: &Unterminated, sink: &mut dyn Sink) -> Batch {
        let (offset, value) = match item {
            Unterminated::Line { offset, data } => (*offset, data.clone()),
            Unterminated::Oversize { offset, length, sha256 } => (*offset, self.builder.reference(*offset, *length, sha256)),
        };
        let record = self.builder.dead_letter("unterminated", offset, value, UNTERMINATED);
        let mut batch = Batch::default();
        match record.send_with(|record| sink.send(record)) {
            Ok(()) => {
                batch.dead_letters.push(("unterminated".to_owned(), offset));
                batch.dlq += 1;
            }
            Err(refusal) => batch.refusal = Some(refusal),
        }
        batch
    }

    /// The `rejected` dead letter standing for the data record of the line at `offset` (`line`,
    /// its value) that the broker refused for good with `error` (`detail`: the broker's words).
    pub fn rejection(&self, offset: u64, line: &[u8], error: &str, detail: &str) -> Record {
        self.builder.rejection(offset, line, error, detail)
    }

    fn write_pending(&mut self, sink: &mut dyn Sink) -> Batch {
        let buffer = std::mem::take(&mut self.buffer);
        let mut batch = Batch::default();
        let last = self.write_items(&buffer, &mut batch, sink);
        batch.last_line = match last {
            Some(LastLine::Range(start, end)) => Some(buffer[start..end].to_vec()),
            Some(LastLine::Owned(line)) => Some(line),
            None => None,
        };
        self.buffer = buffer;
        batch
    }

    /// Hands over the pending lines (split ones are ranges of `buffer`); the last good line.
    fn write_items(&mut self, buffer: &[u8], batch: &mut Batch, sink: &mut dyn Sink) -> Option<LastLine> {
        let mut last = None;
        while let Some(pending) = self.pending.pop_front() {
            let outcome = match pending {
                Pending::Split(Item::Oversize { offset, length, sha256 }) => {
                    let value = self.builder.reference(offset, length, &sha256);
                    let detail = format!("line of {length} bytes is longer than MAX_LINE_BYTES");
                    let record = self.builder.dead_letter("oversize", offset, value, &detail);
                    self.send_dead_letter(batch, sink, offset, length + 1, &record, "oversize")
                        .map_err(|refusal| (refusal, Pending::Split(Item::Oversize { offset, length, sha256 })))
                }
                Pending::Split(Item::Line { offset, start, end }) => match inspect(self.location, &buffer[start..end]) {
                    None => {
                        let line = buffer[start..end].to_vec();
                        batch.undecided = Some((offset, line.clone()));
                        self.undecided = Some((offset, line));
                        break;
                    }
                    Some(facts) => {
                        let (block, events) = (facts.block_number, facts.n_events);
                        match self.publish(batch, sink, offset, &buffer[start..end], facts.coin, block, events) {
                            Ok(()) => {
                                last = Some(LastLine::Range(start, end));
                                Ok(())
                            }
                            Err(refusal) => Err((refusal, Pending::Split(Item::Line { offset, start, end }))),
                        }
                    }
                },
                Pending::Decided { offset, line, verdict } => match verdict {
                    Verdict::Good {
                        coin,
                        block_number,
                        n_events,
                    } => match self.publish(batch, sink, offset, &line, &coin, block_number, n_events) {
                        Ok(()) => {
                            last = Some(LastLine::Owned(line));
                            Ok(())
                        }
                        Err(refusal) => {
                            let verdict = Verdict::Good {
                                coin,
                                block_number,
                                n_events,
                            };
                            Err((refusal, Pending::Decided { offset, line, verdict }))
                        }
                    },
                    Verdict::Rejected { reason, detail } => {
                        let record = self.builder.dead_letter(&reason, offset, line, &detail);
                        let span = record.value.len() as u64 + 1;
                        match self.send_dead_letter(batch, sink, offset, span, &record, &reason) {
                            Ok(()) => Ok(()),
                            Err(refusal) => {
                                let verdict = Verdict::Rejected { reason, detail };
                                Err((
                                    refusal,
                                    Pending::Decided {
                                        offset,
                                        line: record.value,
                                        verdict,
                                    },
                                ))
                            }
                        }
                    }
                },
            };
            if let Err((refusal, pending)) = outcome {
                self.pending.push_front(pending);
                batch.refusal = Some(refusal);
                break;
            }
        }
        last
    }

    /// Numbers and sends a good line; on a refusal every state is as before.
    #[allow(clippy::too_many_arguments)]
    fn publish(
        &mut self,
        batch: &mut Batch,
        sink: &mut dyn Sink,
        offset: u64,
        line: &[u8],
        coin: &[u8],
        block_number: i128,
        n_events: u64,
    ) -> Result<(), Refusal> {
        let before = self.sequencer.save();
        let regression = self.sequencer.number(offset, block_number, n_events, &mut self.line_id);
        decimal_into(offset, &mut self.offset_text);
        let partition = self.builder.partition(coin);
        let headers = [
            ("line_id", self.line_id.as_slice()),
            ("source", self.builder.source()),
            ("offset", self.offset_text.as_slice()),
        ];
        let record = RecordRef {
            destination: Destination::Data,
            partition,
            key: coin,
            value: line,
            headers: &headers,
        };
        match sink.send(&record) {
            Ok(()) => {
                batch.regressions.extend(regression);
                batch.lines += 1;
                self.offset = offset + line.len() as u64 + 1;
                Ok(())
            }
            Err(refusal) => {
                self.sequencer.restore(before);
                Err(refusal)
            }
        }
    }

    fn send_dead_letter(
        &mut self,
        batch: &mut Batch,
        sink: &mut dyn Sink,
        offset: u64,
        span: u64,
        record: &Record,
        reason: &str,
    ) -> Result<(), Refusal> {
        record.send_with(|record| sink.send(record))?;
        batch.dead_letters.push((reason.to_owned(), offset));
        batch.dlq += 1;
        self.offset = offset + span;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refuses every `every`-th record it is offered (queue full), keeps the rest.
    struct Refusing {
        every: usize,
        offered: usize,
        records: Vec<Record>,
    }

    impl Sink for Refusing {
        fn send(&mut self, record: &RecordRef<'_>) -> Result<(), Refusal> {
            self.offered += 1;
            if self.offered.is_multiple_of(self.every) {
                return Err(Refusal::QueueFull);
            }
            self.records.push(record.to_owned());
            Ok(())
        }
    }

    fn engine() -> LineEngine {
        let table = "node_raw_book_diffs_streaming";
        LineEngine::new(
            CoinLocation::Event,
            LineSplitter::new(0, 1 << 20),
            Sequencer::new(
                table,
                Vec::new(),
                crate::sequencer::SeqState {
                    block: None,
                    next_seq: 0,
                    epoch: 0,
                },
                None,
                None,
            ),
            RecordBuilder::new(table, "t/hourly/20260610/13".to_owned(), 6, 1),
        )
    }

    fn corpus() -> Vec<u8> {
        let mut bytes = Vec::new();
        for (n, block) in [5, 5, 6, 4, 4, 7].iter().enumerate() {
            let coin = ["BTC", "ETH", "SOL"][n % 3];
            bytes.extend_from_slice(
                format!(r#"{{"block_number":{block},"block_time":"t","events":[{{"coin":"{coin}"}},{{"coin":"{coin}"}}]}}"#)
                    .as_bytes(),
            );
            bytes.push(b'\n');
            if n == 2 {
                bytes.extend_from_slice(b"not json\n");
            }
        }
        bytes
    }

    /// Runs `engine` over `bytes` until every line is handed over, answering undecided lines as
    /// malformed and retrying after each refusal.
    fn run(engine: &mut LineEngine, sink: &mut dyn Sink, bytes: &[u8]) -> (u64, u64) {
        let mut batch = engine.feed(bytes, sink).unwrap();
        let (mut lines, mut dlq) = (0, 0);
        loop {
            lines += batch.lines;
            dlq += batch.dlq;
            batch = if batch.undecided.is_some() {
                let verdict = Verdict::Rejected {
                    reason: "malformed".to_owned(),
                    detail: "not JSON".to_owned(),
                };
                engine.resume(verdict, sink).unwrap()
            } else if batch.refusal.is_some() {
                engine.proceed(sink).unwrap()
            } else {
                return (lines, dlq);
            };
        }
    }

    #[test]
    fn a_refused_record_is_offered_again_with_every_state_as_if_it_had_not_been_seen() {
        let bytes = corpus();
        let mut reference = Collector::default();
        let mut plain = engine();
        let counts = run(&mut plain, &mut reference, &bytes);
        for every in 2..=7 {
            let mut refusing = Refusing {
                every,
                offered: 0,
                records: Vec::new(),
            };
            let mut refused = engine();
            assert_eq!(run(&mut refused, &mut refusing, &bytes), counts, "every {every}");
            assert_eq!(refusing.records, reference.records, "every {every}");
            assert_eq!(refused.offset(), plain.offset());
            assert_eq!(refused.sequencer.state(), plain.sequencer.state());
            assert_eq!(
                (refused.sequencer.first_block, refused.sequencer.last_block),
                (plain.sequencer.first_block, plain.sequencer.last_block)
            );
        }
        assert_eq!(counts, (6, 1));
        assert_eq!(plain.sequencer.state().epoch, 1); // block 6 then 4: one regression
    }

    #[test]
    fn an_unterminated_line_refused_is_offered_again_and_moves_nothing() {
        let mut engine = engine();
        let mut collector = Collector::default();
        engine.feed(b"half a line", &mut collector).unwrap();
        let held = engine.flush_partial().unwrap().unwrap();
        let offset = engine.offset();
        let mut refusing = Refusing {
            every: 1,
            offered: 0,
            records: Vec::new(),
        };
        let refused = engine.write_unterminated(&held, &mut refusing);
        assert!(refused.refusal.is_some() && refused.dlq == 0 && refused.dead_letters.is_empty());
        let sent = engine.write_unterminated(&held, &mut collector);
        assert_eq!(
            (sent.dlq, sent.dead_letters.clone()),
            (1, vec![("unterminated".to_owned(), 0)])
        );
        assert_eq!(engine.offset(), offset);
        assert_eq!(collector.records[0].value, b"half a line");
        assert_eq!(collector.records[0].headers[3].1, UNTERMINATED.as_bytes());
    }

    #[test]
    fn a_call_while_a_verdict_is_pending_is_refused() {
        let mut engine = engine();
        let mut sink = Collector::default();
        let batch = engine.feed(b"not json\n", &mut sink).unwrap();
        assert!(batch.undecided.is_some());
        assert_eq!(engine.proceed(&mut sink).unwrap_err(), Misuse::VerdictPending);
        assert_eq!(engine.feed(b"", &mut sink).unwrap_err(), Misuse::VerdictPending);
    }
}
