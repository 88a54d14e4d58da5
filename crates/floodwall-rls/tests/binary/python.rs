//! The binary called by a client not written here (issue #25): Python's grpcio with the
//! gRPC team's generated code for Envoy's API (the xds-protos package), through
//! crates/floodwall-rls/tests/python/rls_client.py. Each test serves [`CONFIG`] on the
//! memory store, runs one of the script's scenarios and asserts what Python read from each
//! answer: codes, limits, what remains, when it is full again, and the headers.
//!
//! It needs only `python3`: when that lacks the packages, they are installed from the
//! package index into a virtual environment of these tests' own under cargo's target
//! directory, once (floodwall-test-support's `python_with`). A package that cannot be had
//! is a failure that says why, never a skip.
//!
//! The limits are counted with GCRA (the default): a day's quota of `q` frees a unit every
//! day / `q`, so a fresh key's first answer is full again in exactly one interval, and the
//! `k`th in more than `k - 1` and at most `k` (the time the test takes comes off).

use std::sync::OnceLock;

use floodwall_test_support::python_with;
use serde_json::Value;

use super::*;

/// The client's Python packages, as pip names them.
const PACKAGES: [&str; 2] = ["grpcio", "xds-protos"];

/// What the script imports from them.
const IMPORTS: &str = "import grpc; from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc";

/// The configuration every test serves (the script's SCENARIOS comment says it too).
const CONFIG: &str = "\
domain: py
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 3, name: per_user}
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: bytes
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: api_key
    descriptors:
      - key: plan
        value: gold
        rate_limit: {unit: hour, requests_per_unit: 5}
      - key: plan
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: /healthz
    rate_limit: {unlimited: true}
  - key: path
    value: /search
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 2}
";

const DAY: u64 = 86_400;

/// One descriptor's status as Python read it.
#[derive(Debug, PartialEq)]
struct Status {
    code: String,
    /// `current_limit`'s name, requests_per_unit and unit.
    limit: Option<(String, u64, String)>,
    remaining: u64,
    reset: Option<Duration>,
}

/// One answer as Python read it.
#[derive(Debug)]
struct Answer {
    overall: String,
    statuses: Vec<Status>,
    headers: Vec<(String, String)>,
}

impl Answer {
    fn from_json(v: &Value) -> Answer {
        let text = |v: &Value| v.as_str().unwrap_or_else(|| panic!("{v}")).to_owned();
        let number = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("{v}"));
        let statuses = v["statuses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| Status {
                code: text(&s["code"]),
                limit: (!s["current_limit"].is_null()).then(|| {
                    let l = &s["current_limit"];
                    (
                        text(&l["name"]),
                        number(&l["requests_per_unit"]),
                        text(&l["unit"]),
                    )
                }),
                remaining: number(&s["limit_remaining"]),
                reset: (!s["duration_until_reset"].is_null()).then(|| {
                    let d = &s["duration_until_reset"];
                    Duration::new(number(&d["seconds"]), number(&d["nanos"]) as u32)
                }),
            })
            .collect();
        let headers = v["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (text(&h[0]), text(&h[1])))
            .collect();
        Answer {
            overall: text(&v["overall_code"]),
            statuses,
            headers,
        }
    }

    /// The codes: overall, then each descriptor's.
    fn codes(&self) -> (&str, Vec<&str>) {
        let each = self.statuses.iter().map(|s| s.code.as_str()).collect();
        (self.overall.as_str(), each)
    }

    /// Each descriptor's `limit_remaining`.
    fn remaining(&self) -> Vec<u64> {
        self.statuses.iter().map(|s| s.remaining).collect()
    }

    /// The value of header `name`, if the answer has it.
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A Python with grpcio and xds-protos, made once for all the tests of this process.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rls-python-venv");
        python_with(&PACKAGES, IMPORTS, &venv)
    })
}

/// Serves [`CONFIG`] with `extra` arguments, runs `scenario` of rls_client.py against it
/// and returns its answers.
fn scenario(name: &str, extra: &[&str]) -> Vec<Answer> {
    let python = python();
    let dir = TempDir::new();
    dir.write("py.yaml", CONFIG);
    let rls = Rls::start(dir.path(), extra);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/rls_client.py");
    let output = Command::new(python)
        .arg(&script)
        .arg(rls.addr.to_string())
        .arg(name)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "rls_client.py {name} failed ({}):\n{stdout}\n{stderr}\nthe server's log:\n{}",
        output.status,
        rls.log()
    );
    let json: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("rls_client.py {name} printed no JSON ({e}):\n{stdout}"));
    json.as_array()
        .unwrap()
        .iter()
        .map(Answer::from_json)
        .collect()
}

