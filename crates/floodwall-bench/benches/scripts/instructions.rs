//! Instructions per script call, counted by callgrind: the steady measure of what a script
//! costs Redis (`SCRIPTS_INSTRUCTIONS=1 cargo bench -p floodwall-bench --bench scripts`).
//!
//! Timings on these VMs drift by a third within minutes (BENCHMARKS.md §2); the
//! instructions a `redis-server` executes per call do not (about 1 % between runs). The
//! server runs under `valgrind --tool=callgrind` (redis-harness starts it through a wrapper
//! named by `REDIS_HARNESS_SERVER`, in a child of this bench marked by
//! `FLOODWALL_CALLGRIND_CHILD=1`). For each script and case: `FLUSHALL`, [`WARM`]
//! uncounted calls over [`KEYS`] keys, `callgrind_control -z`, [`COUNTED`] calls,
//! `callgrind_control -d`, and the dump's total over the calls. Instructions are not time:
//! a cache miss counts as much as a hit, so a script that looks up its key twice looks
//! cheaper than it runs; the timed table is the one the targets are read on.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use redis_harness::RedisServer;

/// Keys per script: fewer than the timed run's, since a server under callgrind is some 50
/// times slower; enough that a key is not hot in the caches.
const KEYS: usize = 1_000;
/// Uncounted calls before counting, so the keys hold state (a refused key its refusal).
const WARM: u64 = 4_000;
/// Counted calls per script and case.
const COUNTED: u64 = 4_000;

/// Where a counting run keeps the wrapper and callgrind's dumps: the directory of the
/// `redis-server` stand-in that redis-harness is told to start.
pub(crate) struct Wrapper {
    pub(crate) dir: PathBuf,
}

/// What `SCRIPTS_INSTRUCTIONS=1` does first.
pub(crate) enum Start {
    /// This process was started by [`Start::get`] with the wrapper in place: count.
    Count(Wrapper),
    /// The wrapper was written and this bench run again with redis-harness pointed at it
    /// and [`MARKER`] set (environment variables are set for a child, never in this
    /// process); done.
    Ran,
}

