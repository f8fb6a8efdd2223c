//! The native inspection of a line: its coin, block and event count, when they are certain.
//!
//! `core/lineinfo.py` is the reference: a line is good there when orjson parses it to an object
//! whose `block_number` is an integer and whose `events` is a non-empty array with a non-empty
//! string coin in its first event (where the table keeps it). Its rejections carry orjson's error
//! messages, which only orjson can write, so this module gives no verdict on a bad line. It answers
//! only when it is certain the reference calls the line good with the same facts, and otherwise
//! returns `None` (the line is *undecided* and Python's `inspect_line` decides it).
//!
//! One pass validates the whole document as strict JSON (what orjson accepts, minus what this pass
//! cannot vouch for) and reads the three facts on the way. Left undecided, besides every line that
//! is not good: duplicate keys at the levels read (orjson keeps the last one), escaped keys (one
//! may spell a name read here), an escaped coin, a `\u` escape of a surrogate,
//! nesting deeper than `MAX_DEPTH`, a number orjson might read as infinity, and a block number
//! outside 0..2^63-1 (the reference accepts more; Python decides those).
//!
//! Why a pass of our own rather than simd-json or sonic-rs: the rules above need the keys and
//! escapes of the levels read as the pass meets them, which those parsers do not report, and on
//! the production mix's short lines neither was faster (measured on this 2-core machine, µs per
//! line, book diffs / order statuses: this pass 0.24 / 0.48, sonic-rs validating 0.20 / 0.40,
//! simd-json's tape 0.47 / 0.69, serde_json validating 0.16 / 0.34).

/// Where the coin sits inside one element of a line's `events` (`core/tables.py`'s `CoinLocation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoinLocation {
    /// `events[0]["coin"]`
    Event,
    /// `events[0]["order"]["coin"]`
    Order,
    /// `events[0][1]["coin"]`
    FillTuple,
}

impl CoinLocation {
    /// The location named as `CoinLocation`'s values are (`event`, `order`, `fill_tuple`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "event" => Some(CoinLocation::Event),
            "order" => Some(CoinLocation::Order),
            "fill_tuple" => Some(CoinLocation::FillTuple),
            _ => None,
        }
    }
}

/// A good line's facts: the coin of its first event (its raw UTF-8 bytes: never escaped), its block
/// and how many events it holds.
#[derive(Debug, PartialEq, Eq)]
pub struct Facts<'a> {
    pub coin: &'a [u8],
    pub block_number: i128,
    pub n_events: u64,
}

/// Nesting the pass follows; orjson's own limit is 1024, real lines nest about 5 deep.
const MAX_DEPTH: usize = 64;
/// Longest number token taken; with at most two exponent digits its magnitude stays below 1e131,
/// far from where a double overflows (orjson rejects numbers that parse to infinity).
const MAX_NUMBER_LEN: usize = 32;
const MAX_EXPONENT_DIGITS: usize = 2;
const MAX_BLOCK: u64 = 1 << 63;

/// The bytes that end a run of plain string text: the quote, the backslash, control characters.
const STRING_STOP: [bool; 256] = {
    let mut stop = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        stop[byte] = true;
        byte += 1;
    }
    stop[b'"' as usize] = true;
    stop[b'\\' as usize] = true;
    stop
};

/// Where the first byte that stops a string's text (`"`, `\\` or a control character) is in
/// `text`, if any. Eight bytes at a time, in plain integer arithmetic: the strings are short (keys,
/// numbers as text, at most a 66-character hash), too short for a search call to pay, and a
/// byte-by-byte loop was the hottest part of the inspection.
fn string_run(text: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let mut words = text.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        let word = u64::from_le_bytes(word.try_into().expect("chunks of eight"));
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // Each term marks a byte that is zero (a quote, a backslash) or below 0x20 (a control
        // character) in its high bit. A term can also mark bytes above one it rightly marked
        // (the borrow runs upwards), never below: the lowest mark is the first stop.
        let stops = (quote.wrapping_sub(ONES) & !quote
            | backslash.wrapping_sub(ONES) & !backslash
            | word.wrapping_sub(ONES * 0x20) & !word)
            & HIGH_BITS;
        if stops != 0 {
            return Some(at + stops.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| STRING_STOP[usize::from(b)])
        .map(|run| at + run)
}

/// The line's facts when it is certainly good, None when Python must decide it.
pub fn inspect(location: CoinLocation, line: &[u8]) -> Option<Facts<'_>> {
    std::str::from_utf8(line).ok()?;
    Reader { bytes: line, at: 0 }.envelope(location).ok()
}

