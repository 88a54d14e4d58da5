//! The bytes a request is limited by.

use std::fmt;

use smallvec::SmallVec;

/// The rate-limit key of one request: the bytes a [store](floodwall_core::Store) keys its
/// state by, under each policy's namespace.
///
/// Extractors write into it rather than return a new buffer, so pairs of extractors append
/// without copying, and keys up to 64 bytes (an IP, a SHA-256, a pair of those) live inline:
/// extracting a key allocates nothing on the hot path.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Key {
    bytes: SmallVec<[u8; 64]>,
}

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

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl fmt::Debug for Key {
    /// Hex, never text: keys are IPs and hashes, and a key printed as text could smuggle
    /// control characters into a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(")?;
        for b in self.bytes.iter() {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}
