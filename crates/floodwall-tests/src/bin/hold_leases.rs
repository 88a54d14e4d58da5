//! A process that takes in-flight leases in Redis and holds them (renewing them) until it
//! is killed: what `tests/in_flight_redis.rs` kills with SIGKILL, to see a dead process's
//! slots come free.
//!
//! `hold_leases <redis url> <limit name> <max> <lease ms> <count>`: takes `count` slots of
//! key `k`, prints `held <count>` on a line of its own, then waits forever.

use std::io::Write;
use std::time::Duration;

use floodwall::redis::RedisStore;
use floodwall::{ConcurrencyLimit, StoreExt};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, name, max, lease_ms, count] = args.as_slice() else {
        return Err("usage: hold_leases <url> <name> <max> <lease ms> <count>".into());
    };
    let limit = ConcurrencyLimit::new(name.as_str(), max.parse()?)?
        .with_lease(Duration::from_millis(lease_ms.parse()?))?;
    let store = RedisStore::connect(url).await?;
    let mut held = Vec::new();
    for _ in 0..count.parse::<usize>()? {
        match store.acquire(b"k", &limit).await?.permit() {
            Some(permit) => held.push(permit),
            None => return Err("no slot left".into()),
        }
    }
    println!("held {}", held.len());
    std::io::stdout().flush()?;
    std::future::pending::<()>().await;
    Ok(())
}
