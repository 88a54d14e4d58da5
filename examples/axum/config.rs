//! The example's configuration, read from the environment (a bad value prints the reason
//! and exits with 2):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `LISTEN` | `127.0.0.1:3000` | address to serve on |
//! | `RATE` | `10/s burst 20` | the quota per client (`100/min`, `10/30s`, `5/s burst 10`) |
//! | `ALGORITHM` | `gcra` | `gcra`, `token_bucket`, `leaky_bucket`, `fixed_window`, `sliding_window`, `sliding_log` |
//! | `TRUSTED_PROXIES` | none | CIDRs of reverse proxies whose `X-Forwarded-For` is believed (`10.0.0.0/8,127.0.0.1`) |
//! | `REDIS_URL` | unset | share limits through Redis instead of memory (build with `--features redis`) |
//! | `REDIS_CLUSTER_URLS` | unset | the same through a Redis Cluster (comma-separated node URLs) |
//! | `POLICY_FILE` | unset | the policies, key and routes from this TOML file instead of `RATE`, `ALGORITHM` and `TRUSTED_PROXIES` (`examples/policies.toml`); `SIGHUP` reloads it |

use std::env;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use floodwall::core::DynStore;
use floodwall::tower::extract::parse_cidrs;
use floodwall::{Algorithm, MemoryStore, Policy, Quota};
use ipnet::IpNet;

const DEFAULT_LISTEN: &str = "127.0.0.1:3000";
const DEFAULT_RATE: &str = "10/s burst 20";

/// Everything read from the environment.
pub(crate) struct Config {
    pub(crate) listen: SocketAddr,
    pub(crate) policy: Policy,
    pub(crate) trusted: Vec<IpNet>,
    pub(crate) store: StoreChoice,
    /// Where the limits come from when set: the other limit variables are then ignored.
    pub(crate) policy_file: Option<PathBuf>,
}

/// Where limits live, as the environment says; connecting waits for the runtime.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum StoreChoice {
    Memory,
    Redis(String),
    Cluster(Vec<String>),
}

impl Config {
    pub(crate) fn from_env() -> Result<Self, String> {
        let listen_text = var("LISTEN")?.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen = listen_text
            .parse()
            .map_err(|e| format!("LISTEN={listen_text:?}: {e} (expected e.g. {DEFAULT_LISTEN})"))?;

        let algorithm_text = var("ALGORITHM")?;
        let algorithm = match &algorithm_text {
            Some(text) => text
                .parse::<Algorithm>()
                .map_err(|e| format!("ALGORITHM={text:?}: {e}"))?,
            None => Algorithm::Gcra,
        };

        let rate_text = var("RATE")?;
        let mut quota = match &rate_text {
            Some(text) => text
                .parse::<Quota>()
                .map_err(|e| format!("RATE={text:?}: {e}"))?,
            None => DEFAULT_RATE
                .parse::<Quota>()
                .map_err(|e| format!("default RATE: {e}"))?,
        };
        // Window algorithms admit `count` per period and refuse a burst: drop the default's
        // burst, but never silently change a RATE the user wrote.
        if rate_text.is_none() && !algorithm.has_burst() && quota.burst() != quota.count() {
            let without = Quota::new(quota.count(), quota.period()).map_err(|e| e.to_string())?;
            println!(
                "note: {} has no burst; using RATE=\"{without}\" instead of the default \"{DEFAULT_RATE}\"",
                algorithm.name()
            );
            quota = without;
        }
        let policy = Policy::new("per-ip", algorithm, quota)
            .map_err(|e| format!("RATE={quota} with ALGORITHM={}: {e}", algorithm.name()))?;

        let trusted = match var("TRUSTED_PROXIES")? {
            Some(list) => {
                parse_cidrs(&list).map_err(|e| format!("TRUSTED_PROXIES={list:?}: {e}"))?
            }
            None => Vec::new(),
        };

        let store = match (var("REDIS_CLUSTER_URLS")?, var("REDIS_URL")?) {
            (Some(urls), _) => StoreChoice::Cluster(
                urls.split(',')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ),
            (None, Some(url)) => StoreChoice::Redis(url),
            (None, None) => StoreChoice::Memory,
        };

        let policy_file = var("POLICY_FILE")?.map(PathBuf::from);
        if policy_file.is_some() {
            for ignored in ["RATE", "ALGORITHM", "TRUSTED_PROXIES"] {
                if var(ignored)?.is_some() {
                    println!("note: {ignored} is ignored: POLICY_FILE sets the limits");
                }
            }
        }

        Ok(Self {
            listen,
            policy,
            trusted,
            store,
            policy_file,
        })
    }
}

/// An environment variable; unset and empty are the same, non-UTF-8 is an error.
fn var(name: &str) -> Result<Option<String>, String> {
    match env::var(name) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v.trim().to_owned())),
        Err(env::VarError::NotPresent) => Ok(None),
        Err(env::VarError::NotUnicode(_)) => Err(format!("{name} is not valid UTF-8")),
    }
}

impl StoreChoice {
    /// Connects the chosen store, with a name to print; a Redis that cannot be reached is
    /// an error at start-up, not a surprise at the first request.
    pub(crate) async fn connect(&self) -> Result<(Arc<dyn DynStore>, String), String> {
        match self {
            StoreChoice::Memory => Ok((Arc::new(MemoryStore::new()), "memory".to_owned())),
            #[cfg(feature = "redis")]
            StoreChoice::Redis(url) => {
                let store = floodwall::redis::RedisStore::builder()
                    .multiplexed(url)
                    .await
                    .map_err(|e| format!("REDIS_URL={url:?}: {e}"))?;
                Ok((Arc::new(store), format!("redis ({url})")))
            }
            #[cfg(feature = "redis")]
            StoreChoice::Cluster(urls) => {
                let store = floodwall::redis::RedisStore::builder()
                    .cluster(urls)
                    .await
                    .map_err(|e| format!("REDIS_CLUSTER_URLS={}: {e}", urls.join(",")))?;
                Ok((
                    Arc::new(store),
                    format!("redis cluster ({} nodes)", urls.len()),
                ))
            }
            #[cfg(not(feature = "redis"))]
            StoreChoice::Redis(_) | StoreChoice::Cluster(_) => {
                Err("REDIS_URL / REDIS_CLUSTER_URLS need the Redis store: \
                     cargo run --example axum --features redis"
                    .to_owned())
            }
        }
    }
}
