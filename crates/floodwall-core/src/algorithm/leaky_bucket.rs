//! The classic funnel (a leaky bucket with capacity and leak rate): a bucket of capacity
//! `burst` that leaks one unit per interval; a request pours its cost in and passes if it
//! fits.
//!
//! The classic Redis funnel truncates the leaked amount to an integer and resets its clock
//! on every call, so frequent callers stop it leaking at all. Leaking whole units while keeping the
//! remainder of the interval fixes that, and then the funnel needs no (level, time) pair: the
//! time it will be empty, `E`, says everything. The level at `now` is `⌈(E − now) / interval⌉`
//! units, a request of cost `c` fits if that plus `c` is at most the capacity, and pouring
//! it in moves `E` by `c × interval`. That is GCRA, with `E` as its theoretical arrival time
//! and the capacity as its burst: the funnel runs on `Gcra` (`Gcra::new(capacity,
//! interval)`), so both algorithms share one implementation, one Redis script and the memory
//! store's lock-free path. This module keeps the funnel's picture, checked against GCRA.
//!
//! A clock behind `E` sees the funnel fuller than it was, never emptier.

#[cfg(test)]
mod tests {
    use super::super::gcra::Gcra;

    const CAPACITY: u64 = 3;
    const INTERVAL: u64 = 100;

    /// The funnel's level at `now` when it is empty at `e`.
    fn level(e: u64, now: u64) -> u64 {
        e.saturating_sub(now).div_ceil(INTERVAL)
    }

    #[test]
    fn leaks_one_unit_per_interval_keeping_the_remainder() {
        let f = Gcra::new(CAPACITY, INTERVAL).unwrap();
        let (_, e) = f.decide(0, 1_000, 3);
        let e = e.unwrap();
        assert_eq!(level(e, 1_000), 3);
        // Called every 60 µs: a truncating funnel would never leak; this one leaks at 1_100.
        assert_eq!(level(e, 1_060), 3);
        let (raw, _) = f.decide(e, 1_060, 1);
        assert_eq!((raw.allowed, raw.retry), (false, 40));
        let (raw, e2) = f.decide(e, 1_120, 1);
        assert!(raw.allowed);
        // Full again, and the next unit leaks 80 µs on, at 1_200: the remainder was kept.
        assert_eq!(level(e2.unwrap(), 1_120), 3);
        assert_eq!(level(e2.unwrap(), 1_200), 2);
        assert_eq!((raw.remaining, raw.reset), (0, 280));
    }

    #[test]
    fn an_emptied_funnel_restarts_its_clock() {
        let f = Gcra::new(CAPACITY, INTERVAL).unwrap();
        let (raw, e) = f.decide(100, 10_050, 1);
        assert_eq!((raw.allowed, raw.remaining, raw.reset), (true, 2, 100));
        assert_eq!(e, Some(10_150));
    }

    #[test]
    fn a_capacity_that_overflows_is_refused() {
        assert!(Gcra::new(u64::MAX, 2).is_none());
    }
}
