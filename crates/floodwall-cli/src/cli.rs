//! The command line: `simulate`, `inspect`, `reset` and `unban`, as clap reads them.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use floodwall_core::Algorithm;

/// floodwall's operator tool: see what a policy does to traffic before shipping it
/// (`simulate`), and look at or act on one key of a live policy in Redis (`inspect`,
/// `reset`, `unban`).
///
/// Exit codes: 0 done, 2 for input that is not valid or a Redis that cannot be reached
/// (one line on stderr names the argument or the line), 1 for any other failure.
#[derive(Debug, Parser)]
#[command(name = "floodwall", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Replays traffic through each algorithm in memory, on a manual clock (no waiting),
    /// and writes a chart (SVG) or every request's fate (CSV), with a summary.
    Simulate(SimulateArgs),
    /// Shows a key's state as the store holds it, without charging it: remaining,
    /// time until reset, and under a penalty its ban, strikes and remembered bans.
    Inspect(Target),
    /// Forgets a key's quota state under the policy (a ban stays: see `unban`).
    Reset(Target),
    /// Lifts a key's ban under the policy and forgets its strikes (its quota state stays).
    Unban(Target),
}

/// `floodwall simulate`.
#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// The quota, as floodwall reads it: `10/s`, `10/s burst 20`, `100/min`.
    #[arg(long, value_name = "QUOTA")]
    pub(crate) policy: String,

    /// An algorithm to simulate (repeat for several, each in a panel of its own):
    /// gcra, token_bucket, leaky_bucket, fixed_window, sliding_window, sliding_log.
    #[arg(
        long = "algorithm",
        value_name = "ALGORITHM",
        default_value = "gcra",
        value_parser = parse_algorithm
    )]
    pub(crate) algorithms: Vec<Algorithm>,

    /// The traffic: `steady:RATE` (`steady:25/s`), `bursts:N/EVERY[+OFFSET]`
    /// (`bursts:30/5s+900ms`: 30 at once every 5 s), `ramp:FROM-TO/UNIT` (`ramp:0-50/s`,
    /// rising over --duration), `poisson:RATE` (seeded by --seed), or a file of
    /// timestamps, one a line (`file:PATH`, or a PATH; see --timestamps).
    #[arg(long, value_name = "SPEC_OR_FILE")]
    pub(crate) traffic: String,

    /// How long synthetic traffic lasts (`10s`, `2min`); a file lasts as long as it does.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub(crate) duration: String,

    /// How a traffic file writes its timestamps: `seconds` (decimal, since any origin),
    /// `millis`, `micros`, `rfc3339` (the first field of the line that is one) or `clf`
    /// (an access log's `[10/Oct/2000:13:55:36 -0700]`).
    #[arg(long, value_enum, default_value_t = TimestampFormat::Seconds)]
    pub(crate) timestamps: TimestampFormat,

    /// The seed of `poisson:` traffic: the same seed draws the same requests.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// The chart's time step: requests are counted per bucket of this length (default:
    /// a tenth of the policy's period, at least 1 ms).
    #[arg(long, value_name = "DURATION")]
    pub(crate) bucket: Option<String>,

    /// `svg`: a chart, one panel per algorithm on one time axis, and the summary table;
    /// `csv`: one row per request (its time and, per algorithm, 1 if admitted).
    #[arg(long, value_enum, default_value_t = OutputFormat::Svg)]
    pub(crate) format: OutputFormat,

    /// Where the chart or CSV goes (default: stdout, and the summary to stderr).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
}

/// How a traffic file writes its timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TimestampFormat {
    /// Decimal seconds (`1700000000.25`, `0.9`).
    Seconds,
    /// Whole milliseconds.
    Millis,
    /// Whole microseconds.
    Micros,
    /// `2024-05-01T12:00:00.250Z` or with an offset.
    Rfc3339,
    /// The Common/Combined Log Format's `[01/May/2024:12:00:00 +0000]`.
    Clf,
}

/// What `simulate` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// A chart.
    Svg,
    /// A table of every request.
    Csv,
}

/// The key, the policy and the store that `inspect`, `reset` and `unban` act on.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("store").args(["redis", "redis_cluster", "sentinel"]).required(true).multiple(false)
))]
pub(crate) struct Target {
    /// The key as the layer's extractor reads it from a request: a client's IP (the
    /// default), a header's value (--header, --bearer, or the policy file's `[key]`), or
    /// the key's bytes in hex with --raw-hex.
    pub(crate) key: String,

    /// The policy's name: the store keeps each key's state under it.
    #[arg(long, value_name = "NAME")]
    pub(crate) policy: String,

