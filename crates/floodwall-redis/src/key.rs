//! The Redis key of a (policy, user key) pair: `<prefix><policy name>:<tag>.<fingerprint>:{<user key>}`,
//! the user key as is, as `x{<hex>}` (up to [`MAX_HEX_KEY_LEN`] bytes) or as
//! `#{<sha-256 hex>}`; and of a penalty's ban, strikes and remembered bans
//! ([`penalty_keys`]), in the same hash tag and without fingerprint. Why each form, and
//! the formats' history: [`crate::guide::redis`] ("Keys and their formats", "Penalties in
//! Redis").

use std::fmt::{self, Write as _};

use floodwall_core::{Parameters, Policy};
use sha2::{Digest, Sha256};

use crate::kind::Layout;

/// User keys longer than this (bytes) are stored as their SHA-256, as in the memory store.
pub const MAX_RAW_KEY_LEN: usize = 128;

/// Keys that cannot be used as they are, up to this many bytes, are stored as their hex
/// (at most 64 digits, as long as a SHA-256 in hex); longer ones as their SHA-256.
pub const MAX_HEX_KEY_LEN: usize = 32;

/// The longest prefix accepted.
pub(crate) const MAX_PREFIX_LEN: usize = 64;

/// Whether `prefix` can start every key: short, printable, and free of `{` and `}`, which
/// would make the prefix the hash tag and put every key in one cluster slot.
pub(crate) fn valid_prefix(prefix: &str) -> bool {
    prefix.len() <= MAX_PREFIX_LEN && prefix.chars().all(plain)
}

/// A character a key can hold as it is.
fn plain(c: char) -> bool {
    !c.is_control() && !c.is_whitespace() && c != '{' && c != '}'
}

fn raw_ok(key: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(key).ok()?;
    ((1..=MAX_RAW_KEY_LEN).contains(&s.len()) && s.chars().all(plain)).then_some(s)
}

/// The tag, the stored format's version and the parameters that shape the state
/// ([`Parameters::shape`]) that name `params`' keys (see [`Spec`](crate::kind::Spec)); a
/// placeholder for an algorithm without a script, whose checks fail before any key is
/// read.
fn tag_and_numbers(params: Parameters) -> (&'static str, u8, [u64; 2]) {
    match Layout::of(params) {
        Some(layout) => {
            let spec = layout.kind.spec();
            (spec.tag, spec.format, params.shape())
        }
        None => ("x", 1, [0; 2]),
    }
}

