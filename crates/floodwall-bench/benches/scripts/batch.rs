//! What a coalesced batch costs Redis per CHECK, against the floor of its commands and
//! against redis-cell's native `CL.THROTTLE` (issue #26 asks for <= 0.7x its CPU per
//! decision on 10,000 keys).
//!
//! With coalescing, concurrent checks go as one batch script call, so what matters is a
//! check's share of a batch, not a call's cost. Rows, on [`KEYS`] keys that all hold state,
//! every check admitted:
//!
//! - the store itself: `RedisStore::check` from 64 tasks, coalescing on (how many checks
//!   went per call is read from `INFO commandstats`);
//! - the store's batch script (its text and arguments as the store sends them, `store.rs`)
//!   on batches of [`BATCH`] distinct keys, [`PIPELINE`] calls per round trip;
//! - floors, the batch's commands with no logic (`floors.rs`);
//! - variants of the batch script that might be cheaper, prototyped as edits of the store's
//!   text (`variants.rs`; a change goes into floodwall-redis once it has earned its place);
//! - `CL.THROTTLE`, one call per check, pipelined as the batches are and as the `cell`
//!   bench's 64 tasks send it (64 per round trip), and E1.
//!
//! Keys: the store's Redis keys for [`KEYS`] user keys in a seeded shuffled order; a call
//! takes the next keys in that order, so a batch's keys are distinct and every key is
//! checked as often. Each row: `FLUSHALL`, two uncounted passes over the keys, then the
//! measured checks.
//!
//! Two measures. Instructions (`SCRIPTS_INSTRUCTIONS=1`, as the single-script rows of
//! `instructions.rs`: zeroed counters, [`COUNTED`] checks, the dump's total over the checks,
//! and for some rows a per-function split, `split.rs`); steady, but not time, and callgrind
//! counts no kernel work (a call of one check pays its socket reads and writes there too).
//! And Redis's CPU time (`SCRIPTS_BATCH_CPU=1`, a plain server: `INFO cpu` user + sys over
//! [`TIMED`] checks, [`ROUNDS`] rounds in alternating orders, the median), which is issue
//! #26's measure but moves with whatever else the machine runs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use floodwall::Policy;
use floodwall::redis::RedisStore;
use floodwall::redis::redis::{self, Cmd, Connection, Value};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use redis_harness::RedisServer;
use tokio::runtime::Runtime;

use crate::floors;
use crate::instructions::{Wrapper, dumped, zero};
use crate::store;

/// Keys checked, as in issue #26's uniform workload.
const KEYS: usize = 10_000;
/// Checks per batch call: about what the store's batches carry at 64 tasks (0.03 calls per
/// decision in the `cell` bench).
const BATCH: usize = 32;
/// Calls per round trip, as the single-script rows' `-P 8`.
const PIPELINE: usize = 8;
/// Counted checks per row under callgrind (500 batches).
const COUNTED: usize = 16_000;
/// Timed checks per row and round.
const TIMED: usize = 160_000;
/// Rounds of the timed rows.
const ROUNDS: usize = 5;
/// The quota: `CL.THROTTLE <key> 1000000000 1000000 1 1` (1 µs apart, a burst of 10^9),
/// the `cell` bench's, which never refuses here; floodwall under `Policy::redis_cell`.
const CELL_ARGS: [u64; 4] = [1_000_000_000, 1_000_000, 1, 1];

/// What the rows are measured in.
pub(crate) enum Measure<'a> {
    /// Instructions, on a server run under callgrind.
    Instructions(&'a Wrapper),
    /// Redis's CPU time, on a plain server.
    Cpu,
}

/// The command of one check, made from its key.
type MakeOne = Rc<dyn Fn(&[u8]) -> Cmd>;
/// The command of one call, made from its checks' keys.
type MakeCall = Box<dyn Fn(&[&[u8]]) -> Cmd>;

/// How a row's checks reach Redis.
#[derive(Clone)]
enum Call {
    /// `EVALSHA <sha>` of [`BATCH`] keys with the store's `ARGV`; one answer per key, each
    /// >= 0 (admitted).
    Batch(String),
    /// One command per check, made from its key; the answer must pass the check.
    Each {
        command: &'static str,
        make: MakeOne,
        ok: fn(&Value) -> bool,
    },
    /// `RedisStore::check` from 64 tasks, coalescing on.
    Store,
}