fn limit(name: &str, requests_per_unit: u64, unit: &str) -> Option<(String, u64, String)> {
    Some((name.to_owned(), requests_per_unit, unit.to_owned()))
}

/// Whether `reset` is what a GCRA key of `interval` charged `units` reports: more than
/// `units - 1` intervals, at most `units`.
fn within(reset: Option<Duration>, units: u64, interval: u64) -> bool {
    reset.is_some_and(|r| {
        r > Duration::from_secs((units - 1) * interval)
            && r <= Duration::from_secs(units * interval)
    })
}

/// `d` in whole seconds, rounded up, as the headers carry it.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[test]
fn python_sees_the_exact_quota_and_the_statuses() {
    let answers = scenario("quota", &[]);
    let codes: Vec<_> = answers.iter().map(Answer::codes).collect();
    assert_eq!(
        codes,
        [
            ("OK", vec!["OK"]),
            ("OK", vec!["OK"]),
            ("OK", vec!["OK"]),
            ("OVER_LIMIT", vec!["OVER_LIMIT"]),
            ("OK", vec!["OK"]),
        ]
    );
    let remaining: Vec<_> = answers.iter().map(Answer::remaining).collect();
    assert_eq!(remaining, [[2], [1], [0], [0], [2]]);
    for answer in &answers {
        assert_eq!(answer.statuses[0].limit, limit("per_user", 3, "DAY"));
        assert!(answer.headers.is_empty(), "headers are off by default");
    }
    // A day's 3: a unit back every 8 hours. Alice's three units, then her refusal (nothing
    // charged); Bob's first is exactly one interval.
    let interval = DAY / 3;
    for (k, answer) in answers[..3].iter().enumerate() {
        let reset = answer.statuses[0].reset;
        assert!(within(reset, k as u64 + 1, interval), "{k}: {reset:?}");
    }
    assert!(within(answers[3].statuses[0].reset, 3, interval));
    assert_eq!(
        answers[4].statuses[0].reset,
        Some(Duration::from_secs(interval))
    );
}

#[test]
fn python_nested_descriptors_find_their_limits() {
    let answers = scenario("nested", &[]);
    let seen: Vec<_> = answers
        .iter()
        .map(|a| {
            let s = &a.statuses[0];
            (a.overall.as_str(), s.limit.clone(), s.remaining)
        })
        .collect();
    assert_eq!(
        seen,
        [
            // plan gold: 5 an hour.
            ("OK", limit("", 5, "HOUR"), 4),
            // Any other plan: 2 an hour, counted apart.
            ("OK", limit("", 2, "HOUR"), 1),
            // Gold again: its own count went on.
            ("OK", limit("", 5, "HOUR"), 3),
            // api_key without a plan reaches no limit: OK, nothing else said.
            ("OK", None, 0),
        ]
    );
    assert_eq!(answers[3].statuses[0].reset, None);
}

#[test]
fn python_hits_addend_is_the_cost() {
    let answers = scenario("hits_addend", &[]);
    let codes: Vec<_> = answers.iter().map(|a| a.overall.as_str()).collect();
    assert_eq!(codes, ["OK", "OK", "OVER_LIMIT", "OK", "OK", "OK"]);
    let remaining: Vec<_> = answers.iter().map(Answer::remaining).collect();
    assert_eq!(
        remaining,
        [
            // 10 a day; the request's hits_addend 4.
            vec![6],
            // The descriptor's 5 over the request's 2.
            vec![1],
            // 2 with 1 left: refused, nothing taken.
            vec![1],
            // The descriptor's 0: only read.
            vec![1],
            // The last unit.
            vec![0],
            // Two keys in one request: the request's 3, and a descriptor's own 7.
            vec![7, 3],
        ]
    );
    // Every unit charged shows in when the key is full again: 9 of 10, 3 and 7.
    let interval = DAY / 10;
    assert!(within(answers[2].statuses[0].reset, 9, interval));
    assert_eq!(
        answers[5].statuses[0].reset,
        Some(Duration::from_secs(3 * interval))
    );
    assert_eq!(
        answers[5].statuses[1].reset,
        Some(Duration::from_secs(7 * interval))
    );
}

#[test]
fn python_unlimited_is_ok_with_everything_remaining() {
    let answers = scenario("unlimited", &[]);
    assert_eq!(answers.len(), 3);
    for answer in &answers {
        assert_eq!(answer.overall, "OK");
        assert_eq!(
            answer.statuses,
            [Status {
                code: "OK".to_owned(),
                limit: None,
                remaining: u64::from(u32::MAX),
                reset: None,
            }]
        );
    }
}

