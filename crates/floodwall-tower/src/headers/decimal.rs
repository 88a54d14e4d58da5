//! Numbers written into header values without `fmt`, into a per-thread buffer: formatting
//! the headers is a measurable part of what every admitted request costs.

use std::cell::RefCell;

use bytes::{Bytes, BytesMut};
use http::HeaderValue;

/// A number as a header value.
pub(super) fn decimal_value(n: u64) -> HeaderValue {
    HeaderValue::from_maybe_shared(pooled(MAX_DIGITS, |out| put_decimal(out, n)))
        .unwrap_or_else(|_| HeaderValue::from(n))
}

thread_local! {
    /// Where this thread writes the header values it formats per response: each a slice
    /// of one buffer, so formatting allocates nothing. The buffer is reused from its start
    /// once every value cut from it is dropped, and replaced while some are held.
    static VALUES: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// What [`VALUES`] allocates at a time: room for a hundred-odd values.
pub(super) const VALUES_CHUNK: usize = 4096;

/// The most digits a `u64` has.
pub(super) const MAX_DIGITS: usize = 20;

/// The bytes `write` appends (about `max` of them at most), for a header value written
/// onto a response at once: cut from this thread's [`VALUES`]. (A value held longer would
/// keep the chunk it was cut from alive: it gets an allocation of its own.)
pub(super) fn pooled(max: usize, write: impl Fn(&mut BytesMut)) -> Bytes {
    let cut = VALUES.try_with(|values| {
        let mut values = values.borrow_mut();
        if values.capacity() < max {
            values.reserve(VALUES_CHUNK.max(max));
        }
        write(&mut values);
        values.split().freeze()
    });
    cut.unwrap_or_else(|_| {
        // The thread is exiting and its buffer is gone: a buffer of the value's own.
        let mut own = BytesMut::with_capacity(max);
        write(&mut own);
        own.freeze()
    })
}

/// Two decimal digits for each number below 100: `00`, `01`, ..., `99`.
pub(super) const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// Appends `n` in decimal.
pub(super) fn put_decimal(out: &mut BytesMut, n: u64) {
    let mut buf = [0u8; MAX_DIGITS];
    let at = decimal_before(&mut buf, MAX_DIGITS, n);
    out.extend_from_slice(&buf[at..]);
}

/// Writes `n` in decimal so that it ends where `buf[end..]` starts (at least
/// [`MAX_DIGITS`] bytes must be free before `end`); returns where it starts. Header values
/// are formatted for every admitted request, so this does without `fmt`, two digits per
/// division.
pub(super) fn decimal_before(buf: &mut [u8], end: usize, n: u64) -> usize {
    let mut at = end;
    let mut n = n;
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + n as u8;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_cut_from_the_buffer_stay_intact_while_held() {
        // Far more than one buffer's worth, all held at once, then some dropped and more
        // cut: every value keeps its own bytes.
        let mut held: Vec<(u64, HeaderValue)> =
            (0..2_000).map(|n| (n, decimal_value(n * 7_919))).collect();
        held.retain(|(n, _)| n % 3 == 0);
        held.extend((2_000..3_000).map(|n| (n, decimal_value(n * 7_919))));
        for (n, value) in &held {
            assert_eq!(value, (n * 7_919).to_string().as_str());
        }
        drop(held);
        // And once all are dropped, the buffer is used again from its start.
        assert_eq!(decimal_value(42), "42");
        // Where a chunk starts: the first value not cut right after the one before.
        let at = |v: &HeaderValue| v.as_bytes().as_ptr();
        let mut held = vec![decimal_value(1_000_000)];
        let start = loop {
            let value = decimal_value(1_000_000);
            let contiguous = at(&value) == at(&held[held.len() - 1]).wrapping_add(7);
            held.push(value);
            if !contiguous {
                break at(&held[held.len() - 1]);
            }
        };
        drop(held);
        // Values dropped as soon as cut come back round to that start.
        let reused = (0..2 * VALUES_CHUNK).any(|_| at(&decimal_value(1_000_000)) == start);
        assert!(reused, "the buffer was not used again from its start");
    }

    #[test]
    fn values_cut_in_a_row_share_the_buffers_allocation() {
        // Formatting a value allocates nothing: values cut one after another, all held,
        // lie one after another in this thread's buffer, a new chunk at most once per
        // hundred-odd values.
        let held: Vec<HeaderValue> = (0..200).map(|_| decimal_value(1_000_000)).collect();
        let at = |v: &HeaderValue| v.as_bytes().as_ptr();
        let apart = held
            .windows(2)
            .filter(|w| at(&w[1]) != at(&w[0]).wrapping_add(7))
            .count();
        let why = "of 199 values were not cut after the one before";
        assert!(apart <= 2, "{apart} {why}");
    }

    #[test]
    fn put_decimal_writes_every_width_up_to_u64_max() {
        let mut ns = vec![0, 1, 11, 101, 1_000_000, u64::MAX - 1, u64::MAX];
        ns.extend((1..20).map(|e| 10_u64.pow(e) - 1));
        ns.extend((1..20).map(|e| 10_u64.pow(e)));
        for n in ns {
            let mut out = BytesMut::new();
            put_decimal(&mut out, n);
            assert_eq!(&out[..], n.to_string().as_bytes(), "{n}");
            assert_eq!(decimal_value(n), n.to_string().as_str());
        }
        // After what is already there.
        let mut out = BytesMut::from(&b"r="[..]);
        put_decimal(&mut out, u64::MAX);
        assert_eq!(&out[..], b"r=18446744073709551615");
    }
}
