//! Redis Cluster key hashing: CRC16 (XMODEM) of the key, or of its
//! `{hash tag}`, modulo 16384.

/// Number of hash slots in a Redis Cluster.
///
/// Exposed so tests can iterate over every slot or size a slot table
/// without repeating the magic number.
pub const SLOT_COUNT: u16 = 16384;

/// CRC16-CCITT (XMODEM) lookup table: polynomial 0x1021, initial value 0,
/// no reflection, no final XOR. This is the variant Redis uses in
/// `src/crc16.c`.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16 (XMODEM) of `data`.
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &byte| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ byte)]
    })
}

/// The part of `key` that Redis Cluster hashes.
///
/// If the key contains a `{` followed later by a `}` with at least one byte
/// between them, only the bytes between the *first* `{` and the first `}`
/// after it are hashed; otherwise the whole key is. So `{user1}.a` hashes
/// `user1`, while `foo{}{bar}` and `{}x` hash the whole key.
fn hashed_part(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    let rest = &key[open + 1..];
    match rest.iter().position(|&b| b == b'}') {
        Some(len) if len > 0 => &rest[..len],
        _ => key,
    }
}

/// The Redis Cluster hash slot (0..16384) that `key` belongs to.
///
/// Tests use this to route commands to the right node themselves, or to
/// build keys that land on a chosen node, without asking the server
/// (`CLUSTER KEYSLOT`) for every key. It follows Redis's own rules exactly,
/// including the `{hash tag}` rule, and works on arbitrary bytes.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hashed_part(key)) % SLOT_COUNT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_xmodem_check_value() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn known_slots_from_the_redis_docs() {
        // Values from the Redis Cluster specification / CLUSTER KEYSLOT docs.
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo{hash_tag}"), 2515);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
    }

    #[test]
    fn hash_tag_rules() {
        assert_eq!(hashed_part(b"{user1}.a"), b"user1");
        assert_eq!(hashed_part(b"a{user1}b{x}"), b"user1");
        assert_eq!(hashed_part(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hashed_part(b"{}x"), b"{}x");
        assert_eq!(hashed_part(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hashed_part(b"foo{bar"), b"foo{bar");
        assert_eq!(key_slot(b"{user1}.a"), key_slot(b"{user1}.b"));
        assert_eq!(key_slot(b"{user1}.a"), key_slot(b"user1"));
    }

    #[test]
    fn every_slot_is_in_range() {
        for i in 0..10_000u32 {
            assert!(key_slot(&i.to_le_bytes()) < SLOT_COUNT);
        }
    }
}