struct Row {
    name: String,
    call: Call,
    /// The calls of the first warm-up pass, when not the row's own: a floor that writes no
    /// TTL (or nothing) finds keys written with one.
    warm: Option<Call>,
    /// Whether to print its per-function split (instructions only).
    split: bool,
    /// Whether its writes follow the store's TTL grid (the store, its script, the variants).
    gridded: bool,
    /// Calls per round trip.
    depth: usize,
}

impl Row {
    fn new(name: impl Into<String>, call: Call) -> Row {
        Row {
            name: name.into(),
            call,
            warm: None,
            split: false,
            gridded: false,
            depth: PIPELINE,
        }
    }

    fn depth(self, depth: usize) -> Row {
        Row { depth, ..self }
    }

    fn warmed_by(self, warm: &Call) -> Row {
        Row {
            warm: Some(warm.clone()),
            ..self
        }
    }

    fn split(self) -> Row {
        Row {
            split: true,
            ..self
        }
    }

    fn gridded(self) -> Row {
        Row {
            gridded: true,
            ..self
        }
    }
}

/// What one row measured.
struct Measured {
    /// Instructions or µs of CPU per check.
    per_check: f64,
    checks_per_call: f64,
    /// Instructions per check by function (self cost), for rows with `split`.
    split: Option<HashMap<String, f64>>,
}

/// The connection, keys and store every row runs with.
struct Bench<'a> {
    server: &'a RedisServer,
    measure: Measure<'a>,
    con: Connection,
    /// The store's Redis keys, in the order calls take them.
    keys: Vec<Vec<u8>>,
    /// The user keys of `keys`, in the same order, for the store row.
    users: Arc<Vec<Vec<u8>>>,
    rt: Runtime,
    store: RedisStore,
    policy: Policy,
    /// The `ARGV` of a batch of [`BATCH`] checks, as the store sends it.
    argv: Vec<String>,
    /// `SCRIPTS_KEEP`: where to keep the scripts' texts and the split rows' dumps.
    keep: Option<PathBuf>,
    /// The store's TTL grid for the policy, in µs (`lua/gcra.lua`: a quarter of the
    /// tolerance, in whole ms).
    grid_us: u64,
    /// The longest a row has taken so far.
    longest: Duration,
}

