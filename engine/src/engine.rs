//! One hour file's line engine: split, inspect, sequence and build the records of each read.
//!
//! A read runs through its lines in file order. A line the native inspection cannot decide stops
//! it: the batch so far is returned with that line as `undecided`, the rest of the read waits here,
//! and `resume` takes Python's verdict on the line and carries on. So every line is handed over
//! exactly once, in file order, whoever decided it.

use std::collections::VecDeque;
use std::fmt;

use crate::inspect::{inspect, CoinLocation};
use crate::records::{Batch, Destination, RecordBuilder};
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
    /// `feed` or `flush_partial` while a line waits for its verdict.
    VerdictPending,
    /// A verdict given while no line waits for one.
    NothingUndecided,
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Misuse::VerdictPending => "a line is waiting for its verdict: call accept() or reject() first",
            Misuse::NothingUndecided => "no line is waiting for a verdict",
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
    /// The lines of the current read after the undecided one.
    pending: VecDeque<Item>,
    undecided: Option<(u64, Vec<u8>)>,
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
            pending: VecDeque::new(),
            undecided: None,
        }
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn held_bytes(&self) -> u64 {
        self.splitter.held_bytes()
    }

    /// Splits `chunk` and hands over its complete lines, up to the first undecided one.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Batch, Misuse> {
        if self.undecided.is_some() {
            return Err(Misuse::VerdictPending);
        }
        let mut items = Vec::new();
        self.splitter.feed(chunk, &mut items);
        self.pending.extend(items);
        Ok(self.write_pending(Batch::default()))
    }

    /// Applies Python's verdict to the undecided line and hands over the rest of the read.
    pub fn resume(&mut self, verdict: Verdict) -> Result<Batch, Misuse> {
        let (offset, line) = self.undecided.take().ok_or(Misuse::NothingUndecided)?;
        let mut batch = Batch::default();
        let end = offset + line.len() as u64 + 1;
        match verdict {
            Verdict::Good {
                coin,
                block_number,
                n_events,
            } => self.publish(&mut batch, offset, &line, &coin, block_number, n_events),
            Verdict::Rejected { reason, detail } => self.dead_letter(&mut batch, offset, line, &reason, &detail),
        }
        self.offset = end;
        Ok(self.write_pending(batch))
    }

    /// The held unterminated tail (the file is finalized), the offset moved past it; None if empty.
    pub fn flush_partial(&mut self) -> Result<Option<Item>, Misuse> {
        if self.undecided.is_some() {
            return Err(Misuse::VerdictPending);
        }
        let item = self.splitter.flush_partial();
        self.offset = self.splitter.offset();
        Ok(item)
    }

    fn write_pending(&mut self, mut batch: Batch) -> Batch {
        while let Some(item) = self.pending.pop_front() {
            let end = item.end();
            match item {
                Item::Oversize { offset, length, sha256 } => {
                    let value = self.builder.reference(offset, length, &sha256);
                    let detail = format!("line of {length} bytes is longer than MAX_LINE_BYTES");
                    self.dead_letter(&mut batch, offset, value, "oversize", &detail);
                }
                Item::Line { offset, data } => {
                    let Some(facts) = inspect(self.location, &data) else {
                        batch.undecided = Some((offset, data.clone()));
                        self.undecided = Some((offset, data));
                        break;
                    };
                    self.publish(&mut batch, offset, &data, facts.coin, facts.block_number, facts.n_events);
                }
            }
            self.offset = end;
        }
        batch.last_line = batch
            .records
            .iter()
            .rev()
            .find(|r| r.destination == Destination::Data)
            .map(|r| r.value.clone());
        batch
    }

    fn publish(&mut self, batch: &mut Batch, offset: u64, line: &[u8], coin: &[u8], block_number: i128, n_events: u64) {
        let (line_id, regression) = self.sequencer.number(offset, block_number, n_events);
        batch.regressions.extend(regression);
        batch.records.push(self.builder.data(coin, line, offset, line_id));
        batch.lines += 1;
    }

    fn dead_letter(&mut self, batch: &mut Batch, offset: u64, value: Vec<u8>, reason: &str, detail: &str) {
        batch.records.push(self.builder.dead_letter(reason, offset, value, detail));
        batch.dead_letters.push((reason.to_owned(), offset));
        batch.dlq += 1;
    }
}
