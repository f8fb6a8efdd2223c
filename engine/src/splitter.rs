//! Splitting appended file bytes into complete lines, as `core/splitter.py`'s `LineSplitter` does.
//!
//! The tail of every chunk is held back until its newline arrives; a line longer than the limit is
//! kept only as a running sha256 and length (memory stays bounded) and reported as `Item::Oversize`.
//! A line of exactly `max_line_bytes` bytes is a normal line. The result never depends on how the
//! stream is chunked.
//!
//! Lines are not copied one by one: a fed chunk goes into the caller's read buffer once (after the
//! held partial line that it completes, if any) and each line is a range of that buffer.

use memchr::memchr;
use sha2::{Digest, Sha256};

/// What one fed chunk completes, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A complete line: the file offset of its first byte, and where its bytes (without the newline)
    /// are in the read buffer.
    Line { offset: u64, start: usize, end: usize },
    /// A line longer than the limit: its offset, length and sha256 (hex), newline excluded.
    Oversize { offset: u64, length: u64, sha256: String },
}

impl Item {
    /// How many bytes of the file the item covers, its newline included.
    pub fn span(&self) -> u64 {
        match self {
            Item::Line { start, end, .. } => (end - start) as u64 + 1,
            Item::Oversize { length, .. } => length + 1,
        }
    }
}

/// The held partial line, or what is left of it once it grew past the limit.
enum Held {
    Bytes(Vec<u8>),
    Oversize { digest: Sha256, length: u64 },
}

pub struct LineSplitter {
    offset: u64,
    max_line_bytes: u64,
    held: Held,
}

impl LineSplitter {
    pub fn new(offset: u64, max_line_bytes: u64) -> Self {
        LineSplitter {
            offset,
            max_line_bytes,
            held: Held::Bytes(Vec::new()),
        }
    }

    /// Just past the newline of the last complete line returned: where the next line starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Length of the partial line held back (counted, not stored, once oversize).
    pub fn held_bytes(&self) -> u64 {
        match &self.held {
            Held::Bytes(bytes) => bytes.len() as u64,
            Held::Oversize { length, .. } => *length,
        }
    }

    /// Appends to `out` the lines completed by `chunk`, their bytes in `buffer` (cleared first);
    /// the unterminated rest is held back.
    pub fn feed(&mut self, chunk: &[u8], buffer: &mut Vec<u8>, out: &mut Vec<Item>) {
        buffer.clear();
        let mut rest = chunk;
        // An oversize held line is never empty: it is longer than the limit.
        if self.held_bytes() > 0 {
            match memchr(b'\n', rest) {
                None => {
                    self.extend_held(rest);
                    return;
                }
                Some(newline) => {
                    self.extend_held(&rest[..newline]);
                    out.push(self.release_held(1, buffer));
                    rest = &rest[newline + 1..];
                }
            }
        }
        let mut at = buffer.len();
        buffer.extend_from_slice(rest);
        while let Some(newline) = memchr(b'\n', &buffer[at..]) {
            out.push(self.complete_line(buffer, at, at + newline));
            at += newline + 1;
        }
        self.extend_held(&buffer[at..]);
        buffer.truncate(at);
    }

    /// The held unterminated tail (the file is finalized), its bytes in `buffer` (cleared first),
    /// the offset moved past it; None if nothing is held.
    pub fn flush_partial(&mut self, buffer: &mut Vec<u8>) -> Option<Item> {
        buffer.clear();
        if self.held_bytes() == 0 {
            return None;
        }
        Some(self.release_held(0, buffer))
    }

    fn complete_line(&mut self, buffer: &[u8], start: usize, end: usize) -> Item {
        let offset = self.offset;
        let line = &buffer[start..end];
        self.offset += line.len() as u64 + 1;
        if line.len() as u64 > self.max_line_bytes {
            Item::Oversize {
                offset,
                length: line.len() as u64,
                sha256: hex(&Sha256::digest(line)),
            }
        } else {
            Item::Line { offset, start, end }
        }
    }

    fn extend_held(&mut self, piece: &[u8]) {
        match &mut self.held {
            Held::Oversize { digest, length } => {
                digest.update(piece);
                *length += piece.len() as u64;
            }
            Held::Bytes(bytes) if (bytes.len() + piece.len()) as u64 > self.max_line_bytes => {
                let mut digest = Sha256::new();
                digest.update(&bytes[..]);
                digest.update(piece);
                let length = (bytes.len() + piece.len()) as u64;
                self.held = Held::Oversize { digest, length };
            }
            Held::Bytes(bytes) => bytes.extend_from_slice(piece),
        }
    }

    fn release_held(&mut self, newline_length: u64, buffer: &mut Vec<u8>) -> Item {
        let offset = self.offset;
        let item = match std::mem::replace(&mut self.held, Held::Bytes(Vec::new())) {
            Held::Bytes(data) => {
                let start = buffer.len();
                buffer.extend_from_slice(&data);
                Item::Line {
                    offset,
                    start,
                    end: buffer.len(),
                }
            }
            Held::Oversize { digest, length } => Item::Oversize {
                offset,
                length,
                sha256: hex(&digest.finalize()),
            },
        };
        self.offset += item.span() - 1 + newline_length;
        item
    }
}

/// Lower-case hex, as Python's `hashlib.sha256(...).hexdigest()` writes it.
pub fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(digest.len() * 2);
    for byte in digest {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 0x0F)] as char);
    }
    text
}
