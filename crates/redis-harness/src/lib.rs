//! Start and stop real `redis-server` processes for tests.
//!
//! floodwall's Redis backend must be tested against a real server: Lua
//! scripting, key expiry, cluster slot routing and crash behaviour are
//! exactly what a mock gets wrong. This crate (internal, never published)
//! gives test suites:
//!
//! - [`RedisServer`]: one `redis-server` on a free `127.0.0.1` port with its
//!   own temp directory, which can be killed, restarted on the same port,
//!   paused, and sent commands;
//! - [`RedisCluster`]: N masters joined into a Redis Cluster;
//! - [`RedisSentinel`]: a primary, its replicas and Redis Sentinels watching them,
//!   whose primary can be killed to watch a failover;
//! - [`key_slot`]: the cluster hash slot of a key, computed locally;
//! - [`query`] and [`Reply`]: a minimal blocking RESP2 client.
//!
//! It never uses the default port 6379, so it cannot disturb a developer's
//! own Redis. Every process is killed when its handle is dropped, including
//! when a test panics. It depends on std only.
//!
//! `redis-server` is looked up on `PATH`, or taken from the
//! `REDIS_HARNESS_SERVER` environment variable. Redis 7.0 or later is
//! required (`CLUSTER ADDSLOTSRANGE`, `cluster-port`, `CLIENT PAUSE ALL`).
//!
//! ```no_run
//! let mut server = redis_harness::RedisServer::start();
//! assert_eq!(server.cmd(&["PING"]), "PONG");
//! server.kill();
//! server.restart();
//! assert_eq!(server.cmd(&["SET", "k", "v"]), "OK");
//! ```

mod cluster;
mod resp;
mod sentinel;
mod server;
mod slot;

pub use cluster::RedisCluster;
pub use resp::{Reply, query};
pub use sentinel::RedisSentinel;
pub use server::RedisServer;
pub use slot::{SLOT_COUNT, key_slot};