/// The pass stops at the first thing it cannot vouch for.
struct Undecided;

type Step<T> = Result<T, Undecided>;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    // ------------------------------------------------------------------ the fields read

    fn envelope(&mut self, location: CoinLocation) -> Step<Facts<'a>> {
        let mut block_number = None;
        let mut events = None;
        self.object(|reader, key| match key {
            b"block_number" => set_once(&mut block_number, reader.block_number()?),
            b"events" => set_once(&mut events, reader.events(location)?),
            _ => reader.value(1),
        })?;
        self.skip_whitespace();
        if self.at != self.bytes.len() {
            return Err(Undecided);
        }
        let (coin, n_events) = events.ok_or(Undecided)?;
        Ok(Facts {
            coin,
            block_number: block_number.ok_or(Undecided)?,
            n_events,
        })
    }

    fn block_number(&mut self) -> Step<i128> {
        let token = self.number()?;
        if !token.iter().all(u8::is_ascii_digit) {
            return Err(Undecided);
        }
        let mut value: u64 = 0;
        for digit in token {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit - b'0')))
                .ok_or(Undecided)?;
        }
        if value >= MAX_BLOCK {
            return Err(Undecided);
        }
        Ok(i128::from(value))
    }

    /// The coin of the first event and the number of events of a non-empty array.
    fn events(&mut self, location: CoinLocation) -> Step<(&'a [u8], u64)> {
        let mut coin = None;
        let count = self.array(|reader, index| {
            if index == 0 {
                coin = Some(reader.event_coin(location)?);
                Ok(())
            } else {
                reader.value(2)
            }
        })?;
        Ok((coin.ok_or(Undecided)?, count))
    }

    fn event_coin(&mut self, location: CoinLocation) -> Step<&'a [u8]> {
        match location {
            CoinLocation::Event => self.coin_holder(3),
            CoinLocation::Order => {
                let mut coin = None;
                self.object(|reader, key| match key {
                    b"order" => set_once(&mut coin, reader.coin_holder(4)?),
                    _ => reader.value(3),
                })?;
                coin.ok_or(Undecided)
            }
            CoinLocation::FillTuple => {
                let mut coin = None;
                self.array(|reader, index| {
                    if index == 1 {
                        coin = Some(reader.coin_holder(4)?);
                        Ok(())
                    } else {
                        reader.value(3)
                    }
                })?;
                coin.ok_or(Undecided)
            }
        }
    }

    /// An object with a non-empty, unescaped string `coin`.
    fn coin_holder(&mut self, depth: usize) -> Step<&'a [u8]> {
        let mut coin = None;
        self.object(|reader, key| match key {
            b"coin" => set_once(&mut coin, reader.coin()?),
            _ => reader.value(depth),
        })?;
        coin.ok_or(Undecided)
    }

    fn coin(&mut self) -> Step<&'a [u8]> {
        self.skip_whitespace();
        let (text, escaped) = self.string()?;
        if escaped || text.is_empty() {
            return Err(Undecided);
        }
        Ok(text)
    }

    // ------------------------------------------------------------------ strict JSON

    /// An object whose keys are unescaped (an escaped key is left undecided); `on_member` reads
    /// each member's value, the reader just past the colon.
    fn object(&mut self, mut on_member: impl FnMut(&mut Self, &'a [u8]) -> Step<()>) -> Step<()> {
        self.expect(b'{')?;
        self.skip_whitespace();
        if self.eat(b'}') {
            return Ok(());
        }
        loop {
            self.skip_whitespace();
            let (key, escaped) = self.string()?;
            if escaped {
                return Err(Undecided);
            }
            self.expect(b':')?;
            on_member(self, key)?;
            self.skip_whitespace();
            if self.eat(b'}') {
                return Ok(());
            }
            self.expect(b',')?;
        }
    }

    /// An array; `on_element` reads each element (with its index). Returns the element count.
    fn array(&mut self, mut on_element: impl FnMut(&mut Self, u64) -> Step<()>) -> Step<u64> {
        self.expect(b'[')?;
        self.skip_whitespace();
        if self.eat(b']') {
            return Ok(0);
        }
        let mut count = 0;
        loop {
            on_element(self, count)?;
            count += 1;
            self.skip_whitespace();
            if self.eat(b']') {
                return Ok(count);
            }
            self.expect(b',')?;
        }
    }

    /// Any value inside a container at `depth`, validated and skipped.
    fn value(&mut self, depth: usize) -> Step<()> {
        self.skip_whitespace();
        match self.peek().ok_or(Undecided)? {
            b'{' | b'[' if depth >= MAX_DEPTH => Err(Undecided),
            b'{' => self.object(|reader, _| reader.value(depth + 1)),
            b'[' => self.array(|reader, _| reader.value(depth + 1)).map(drop),
            b'"' => self.string().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }

    /// A string's raw text between its quotes, and whether it holds an escape.
    fn string(&mut self) -> Step<(&'a [u8], bool)> {
        let bytes = self.bytes;
        self.expect(b'"')?;
        let start = self.at;
        let mut escaped = false;
        loop {
            // The line is valid UTF-8 (checked first), so only ASCII bytes can stop a string.
            self.at += string_run(&bytes[self.at..]).ok_or(Undecided)?;
            match bytes[self.at] {
                b'"' => {
                    self.at += 1;
                    return Ok((&bytes[start..self.at - 1], escaped));
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                // A control character must be escaped.
                _ => return Err(Undecided),
            }
        }
    }

    fn escape(&mut self) -> Step<()> {
        self.at += 1; // the backslash
        match self.peek().ok_or(Undecided)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.at += 1;
                Ok(())
            }
            b'u' => {
                let digits = self.bytes.get(self.at + 1..self.at + 5).ok_or(Undecided)?;
                if !digits.iter().all(u8::is_ascii_hexdigit) {
                    return Err(Undecided);
                }
                let code = digits.iter().fold(0u32, |code, &digit| code * 16 + hex_value(digit));
                // Surrogates are valid only in pairs, which orjson checks in its own words.
                if (0xD800..=0xDFFF).contains(&code) {
                    return Err(Undecided);
                }
                self.at += 5;
                Ok(())
            }
            _ => Err(Undecided),
        }
    }

    /// A number token: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, of bounded size.
    fn number(&mut self) -> Step<&'a [u8]> {
        self.skip_whitespace();
        let start = self.at;
        self.eat(b'-');
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(Undecided),
        }
        if self.eat(b'.') && self.digits() == 0 {
            return Err(Undecided);
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            let exponent_digits = self.digits();
            if exponent_digits == 0 || exponent_digits > MAX_EXPONENT_DIGITS {
                return Err(Undecided);
            }
        }
        if self.at - start > MAX_NUMBER_LEN {
            return Err(Undecided);
        }
        Ok(&self.bytes[start..self.at])
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        self.at - start
    }

    fn literal(&mut self, word: &[u8]) -> Step<()> {
        if self.bytes[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(Undecided)
        }
    }

    // ------------------------------------------------------------------ bytes

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let matched = self.peek() == Some(byte);
        if matched {
            self.at += 1;
        }
        matched
    }

    fn expect(&mut self, byte: u8) -> Step<()> {
        self.skip_whitespace();
        if self.eat(byte) {
            Ok(())
        } else {
            Err(Undecided)
        }
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }
}

