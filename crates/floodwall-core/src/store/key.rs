//! Map keys of the memory store: a policy's namespace and a user key, compared and hashed
//! as a pair so that a lookup borrows the user key and allocates nothing.

use std::hash::{Hash, Hasher};

use papaya::Equivalent;
use sha2::{Digest, Sha256};

/// User keys longer than this are stored as their SHA-256, so a flood of 10 KB keys costs
/// what a flood of short ones does. The digest is unpredictable to whoever picks the key,
/// so no one can aim a long key at another client's state.
pub(crate) const MAX_KEY_LEN: usize = 128;

/// An owned key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MapKey {
    ns: u64,
    form: u8,
    key: Box<[u8]>,
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

impl KeyRef<'_> {
    pub(crate) fn to_owned(self) -> MapKey {
        MapKey {
            ns: self.ns,
            form: self.form,
            key: self.key.into(),
        }
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
        KeyRef {
            ns: self.ns,
            form: self.form,
            key: &self.key,
        }
        .hash(state)
    }
}

impl Equivalent<MapKey> for KeyRef<'_> {
    #[inline]
    fn equivalent(&self, other: &MapKey) -> bool {
        self.ns == other.ns && self.form == other.form && *self.key == *other.key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_and_owned_keys_agree() {
        let s = ahash::RandomState::new();
        for (ns, key) in [(1, &b"bc"[..]), (2, b"c"), (0, b""), (7, &[0xff; 300])] {
            let buf = KeyBuf::new(key);
            let r = buf.as_ref(ns);
            let owned = r.to_owned();
            assert_eq!(s.hash_one(r), s.hash_one(&owned));
            assert!(r.equivalent(&owned));
        }
        assert!(
            !KeyBuf::new(b"k")
                .as_ref(1)
                .equivalent(&KeyBuf::new(b"k").as_ref(2).to_owned())
        );
    }

    #[test]
    fn long_keys_are_bounded_and_kept_apart_from_short_ones() {
        let long = vec![b'x'; 10_000];
        let owned = KeyBuf::new(&long).as_ref(9).to_owned();
        assert_eq!(owned.key.len(), 32);
        let digest: [u8; 32] = Sha256::digest(&long).into();
        // A client sending the digest itself as its key does not share the long key's state.
        let forged = KeyBuf::new(&digest);
        assert!(!forged.as_ref(9).equivalent(&owned));
    }
}
