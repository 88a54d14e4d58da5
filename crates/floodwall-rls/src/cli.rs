//! The binary's command line (not part of the library): what to serve, where, and on which
//! store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{ArgGroup, Parser};
use floodwall_core::{DynStore, MemoryStore};
use floodwall_redis::{BuildError, RedisStore};

/// floodwall as Envoy's rate-limit service (RLS v3, gRPC): envoyproxy/ratelimit's YAML
/// configuration, decided with every floodwall algorithm, in memory or on Redis.
///
/// SIGHUP reloads the configuration (a file that does not load changes nothing);
/// SIGTERM and Ctrl-C stop it gracefully. Logs go to stderr, filtered by RUST_LOG
/// (default `info`).
#[derive(Debug, Parser)]
#[command(name = "floodwall-rls", version)]
#[command(group(ArgGroup::new("store").args(["redis", "redis_cluster", "sentinel"]).multiple(false)))]
pub(crate) struct Args {
    /// A YAML file (one domain), or a directory of `*.yaml` / `*.yml` files (one domain each).
    #[arg(long, env = "RLS_CONFIG", value_name = "FILE_OR_DIR")]
    pub(crate) config: PathBuf,

    /// The address the gRPC server listens on (port 0 picks a free one, logged at startup).
    #[arg(
        long,
        env = "LISTEN",
        default_value = "127.0.0.1:8081",
        value_name = "ADDR"
    )]
    pub(crate) listen: SocketAddr,

    /// Counts on one Redis node, shared by every instance pointed at it
    /// (`redis://[user:password@]host[:port][/db]`). Without a Redis option the counts are
    /// in this process's memory.
    #[arg(long, env = "REDIS_URL", value_name = "URL", hide_env_values = true)]
    pub(crate) redis: Option<String>,

    /// Counts on a Redis Cluster, reached through any of these nodes (comma-separated).
    #[arg(
        long,
        env = "REDIS_CLUSTER_URLS",
        value_name = "URL,URL,...",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub(crate) redis_cluster: Option<Vec<String>>,

    /// Counts on the Redis primary that these sentinels (comma-separated) name for
    /// `--service`.
    #[arg(
        long,
        env = "REDIS_SENTINEL_URLS",
        value_name = "URL,URL,...",
        value_delimiter = ',',
        requires = "service",
        hide_env_values = true
    )]
    pub(crate) sentinel: Option<Vec<String>>,

    /// The sentinels' name for the primary (`sentinel monitor <name> ...`).
    #[arg(
        long,
        env = "REDIS_SENTINEL_SERVICE",
        value_name = "NAME",
        requires = "sentinel"
    )]
    pub(crate) service: Option<String>,

    /// Answers carry the IETF `RateLimit` and `RateLimit-Policy` headers (and `Retry-After`
    /// when over the limit) for Envoy to add to the response.
    #[arg(long, env = "RESPONSE_HEADERS")]
    pub(crate) response_headers: bool,

    /// After SIGTERM or Ctrl-C, how long requests in flight and open connections get to
    /// finish (a client that keeps its connection open past it is cut off), in seconds.
    #[arg(
        long,
        env = "SHUTDOWN_GRACE",
        default_value_t = 10,
        value_name = "SECONDS"
    )]
    pub(crate) shutdown_grace: u64,
}

impl Args {
    /// The store the options name, connected: Redis (one node, a cluster or through
    /// sentinels), else memory.
    pub(crate) async fn store(&self) -> Result<Arc<dyn DynStore>, BuildError> {
        let builder = RedisStore::builder();
        let store: Arc<dyn DynStore> = if let Some(url) = &self.redis {
            Arc::new(builder.multiplexed(url).await?)
        } else if let Some(urls) = &self.redis_cluster {
            Arc::new(builder.cluster(urls).await?)
        } else if let (Some(urls), Some(service)) = (&self.sentinel, &self.service) {
            Arc::new(builder.sentinel(urls, service).await?)
        } else {
            Arc::new(MemoryStore::new())
        };
        Ok(store)
    }

    /// The store, for the startup log; credentials in URLs are not logged.
    pub(crate) fn store_name(&self) -> String {
        if let Some(url) = &self.redis {
            format!("redis {}", redact(url))
        } else if let Some(urls) = &self.redis_cluster {
            let urls: Vec<String> = urls.iter().map(|u| redact(u)).collect();
            format!("redis cluster {}", urls.join(","))
        } else if let (Some(urls), Some(service)) = (&self.sentinel, &self.service) {
            let urls: Vec<String> = urls.iter().map(|u| redact(u)).collect();
            format!("redis sentinel {} service {service}", urls.join(","))
        } else {
            "memory".to_owned()
        }
    }
}

/// `url` without the `user:password@` part.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("floodwall-rls").chain(args.iter().copied()))
    }

    #[test]
    fn the_redis_options_exclude_each_other() {
        assert!(parse(&["--config", "c", "--redis", "redis://a/"]).is_ok());
        assert!(
            parse(&[
                "--config",
                "c",
                "--redis",
                "redis://a/",
                "--redis-cluster",
                "redis://b/"
            ])
            .is_err()
        );
        assert!(parse(&["--config", "c", "--sentinel", "redis://s/"]).is_err());
        let sentinel = parse(&[
            "--config",
            "c",
            "--sentinel",
            "redis://s1/,redis://s2/",
            "--service",
            "m",
        ])
        .unwrap();
        assert_eq!(sentinel.sentinel.unwrap().len(), 2);
    }

    #[test]
    fn credentials_are_not_logged() {
        assert_eq!(redact("redis://u:p@h:1/0"), "redis://***@h:1/0");
        assert_eq!(redact("redis://h:1/"), "redis://h:1/");
    }
}