/// `name` as a file name: its letters and digits, the rest `-`.
fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Measures the batch rows on `server` and prints their table (and, counting instructions,
/// the per-function split); `cell` says why `CL.THROTTLE` is missing, if it is.
pub(crate) fn report(server: &RedisServer, measure: Measure<'_>, cell: Option<&str>) {
    let rt = crate::support::runtime(2);
    let store = rt.block_on(async {
        RedisStore::builder()
            // Every check to Redis, as the cell bench's `deny_cache(false)` row.
            .deny_cache(false)
            .multiplexed(&server.url())
            .await
            .expect("multiplexed store")
    });
    let [burst, count, period, _] = CELL_ARGS;
    let policy = Policy::redis_cell("batch", burst, count, Duration::from_secs(period))
        .expect("a valid policy");
    let mut order: Vec<usize> = (0..KEYS).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(26));
    let users: Vec<Vec<u8>> = order
        .iter()
        .map(|i| format!("user-{i:05}").into_bytes())
        .collect();
    let keys = users.iter().map(|u| store.redis_key(u, &policy)).collect();
    let first = Arc::new(users[..512].to_vec());
    let captured = store::capture(server, &rt, &store, &policy, &first);
    let a = &captured.argv;
    assert!(
        captured.text.contains("'MGET'") && a.len() == 6 && a[0] == a[5],
        "not a batch of distinct keys of cost 1: {a:?}"
    );
    let mut argv = captured.argv.clone();
    (argv[0], argv[5]) = (BATCH.to_string(), BATCH.to_string());
    let what = match measure {
        Measure::Instructions(_) => format!(
            "instructions per CHECK (callgrind; {COUNTED} counted checks after FLUSHALL and two \
             uncounted passes over the keys)"
        ),
        Measure::Cpu => format!(
            "Redis CPU µs per CHECK (INFO cpu user+sys; {TIMED} checks after FLUSHALL and two \
             uncounted passes over the keys; median of {ROUNDS} rounds)"
        ),
    };
    println!(
        "\nbatch rows: {what}; {KEYS} keys, all admitted; batches of {BATCH} distinct keys, \
         {PIPELINE} calls per round trip\nthe store's batch script: SHA {}, {} bytes, ARGV {argv:?} \
         for {BATCH} checks",
        captured.sha,
        captured.text.len(),
    );
    let keep = std::env::var_os("SCRIPTS_KEEP").map(PathBuf::from);
    let load = |name: &str, text: &str| {
        if let Some(keep) = &keep {
            let to = keep.join(format!("{}.lua", file_name(name)));
            std::fs::write(&to, text).unwrap_or_else(|e| panic!("keep {}: {e}", to.display()));
        }
        Call::Batch(server.cmd(&["SCRIPT", "LOAD", text]))
    };
    let real = load("floodwall batch", &captured.text);
    assert!(matches!(&real, Call::Batch(sha) if *sha == captured.sha));
    let px = load("floor: PX", floors::FLOOR_PX);
    let mut rows = vec![
        Row::new("floodwall store, 64 tasks", Call::Store).gridded(),
        Row::new("floodwall batch", real).split().gridded(),
        Row::new(
            "floor: KEEPTTL",
            load("floor: KEEPTTL", floors::FLOOR_KEEPTTL),
        )
        .warmed_by(&px)
        .split(),
        Row::new("floor: PX", px.clone()),
        Row::new(
            "floor: SETRANGE",
            load("floor: SETRANGE", floors::FLOOR_SETRANGE),
        )
        .warmed_by(&px),
        Row::new("floor: INCRBY", load("floor: INCRBY", floors::FLOOR_INCRBY)).warmed_by(&px),
        Row::new(
            "floor: read-only",
            load("floor: read-only", floors::FLOOR_READ),
        )
        .warmed_by(&px),
    ];
    let mut variants = Vec::new();
    for (name, text, split) in crate::variants::all(&captured.text) {
        let call = load(name, &text);
        if let Call::Batch(sha) = &call {
            variants.push((name, sha.clone()));
        }
        let row = Row::new(name, call).gridded();
        rows.push(if split { row.split() } else { row });
    }
    let e1 = server.cmd(&["SCRIPT", "LOAD", crate::E1_LUA]);
    let e1 = Call::Each {
        command: "evalsha",
        make: Rc::new(move |key| {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(&e1).arg(1).arg(key);
            cmd
        }),
        ok: |v| matches!(v, Value::Int(_)),
    };
    rows.push(Row::new("E1", e1));
    let cell_call = Call::Each {
        command: "cl.throttle",
        make: Rc::new(|key| {
            let mut cmd = redis::cmd("CL.THROTTLE");
            cmd.arg(key).arg(&CELL_ARGS[..]);
            cmd
        }),
        ok: |v| matches!(v, Value::Array(a) if a.first() == Some(&Value::Int(0))),
    };
    match cell {
        None => {
            rows.push(Row::new("CL.THROTTLE", cell_call.clone()).split());
            // As the cell bench sends it: 64 tasks on one multiplexed connection.
            rows.push(Row::new("CL.THROTTLE, 64 per round trip", cell_call).depth(64));
        }
        Some(why) => println!("note: no CL.THROTTLE row: {why}"),
    }
    let mut con = redis::Client::open(server.url())
        .and_then(|c| c.get_connection())
        .expect("a connection");
    crate::variants::agree(&mut con, &captured.sha, &variants);
    let mut bench = Bench {
        server,
        measure,
        con,
        keys,
        users: Arc::new(users),
        rt,
        store,
        policy,
        argv,
        keep,
        grid_us: a[2]
            .parse::<u64>()
            .map(|tolerance| (tolerance / 4000).max(1) * 1000)
            .expect("the tolerance in the batch's ARGV"),
        longest: Duration::from_secs(20),
    };
    let rounds = match bench.measure {
        Measure::Instructions(_) => 1,
        Measure::Cpu => ROUNDS,
    };
    // Per row, what each round measured; rows in alternating orders over the rounds.
    let mut measured: Vec<Vec<Measured>> = rows.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for i in crate::support::round_order(rows.len(), round) {
            let m = bench.measure_row(&rows[i]);
            measured[i].push(m);
        }
    }
    print_table(&rows, &measured);
    let split: Vec<(&str, &HashMap<String, f64>)> = rows
        .iter()
        .zip(&measured)
        .filter_map(|(r, m)| Some((r.name.as_str(), m.first()?.split.as_ref()?)))
        .collect();
    crate::split::print_split(&split);
}

