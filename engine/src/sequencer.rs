//! The table stream's sequencer: `seq_in_block`, regression epochs and the line ids they make,
//! as `core/records.py`'s `RecordWriter` keeps them.
//!
//! `seq_in_block` is the number of events in the earlier good lines of the same block (0 when the
//! block differs from the previous good line's). A good line whose block is lower than the previous
//! one's starts a new regression epoch; from then on every id ends in `|r<epoch>`, then the late
//! tag of a sealed file's late lines.

use crate::records::{push_block, push_decimal};

/// The sequencer state persisted with every checkpoint: the block of the last good line (None
/// before the first), `seq_in_block` of the next line of that block, the regression epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqState {
    pub block: Option<i128>,
    pub next_seq: u64,
    pub epoch: u64,
}

/// A good line whose block is lower than the previous good line's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regression {
    pub offset: u64,
    pub previous: i128,
    pub block: i128,
    pub epoch: u64,
}

pub struct Sequencer {
    table: Vec<u8>,
    late_tag: Vec<u8>,
    state: SeqState,
    /// What follows `seq_in_block` in an id of the current epoch.
    suffix: Vec<u8>,
    pub first_block: Option<i128>,
    pub last_block: Option<i128>,
}

impl Sequencer {
    pub fn new(table: &str, late_tag: Vec<u8>, state: SeqState, first_block: Option<i128>, last_block: Option<i128>) -> Self {
        let suffix = id_suffix(state.epoch, &late_tag);
        Sequencer {
            table: table.as_bytes().to_vec(),
            late_tag,
            state,
            suffix,
            first_block,
            last_block,
        }
    }

    pub fn state(&self) -> SeqState {
        self.state
    }

    /// Everything a numbering changes, to put back when its record is refused.
    pub fn save(&self) -> (SeqState, Option<i128>, Option<i128>) {
        (self.state, self.first_block, self.last_block)
    }

    pub fn restore(&mut self, (state, first_block, last_block): (SeqState, Option<i128>, Option<i128>)) {
        if state.epoch != self.state.epoch {
            self.suffix = id_suffix(state.epoch, &self.late_tag);
        }
        self.state = state;
        self.first_block = first_block;
        self.last_block = last_block;
    }

    /// Numbers the good line at `offset` (block `block`, `n_events` events), writes its `line_id`
    /// into `line_id` (cleared first) and returns the regression it starts, if it does.
    pub fn number(&mut self, offset: u64, block: i128, n_events: u64, line_id: &mut Vec<u8>) -> Option<Regression> {
        let SeqState {
            block: previous,
            next_seq,
            mut epoch,
        } = self.state;
        let seq = if previous == Some(block) { next_seq } else { 0 };
        let regression = match previous {
            Some(previous) if block < previous => {
                epoch += 1;
                self.suffix = id_suffix(epoch, &self.late_tag);
                Some(Regression {
                    offset,
                    previous,
                    block,
                    epoch,
                })
            }
            _ => None,
        };
        line_id.clear();
        line_id.extend_from_slice(&self.table);
        line_id.push(b'|');
        push_block(line_id, block);
        line_id.push(b'|');
        push_decimal(line_id, seq);
        line_id.extend_from_slice(&self.suffix);
        self.state = SeqState {
            block: Some(block),
            next_seq: seq + n_events,
            epoch,
        };
        self.first_block.get_or_insert(block);
        self.last_block = Some(block);
        regression
    }
}

/// `|r<epoch>` once the stream regressed, then the late tag (both empty for a plain line).
fn id_suffix(epoch: u64, late_tag: &[u8]) -> Vec<u8> {
    let mut suffix = if epoch > 0 {
        format!("|r{epoch}").into_bytes()
    } else {
        Vec::new()
    };
    suffix.extend_from_slice(late_tag);
    suffix
}