impl Start {
    /// Counting in this process, or the run in a child done; `Err` says what is missing.
    pub(crate) fn get() -> Result<Start, String> {
        // The marker, not REDIS_HARNESS_SERVER, which a user may have set for another reason.
        if std::env::var_os(MARKER).is_some() {
            let server = std::env::var_os(CHILD)
                .ok_or_else(|| format!("{MARKER} is set but {CHILD} is not"))?;
            let dir = Path::new(&server)
                .parent()
                .expect("the wrapper's directory");
            return Ok(Start::Count(Wrapper {
                dir: dir.to_owned(),
            }));
        }
        for tool in ["valgrind", "callgrind_control"] {
            if !crate::support::have(tool) {
                return Err(format!("{tool} not found (Debian package valgrind)"));
            }
        }
        let dir = std::env::temp_dir().join(format!("floodwall-callgrind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let script = dir.join("redis-server");
        // `exec`: the server keeps the PID redis-harness knows, which callgrind_control takes.
        let body = format!(
            "#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file={}/cg.%p \
             redis-server \"$@\"\n",
            dir.display()
        );
        let run = std::fs::write(&script, body)
            .and_then(|()| {
                std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            })
            .and_then(|()| {
                Command::new(std::env::current_exe()?)
                    .args(std::env::args_os().skip(1))
                    .env(CHILD, &script)
                    .env(MARKER, "1")
                    .status()
            });
        let _ = std::fs::remove_dir_all(&dir);
        match run {
            Ok(status) if status.success() => Ok(Start::Ran),
            Ok(status) => Err(format!("the counting run failed ({status})")),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// redis-harness starts the `redis-server` this names.
const CHILD: &str = "REDIS_HARNESS_SERVER";
/// Set (to 1) only on the counting child [`Start::get`] starts: how the child knows itself.
const MARKER: &str = "FLOODWALL_CALLGRIND_CHILD";

/// One script to count: its SHA and the arguments after `EVALSHA <sha>`; references have
/// no case and no target.
pub(crate) struct Measured {
    pub(crate) name: &'static str,
    pub(crate) case: Option<&'static str>,
    pub(crate) sha: String,
    /// The script whose uncounted calls fill the keys before counting (usually `sha`).
    pub(crate) warm: String,
    pub(crate) args: Vec<String>,
    pub(crate) target: Option<crate::Target>,
}

impl Measured {
    pub(crate) fn reference(name: &'static str, sha: &str, args: Vec<String>) -> Measured {
        Measured {
            name,
            case: None,
            sha: sha.to_owned(),
            warm: sha.to_owned(),
            args,
            target: None,
        }
    }
}

/// Counts every script and prints the table: instructions per call, over E1's (the first
/// script) and over the fair reference's of the script's case (the references named
/// [`crate::FAIR_WRITE`] and [`crate::FAIR_READ`]; a reference's own row is read over the
/// first).
pub(crate) fn report(server: &RedisServer, wrapper: &Wrapper, scripts: &[Measured]) {
    println!(
        "instructions per call (callgrind; redis-benchmark -c 4 -P 8 -r {KEYS}, {COUNTED} \
         counted calls after FLUSHALL and {WARM} uncounted)"
    );
    let counts: Vec<f64> = scripts
        .iter()
        .map(|m| count(server, &wrapper.dir, m))
        .collect();
    let of = |name: &str| {
        scripts
            .iter()
            .zip(&counts)
            .find(|(m, _)| m.name == name)
            .map_or(f64::NAN, |(_, &c)| c)
    };
    let (e1, write, read) = (counts[0], of(crate::FAIR_WRITE), of(crate::FAIR_READ));
    println!(
        "{:<24} {:<8} {:>9} {:>6} {:>7} {:>8}  target",
        "script", "case", "Ir/call", "xE1", "xref", "/allowd"
    );
    for (m, &ir) in scripts.iter().zip(&counts) {
        let allowed = scripts
            .iter()
            .zip(&counts)
            .find(|(a, _)| a.name == m.name && a.case == Some("allowed"));
        let vs_allowed = match (m.case, allowed) {
            (Some("denied"), Some((_, &a))) => format!("{:.2}", ir / a),
            _ => String::new(),
        };
        let reference = if m.case == Some("denied") {
            read
        } else {
            write
        };
        let target = m.target.map_or(String::new(), |t| {
            t.verdict(m.case == Some("allowed"), ir / e1, ir / reference)
        });
        println!(
            "{:<24} {:<8} {:>9.0} {:>6.2} {:>7.2} {:>8}  {target}",
            m.name,
            m.case.unwrap_or("-"),
            ir,
            ir / e1,
            ir / reference,
            vs_allowed
        );
    }
    println!(
        "xref: over {} for allowed rows and references, over {} for denied rows",
        crate::FAIR_WRITE,
        crate::FAIR_READ
    );
}

/// Instructions per call of one script, as the module docs describe.
fn count(server: &RedisServer, dir: &Path, m: &Measured) -> f64 {
    server.cmd(&["FLUSHALL"]);
    crate::redis_benchmark_with(server, [4, 8, KEYS], &m.warm, &m.args, WARM);
    zero(server);
    benchmark(server, m, COUNTED);
    // redis-benchmark does not read replies: an error would count as a cheap call.
    let stats = crate::support::commandstats(&server.cmd(&["INFO", "commandstats"]));
    let evalsha = stats.get("evalsha").cloned().unwrap_or_default();
    // A field INFO leaves out counts 0.
    let field = |name: &str| -> u64 {
        evalsha
            .get(name)
            .map_or(0, |v| v.parse().expect("an integer in INFO commandstats"))
    };
    assert!(
        field("calls") == COUNTED && field("failed_calls") == 0 && field("rejected_calls") == 0,
        "{}: evalsha {evalsha:?}; INFO errorstats: {}",
        m.name,
        server.cmd(&["INFO", "errorstats"])
    );
    dumped(server, dir).0 / COUNTED as f64
}

/// Zeroes the server's instruction counters and its `INFO commandstats`: what runs next is
/// what the next [`dumped`] counts.
pub(crate) fn zero(server: &RedisServer) {
    callgrind_control(server, "-z");
    server.cmd(&["CONFIG", "RESETSTAT"]);
}

/// The instructions the server ran since the counters were last zeroed, and the dump they
/// were read from (kept until the next call, for a per-function split).
pub(crate) fn dumped(server: &RedisServer, dir: &Path) -> (f64, PathBuf) {
    // A dump goes to `cg.<pid>.<n>`: clear the earlier ones, dump, read the one there is.
    let prefix = format!("cg.{}.", server.pid());
    let dumps = || {
        std::fs::read_dir(dir)
            .expect("the callgrind directory")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .collect::<Vec<_>>()
    };
    for old in dumps() {
        let _ = std::fs::remove_file(old);
    }
    callgrind_control(server, "-d");
    let dump = dumps().pop().expect("callgrind wrote a dump");
    let text = std::fs::read_to_string(&dump).expect("the dump");
    let total: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("a total in the dump");
    (total, dump)
}

fn callgrind_control(server: &RedisServer, option: &str) {
    let status = Command::new("callgrind_control")
        .args([option, &server.pid().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn callgrind_control");
    assert!(status.success(), "callgrind_control {option} failed");
}

/// `n` calls of `EVALSHA <sha> <args>` over [`KEYS`] keys, a few at a time.
fn benchmark(server: &RedisServer, m: &Measured, n: u64) {
    crate::redis_benchmark_with(server, [4, 8, KEYS], &m.sha, &m.args, n);
}