impl Bench<'_> {
    /// One row's checks measured, as the module docs describe.
    fn measure_row(&mut self, row: &Row) -> Measured {
        if row.gridded {
            self.clear_of_edge();
        }
        let began = Instant::now();
        self.server.cmd(&["FLUSHALL"]);
        // A pass that writes every key with a TTL, then one of the row's own calls, so the
        // measured writes find what they will find in a steady state (`SETRANGE` copies an
        // integer-encoded value once, then overwrites it in place).
        self.run(row.warm.as_ref().unwrap_or(&row.call), KEYS, row.depth);
        self.run(&row.call, KEYS, row.depth);
        let checks = match self.measure {
            Measure::Instructions(_) => COUNTED,
            Measure::Cpu => TIMED,
        };
        match self.measure {
            Measure::Instructions(_) => zero(self.server),
            Measure::Cpu => {
                self.server.cmd(&["CONFIG", "RESETSTAT"]);
            }
        }
        let cpu = || crate::support::used_cpu_s(&self.server.cmd(&["INFO", "cpu"]));
        let cpu_before = cpu();
        let calls = self.run(&row.call, checks, row.depth);
        let cpu_after = cpu();
        let stats = crate::support::commandstats(&self.server.cmd(&["INFO", "commandstats"]));
        let command = match &row.call {
            Call::Each { command, .. } => command,
            Call::Batch(_) | Call::Store => "evalsha",
        };
        let field = |name: &str| -> u64 {
            stats
                .get(command)
                .and_then(|s| s.get(name))
                .map_or(0, |v| v.parse().expect("an integer in INFO commandstats"))
        };
        let seen = field("calls");
        assert!(
            field("failed_calls") == 0
                && field("rejected_calls") == 0
                && (calls == 0 || seen == calls),
            "{}: {command} {:?}",
            row.name,
            stats.get(command)
        );
        let (per_check, split) = match self.measure {
            Measure::Instructions(wrapper) => {
                let (total, dump) = dumped(self.server, &wrapper.dir);
                if let (true, Some(keep)) = (row.split, &self.keep) {
                    let to = keep.join(format!("{}.callgrind", file_name(&row.name)));
                    std::fs::copy(&dump, &to)
                        .unwrap_or_else(|e| panic!("keep {}: {e}", to.display()));
                }
                let split = row.split.then(|| crate::split::split(&dump, checks));
                (total / checks as f64, split)
            }
            Measure::Cpu => {
                let (Some(before), Some(after)) = (cpu_before, cpu_after) else {
                    panic!("no used_cpu_user/used_cpu_sys in INFO cpu");
                };
                ((after - before) * 1e6 / checks as f64, None)
            }
        };
        self.longest = self.longest.max(began.elapsed());
        Measured {
            per_check,
            checks_per_call: checks as f64 / seen as f64,
            split,
        }
    }

    /// Waits for the next edge of the store's TTL grid (cells of [`Bench::grid_us`] from the
    /// epoch) when it could fall within the next row. At an edge every key's state moves to a
    /// new cell, so every key's next write renews its TTL (`SET .. PX`) and the keys not
    /// written before it expire: once per cell (250 s here) for every key, which issue #26's
    /// rates spread over thousands of checks per key, but which a row that meets an edge
    /// would pay on all of its keys at once.
    fn clear_of_edge(&self) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970");
        let now_us = u64::try_from(now.as_micros()).expect("a time in µs");
        let left = Duration::from_micros(self.grid_us - now_us % self.grid_us);
        if left < self.longest.mul_f64(1.5) {
            println!(
                "(waiting {:.0} s for an edge of the TTL grid to pass)",
                left.as_secs_f64()
            );
            std::thread::sleep(left + Duration::from_secs(1));
        }
    }

    /// `checks` checks by `call` over the keys in order, from the first, `depth` calls per
    /// round trip; the calls made (0 for the store, which decides that itself).
    fn run(&mut self, call: &Call, checks: usize, depth: usize) -> u64 {
        let (group, make): (usize, MakeCall) = match call {
            Call::Store => {
                store::drive(&self.rt, &self.store, &self.policy, &self.users, checks);
                return 0;
            }
            Call::Batch(sha) => {
                let (sha, argv) = (sha.clone(), self.argv.clone());
                (
                    BATCH,
                    Box::new(move |keys: &[&[u8]]| {
                        let mut cmd = redis::cmd("EVALSHA");
                        cmd.arg(&sha).arg(keys.len());
                        for k in keys {
                            cmd.arg(*k);
                        }
                        cmd.arg(&argv);
                        cmd
                    }),
                )
            }
            Call::Each { make, .. } => {
                let make = Rc::clone(make);
                (1, Box::new(move |keys: &[&[u8]]| make(keys[0])))
            }
        };
        let ok = |v: &Value| match call {
            Call::Batch(_) => matches!(v, Value::Array(a)
                if a.len() == BATCH && a.iter().all(|x| matches!(x, Value::Int(i) if *i >= 0))),
            Call::Each { ok, .. } => ok(v),
            Call::Store => unreachable!("the store checks its own answers"),
        };
        let calls = checks.div_ceil(group);
        let (mut at, mut sent) = (0, 0);
        while sent < calls {
            let mut pipe = redis::pipe();
            let n = depth.min(calls - sent);
            for _ in 0..n {
                let keys: Vec<&[u8]> = (0..group)
                    .map(|k| &self.keys[(at + k) % KEYS][..])
                    .collect();
                pipe.add_command(make(&keys));
                at += group;
            }
            let replies: Vec<Value> = pipe.query(&mut self.con).expect("a pipeline of calls");
            for r in &replies {
                assert!(ok(r), "not an admission: {r:?}");
            }
            sent += n;
        }
        calls as u64
    }
}

