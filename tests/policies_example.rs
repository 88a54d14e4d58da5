//! The policies example as a process, from a client's side: the plan, and so the quota,
//! follows the account a real API key belongs to (never what the client claims), and the
//! per-client ceiling holds whatever the plan allows.
//!
//! It runs the example binary that `cargo test` builds beside the tests (before a `--test
//! policies_example` run alone, `cargo build --all-features --example policies`).

mod common;

use common::{request, start_example, status};

/// A response's status and its `RateLimit` field as `(policy, remaining)` pairs.
struct Answer {
    status: u16,
    remaining: Vec<(String, u64)>,
}

impl Answer {
    fn names(&self) -> Vec<&str> {
        self.remaining
            .iter()
            .map(|(name, _)| name.as_str())
            .collect()
    }

    fn remaining(&self, policy: &str) -> u64 {
        self.remaining
            .iter()
            .find(|(name, _)| name == policy)
            .unwrap_or_else(|| panic!("no {policy} in {:?}", self.remaining))
            .1
    }
}

/// GETs `/` over a fresh connection with `headers`.
fn get(addr: &str, headers: &str) -> Answer {
    let raw = request(addr, &format!("GET / HTTP/1.1\r\n{headers}"));
    let status = status(&raw);
    // `RateLimit: "name";r=R;t=T, "other";r=R;t=T`
    let field = raw
        .lines()
        .find_map(|line| line.strip_prefix("ratelimit: "))
        .unwrap_or_else(|| panic!("no RateLimit field in:\n{raw}"));
    let remaining = field
        .split(", ")
        .map(|item| {
            let mut params = item.split(';');
            let name = params.next().unwrap().trim_matches('"').to_owned();
            let r = params
                .find_map(|p| p.strip_prefix("r="))
                .unwrap_or_else(|| panic!("no r= in {item:?}"));
            (name, r.parse().unwrap())
        })
        .collect();
    Answer { status, remaining }
}

#[test]
fn the_plan_is_the_accounts_and_the_ceiling_holds_over_every_plan() {
    let example = start_example("policies", "policies_example", &[]);
    let addr = &example.addr;

    // Claiming a plan, or sending a key that is not an account's, earns nothing: each is
    // the same anonymous client (one address), charged one more.
    let mut last = u64::MAX;
    for claim in ["x-plan: pro\r\n", "x-api-key: not-a-key\r\n", ""] {
        let answer = get(addr, claim);
        assert_eq!(answer.status, 200, "{claim:?}");
        assert_eq!(answer.names(), ["anonymous", "ceiling"], "{claim:?}");
        assert!(answer.remaining("anonymous") < last, "{claim:?}");
        last = answer.remaining("anonymous");
    }

    let free = get(addr, "x-api-key: demo-free-key\r\n");
    assert_eq!(free.names(), ["free", "ceiling"]);
    assert_eq!(free.remaining("free"), 60 - 1);

    // The pro plan allows 6000 a minute at once; the ceiling, 20 a second per client. A
    // burst far under the plan's quota is refused by the ceiling.
    let mut admitted = 0;
    let refusal = loop {
        let answer = get(addr, "x-api-key: demo-pro-key\r\n");
        assert_eq!(answer.names(), ["pro", "ceiling"]);
        if answer.status != 200 {
            break answer;
        }
        admitted += 1;
        assert!(admitted <= 100, "the ceiling never refused");
    };
    assert_eq!(refusal.status, 429);
    assert!(
        admitted >= 20,
        "{admitted} admitted before the ceiling refused"
    );
    assert_eq!(refusal.remaining("ceiling"), 0);
    assert!(refusal.remaining("pro") > 5000);
}
