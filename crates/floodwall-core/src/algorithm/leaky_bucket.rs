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
//! store's lock-free path. `tests/proptests.rs` checks it against the funnel's picture.
//!
//! A clock behind `E` sees the funnel fuller than it was, never emptier.
