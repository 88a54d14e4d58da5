//! The fallback's operations other than a single check, while its store fails: several
//! policies at once, bookings and their cancels, charges, resets and unbans.

use floodwall_core::{Adjustment, Cancelled, ConcurrencyLimit, Penalty, Reservable};

use super::*;

fn local_fallback<S: Store + Clone>(clock: &ManualClock, store: &S) -> Fallback<S, ManualClock> {
    let local = MemoryStore::builder().clock(clock.clone()).build();
    Fallback::with_local_store(store.clone(), FailMode::local(2), local)
}

fn check_all<S: Store>(store: &S, key: &[u8], policies: &[Policy]) -> Vec<Decision> {
    let all = now(store.check_all(key, policies, 1)).unwrap().unwrap();
    all.into_iter().map(Option::unwrap).collect()
}

#[test]
fn several_policies_fail_open_together_and_locally_all_or_nothing() {
    let (clock, flaky, _) = setup();
    let both = [
        policy("4/min"),
        Policy::gcra("q", "40/min".parse().unwrap()).unwrap(),
    ];
    flaky.set(Health::Down);

    let open = Fallback::new(flaky.clone(), FailMode::Open);
    let answers = check_all(&open, b"k", &both);
    assert_eq!(answers.len(), 2);
    for (d, p) in answers.iter().zip(&both) {
        assert!(d.is_allowed() && d.source == Source::Fallback);
        assert_eq!((d.limit, d.remaining), (p.limit(), p.limit()));
    }

    // Locally, each policy's share (half of each quota); the smaller refuses the third
    // request, and the larger, which would allow it, is not charged for it.
    let local = local_fallback(&clock, &flaky);
    for remaining in [1, 0] {
        let answers = check_all(&local, b"k", &both);
        assert!(
            answers
                .iter()
                .all(|d| d.is_allowed() && d.source == Source::Fallback)
        );
        assert_eq!(answers[0].remaining, remaining);
    }
    let refused = check_all(&local, b"k", &both);
    assert!(!refused[0].is_allowed() && refused[1].is_allowed());
    assert_eq!((refused[1].limit, refused[1].remaining), (20, 18));
    assert_eq!(local.stats().decided_locally, 3);
}

#[test]
fn a_local_booking_is_cancelled_locally_and_an_open_one_had_nothing_to_give_back() {
    let (clock, flaky, _) = setup();
    let p = policy("2/min").reservable().unwrap();
    let wait = Duration::from_secs(60);
    flaky.set(Health::Down);

    let local = local_fallback(&clock, &flaky);
    let first = now(local.reserve(b"k", &p, 1, wait)).unwrap().unwrap();
    assert!(first.decision.is_allowed() && first.decision.source == Source::Fallback);
    // The share is one a minute: the next slot is a minute away, booked.
    let second = now(local.reserve(b"k", &p, 1, wait)).unwrap().unwrap();
    assert_eq!(second.decision.source, Source::Fallback);
    assert!(second.wait > Duration::ZERO);
    let cancelled = now(local.cancel(b"k", &p, &second)).unwrap().unwrap();
    assert_eq!(cancelled, Cancelled::Returned);
    let again = now(local.reserve(b"k", &p, 1, wait)).unwrap().unwrap();
    assert_eq!(
        again.wait, second.wait,
        "the slot given back is booked again"
    );

    let open = Fallback::new(flaky.clone(), FailMode::Open);
    let booked = now(open.reserve(b"k", &p, 1, wait)).unwrap().unwrap();
    assert!(booked.decision.is_allowed() && booked.wait == Duration::ZERO);
    let cancelled = now(open.cancel(b"k", &p, &booked)).unwrap().unwrap();
    assert_eq!(cancelled, Cancelled::Spent);
}

#[test]
fn charges_resets_and_unbans_reach_the_local_share_while_the_store_fails() {
    let (clock, flaky, _) = setup();
    let p = policy("10/min");
    let local = local_fallback(&clock, &flaky);
    flaky.set(Health::Down);

    assert_eq!(check(&local, b"k", &p).unwrap().remaining, 4);
    now(local.adjust(b"k", &p, Adjustment::Charge(3)))
        .unwrap()
        .unwrap();
    assert_eq!(check(&local, b"k", &p).unwrap().remaining, 0);
    // A reset forgets the local share too (this test store answers resets while down).
    now(local.reset(b"k", &p)).unwrap().unwrap();
    assert_eq!(check(&local, b"k", &p).unwrap().remaining, 4);

    let ban = Penalty::new(2, Duration::from_secs(60), Duration::from_secs(600)).unwrap();
    let login = Policy::gcra("login", "2/min".parse().unwrap())
        .unwrap()
        .with_penalty(ban);
    // The share (one a minute) admits one; two refusals ban the key.
    assert!(check(&local, b"k", &login).unwrap().is_allowed());
    assert!(!check(&local, b"k", &login).unwrap().is_banned());
    let banned = check(&local, b"k", &login).unwrap();
    assert!(banned.is_banned());
    assert!(
        now(local.unban(b"k", &login))
            .unwrap()
            .unwrap_err()
            .is_unavailable()
    );
    let after = check(&local, b"k", &login).unwrap();
    // Unbanned locally too: refused by the quota, a first strike again, no ban.
    assert!(!after.is_allowed() && !after.is_banned(), "{after:?}");
}