/// Each row's cost per check and its ratios to `CL.THROTTLE`'s, E1's and the KEEPTTL
/// floor's: with several rounds, the median cost (and its range) and the median of the
/// rounds' ratios.
fn print_table(rows: &[Row], measured: &[Vec<Measured>]) {
    let of = |name: &str| rows.iter().position(|r| r.name == name);
    let (cell, e1, floor) = (of("CL.THROTTLE"), of("E1"), of("floor: KEEPTTL"));
    let cell64 = of("CL.THROTTLE, 64 per round trip");
    let cost = |i: usize| -> Vec<f64> { measured[i].iter().map(|m| m.per_check).collect() };
    let ratio = |i: usize, to: Option<usize>| -> f64 {
        let Some(to) = to else { return f64::NAN };
        let mut r: Vec<f64> = cost(i).iter().zip(cost(to)).map(|(a, b)| a / b).collect();
        crate::support::median(&mut r).unwrap_or(f64::NAN)
    };
    let unit = if measured[0].len() > 1 {
        "µs/check (range)"
    } else {
        "Ir/check"
    };
    println!(
        "{:<38} {:>22} {:>11} {:>6} {:>7} {:>6} {:>7}",
        "row", unit, "checks/call", "xcell", "xcell64", "xE1", "xfloor"
    );
    for (i, r) in rows.iter().enumerate() {
        let (median, lo, hi) = crate::support::median_min_max(&mut cost(i)).expect("a round");
        let cost = if measured[i].len() > 1 {
            format!("{median:.3} ({lo:.3}–{hi:.3})")
        } else {
            format!("{median:.0}")
        };
        let per_call =
            measured[i].iter().map(|m| m.checks_per_call).sum::<f64>() / measured[i].len() as f64;
        println!(
            "{:<38} {:>22} {:>11.1} {:>6.2} {:>7.2} {:>6.2} {:>7.2}",
            r.name,
            cost,
            per_call,
            ratio(i, cell),
            ratio(i, cell64),
            ratio(i, e1),
            ratio(i, floor)
        );
    }
    println!(
        "xcell, xcell64, xE1, xfloor: over the per-check cost of CL.THROTTLE (8 and 64 per round \
         trip), E1 and the KEEPTTL floor"
    );
}
