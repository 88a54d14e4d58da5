//! The bytes a request is limited by.

use std::fmt;
use std::hash::{Hash, Hasher};

/// The rate-limit key of one request: the bytes a [store](floodwall_core::Store) keys its
/// state by, under each policy's namespace.
///
/// Extractors write into it rather than return a new buffer, so pairs of extractors append
/// without copying, and keys up to 64 bytes (an IP, a SHA-256, a pair of those) live inline:
/// extracting a key allocates nothing on the hot path.
#[derive(Clone, Default)]
pub struct Key {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    /// The first `len` bytes of `buf`.
    Inline { len: u8, buf: [u8; INLINE] },
    /// Past [`INLINE`] bytes.
    Heap(Vec<u8>),
}

/// Bytes a key holds without allocating.
const INLINE: usize = 64;

impl Default for Repr {
    fn default() -> Self {
        Self::Inline {
            len: 0,
            buf: [0; INLINE],
        }
    }
}

impl Key {
    /// An empty key.
    pub fn new() -> Self {
        Self::default()
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.repr {
            Repr::Inline { len, buf } => &buf[..usize::from(*len)],
            Repr::Heap(bytes) => bytes,
        }
    }

    /// Appends one byte.
    pub fn push(&mut self, byte: u8) {
        self.extend_from_slice(&[byte]);
    }

    /// Appends bytes.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        match &mut self.repr {
            Repr::Inline { len, buf } => {
                let start = usize::from(*len);
                let end = start + bytes.len();
                if let Some(dst) = buf.get_mut(start..end) {
                    dst.copy_from_slice(bytes);
                    *len = end as u8;
                } else {
                    let mut heap = Vec::with_capacity(end.max(2 * INLINE));
                    heap.extend_from_slice(&buf[..start]);
                    heap.extend_from_slice(bytes);
                    self.repr = Repr::Heap(heap);
                }
            }
            Repr::Heap(heap) => heap.extend_from_slice(bytes),
        }
    }

    /// Appends the first `len` bytes of `bytes` (at most `N`). Copying a whole array is a
    /// fixed-size copy, cheaper than one of `len` bytes for the few bytes of an IP.
    #[inline]
    pub(crate) fn extend_from_prefix<const N: usize>(&mut self, bytes: &[u8; N], len: usize) {
        let len = len.min(N);
        if let Repr::Inline { len: used, buf } = &mut self.repr {
            let start = usize::from(*used);
            if let Some(dst) = buf.get_mut(start..start + N) {
                dst.copy_from_slice(bytes);
                *used = (start + len) as u8;
                return;
            }
        }
        self.extend_from_slice(&bytes[..len]);
    }

    /// How many bytes the key holds.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops everything after the first `len` bytes, to undo a failed extractor.
    pub fn truncate(&mut self, len: usize) {
        match &mut self.repr {
            Repr::Inline { len: used, .. } => {
                if len < usize::from(*used) {
                    *used = len as u8;
                }
            }
            Repr::Heap(heap) => heap.truncate(len),
        }
    }

    /// Overwrites bytes already written, from `at` (for length prefixes).
    pub(crate) fn write_at(&mut self, at: usize, bytes: &[u8]) {
        let written = self.len();
        let dst = match &mut self.repr {
            Repr::Inline { buf, .. } => &mut buf[..written],
            Repr::Heap(heap) => &mut heap[..],
        };
        if let Some(dst) = dst.get_mut(at..at + bytes.len()) {
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
