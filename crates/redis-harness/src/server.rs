//! One real `redis-server` child process on a free loopback port.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::resp::{Reply, query, query_with_timeout};

/// How long a server gets to answer PING after it was spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many fresh ports `start` tries when the chosen one was taken.
const START_ATTEMPTS: usize = 5;
/// How long `restart` keeps retrying while its port is still in use.
const RESTART_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Lines of the server log quoted in failure messages.
const LOG_TAIL_LINES: usize = 40;

/// The `redis-server` binary: `$REDIS_HARNESS_SERVER`, else `redis-server`
/// from `PATH`.
fn server_bin() -> OsString {
    std::env::var_os("REDIS_HARNESS_SERVER").unwrap_or_else(|| "redis-server".into())
}

/// A fresh, empty directory under the system temp dir, unique across
/// processes (pid), threads (counter) and runs (nanos).
fn unique_dir() -> io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir =
        std::env::temp_dir().join(format!("redis-harness-{}-{n}-{nanos}", std::process::id()));
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Ports the OS considers free on 127.0.0.1 right now, all distinct.
///
/// The listeners are held until all ports are chosen so the OS cannot hand
/// out the same port twice, then dropped so the server can bind them. Some
/// other process may still grab one in between: callers retry on failure.
pub(crate) fn free_ports(count: usize) -> io::Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// The last `LOG_TAIL_LINES` lines of a file, or a note saying why not.
fn tail(path: &Path, from: u64) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let start = usize::try_from(from).unwrap_or(0).min(bytes.len());
            let text = String::from_utf8_lossy(&bytes[start..]);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

/// Why a freshly spawned server did not become ready.
enum NotReady {
    /// The process exited (bad config, port in use, ...).
    Exited(ExitStatus),
    /// It kept running but never answered PING as itself.
    TimedOut,
    /// We could not even ask the OS about the child.
    Io(io::Error),
}

impl From<io::Error> for NotReady {
    fn from(e: io::Error) -> Self {
        NotReady::Io(e)
    }
}

/// Poll until the server on `port` answers PING *and* reports our child's
/// PID in `INFO server`: the PID check makes sure we are not talking to some
/// other server that won a race for the port.
fn wait_ready(child: &mut Child, port: u16, timeout: Duration) -> Result<(), NotReady> {
    let deadline = Instant::now() + timeout;
    let pid_line = format!("process_id:{}", child.id());
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(NotReady::Exited(status));
        }
        let probe = Duration::from_millis(500);
        if let Ok(Reply::Status(pong)) = query_with_timeout(port, &["PING"], probe)
            && pong == "PONG"
            && let Ok(info) = query_with_timeout(port, &["INFO", "server"], probe)
            && info.to_string().lines().any(|l| l.trim() == pid_line)
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(NotReady::TimedOut);
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// The server log since byte `from`, plus its stderr if any.
fn log_tail_in(dir: &Path, from: u64) -> String {
    let mut out = tail(&dir.join("redis.log"), from);
    let stderr = tail(&dir.join("stderr.log"), 0);
    if !stderr.trim().is_empty() {
        out.push_str("\n--- stderr ---\n");
        out.push_str(&stderr);
    }
    out
}

/// Spawn `redis-server` with `args` in `dir` and wait until it is ready on
/// `port`. On failure the child is killed and reaped.
fn spawn_and_wait(dir: &Path, args: &[String], port: u16) -> Result<Child, NotReady> {
    let stderr = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("stderr.log"))?;
    let mut child = Command::new(server_bin())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot spawn {:?} ({e}); is redis-server installed \
                     (apt-get install redis-server) or REDIS_HARNESS_SERVER set?",
                    server_bin()
                ),
            )
        })?;
    match wait_ready(&mut child, port, READY_TIMEOUT) {
        Ok(()) => Ok(child),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// Turn a startup failure into an error that quotes the log.
fn not_ready_error(
    e: NotReady,
    dir: &Path,
    port: u16,
    args: &[String],
    log_start: u64,
) -> io::Error {
    let what = match e {
        NotReady::Exited(status) => format!("exited with {status}"),
        NotReady::TimedOut => format!("did not answer PING within {READY_TIMEOUT:?}"),
        NotReady::Io(e) => return e,
    };
    io::Error::other(format!(
        "redis-server on port {port} {what} (args {args:?}); log tail:\n{}",
        log_tail_in(dir, log_start)
    ))
}

/// What kind of process [`RedisServer::try_start_inner`] starts.
pub(crate) enum Mode<'a> {
    /// A standalone data node.
    Plain,
    /// A cluster node, with a bus port.
    Cluster,
    /// A Redis Sentinel (`redis-server <dir>/sentinel.conf --sentinel`) whose config file
    /// holds this (the `sentinel monitor ...` lines). Sentinel rewrites that file as it
    /// learns the topology, so it lives in the server's own directory.
    Sentinel(&'a str),
}

/// A real `redis-server` process, owned by a test, on `127.0.0.1:port()`.
///
/// Tests of Redis-backed rate limiting need a real server (Lua scripts,
/// `PEXPIRE` semantics, cluster redirects, crashes) that no mock reproduces.
/// Each instance gets its own free port and its own temp directory, so
/// tests can run in parallel and never touch a developer's own Redis on
/// 6379. Dropping it kills the process and deletes the directory, so a
/// failing assertion still cleans up.
///
/// The server runs without persistence (`save ""`, `appendonly no`), so
/// [`restart`](Self::restart) comes back empty, like a crashed cache node.
/// `DEBUG` is enabled for local connections so tests can `DEBUG SLEEP`.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    /// The cluster bus port, for cluster nodes.
    bus_port: Option<u16>,
    dir: PathBuf,
    /// Full `redis-server` arguments, reused verbatim by `restart`.
    args: Vec<String>,
    /// `None` once killed. A mutex so `is_running(&self)` can reap it.
    child: Mutex<Option<Child>>,
    /// PID of the most recently started process.
    pid: u32,
}

