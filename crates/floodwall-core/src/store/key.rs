//! Map keys of the memory store: a policy's namespace and a user key, compared and hashed
//! as a pair so that a lookup borrows both and allocates nothing.

use std::hash::{Hash, Hasher};

use papaya::Equivalent;
use sha2::{Digest, Sha256};

/// User keys longer than this are stored as their SHA-256, so a flood of 10 KB keys costs
/// what a flood of short ones does. The digest is unpredictable to whoever picks the key,
/// so no one can aim a long key at another client's state.
pub(crate) const MAX_KEY_LEN: usize = 128;

/// An owned key: `namespace ++ form ++ user key`, with the split points kept.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MapKey {
    bytes: Box<[u8]>,
    ns_len: u32,
}

/// A borrowed key: what a lookup builds on the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyRef<'a> {
    ns: &'a [u8],
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

    pub(crate) fn as_ref<'b>(&'b self, ns: &'b [u8]) -> KeyRef<'b> {
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
        let mut bytes = Vec::with_capacity(self.ns.len() + 1 + self.key.len());
        bytes.extend_from_slice(self.ns);
        bytes.push(self.form);
        bytes.extend_from_slice(self.key);
        MapKey {
            bytes: bytes.into_boxed_slice(),
            ns_len: self.ns.len() as u32,
        }
    }
}

impl MapKey {
    fn parts(&self) -> KeyRef<'_> {
        let ns_len = self.ns_len as usize;
        KeyRef {
            ns: &self.bytes[..ns_len],
            form: self.bytes[ns_len],
            key: &self.bytes[ns_len + 1..],
        }
    }
}

// Both forms hash the same three writes, so a `KeyRef` finds its `MapKey`.
impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.ns);
        state.write_u8(self.form);
        state.write(self.key);
    }
}

impl Hash for MapKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state)
    }
}

impl Equivalent<MapKey> for KeyRef<'_> {
    fn equivalent(&self, key: &MapKey) -> bool {
        let other = key.parts();
        self.form == other.form && self.key == other.key && self.ns == other.ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn borrowed_and_owned_keys_agree() {
        let s = ahash::RandomState::new();
        for (ns, key) in [
            (&b"a"[..], &b"bc"[..]),
            (b"ab", b"c"),
            (b"", b""),
            (b"p", &[0xff; 300]),
        ] {
            let buf = KeyBuf::new(key);
            let r = buf.as_ref(ns);
            let owned = r.to_owned();
            assert_eq!(s.hash_one(r), s.hash_one(&owned));
            assert!(r.equivalent(&owned));
        }
        // Same concatenation, different split: different keys.
        let a = KeyBuf::new(b"bc");
        let b = KeyBuf::new(b"c");
        assert!(!a.as_ref(b"a").equivalent(&b.as_ref(b"ab").to_owned()));
    }

    #[test]
    fn long_keys_are_bounded_and_kept_apart_from_short_ones() {
        let long = vec![b'x'; 10_000];
        let owned = KeyBuf::new(&long).as_ref(b"ns").to_owned();
        assert!(owned.bytes.len() <= 2 + 1 + 32);
        let digest: [u8; 32] = Sha256::digest(&long).into();
        // A client sending the digest itself as its key does not share the long key's state.
        let forged = KeyBuf::new(&digest);
        assert!(!forged.as_ref(b"ns").equivalent(&owned));
    }
}
