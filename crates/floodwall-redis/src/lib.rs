//! floodwall's Redis store: rate-limit state shared by a fleet of servers, decided by one
//! atomic Lua script per check, on the Redis server's clock.
//!
//! ```no_run
//! use floodwall_core::{Policy, StoreExt};
//! use floodwall_redis::RedisStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! let per_ip = Policy::gcra("per-ip", "10/s burst 20".parse()?)?;
//!
//! let decision = store.check(b"203.0.113.7", &per_ip, 1).await?;
//! if !decision.is_allowed() {
//!     println!("retry after {:?}", decision.retry_after);
//! }
//! # Ok(()) }
//! ```
//!
//! `RedisStore` is a [`Store`](floodwall_core::Store): hand it to floodwall-tower's
//! `RateLimitLayer::new(store, policy)` as you would a `MemoryStore`. The connection kinds
//! are on [`RedisStore::builder`] (`.pool(url)`, `.cluster(urls)`, `.sentinel(..)`).
//!
//! - **Every algorithm** of [`floodwall_core`] (GCRA, token bucket, leaky bucket, fixed
//!   window, sliding window, sliding log) runs as a script built from `src/lua/` (the leaky
//!   bucket, GCRA underneath, runs GCRA's), doing the same integer arithmetic in
//!   microseconds as the Rust code: the same decision vectors run against both.
//!   `Policy::redis_cell` answers as redis-cell's `CL.THROTTLE` does.
//! - **Server time**: scripts read `TIME`, so clients' clocks never matter. Redis 7
//!   replicates a script's effects, not the script, so replicas agree.
//! - **One key per decision**, whose hash tag is the user key: every script runs on Redis
//!   Cluster, and users spread over its slots; a batch of checks of several keys runs on
//!   the node serving them all. Every key expires when its state is
//!   worthless; nothing calls `KEYS` or `SCAN`.
//! - **Four connection kinds** behind one [`RedisStore`]: redis-rs's multiplexed
//!   `ConnectionManager`, a `bb8-redis` pool, the async cluster connection, and the
//!   primary Redis Sentinel names, looked up again after a failover.
//! - **Failures** map onto [`floodwall_core::Error`]: timeouts, an unreachable server and
//!   errors Redis answered (a key of the wrong type) are told apart, never a panic, never a
//!   silent allow. The tower layer answers a store failure with 503 by default, or lets
//!   requests through with `fail_mode(FailMode::Open)`.
//!
//! # Key layout
//!
//! ```text
//! <prefix><policy name>:<tag>.<fingerprint>:{<user key>}     user key kept as is
//! <prefix><policy name>:<tag>.<fingerprint>:x{<hex>}          other keys up to 32 bytes
//! <prefix><policy name>:<tag>.<fingerprint>:#{<sha-256 hex>}  longer ones, and the empty key
//! floodwall:per-ip:gcra.a48ce859:{203.0.113.7}                a key given as text
//! floodwall:per-ip:gcra.a48ce859:x{04cb007107}                ClientIp's key of 203.0.113.7
//! ```
//!
//! The prefix defaults to `floodwall:`. The tag names the algorithm (`gcra`, `tb`, `lb`,
//! `fw`, `sw`, `sl`); the fingerprint is a hash of the parameters that shape the algorithm's
//! state, so a changed quota keeps each key's state where it means the same
//! ([`floodwall_core::guide::quota_changes`]) and starts afresh where it would not (a
//! window's period). A user key is kept when it is UTF-8, printable, free of `{`, `}`
//! and whitespace, not empty and at most [`MAX_RAW_KEY_LEN`] bytes; otherwise its hex
//! when it is 1 to [`MAX_HEX_KEY_LEN`] bytes (the tower extractors' binary IP keys and
//! API-key digests), else its SHA-256 (so the empty key's tag is not empty: Redis would
//! hash `{}` as part of the whole key, and its keys would fall in different slots). Each
//! key expires soon after its state is back to fresh: at most a quarter of the algorithm's
//! longest span later, + 1 ms.
//!
//! A policy with a [`Penalty`](floodwall_core::Penalty) adds three keys per user key once
//! it is refused, in the same slot and without fingerprint, so that a ban outlives a new
//! quota ([`RedisStore::penalty_keys`]; the [Redis store guide](guide::redis#penalties-in-redis)):
//!
//! ```text
//! <prefix><policy name>:ban:{<user key>}      the ban's end
//! <prefix><policy name>:strikes:{<user key>}  refusals counted
//! <prefix><policy name>:bans:{<user key>}     bans remembered, for the next to grow
//! ```
//!
//! # Cost per decision
//!
//! A check is one `EVALSHA` round trip (the pool adds a PING per checkout); with
//! [coalescing](RedisStoreBuilder::coalesce), a check that finds a call of its policy in
//! flight (on its node) waits for that call, then for the batch it joined, with checks of
//! any keys: up to two, and Redis runs one script call for the whole batch, with one
//! `TIME`, one `MGET` and a write per key changed. A check of cost 1 on the
//! server's clock sends no argument: the policy's parameters are written into a script of
//! its own ([`written_scripts`](RedisStoreBuilder::written_scripts)). A check the
//! [deny cache](RedisStoreBuilder::deny_cache) (on by default) knows Redis would refuse
//! costs no round trip at all.
//!
//! A policy with a [`Penalty`](floodwall_core::Penalty) runs a script of its own, never
//! coalesced, with three more keys: a check adds a `GET` of its ban; a refusal a `GET` and
//! a `SET` of its strikes; a banned key costs `TIME` + `GET`, or, with the deny cache, one
//! call per [ban hold](RedisStoreBuilder::deny_cache_max_ban_hold). Policies without one
//! run exactly the scripts they ran before penalties existed.
//!
//! `MEMORY USAGE` on Redis 7.0 (jemalloc, 64-bit) for a policy `per-ip` of `100/min` and the
//! user key `203.0.113.7`, e.g. `floodwall:per-ip:gcra.a48ce859:{203.0.113.7}` (44 bytes; a
//! longer key costs its extra bytes), as `tests/server.rs` prints it. Commands are those the
//! script runs; `TIME` is added unless the time is explicit. A denial or a peek only reads;
//! bracketed commands run only when needed.
//!
//! | algorithm | Redis type | memory per key | commands when admitted | when denied |
//! |---|---|---|---|---|
//! | GCRA | string (TAT) | 88 B | TIME GET SET | TIME GET |
//! | token bucket | string (tokens added when full) | 88 B | TIME GET SET | TIME GET |
//! | leaky bucket | string (when empty: GCRA's TAT) | 88 B | TIME GET SET | TIME GET |
//! | fixed window | string (window start in µs + used) | 88 B | TIME GET INCRBY (a new window: SET) | TIME GET |
//! | sliding window | hash, a field per used bucket | 104 B + ~9 B per bucket (184 B for 10) | TIME HGETALL \[HDEL\] HINCRBY \[PEXPIRE\] | TIME HGETALL |
//! | sliding log | sorted set, a member per admitted unit + a TTL-grid marker | 152 B + ~36 B per unit (3,672 B for 100) | TIME ZCOUNT \[ZSCORE EXISTS\] ZADD \[PEXPIRE ZREMRANGEBYSCORE\] | TIME ZCOUNT ZRANGEBYSCORE \[ZRANGE\] |
//!
//! A booking of the next slot ([`StoreExt::reserve`](floodwall_core::StoreExt::reserve), for the
//! tower layer's `wait`; GCRA and the buckets only) is one `EVALSHA` of a script of
//! its own, never coalesced: TIME GET, then when it waits GET SET GET at the slot (when
//! admitted at once: SET GET; beyond the wait: nothing more). Giving a slot back
//! ([`StoreExt::cancel`](floodwall_core::StoreExt::cancel)) is one more: GET \[SET .. KEEPTTL\].
//!
//! Why the scripts are shaped so (TTLs renewed on a grid, answers packed into one integer,
//! the sliding log's marker), the key formats' history, and why coalesced batches decide
//! exactly as single calls: the [Redis store guide](guide::redis). How in-flight leases
//! are timed and renewed: the [in-flight guide](guide::in_flight).
//!
//! # Differences from the memory store
//!
//! None in decisions, except after a clock stepped back: the memory store tidies its
//! sliding window (it moves to the newest bucket seen) where the script writes nothing. A
//! later check with an earlier clock may then count, in Redis, buckets the memory store has
//! dropped: Redis is stricter there, never looser. The sliding log drops entries on the
//! same grid in both, so it decides alike even then (`tests/model.rs` steps its clock back).

mod adjust;
mod all;
mod builder;
mod call;
mod coalesce;
mod connection;
mod error;
pub mod guide;
mod key;
mod kind;
mod lease;
#[cfg(feature = "metrics")]
pub mod metrics;
mod op;
mod renew;
mod reply;
mod reserve;
mod script;
mod sentinel;
mod slots;
mod stats;
mod store;
mod unpack;

pub use builder::RedisStoreBuilder;
pub use error::BuildError;
pub use key::{MAX_HEX_KEY_LEN, MAX_RAW_KEY_LEN};
pub use script::{penalized_script_for, script_for};
pub use stats::RedisStats;
pub use store::RedisStore;

/// The redis-rs crate this store is built on, to configure a connection for
/// [`RedisStoreBuilder::from_connection_manager`] or
/// [`RedisStoreBuilder::from_cluster`].
///
/// Using it ties your code to the redis-rs major version floodwall-redis depends on (1.x):
/// a floodwall release that moves to redis-rs 2 is a breaking release for you too. The
/// URL-based builders ([`RedisStoreBuilder::multiplexed`], [`pool`](RedisStoreBuilder::pool),
/// [`cluster`](RedisStoreBuilder::cluster)) need none of it.
pub use redis;
