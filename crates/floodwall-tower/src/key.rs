//! The bytes a request is limited by.

use std::fmt;
use std::hash::{Hash, Hasher};

use smallvec::SmallVec;

/// The rate-limit key of one request: the bytes a [store](floodwall_core::Store) keys its
/// state by. Extractors append to it, and keys up to 64 bytes live inline: extracting a key
/// allocates nothing.
#[derive(Clone, Default)]
pub struct Key {
    bytes: SmallVec<[u8; INLINE]>,
}

/// Bytes a key holds without allocating.
const INLINE: usize = 64;

impl Key {
    /// An empty key.
    pub fn new() -> Self {
        Self::default()
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Appends one byte.
    pub fn push(&mut self, byte: u8) {
        self.bytes.push(byte);
    }

    /// Appends bytes.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// Appends the first `len` bytes of `bytes` (at most `N`): an IP address, usually the
    /// whole key, so an empty key takes it as one fixed-size copy.
    // Forced inline: a call, or SmallVec's `extend_from_slice`, costs instructions on every
    // request (the http_instructions bench).
    #[inline(always)]
    pub(crate) fn extend_from_prefix<const N: usize>(&mut self, bytes: &[u8; N], len: usize) {
        let len = len.min(N);
        if self.bytes.is_empty() && N <= INLINE {
            let mut buf = [0; INLINE];
            buf[..N].copy_from_slice(bytes);
            self.bytes = SmallVec::from_buf_and_len(buf, len);
        } else {
            self.bytes.extend_from_slice(&bytes[..len]);
        }
    }

    /// How many bytes the key holds.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Drops everything after the first `len` bytes, to undo a failed extractor.
    pub fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
    }

    /// Overwrites bytes already written, from `at` (for length prefixes).
    pub(crate) fn write_at(&mut self, at: usize, bytes: &[u8]) {
        if let Some(dst) = self.bytes.get_mut(at..at + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for Key {
    /// Hex, never text: keys are IPs and hashes, and a key printed as text could smuggle
    /// control characters into a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;

    use super::*;

    // A `Vec<u8>` doing the same operations is what a `Key` must be indistinguishable
    // from, on both sides of the inline limit.

    fn on_heap(key: &Key) -> bool {
        key.bytes.spilled()
    }

    fn hash(bytes: &(impl Hash + ?Sized)) -> u64 {
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        hasher.finish()
    }

    #[track_caller]
    fn same(key: &Key, model: &[u8]) {
        assert_eq!(key.as_bytes(), model);
        assert_eq!(key.len(), model.len());
        assert_eq!(key.is_empty(), model.is_empty());
        assert_eq!(hash(key), hash(model), "a key hashes as its bytes do");
    }

    fn filled(len: usize) -> (Key, Vec<u8>) {
        let model: Vec<u8> = (0..len).map(|i| i as u8 ^ 0xa5).collect();
        let mut key = Key::new();
        key.extend_from_slice(&model);
        (key, model)
    }

    #[test]
    fn extend_from_prefix_near_the_inline_limit() {
        let ip: [u8; 16] = std::array::from_fn(|i| 0xc0 + i as u8);
        // An empty key (its fast path), then from room for the whole array, through room
        // for the prefix only, to none.
        for start in std::iter::once(0).chain(40..=INLINE + 2) {
            for len in [0, 1, 4, 15, 16, 40] {
                let (mut key, mut model) = filled(start);
                key.extend_from_prefix(&ip, len);
                model.extend_from_slice(&ip[..len.min(16)]);
                same(&key, &model);
                assert_eq!(on_heap(&key), model.len() > INLINE, "{start} + {len}");
                // What follows lands right after the prefix, not after the whole array.
                key.extend_from_slice(b"!?");
                model.extend_from_slice(b"!?");
                same(&key, &model);
            }
        }
        // A key emptied after spilling takes the fast path too.
        let (mut key, _) = filled(100);
        key.truncate(0);
        key.extend_from_prefix(&ip, 5);
        same(&key, &ip[..5]);
    }

    #[test]
    fn an_inline_key_equals_an_equal_spilled_then_truncated_one() {
        let (inline, model) = filled(30);
        let (mut spilled, _) = filled(100);
        spilled.truncate(30);
        assert!(!on_heap(&inline) && on_heap(&spilled));
        assert_eq!(inline, spilled);
        assert_eq!(spilled, inline);
        assert_eq!(hash(&inline), hash(&spilled));
        same(&spilled, &model);

        // And they differ when their bytes do.
        spilled.write_at(29, &[!model[29]]);
        assert_ne!(inline, spilled);
        assert_ne!(hash(&inline), hash(&spilled));
        // Or their lengths: a stale byte past the end of either does not count.
        let (mut shorter, _) = filled(100);
        shorter.truncate(29);
        assert_ne!(inline, shorter);
        let mut inline_shorter = inline.clone();
        inline_shorter.truncate(29);
        assert_eq!(inline_shorter, shorter);
        assert_eq!(hash(&inline_shorter), hash(&shorter));
    }

    /// Mixed operations, from a fixed seed, their length crossing the inline limit both ways
    /// many times (a key that spilled to the heap stays there).
    #[test]
    fn random_operations_match_a_vec() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        for _ in 0..200 {
            let mut key = Key::new();
            let mut model = Vec::new();
            for _ in 0..60 {
                match next(6) {
                    0 => {
                        let byte = next(256) as u8;
                        key.push(byte);
                        model.push(byte);
                    }
                    1 => {
                        let bytes: Vec<u8> = (0..next(40)).map(|_| next(256) as u8).collect();
                        key.extend_from_slice(&bytes);
                        model.extend_from_slice(&bytes);
                    }
                    2 => {
                        let bytes: [u8; 16] = std::array::from_fn(|_| next(256) as u8);
                        let len = next(20);
                        key.extend_from_prefix(&bytes, len);
                        model.extend_from_slice(&bytes[..len.min(16)]);
                    }
                    3 => {
                        let len = next(model.len() + 10);
                        key.truncate(len);
                        model.truncate(len);
                    }
                    4 => {
                        let at = next(model.len() + 4);
                        let bytes: Vec<u8> = (0..next(6)).map(|_| next(256) as u8).collect();
                        key.write_at(at, &bytes);
                        if let Some(dst) = model.get_mut(at..at + bytes.len()) {
                            dst.copy_from_slice(&bytes);
                        }
                    }
                    _ => {
                        let mut fresh = Key::new();
                        fresh.extend_from_slice(&model);
                        assert_eq!(key, fresh);
                        assert_eq!(hash(&key), hash(&fresh));
                    }
                }
                same(&key, &model);
            }
        }
    }
}
