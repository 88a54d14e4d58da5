//! Prototypes of a cheaper batch script, for the batch rows (`batch.rs`): each is the text
//! the store sends (captured, `store.rs`) with a few lines replaced, so that a row differs
//! from the store's by that change alone, and floodwall-redis stays as it is until a change
//! has earned its place there. Every replaced line must be in the text: a variant whose
//! edit no longer applies fails here rather than count the unchanged script.

use floodwall::redis::redis;

/// Lines replaced: each `(from, to)` applies to every place `from` occurs.
type Edits = &'static [(&'static str, &'static str)];

/// The store's write before `INCRBY` (2026-11-27): `SET .. KEEPTTL` of the whole state
/// within a TTL cell. What the store's change saved, measured on today's text.
const KEEPTTL: Edits = &[(
    "if type(redis.pcall('INCRBY', key, string.format('%d', tat - old))) ~= 'number' then\n    \
     redis.call('SET', key, string.format('%d', tat), 'KEEPTTL')\n  end",
    "redis.call('SET', key, string.format('%d', tat), 'KEEPTTL')",
)];

/// The state as 8 binary bytes (a double, exact for µs times) written over in place with
/// `SETRANGE` within a TTL cell: no `strtod` to read it, no `string.format('%d')` to write
/// it, no decimal check. A change of the stored format: keys written before would need a
/// length check or new names.
const BINARY: Edits = &[
    (
        "tat = tonumber(stored)",
        "tat = #stored == 8 and struct.unpack('>d', stored)",
    ),
    (
        "if type(redis.pcall('INCRBY', key, string.format('%d', tat - old))) ~= 'number' then\n    \
         redis.call('SET', key, string.format('%d', tat), 'KEEPTTL')\n  end",
        "redis.call('SETRANGE', key, '0', struct.pack('>d', tat))",
    ),
    (
        "redis.call('SET', key, string.format('%d', tat), 'PX',",
        "redis.call('SET', key, struct.pack('>d', tat), 'PX',",
    ),
];

/// No `remaining` worked out per check (the batch answers `reset` alone; src/reply.rs works
/// out the rest), and each answer written where it is made rather than by a closure call.
const INLINE: Edits = &[
    (
        "allowed, remaining, retry, reset = 1, math.floor((tolerance - ahead) / interval), 0, ahead",
        "allowed, retry, reset = 1, 0, ahead",
    ),
    (
        "    out[sent] = answer()\n",
        "    if allowed == 1 then out[sent] = reset else out[sent] = -1 - reset end\n",
    ),
];

/// `text` with each `(from, to)` of `edits` applied to every place `from` occurs.
fn edited(text: &str, name: &str, edits: &[Edits]) -> String {
    edits
        .iter()
        .flat_map(|e| e.iter())
        .fold(text.to_owned(), |t, (from, to)| {
            assert!(
                t.contains(from),
                "variant {name}: `{from}` is not in the batch script"
            );
            t.replace(from, to)
        })
}

/// The variants of the store's batch script `text`: each row's name, its text, and whether
/// its per-function split is printed.
pub(crate) fn all(text: &str) -> Vec<(&'static str, String, bool)> {
    let variants: [(&str, &[Edits], bool); 4] = [
        ("before: SET .. KEEPTTL", &[KEEPTTL], false),
        ("variant: answers inline", &[INLINE], false),
        ("variant: binary + SETRANGE", &[BINARY], false),
        (
            "variant: binary + SETRANGE + inline",
            &[BINARY, INLINE],
            true,
        ),
    ];
    variants
        .into_iter()
        .map(|(name, edits, split)| (name, edited(text, name, edits), split))
        .collect()
}

/// Checks that each variant (by SHA) answers as the store's batch script `real` does, on
/// the same history of batches with explicit times on keys of its own: a quota of 5 in a
/// burst (1 ms apart), two keys checked 4 and 3 times per batch, so that some checks are
/// refused, some refill, and a key's state is carried from batch to batch. The rows count
/// admissions only (every answer >= 0), which a variant that misread its state would give
/// too.
pub(crate) fn agree(con: &mut redis::Connection, real: &str, variants: &[(&str, String)]) {
    const NOWS: [u64; 6] = [0, 500, 3_000, 3_100, 9_000, 9_100];
    let answers = |sha: &str, con: &mut redis::Connection| -> Vec<Vec<i64>> {
        let keys = [format!("agree:{sha}:a"), format!("agree:{sha}:b")];
        NOWS.iter()
            .map(|now| {
                redis::cmd("EVALSHA")
                    .arg(sha)
                    .arg(2)
                    .arg(&keys)
                    // 7 checks; interval 1000, tolerance 5000 (µs); now; 2 keys, 4 and 3 checks.
                    .arg(&[7, 1_000, 5_000, 0, 1_700_000_000_000_000 + now, 2, 4, 3])
                    .query(con)
                    .unwrap_or_else(|e| panic!("a batch of {sha}: {e}"))
            })
            .collect()
    };
    let expected = answers(real, con);
    assert!(
        expected.iter().flatten().any(|&a| a < 0),
        "the history refuses some checks"
    );
    for (name, sha) in variants {
        assert_eq!(answers(sha, con), expected, "{name} answers otherwise");
    }
}
