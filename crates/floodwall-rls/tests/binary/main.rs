//! The `floodwall-rls` binary run as a process, on a free loopback port (`--listen
//! 127.0.0.1:0`, the port read from its startup log) with a configuration in a temporary
//! directory, called through envoy-types' generated client. serving.rs: decisions,
//! health, exit codes; reload.rs: SIGHUP and SIGTERM; redis.rs: two processes on one
//! Redis; faults.rs: Redis killed and restarted under load, `--fail-mode`; metrics.rs:
//! `--metrics`; examples.rs: the shipped examples/rls/ configuration; python.rs: Python's
//! grpcio with Envoy's generated code (xds-protos) as the client.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

#[path = "../common/envoy.rs"]
mod envoy;
use envoy::{OK, OVER, descriptor, request};

mod examples;
mod faults;
mod metrics;
mod python;
mod redis;
mod reload;
mod serving;

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_floodwall-rls");

/// How long a process gets to start serving, to log a line, or to exit.
const PATIENCE: Duration = Duration::from_secs(20);

/// The variables the binary reads: cleared, so that a developer's own do not leak in.
const ENV: [&str; 13] = [
    "RLS_CONFIG",
    "LISTEN",
    "REDIS_URL",
    "REDIS_CLUSTER_URLS",
    "REDIS_SENTINEL_URLS",
    "REDIS_SENTINEL_SERVICE",
    "RESPONSE_HEADERS",
    "SHUTDOWN_GRACE",
    "REDIS_TIMEOUT_MS",
    "REDIS_PREFIX",
    "FAIL_MODE",
    "INSTANCES",
    "METRICS_LISTEN",
];

/// A fresh directory under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "floodwall-rls-bin-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// Writes `name` in the directory, replacing it whole (a rename), so that a reload
    /// never reads half a file.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        let staged = self.0.join(format!(".{name}.tmp"));
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, &path).unwrap();
        path
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The command, with the binary's variables cleared.
fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args);
    for var in ENV {
        command.env_remove(var);
    }
    command.env("RUST_LOG", "info");
    command
}

/// A process of the binary that serves, killed on drop.
struct Rls {
    child: Child,
    addr: SocketAddr,
    /// Its log (stderr) so far, one line each.
    log: Arc<Mutex<Vec<String>>>,
}

impl Rls {
    /// Serves `config` (a file or directory) on a free port, with `extra` arguments.
    fn start(config: &Path, extra: &[&str]) -> Rls {
        let config = config.display().to_string();
        let mut args = vec!["--config", &config, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        let mut rls = Rls {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        let line = rls.wait_for_log("serving");
        let addr = line
            .split_whitespace()
            .find_map(|field| field.strip_prefix("addr="))
            .unwrap_or_else(|| panic!("no addr= in {line:?}"));
        rls.addr = addr.parse().unwrap();
        rls
    }

    /// The first log line containing `needle`, waiting for it; panics with the log if the
    /// process exits first or it does not come.
    fn wait_for_log(&mut self, needle: &str) -> String {
        self.wait_for_nth_log(needle, 1)
    }

    /// The `n`th log line containing `needle` (from 1), waiting for it.
    fn wait_for_nth_log(&mut self, needle: &str, n: usize) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let found = {
                let log = self.log.lock().unwrap();
                log.iter()
                    .filter(|l| l.contains(needle))
                    .nth(n - 1)
                    .cloned()
            };
            if let Some(line) = found {
                return line;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "exited ({status}) before logging {needle:?}:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in the log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The whole log so far.
    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Sends `signal` (`HUP`, `TERM`) with kill(1).
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args(["-s", signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -s {signal} failed");
    }

    /// Whether the process is still running.
    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits for the process to exit.
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "still running:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.addr))
            .await
            .unwrap()
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }
}

impl Drop for Rls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The answer to one descriptor of `domain`, cost 1.
async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    entries: &[(&str, &str)],
) -> RateLimitResponse {
    client
        .should_rate_limit(request(domain, vec![descriptor(entries)]))
        .await
        .unwrap_or_else(|s| panic!("{s:?}"))
        .into_inner()
}

/// How many of `n` calls for `entries` of domain `api` are admitted, one after another.
async fn admitted(
    client: &mut RateLimitServiceClient<Channel>,
    entries: &[(&str, &str)],
    n: usize,
) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        let response = ask(client, "api", entries).await;
        assert!([OK, OVER].contains(&response.overall_code), "{response:?}");
        ok += usize::from(response.overall_code == OK);
    }
    ok
}

/// One domain `api` with key `user` limited to `quota` an hour.
fn quota_config(quota: u32) -> String {
    format!(
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {{unit: hour, requests_per_unit: {quota}}}\n"
    )
}
