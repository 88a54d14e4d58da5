//! Map keys: a policy's namespace and a user key, hashed as a pair so that a lookup
//! borrows the user key and allocates nothing.

use std::hash::{Hash, Hasher};

use papaya::Equivalent;
use sha2::{Digest, Sha256};

/// User keys longer than this are stored as their SHA-256 (which no one can aim at another
/// client's state), so long keys cost what short ones do.
pub(crate) const MAX_KEY_LEN: usize = 128;

/// User keys up to this long (an IP address, most user ids) are kept inside the map's
/// entry: compared without chasing a pointer, inserted without an allocation.
const INLINE: usize = 22;

/// An owned key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MapKey {
    ns: u64,
    key: Stored,
}

/// The user key of a [`MapKey`]. Which variant holds a key depends only on its form and
/// length, so the derived equality is the equality of keys.
// Hand-written rather than a `SmallVec<[u8; INLINE]>`: that is 32 bytes on its own (a
// length and a capacity besides the bytes), so every key in the map would take 40 bytes,
// not 32, whatever its inline size (`short_keys_add_nothing_to_an_entry`).
#[derive(Debug, PartialEq, Eq)]
enum Stored {
    /// A user key of at most [`INLINE`] bytes, as given; the rest of `bytes` is zeros.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// A longer user key (at most [`MAX_KEY_LEN`] bytes), as given.
    Heap(Box<[u8]>),
    /// The SHA-256 of a user key longer than [`MAX_KEY_LEN`].
    Digest(Box<[u8; 32]>),
}

impl Stored {
    /// The form (see [`KeyRef`]) and the bytes.
    #[inline]
    fn parts(&self) -> (u8, &[u8]) {
        match self {
            Self::Inline { len, bytes } => (0, &bytes[..usize::from(*len)]),
            Self::Heap(key) => (0, key),
            Self::Digest(digest) => (1, &digest[..]),
        }
    }
}

/// A borrowed key: what a lookup builds on the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyRef<'a> {
    /// The policy's namespace digest.
    ns: u64,
    /// 0: the user key as given; 1: its SHA-256 (keeps the two forms apart).
    form: u8,
    key: &'a [u8],
}

/// Holds the digest of a long key for as long as a lookup needs it.
#[derive(Clone)]
pub(crate) enum KeyBuf<'a> {
    Short(&'a [u8]),
    Long([u8; 32]),
}

impl<'a> KeyBuf<'a> {
    pub(crate) fn new(key: &'a [u8]) -> Self {
        if key.len() <= MAX_KEY_LEN {
            Self::Short(key)
        } else {
            Self::Long(Sha256::digest(key).into())
        }
    }

    pub(crate) fn as_ref(&self, ns: u64) -> KeyRef<'_> {
        match self {
            Self::Short(key) => KeyRef { ns, form: 0, key },
            Self::Long(digest) => KeyRef {
                ns,
                form: 1,
                key: digest,
            },
        }
    }
}

impl<'a> KeyRef<'a> {
    /// `key` under namespace `ns` as given, or `None` when too long to be stored as is.
    #[inline]
    pub(crate) fn short(ns: u64, key: &'a [u8]) -> Option<Self> {
        (key.len() <= MAX_KEY_LEN).then_some(KeyRef { ns, form: 0, key })
    }

    pub(crate) fn to_owned(self) -> MapKey {
        let key = if self.form == 1 {
            let mut digest = [0; 32];
            digest.copy_from_slice(self.key);
            Stored::Digest(Box::new(digest))
        } else if self.key.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..self.key.len()].copy_from_slice(self.key);
            Stored::Inline {
                len: self.key.len() as u8,
                bytes,
            }
        } else {
            Stored::Heap(self.key.into())
        };
        MapKey { ns: self.ns, key }
    }
}

// Both forms hash the same writes, so a `KeyRef` finds its `MapKey`.
impl Hash for KeyRef<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.ns ^ u64::from(self.form));
        state.write(self.key);
    }
}

impl Hash for MapKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let (form, key) = self.key.parts();
        KeyRef {
            ns: self.ns,
            form,
            key,
        }
        .hash(state)
    }
}

impl Equivalent<MapKey> for KeyRef<'_> {
    #[inline]
    fn equivalent(&self, other: &MapKey) -> bool {
        if self.ns != other.ns {
            return false;
        }
        match &other.key {
            Stored::Inline { len, bytes } => {
                self.form == 0
                    && self.key.len() == usize::from(*len)
                    && same_prefix(self.key, bytes)
            }
            Stored::Heap(key) => self.form == 0 && *self.key == **key,
            Stored::Digest(digest) => self.form == 1 && *self.key == digest[..],
        }
    }
}

/// Whether `key` starts `bytes`, compared a word at a time (cheaper than `memcmp`).
#[inline]
fn same_prefix(key: &[u8], bytes: &[u8; INLINE]) -> bool {
    let n = key.len();
    if n >= 8 {
        // Words at 0, 8 (if needed) and n - 8 cover every byte, overlapping where they must.
        word(key, 0) == word(bytes, 0)
            && (n <= 16 || word(key, 8) == word(bytes, 8))
            && word(key, n - 8) == word(bytes, n - 8)
    } else if n >= 4 {
        half(key, 0) == half(bytes, 0) && half(key, n - 4) == half(bytes, n - 4)
    } else {
        key == &bytes[..n]
    }
}

#[inline]
fn word(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(w)
}

#[inline]
fn half(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_ne_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_every_length_round_trip_and_stay_distinct() {
        let s = ahash::RandomState::new();
        let lengths = [
            0,
            1,
            4,
            5,
            7,
            8,
            16,
            17,
            21,
            INLINE,
            INLINE + 1,
            64,
            MAX_KEY_LEN,
            MAX_KEY_LEN + 1,
        ];
        for len in lengths {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let buf = KeyBuf::new(&key);
            let owned = buf.as_ref(3).to_owned();
            assert_eq!(s.hash_one(buf.as_ref(3)), s.hash_one(&owned), "{len}");
            assert!(buf.as_ref(3).equivalent(&owned), "{len}");
            // One more zero byte, one byte changed, another namespace: other keys.
            let mut longer = key.clone();
            longer.push(0);
            assert!(!KeyBuf::new(&longer).as_ref(3).equivalent(&owned), "{len}");
            assert_ne!(KeyBuf::new(&longer).as_ref(3).to_owned(), owned, "{len}");
            // Every byte is compared: a change anywhere is another key.
            for i in 0..key.len() {
                let mut changed = key.clone();
                changed[i] ^= 0x80;
                assert!(
                    !KeyBuf::new(&changed).as_ref(3).equivalent(&owned),
                    "{len} at {i}"
                );
            }
            assert!(!buf.as_ref(4).equivalent(&owned), "{len}");
        }
    }

    #[test]
    fn short_keys_add_nothing_to_an_entry() {
        assert!(std::mem::size_of::<MapKey>() <= 32);
    }

    #[test]
    fn long_keys_are_bounded_and_kept_apart_from_short_ones() {
        let long = vec![b'x'; 10_000];
        let owned = KeyBuf::new(&long).as_ref(9).to_owned();
        assert!(matches!(owned.key, Stored::Digest(_)));
        let digest: [u8; 32] = Sha256::digest(&long).into();
        // A client sending the digest itself as its key does not share the long key's state.
        let forged = KeyBuf::new(&digest);
        assert!(!forged.as_ref(9).equivalent(&owned));
    }
}