impl RedisServer {
    /// Start a server with the default test configuration.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be spawned or does not answer PING within
    /// 10 s; the message includes the server's log tail. Use
    /// [`try_start_with`](Self::try_start_with) to handle that instead.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Start a server with extra `redis-server` arguments appended to the
    /// defaults, e.g. `&["--maxmemory", "10mb"]`. Later arguments win, so
    /// these can override the defaults too.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with(args: &[&str]) -> RedisServer {
        Self::try_start_with(args).unwrap_or_else(|e| panic!("redis-harness: {e}"))
    }

    /// Like [`start_with`](Self::start_with), but returns an error instead
    /// of panicking, for suites that want to skip when Redis is missing.
    pub fn try_start_with(args: &[&str]) -> io::Result<RedisServer> {
        Self::try_start_inner(args, &Mode::Plain)
    }

    /// Start a process of `mode` (a data node, a cluster node with its own bus port, or a
    /// sentinel). Retries with fresh ports if the chosen one was taken.
    pub(crate) fn try_start_inner(extra: &[&str], mode: &Mode<'_>) -> io::Result<RedisServer> {
        let dir = unique_dir()?;
        let result = Self::start_in(&dir, extra, mode);
        if result.is_err() {
            let _ = fs::remove_dir_all(&dir);
        }
        result
    }

    fn start_in(dir: &Path, extra: &[&str], mode: &Mode<'_>) -> io::Result<RedisServer> {
        let log = dir.join("redis.log");
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let ports = free_ports(if matches!(mode, Mode::Cluster) { 2 } else { 1 })?;
            let port = ports[0];
            let bus_port = ports.get(1).copied();
            let mut args: Vec<String> = Vec::new();
            if let Mode::Sentinel(config) = mode {
                // A sentinel needs a writable config file, named first.
                let conf = dir.join("sentinel.conf");
                fs::write(&conf, config)?;
                args.extend([conf.display().to_string(), "--sentinel".to_owned()]);
            }
            args.extend(
                [
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--daemonize",
                    "no",
                    "--dir",
                    &dir.display().to_string(),
                    "--logfile",
                    &log.display().to_string(),
                ]
                .map(String::from),
            );
            if !matches!(mode, Mode::Sentinel(_)) {
                // A data node's settings: no persistence, DEBUG for local clients.
                args.extend(
                    [
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--enable-debug-command",
                        "local",
                    ]
                    .map(String::from),
                );
            }
            if let Some(bus) = bus_port {
                args.extend(
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "2000",
                        "--cluster-port",
                        &bus.to_string(),
                    ]
                    .map(String::from),
                );
            }
            args.extend(extra.iter().map(|a| a.to_string()));

            let log_start = file_len(&log);
            match spawn_and_wait(dir, &args, port) {
                Ok(child) => {
                    return Ok(RedisServer {
                        port,
                        bus_port,
                        dir: dir.to_path_buf(),
                        args,
                        pid: child.id(),
                        child: Mutex::new(Some(child)),
                    });
                }
                Err(NotReady::Exited(status)) => {
                    let log_text = log_tail_in(dir, log_start);
                    if !log_text.contains("in use") {
                        return Err(io::Error::other(format!(
                            "redis-server exited with {status} during startup on port {port} \
                             (args {args:?}); log tail:\n{log_text}"
                        )));
                    }
                    // The port was taken between our probe and its bind:
                    // try again with fresh ports.
                    last_error = log_text;
                }
                Err(e) => return Err(not_ready_error(e, dir, port, &args, log_start)),
            }
        }
        Err(io::Error::other(format!(
            "redis-server could not get a free port after {START_ATTEMPTS} attempts; \
             last log tail:\n{last_error}"
        )))
    }

    /// The last lines of the server log (and its stderr), for assertion
    /// messages when a test sees the server misbehave.
    pub fn log_tail(&self) -> String {
        log_tail_in(&self.dir, 0)
    }

    fn lock_child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The TCP port the server listens on; stays the same across
    /// [`restart`](Self::restart).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster bus port, for cluster nodes (`None` otherwise). Needed
    /// for `CLUSTER MEET`, since it is not the usual `port + 10000`.
    pub fn cluster_bus_port(&self) -> Option<u16> {
        self.bus_port
    }

    /// The socket address, for clients that take one.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Connection URL for this server, `redis://127.0.0.1:PORT/`, as the
    /// `redis` crate and most clients accept.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// PID of the most recently started `redis-server` process, e.g. to
    /// send it `SIGSTOP`. It may have exited: see
    /// [`is_running`](Self::is_running).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's private working directory (`dir`), where its log and,
    /// for cluster nodes, `nodes.conf` live.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the server log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// Whether the process is still alive (not killed and not crashed).
    pub fn is_running(&self) -> bool {
        let mut child = self.lock_child();
        match child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(Ok(Some(_))) => {
                *child = None;
                false
            }
            Some(Err(_)) | None => false,
        }
    }

    /// Kill the server with SIGKILL and wait for it to exit: a crash, with
    /// no chance to save or say goodbye to clients. Does nothing if it is
    /// not running. The port then refuses connections until
    /// [`restart`](Self::restart).
    pub fn kill(&mut self) {
        if let Some(mut child) = self
            .child
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the server again on the same port, directory and arguments,
    /// and wait until it answers PING. If it is still running it is killed
    /// first, so this also simulates crash-and-recover. Retries for a few
    /// seconds while the port is still in use.
    ///
    /// Data is gone (no persistence); a cluster node keeps its identity
    /// and slots through `nodes.conf`.
    ///
    /// # Panics
    ///
    /// If the server does not come back within about 10 s, with its log
    /// tail in the message.
    pub fn restart(&mut self) {
        self.try_restart()
            .unwrap_or_else(|e| panic!("redis-harness: restart failed: {e}"));
    }

    /// Like [`restart`](Self::restart), but returns an error instead of
    /// panicking.
    pub fn try_restart(&mut self) -> io::Result<()> {
        self.kill();
        let deadline = Instant::now() + RESTART_TIMEOUT;
        let log_start = file_len(&self.log_path());
        loop {
            match spawn_and_wait(&self.dir, &self.args, self.port) {
                Ok(child) => {
                    self.pid = child.id();
                    *self.lock_child() = Some(child);
                    return Ok(());
                }
                Err(NotReady::Exited(_))
                    if Instant::now() < deadline
                        && log_tail_in(&self.dir, log_start).contains("in use") =>
                {
                    thread::sleep(Duration::from_millis(100));
                }
                Err(e) => {
                    return Err(not_ready_error(
                        e, &self.dir, self.port, &self.args, log_start,
                    ));
                }
            }
        }
    }

    /// Make the server stop serving clients for `ms` milliseconds
    /// (`CLIENT PAUSE ms ALL`), to test timeouts against a live but
    /// unresponsive server without killing it.
    ///
    /// # Panics
    ///
    /// If the server cannot be reached or refuses the command.
    pub fn pause(&self, ms: u64) {
        let reply = self.try_cmd(&["CLIENT", "PAUSE", &ms.to_string(), "ALL"]);
        match reply {
            Ok(Reply::Status(ok)) if ok == "OK" => {}
            other => panic!(
                "redis-harness: CLIENT PAUSE on port {} failed: {other:?}",
                self.port
            ),
        }
    }

    /// Run one command and return the reply as text, the way
    /// `redis-cli --raw` prints it (see [`Reply`]'s `Display`): `OK`,
    /// `-1`, the value, or the error message. For quick checks such as
    /// `FLUSHALL`, `SCRIPT FLUSH`, `TTL key` or `INFO commandstats`.
    ///
    /// # Panics
    ///
    /// If the server cannot be reached. A Redis error reply does *not*
    /// panic: it is returned as text; use [`try_cmd`](Self::try_cmd) to
    /// tell errors apart.
    pub fn cmd(&self, args: &[&str]) -> String {
        self.try_cmd(args)
            .unwrap_or_else(|e| {
                panic!(
                    "redis-harness: command {args:?} on port {} failed: {e}",
                    self.port
                )
            })
            .to_string()
    }

    /// Run one command (binary-safe arguments) and return the decoded reply.
    pub fn try_cmd<A: AsRef<[u8]>>(&self, args: &[A]) -> io::Result<Reply> {
        query(self.port, args)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