/// FNV-1a, 32 bits: stable across processes, versions and machines, as a fleet sharing keys
/// needs (std's hashers promise none of that).
fn fnv1a(tag: &str, format: u8, numbers: &[u64; 2]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let bytes = tag
        .bytes()
        .chain([format])
        .chain(numbers.iter().flat_map(|n| n.to_le_bytes()));
    for b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The Redis key holding `user_key`'s state under `policy`.
pub(crate) fn redis_key(prefix: &str, policy: &Policy, user_key: &[u8]) -> Vec<u8> {
    let (tag, format, numbers) = tag_and_numbers(policy.parameters());
    let fingerprint = fnv1a(tag, format, &numbers);
    key_of(
        prefix,
        policy.name(),
        format_args!(":{tag}.{fingerprint:08x}:"),
        user_key,
    )
}

/// `<prefix><name><middle>` and the user key, tagged.
fn key_of(prefix: &str, name: &str, middle: fmt::Arguments<'_>, user_key: &[u8]) -> Vec<u8> {
    let mut out = String::with_capacity(prefix.len() + name.len() + 24 + 68);
    out.push_str(prefix);
    out.push_str(name);
    let _ = out.write_fmt(middle);
    push_tagged(&mut out, user_key);
    out.into_bytes()
}

/// The Redis key (a sorted set) holding the leases of `user_key`'s requests in flight
/// under the in-flight limit `name`: `<prefix><name>:lease:{<user key>}`, the user key
/// written as for a rate key, so it is the hash tag. `lease` has no `.` where rate keys have
/// their algorithm's tag and fingerprint, so no rate key can be a lease key. Neither the
/// limit nor the lease time is in it: processes disagreeing on them (a rolling deploy)
/// still count the same requests.
pub(crate) fn lease_key(prefix: &str, name: &str, user_key: &[u8]) -> Vec<u8> {
    key_of(prefix, name, format_args!(":lease:"), user_key)
}

/// The keys of `user_key`'s ban, refusals counted and bans remembered under the policy
/// `name` (see the module docs), in the order the penalty's script declares them after the
/// rate key.
pub(crate) fn penalty_keys(prefix: &str, name: &str, user_key: &[u8]) -> [Vec<u8>; 3] {
    ["ban", "strikes", "bans"].map(|what| key_of(prefix, name, format_args!(":{what}:"), user_key))
}

/// `{<user key>}`, `x{<hex>}` or `#{<sha-256 hex>}` (see the module docs): never an empty
/// tag.
fn push_tagged(out: &mut String, user_key: &[u8]) {
    match raw_ok(user_key) {
        Some(raw) => {
            out.push('{');
            out.push_str(raw);
        }
        None if (1..=MAX_HEX_KEY_LEN).contains(&user_key.len()) => {
            out.push_str("x{");
            push_hex(out, user_key);
        }
        None => {
            out.push_str("#{");
            push_hex(out, &Sha256::digest(user_key));
        }
    }
    out.push('}');
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slots::hash_tag;

    fn policy(q: &str) -> Policy {
        Policy::gcra("api", q.parse().unwrap()).unwrap()
    }

    #[test]
    fn plain_keys_are_kept_and_the_rest_hashed() {
        let p = policy("10/s");
        let k = String::from_utf8(redis_key("fw:", &p, b"203.0.113.7")).unwrap();
        assert!(k.starts_with("fw:api:gcra."), "{k}");
        assert!(k.ends_with(":{203.0.113.7}"), "{k}");
        // Short keys that cannot be kept: their hex.
        let k = String::from_utf8(redis_key("fw:", &p, &[4, 203, 0, 113, 7])).unwrap();
        assert!(k.ends_with(":x{04cb007107}"), "{k}");
        for bad in [&b"a b"[..], b"x{y}", b"\xff\xfe", b"tab\t", &[0xab; 32]] {
            let k = String::from_utf8(redis_key("fw:", &p, bad)).unwrap();
            let hex = k.split_once(":x{").unwrap().1;
            assert_eq!(hex.len(), 2 * bad.len() + 1, "{k}");
        }
        // Longer ones: their SHA-256.
        for bad in [&[0xab; 33][..], &[b'x'; 129], &[b' '; 40]] {
            let k = String::from_utf8(redis_key("fw:", &p, bad)).unwrap();
            let hashed = k.split_once(":#{").unwrap().1;
            assert_eq!(hashed.len(), 64 + 1, "{k}");
        }
        assert!(raw_ok(&[b'x'; 128]).is_some());
    }

    #[test]
    fn no_two_forms_meet() {
        let p = policy("10/s");
        let long = vec![b'x'; 200];
        let hashed = redis_key("", &p, &long);
        let tail = String::from_utf8(hashed.clone()).unwrap();
        let digest = tail.split_once(":#{").unwrap().1.trim_end_matches('}');
        assert_ne!(redis_key("", &p, digest.as_bytes()), hashed);
        assert_ne!(redis_key("", &p, format!("#{{{digest}").as_bytes()), hashed);
        let short = redis_key("", &p, b"\x01");
        assert_ne!(redis_key("", &p, b"01"), short);
        assert_ne!(redis_key("", &p, b"x{01"), short);
    }

    /// The SHA-256 of the empty key, in hex.
    const SHA_OF_EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    /// User keys of every form, and keys that read like another key's form.
    fn tricky_keys() -> Vec<Vec<u8>> {
        let listed = format!("|{{|}}|{{}}|x{{}}|#{{}}|x|#|{SHA_OF_EMPTY}|x{{00}}|00|0| |alice");
        let mut keys: Vec<Vec<u8>> = listed.split('|').map(|k| k.as_bytes().to_vec()).collect();
        keys.extend([
            vec![0],
            vec![0, 0],
            vec![0xff; 32],
            vec![0xff; 33],
            vec![b'x'; 129],
        ]);
        keys
    }

    #[test]
    fn every_user_key_the_empty_one_included_has_a_hash_tag_of_its_own() {
        let p = policy("10/s");
        let mut seen = std::collections::HashMap::new();
        for user in tricky_keys() {
            let rate = redis_key("fw:", &p, &user);
            let tag = hash_tag(&rate).unwrap_or_else(|| panic!("{user:?}: no tag in {rate:?}"));
            // Every other key of the user key has the same tag, so the same slot.
            let [ban, strikes, bans] = penalty_keys("fw:", p.name(), &user);
            for other in [&lease_key("fw:", "api", &user), &ban, &strikes, &bans] {
                assert_eq!(hash_tag(other), Some(tag), "{user:?}: {other:?}");
            }
            // No two user keys share a Redis key.
            if let Some(before) = seen.insert(rate.clone(), user.clone()) {
                panic!("{before:?} and {user:?} both map to {rate:?}");
            }
        }
        // The empty key is no other key's: it takes the hashed form.
        let empty = String::from_utf8(redis_key("", &p, b"")).unwrap();
        assert!(empty.ends_with(&format!(":#{{{SHA_OF_EMPTY}}}")), "{empty}");
    }

    #[test]
    fn a_quota_change_keeps_keys_unless_it_reshapes_the_state() {
        use floodwall_core::Algorithm;
        let key = |a: Algorithm, q: &str| {
            let p = Policy::new("api", a, q.parse().unwrap()).unwrap();
            redis_key("", &p, b"k")
        };
        // Rate, burst and count shape nothing: the same key.
        let gcra = Algorithm::Gcra;
        assert_eq!(key(gcra, "10/s"), key(gcra, "20/s burst 5"));
        let lb = Algorithm::LeakyBucket;
        assert_eq!(key(lb, "10/s"), key(lb, "1/min burst 3"));
        let tb = Algorithm::TOKEN_BUCKET;
        assert_eq!(key(tb, "10/s"), key(tb, "10/s burst 30"));
        let fw = Algorithm::FixedWindow;
        assert_eq!(key(fw, "10/s"), key(fw, "99/s"));
        let sw = Algorithm::SLIDING_WINDOW;
        assert_eq!(key(sw, "10/s"), key(sw, "99/s"));
        let sl = Algorithm::SlidingLog;
        assert_eq!(key(sl, "10/s"), key(sl, "99/s"));
        // What the state means: a new key.
        assert_ne!(key(tb, "10/s"), key(tb, "20/s"), "the tick");
        assert_ne!(key(fw, "10/s"), key(fw, "10/min"), "the period");
        assert_ne!(key(sw, "10/s"), key(sw, "10/min"), "the buckets' width");
        assert_ne!(key(sl, "10/s"), key(sl, "10/min"), "the period");
        assert_ne!(key(gcra, "10/s"), key(lb, "10/s"), "the algorithm");
        // Rounding shapes nothing either.
        let cell = Policy::redis_cell("api", 9, 10, std::time::Duration::from_secs(1)).unwrap();
        assert_eq!(redis_key("", &cell, b"k"), key(gcra, "10/s"));
    }

    #[test]
    fn a_new_state_format_means_new_keys() {
        let fw = Policy::fixed_window("api", "10/s".parse().unwrap()).unwrap();
        let (tag, format, numbers) = tag_and_numbers(fw.parameters());
        assert_eq!((tag, format), ("fw", 3));
        let key = String::from_utf8(redis_key("", &fw, b"k")).unwrap();
        let new = format!("{:08x}", fnv1a(tag, format, &numbers));
        let old = format!("{:08x}", fnv1a(tag, 2, &numbers));
        assert!(key.contains(&new) && !key.contains(&old), "{key}");
    }

    #[test]
    fn keys_stay_where_they_are() {
        // A release that moved keys would lose every state (as the one that keyed them by
        // their shape did, once): the crate docs' example, and one key per algorithm.
        let p = Policy::gcra("per-ip", "100/min".parse().unwrap()).unwrap();
        let k = redis_key("floodwall:", &p, b"203.0.113.7");
        assert_eq!(k, b"floodwall:per-ip:gcra.a48ce859:{203.0.113.7}");
        let expected = [
            "p:gcra.a48ce859:{k}",
            "p:tb.5dae160d:{k}",
            "p:lb.b3855bab:{k}",
            "p:fw.f5e03336:{k}",
            "p:sw.5d9e528b:{k}",
            "p:sl.407a45e3:{k}",
        ];
        for (a, expected) in floodwall_core::Algorithm::all().into_iter().zip(expected) {
            let p = Policy::new("p", a, "10/s".parse().unwrap()).unwrap();
            let k = String::from_utf8(redis_key("", &p, b"k")).unwrap();
            assert_eq!(k, expected, "{a}");
        }
    }

    #[test]
    fn lease_keys_share_the_user_key_forms_and_never_meet_rate_keys() {
        let k = String::from_utf8(lease_key("fw:", "uploads", b"203.0.113.7")).unwrap();
        assert_eq!(k, "fw:uploads:lease:{203.0.113.7}");
        let hex = String::from_utf8(lease_key("fw:", "u", &[4, 203, 0, 113, 7])).unwrap();
        assert_eq!(hex, "fw:u:lease:x{04cb007107}");
        let long = String::from_utf8(lease_key("fw:", "u", &[0xab; 40])).unwrap();
        assert_eq!(long.split_once(":#{").unwrap().1.len(), 65);
        let p = Policy::gcra("uploads", "10/s".parse().unwrap()).unwrap();
        let rate = String::from_utf8(redis_key("fw:", &p, b"203.0.113.7")).unwrap();
        assert_ne!(rate, k);
        assert!(!rate.contains(":lease:"));
    }

    #[test]
    fn penalty_keys_share_the_rate_keys_slot_and_outlive_a_new_quota() {
        let p = policy("10/s");
        let [ban, strikes, bans] = penalty_keys("fw:", p.name(), b"203.0.113.7");
        assert_eq!(ban, b"fw:api:ban:{203.0.113.7}");
        assert_eq!(strikes, b"fw:api:strikes:{203.0.113.7}");
        assert_eq!(bans, b"fw:api:bans:{203.0.113.7}");
        for user in [&b"203.0.113.7"[..], &[4, 203, 0, 113, 7], &[0xab; 40]] {
            let slot = crate::slots::slot_of(&redis_key("fw:", &p, user));
            let again = crate::slots::slot_of(&redis_key("fw:", &policy("20/s"), user));
            assert_eq!(slot, again);
            for k in penalty_keys("fw:", p.name(), user) {
                assert_eq!(crate::slots::slot_of(&k), slot, "{k:?}");
                let untagged = k.split(|&b| b == b'{').next().unwrap();
                assert!(!untagged.contains(&b'.'), "{k:?}");
            }
        }
    }

    #[test]
    fn prefixes_with_braces_are_refused() {
        assert!(valid_prefix("floodwall:"));
        assert!(valid_prefix(""));
        assert!(!valid_prefix("{fw}:"));
        assert!(!valid_prefix("a b"));
    }
}