/// Records a field read at most once: a second occurrence of the key is left undecided.
fn set_once<T>(slot: &mut Option<T>, value: T) -> Step<()> {
    if slot.is_some() {
        return Err(Undecided);
    }
    *slot = Some(value);
    Ok(())
}

fn hex_value(digit: u8) -> u32 {
    u32::from(match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte_by_byte(text: &[u8]) -> Option<usize> {
        text.iter().position(|&b| STRING_STOP[usize::from(b)])
    }

    /// Every byte value at every position of texts of every length up to three words, over
    /// backgrounds that sit on the edges of the arithmetic (0x20, 0x21, 0x7f, UTF-8 bytes), with a
    /// second stop after the first (the borrow that runs upwards must not move the answer).
    #[test]
    fn string_run_finds_the_first_stop_as_a_byte_loop_does() {
        for background in [b'a', 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xc3, 0xff] {
            for length in 0..=24 {
                for at in 0..length {
                    for byte in 0..=255u8 {
                        let mut text = vec![background; length];
                        text[at] = byte;
                        assert_eq!(string_run(&text), byte_by_byte(&text), "{text:?}");
                        if at + 1 < length {
                            text[at + 1] = 0x00;
                            assert_eq!(string_run(&text), byte_by_byte(&text), "{text:?}");
                        }
                    }
                }
            }
        }
    }
}
