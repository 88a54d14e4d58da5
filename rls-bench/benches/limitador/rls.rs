//! The floodwall-rls binary as a process of its own: built from the workspace (release),
//! started on a free port with `--redis`, its CPU time read from `/proc`, and the HTTP/2
//! connections the bench calls it on.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

/// The client the rows call the service with.
pub(crate) type Client = RateLimitServiceClient<Channel>;

/// The binary: `FLOODWALL_RLS_BIN` if set, else built by `cargo build --release -p
/// floodwall-rls` in the workspace this package sits in (a no-op when up to date; the
/// target dir is cargo's usual one: `CARGO_TARGET_DIR` if set, else the workspace's
/// `target/`). The error says why there is none.
pub(crate) fn binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("FLOODWALL_RLS_BIN") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "FLOODWALL_RLS_BIN={} is not a file",
                path.display()
            ))
        };
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    println!("building the floodwall-rls binary: cargo build --release -p floodwall-rls");
    let out = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "floodwall-rls",
            "--bin",
            "floodwall-rls",
        ])
        .arg("--message-format=json-render-diagnostics")
        .arg("--manifest-path")
        .arg(&manifest)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo build failed ({})", out.status));
    }
    // The artifact line of the binary: `..."executable":"<path>"...`.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"compiler-artifact\"") && l.contains("\"floodwall-rls\""))
        .find_map(|l| {
            let rest = l.split("\"executable\":\"").nth(1)?;
            Some(PathBuf::from(rest.split('"').next()?))
        })
        .ok_or_else(|| "cargo named no floodwall-rls executable".to_owned())
}

/// A running floodwall-rls, killed on drop.
pub(crate) struct Rls {
    child: Child,
    pub(crate) addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Rls {
    /// Serves the configuration directory `config` on a free loopback port, counting on
    /// Redis at `url`; waits for its "serving" log line, which names the address.
    pub(crate) fn start(bin: &Path, config: &Path, url: &str) -> Result<Rls, String> {
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(config)
            .args(["--listen", "127.0.0.1:0", "--redis", url])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("log lock").push(line);
            }
        });
        let mut rls = Rls {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let serving = rls
                .log
                .lock()
                .expect("log lock")
                .iter()
                .find(|l| l.contains("serving"))
                .cloned();
            if let Some(line) = serving {
                let addr = line
                    .split_whitespace()
                    .find_map(|f| f.strip_prefix("addr="))
                    .ok_or_else(|| format!("no addr= in {line:?}"))?;
                rls.addr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
                return Ok(rls);
            }
            if let Ok(Some(status)) = rls.child.try_wait() {
                return Err(format!("exited ({status}):\n{}", rls.log()));
            }
            if Instant::now() > deadline {
                return Err(format!("not serving after 30 s:\n{}", rls.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        self.log.lock().expect("log lock").join("\n")
    }

    /// CPU time the process has used, user plus system, in nanoseconds: `/proc/<pid>/stat`'s
    /// `utime` + `stime` (clock ticks; the threads that ended included).
    pub(crate) fn cpu_ns(&self) -> u64 {
        process_cpu_ns(self.child.id()).unwrap_or(0)
    }

    /// `n` HTTP/2 connections to the service, each a client that can be cloned freely
    /// (clones share the connection).
    pub(crate) async fn clients(&self, n: usize) -> Vec<Client> {
        let mut clients = Vec::with_capacity(n);
        for _ in 0..n {
            let channel = Channel::from_shared(format!("http://{}", self.addr))
                .expect("a URI")
                .connect()
                .await
                .unwrap_or_else(|e| panic!("connect to floodwall-rls: {e}"));
            clients.push(RateLimitServiceClient::new(channel));
        }
        clients
    }
}

impl Drop for Rls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 if it cannot be read).
fn ticks_per_s() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// `utime + stime` of process `pid`, in nanoseconds.
fn process_cpu_ns(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, which may hold spaces): field 3 on.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 1_000_000_000 / ticks_per_s())
}
