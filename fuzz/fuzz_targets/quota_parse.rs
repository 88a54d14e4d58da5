//! Any text given to the quota parser: an error or a valid quota, never a panic; a valid
//! quota prints as text that parses back to it, and every algorithm either refuses it at
//! construction or decides with it (any time, any cost, shared among any nodes) without
//! overflowing.
#![no_main]

use floodwall_core::{Algorithm, Policy, Quota, State};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(quota) = text.parse::<Quota>() else {
        return;
    };
    assert!(quota.count() > 0 && quota.burst() > 0);
    assert!(quota.period() <= floodwall_core::MAX_SPAN);
    let printed = quota.to_string();
    assert_eq!(printed.parse::<Quota>().as_ref(), Ok(&quota), "{printed}");
    let salt = data.len() as u64;
    for algorithm in Algorithm::all() {
        let Ok(policy) = Policy::new("fuzz", algorithm, quota) else {
            continue;
        };
        let mut state = State::new();
        for (now, cost) in [
            (0, 1),
            (1_700_000_000_000_000, salt),
            (u64::MAX, 1),
            (1_700_000_000_000_000, policy.limit()),
            (5, u64::MAX),
        ] {
            let _ = policy.decide(&mut state, now, cost);
        }
        for nodes in [0, 2, 3, salt as u32, u32::MAX] {
            if let Ok(share) = policy.share(nodes) {
                assert!(share.limit() >= 1 && share.limit() <= policy.limit().max(1));
                let _ = share.decide(&mut State::new(), 1, 1);
            }
        }
    }
});