#[test]
fn python_shadow_mode_answers_ok_while_over() {
    let answers = scenario("shadow", &[]);
    let codes: Vec<_> = answers.iter().map(Answer::codes).collect();
    assert_eq!(
        codes,
        [
            ("OK", vec!["OK"]),
            ("OK", vec!["OK"]),
            ("OK", vec!["OK"]),
            ("OK", vec!["OK"]),
            ("OK", vec!["OK", "OK"]),
        ]
    );
    // 2 a day: counted, with 0 left once it would have refused; beside it, a counted
    // limit is charged, the request not refused.
    let remaining: Vec<_> = answers.iter().map(Answer::remaining).collect();
    assert_eq!(remaining, [vec![1], vec![0], vec![0], vec![0], vec![0, 2]]);
    assert_eq!(answers[0].statuses[0].limit, limit("", 2, "DAY"));
    assert_eq!(answers[4].statuses[1].limit, limit("per_user", 3, "DAY"));
}

#[test]
fn python_a_refused_request_charges_none_of_its_descriptors() {
    let answers = scenario("all_or_nothing", &[]);
    let codes: Vec<_> = answers.iter().map(Answer::codes).collect();
    assert_eq!(
        codes,
        [
            ("OK", vec!["OK"]),
            ("OK", vec!["OK"]),
            ("OK", vec!["OK"]),
            ("OK", vec!["OK"]),
            ("OVER_LIMIT", vec!["OK", "OVER_LIMIT"]),
            ("OK", vec!["OK"]),
        ]
    );
    let remaining: Vec<_> = answers.iter().map(Answer::remaining).collect();
    assert_eq!(
        remaining,
        [
            // The tenant's 5 a day, charged once.
            vec![4],
            // The user's 3, used up.
            vec![2],
            vec![1],
            vec![0],
            // Both: the user is over, so the tenant keeps its 4.
            vec![4, 0],
            // The tenant alone: charged once more, not twice.
            vec![3],
        ]
    );
    // The tenant's charge is two units, so full again within two intervals.
    assert!(within(answers[5].statuses[0].reset, 2, DAY / 5));
}

#[test]
fn python_reads_the_response_headers() {
    let answers = scenario("headers", &["--response-headers"]);
    let codes: Vec<_> = answers.iter().map(|a| a.overall.as_str()).collect();
    assert_eq!(codes, ["OK", "OK", "OK", "OK", "OVER_LIMIT"]);

    // Each member is named after the limit's policy: the descriptor path and a digest.
    let name = |answer: &Answer, prefix: &str| -> String {
        let policy = answer.header("RateLimit-Policy").unwrap();
        let name = policy.split(';').next().unwrap();
        let digest = name
            .strip_prefix(&format!("\"{prefix}:"))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{policy}"));
        assert!(
            digest.len() == 16 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{policy}"
        );
        name.to_owned()
    };
    let user = name(&answers[0], "py.user");
    for (k, answer) in answers.iter().enumerate() {
        let names: Vec<&str> = answer.headers.iter().map(|(k, _)| k.as_str()).collect();
        let expected: &[&str] = if k == 4 {
            &["RateLimit-Policy", "RateLimit", "Retry-After"]
        } else {
            &["RateLimit-Policy", "RateLimit"]
        };
        assert_eq!(names, expected, "{k}");
    }
    // The user's quota: q and w; r as limit_remaining, t as duration_until_reset rounded up.
    for answer in [&answers[0], &answers[1], &answers[2], &answers[4]] {
        let status = &answer.statuses[0];
        let t = ceil_secs(status.reset.unwrap());
        assert_eq!(
            answer.header("RateLimit-Policy"),
            Some(format!("{user};q=3;w={DAY}").as_str())
        );
        assert_eq!(
            answer.header("RateLimit"),
            Some(format!("{user};r={};t={t}", status.remaining).as_str())
        );
    }
    assert_eq!(
        answers[0].header("RateLimit"),
        Some(format!("{user};r=2;t=28800").as_str())
    );
    // Two descriptors, one unlimited: only the counted one is a member.
    let tenant = name(&answers[3], "py.tenant");
    assert_eq!(
        answers[3].header("RateLimit-Policy"),
        Some(format!("{tenant};q=5;w={DAY}").as_str())
    );
    assert_eq!(
        answers[3].header("RateLimit"),
        Some(format!("{tenant};r=4;t=17280").as_str())
    );
    // Over: one unit back comes two intervals before the whole quota is.
    let over = &answers[4];
    let t = ceil_secs(over.statuses[0].reset.unwrap());
    let retry: u64 = over.header("Retry-After").unwrap().parse().unwrap();
    assert_eq!(retry, t - 2 * (DAY / 3));
    assert!(retry >= 1);
}