#[test]
fn an_operation_the_store_cannot_do_is_an_error_not_an_outage() {
    let (_, flaky, _) = setup();
    let open = Fallback::new(NoAcquire(flaky), FailMode::Open);
    let limit = ConcurrencyLimit::new("uploads", 2).unwrap();
    let err = now(open.acquire(b"k", &limit)).unwrap().unwrap_err();
    assert!(!err.is_store_failure(), "{err}");
    assert!(!open.is_engaged());
    assert_eq!(open.stats().failed_open, 0);
}

/// A store without in-flight limits.
struct NoAcquire(Flaky);

/// A store that cannot charge or refund.
#[derive(Clone)]
struct NoAdjust(Flaky);

/// `flaky`'s answer to `op`, or an `unsupported` error for what `refuses` picks.
fn unless(
    flaky: &Flaky,
    op: Op<'_>,
    refuses: bool,
) -> impl Future<Output = Result<Reply, Error>> + Send {
    let refused = refuses.then(|| op.unsupported());
    let inner = flaky.call(op);
    async move {
        match refused {
            Some(e) => Err(e),
            None => inner.await,
        }
    }
}

impl Store for NoAcquire {
    fn call(&self, op: Op<'_>) -> impl Future<Output = Result<Reply, Error>> + Send {
        unless(&self.0, op, matches!(op, Op::Acquire { .. }))
    }
}

impl Store for NoAdjust {
    fn call(&self, op: Op<'_>) -> impl Future<Output = Result<Reply, Error>> + Send {
        unless(&self.0, op, matches!(op, Op::Adjust { .. }))
    }
}

#[test]
fn a_booking_the_store_made_is_cancelled_in_the_store_in_every_mode() {
    let (clock, flaky, _) = setup();
    let p = policy("2/min").reservable().unwrap();
    let open = Fallback::new(flaky.clone(), FailMode::Open);
    let local = local_fallback(&clock, &flaky);
    assert_eq!(book_and_cancel(&open, b"a", &p), Cancelled::Returned);
    assert_eq!(book_and_cancel(&local, b"b", &p), Cancelled::Returned);
}

/// Books `key`'s quota, then the next slot, and cancels that: a store's booking.
fn book_and_cancel<S: Store>(store: &S, key: &[u8], p: &Reservable) -> Cancelled {
    let wait = Duration::from_secs(60);
    now(store.reserve(key, p, 2, wait)).unwrap().unwrap();
    let next = now(store.reserve(key, p, 1, wait)).unwrap().unwrap();
    assert_eq!(next.decision.source, Source::Store);
    assert!(next.wait > Duration::ZERO);
    now(store.cancel(key, p, &next)).unwrap().unwrap()
}

#[test]
fn in_flight_slots_fail_open_or_are_held_in_the_local_share() {
    let (clock, flaky, _) = setup();
    let limit = ConcurrencyLimit::new("uploads", 4).unwrap();
    flaky.set(Health::Down);
    let open = Fallback::new(flaky.clone(), FailMode::Open);
    let permits: Vec<_> = (0..6)
        .map(|_| now(open.acquire(b"k", &limit)).unwrap().unwrap().permit())
        .collect();
    assert!(
        permits.iter().all(Option::is_some),
        "failing open grants every slot"
    );

    let local = local_fallback(&clock, &flaky);
    let held: Vec<_> = (0..3)
        .map(|_| now(local.acquire(b"k", &limit)).unwrap().unwrap().permit())
        .collect();
    assert!(
        held[0].is_some() && held[1].is_some(),
        "this node's half of 4"
    );
    assert!(held[2].is_none());
}

#[test]
fn a_charge_the_store_cannot_make_is_its_error_not_a_local_charge() {
    let (clock, flaky, _) = setup();
    let p = policy("10/min");
    let local = local_fallback(&clock, &NoAdjust(flaky.clone()));
    let err = now(local.adjust(b"k", &p, Adjustment::Charge(3)))
        .unwrap()
        .unwrap_err();
    assert!(!err.is_store_failure(), "{err}");
    // The store is down now: the local share was never charged.
    flaky.set(Health::Down);
    assert_eq!(check(&local, b"k", &p).unwrap().remaining, 4);
}
