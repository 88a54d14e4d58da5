//! The binary's command line (not part of the library): what to serve, where, and on which
//! store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ArgGroup, CommandFactory, Parser, ValueEnum};
use floodwall_core::resilience::Fallback;
use floodwall_core::{DynStore, MemoryStore, Store};
use floodwall_redis::{BuildError, Deployment, RedisStore};

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

    /// The most one Redis call may take, connecting included, in milliseconds (default
    /// 1000); past it the request is answered as --fail-mode says.
    #[arg(
        long,
        env = "REDIS_TIMEOUT_MS",
        value_name = "MS",
        requires = "store",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub(crate) redis_timeout: Option<u64>,

    /// Every Redis key starts with this (default `floodwall:`), so that several services
    /// can share one Redis: at most 64 printable characters, no braces or whitespace.
    #[arg(long, env = "REDIS_PREFIX", value_name = "PREFIX", requires = "store")]
    pub(crate) redis_prefix: Option<String>,

    /// What a request gets while Redis fails: `unavailable`, a gRPC UNAVAILABLE (Envoy's
    /// filter then applies its failure_mode_deny), or `local`, a decision in this
    /// process's memory with 1/--instances of each quota until Redis answers again.
    #[arg(
        long,
        env = "FAIL_MODE",
        value_enum,
        default_value_t = FailMode::Unavailable,
        requires_if("local", "store")
    )]
    pub(crate) fail_mode: FailMode,

    /// With --fail-mode local: how many instances share each quota. Alone, each enforces
    /// 1/N of it (at least 1 request), so that the fleet stays about as limited as with
    /// Redis. Default 1.
    #[arg(
        long,
        env = "INSTANCES",
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub(crate) instances: Option<u32>,

    /// Serves Prometheus text on http://ADDR/metrics: decisions by domain, descriptor key
    /// and result, and the store's latency (port 0 picks a free one, logged at startup).
    #[arg(long, env = "METRICS_LISTEN", value_name = "ADDR")]
    pub(crate) metrics: Option<SocketAddr>,

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

/// What a request gets while Redis fails (`--fail-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FailMode {
    /// A gRPC UNAVAILABLE, within the Redis timeout.
    Unavailable,
    /// A decision in this process's memory, with a share of each quota.
    Local,
}

impl Args {
    /// The command line, with what clap cannot check itself checked: exits 2 with usage
    /// on an error, as clap does.
    pub(crate) fn read() -> Args {
        let args = Args::parse();
        if let Err(e) = args.check() {
            e.exit();
        }
        args
    }

    /// `--instances` means something with `--fail-mode local` only.
    fn check(&self) -> Result<(), clap::Error> {
        if self.instances.is_some() && self.fail_mode != FailMode::Local {
            return Err(Args::command().error(
                ErrorKind::ArgumentConflict,
                "--instances shares each quota for --fail-mode local only",
            ));
        }
        Ok(())
    }

    /// The store the options name, connected: Redis (one node, a cluster or through
    /// sentinels) with its timeout, prefix and fail mode, else memory.
    pub(crate) async fn store(&self) -> Result<Arc<dyn DynStore>, BuildError> {
        let mut builder = RedisStore::builder();
        if let Some(ms) = self.redis_timeout {
            builder = builder.timeout(Duration::from_millis(ms));
        }
        if let Some(prefix) = &self.redis_prefix {
            builder = builder.prefix(prefix.clone());
        }
        Ok(match self.deployment() {
            Some(redis) => self.failing(builder.connect(&redis).await?),
            None => Arc::new(MemoryStore::new()),
        })
    }

    /// The Redis the options name, if any.
    fn deployment(&self) -> Option<Deployment> {
        if let Some(url) = &self.redis {
            Some(Deployment::Node(url.clone()))
        } else if let Some(urls) = &self.redis_cluster {
            Some(Deployment::Cluster(urls.clone()))
        } else if let (Some(urls), Some(service)) = (&self.sentinel, &self.service) {
            Some(Deployment::Sentinel {
                sentinels: urls.clone(),
                service: service.clone(),
            })
        } else {
            None
        }
    }

    /// The shared store as `--fail-mode` has it fail: its errors passed on (the service
    /// answers UNAVAILABLE), or decided locally by a [`Fallback`] with `1/instances` of
    /// each quota.
    fn failing<S: Store + 'static>(&self, store: S) -> Arc<dyn DynStore> {
        match self.fail_mode {
            FailMode::Unavailable => Arc::new(store),
            FailMode::Local => Arc::new(Fallback::local(store, self.instances.unwrap_or(1))),
        }
    }

    /// `--fail-mode`, for the startup log (`none` for the memory store, which does not
    /// fail).
    pub(crate) fn fail_mode_name(&self) -> String {
        if self.redis.is_none() && self.redis_cluster.is_none() && self.sentinel.is_none() {
            return "none".to_owned();
        }
        match self.fail_mode {
            FailMode::Unavailable => "unavailable".to_owned(),
            FailMode::Local => format!("local/{}", self.instances.unwrap_or(1)),
        }
    }

    /// The store, for the startup log; credentials in URLs are not logged.
    pub(crate) fn store_name(&self) -> String {
        match self.deployment() {
            Some(redis @ Deployment::Node(_)) => format!("redis {redis}"),
            Some(redis @ Deployment::Cluster(_)) => format!("redis cluster {redis}"),
            Some(redis @ Deployment::Sentinel { .. }) => format!("redis sentinel {redis}"),
            None => "memory".to_owned(),
        }
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
    fn the_fail_mode_and_redis_options_need_redis() {
        let redis = ["--config", "c", "--redis", "redis://a/"];
        let local =
            parse(&[&redis[..], &["--fail-mode", "local", "--instances", "3"]].concat()).unwrap();
        assert_eq!(
            (local.fail_mode, local.instances, local.check().is_ok()),
            (FailMode::Local, Some(3), true)
        );
        let defaults = parse(&redis).unwrap();
        assert_eq!(defaults.fail_mode, FailMode::Unavailable);
        // The memory store has no Redis to fail, time out or prefix.
        for extra in [
            &["--fail-mode", "local"][..],
            &["--redis-timeout", "100"],
            &["--redis-prefix", "p:"],
        ] {
            let error = parse(&[&["--config", "c"][..], extra].concat()).unwrap_err();
            assert_eq!(
                error.kind(),
                ErrorKind::MissingRequiredArgument,
                "{extra:?}"
            );
        }
        assert!(parse(&["--config", "c", "--fail-mode", "unavailable"]).is_ok());
        assert!(parse(&[&redis[..], &["--redis-timeout", "0"]].concat()).is_err());
        assert!(
            parse(&[&redis[..], &["--fail-mode", "local", "--instances", "0"]].concat()).is_err()
        );
        let stray = parse(&[&redis[..], &["--instances", "2"]].concat()).unwrap();
        assert_eq!(
            stray.check().unwrap_err().kind(),
            ErrorKind::ArgumentConflict
        );
    }

    #[test]
    fn credentials_are_not_logged() {
        let args = parse(&["--config", "c", "--redis", "redis://u:p@h:1/0"]).unwrap();
        assert_eq!(args.store_name(), "redis redis://***@h:1/0");
    }
}