    /// Takes the policy (its algorithm, quota and penalty) and the key's kind from the
    /// layer's policy file, as the layer reads it.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["quota", "algorithm", "penalty", "salt", "ipv4_prefix", "ipv6_prefix"],
        required_unless_present = "quota"
    )]
    pub(crate) policy_file: Option<PathBuf>,

    /// Without a policy file: the policy's quota (`10/s burst 20`).
    #[arg(long, value_name = "QUOTA")]
    pub(crate) quota: Option<String>,

    /// Without a policy file: the policy's algorithm (default gcra).
    #[arg(long, value_name = "ALGORITHM", value_parser = parse_algorithm, requires = "quota")]
    pub(crate) algorithm: Option<Algorithm>,

    /// Without a policy file: the policy's penalty, as the policy file writes it
    /// (`after=5,within=10min,ban=15min[,growth=2,max_ban=1day,forget_after=1day]`). A
    /// ban is seen only through a policy that has its penalty.
    #[arg(long, value_name = "PENALTY", requires = "quota")]
    pub(crate) penalty: Option<String>,

    /// The key is this header's value (keyed by its SHA-256, as `HeaderKey` does); with
    /// a policy file whose `[key]` reads a header, name that header here.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["bearer", "raw_hex"])]
    pub(crate) header: Option<String>,

    /// The key is a bearer token (`Authorization: Bearer <KEY>`), as `HeaderKey::bearer`.
    #[arg(long, conflicts_with = "raw_hex")]
    pub(crate) bearer: bool,

    /// Without a policy file: the salt the layer hashes before a header's value.
    #[arg(long, value_name = "SALT")]
    pub(crate) salt: Option<String>,

    /// IPv4 clients are keyed by their first bits (as the layer's `ipv4_prefix`).
    #[arg(long, value_name = "BITS", conflicts_with = "raw_hex")]
    pub(crate) ipv4_prefix: Option<u8>,

    /// IPv6 clients are keyed by their first bits (default 64, as the layer).
    #[arg(long, value_name = "BITS", conflicts_with = "raw_hex")]
    pub(crate) ipv6_prefix: Option<u8>,

    /// The key is its bytes, written in hex, as `inspect` shows them (`04cb007107`: the
    /// layer's key for 203.0.113.7).
    #[arg(long)]
    pub(crate) raw_hex: bool,

    #[command(flatten)]
    pub(crate) redis: RedisArgs,
}

/// Which Redis, as floodwall-rls takes it.
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct RedisArgs {
    /// One Redis node (`redis://[user:password@]host[:port][/db]`).
    #[arg(long, env = "REDIS_URL", value_name = "URL", hide_env_values = true)]
    pub(crate) redis: Option<String>,

    /// A Redis Cluster, reached through any of these nodes (comma-separated).
    #[arg(
        long,
        env = "REDIS_CLUSTER_URLS",
        value_name = "URL,URL,...",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub(crate) redis_cluster: Option<Vec<String>>,

    /// The Redis primary these sentinels (comma-separated) name for --service.
    #[arg(
        long,
        env = "REDIS_SENTINEL_URLS",
        value_name = "URL,URL,...",
        value_delimiter = ',',
        requires = "service",
        hide_env_values = true
    )]
    pub(crate) sentinel: Option<Vec<String>>,

    /// The sentinels' name for the primary.
    #[arg(
        long,
        env = "REDIS_SENTINEL_SERVICE",
        value_name = "NAME",
        requires = "sentinel"
    )]
    pub(crate) service: Option<String>,

    /// The key prefix the application's store uses (default `floodwall:`).
    #[arg(long, env = "REDIS_PREFIX", value_name = "PREFIX")]
    pub(crate) redis_prefix: Option<String>,

    /// The most one Redis call may take, connecting included, in milliseconds (default
    /// 1000).
    #[arg(
        long,
        env = "REDIS_TIMEOUT_MS",
        value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub(crate) redis_timeout: Option<u64>,
}

/// An algorithm by its name, with floodwall-core's own error for an unknown one.
fn parse_algorithm(s: &str) -> Result<Algorithm, String> {
    s.parse::<Algorithm>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("floodwall").chain(args.iter().copied()))
    }

    #[test]
    fn a_target_needs_one_policy_source_and_one_store() {
        let ok = ["inspect", "1.2.3.4", "--policy", "p", "--quota", "1/s"];
        assert!(parse(&[&ok[..], &["--redis", "redis://h/"]].concat()).is_ok());
        assert!(parse(&ok).is_err(), "no store");
        let both = ["--redis", "redis://h/", "--redis-cluster", "redis://a/"];
        assert!(parse(&[&ok[..], &both].concat()).is_err());
        let no_policy = ["reset", "k", "--policy", "p", "--redis", "redis://h/"];
        assert!(parse(&no_policy).is_err(), "neither a file nor a quota");
        let file_and_quota = [
            "unban",
            "k",
            "--policy",
            "p",
            "--policy-file",
            "f.toml",
            "--quota",
            "1/s",
            "--redis",
            "redis://h/",
        ];
        assert!(parse(&file_and_quota).is_err());
    }

    #[test]
    fn algorithms_repeat_and_default_to_gcra() {
        let Command::Simulate(one) = parse(&["simulate", "--policy", "1/s", "--traffic", "x"])
            .unwrap()
            .command
        else {
            panic!("not simulate")
        };
        assert_eq!(one.algorithms, [Algorithm::Gcra]);
        let many = parse(&[
            "simulate",
            "--policy",
            "1/s",
            "--traffic",
            "x",
            "--algorithm",
            "fixed_window",
            "--algorithm",
            "sliding-log",
        ])
        .unwrap();
        let Command::Simulate(many) = many.command else {
            panic!("not simulate")
        };
        assert_eq!(
            many.algorithms,
            [Algorithm::FixedWindow, Algorithm::SlidingLog]
        );
    }
}
