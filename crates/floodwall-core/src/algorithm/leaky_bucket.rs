//! The classic funnel (a leaky bucket with capacity and leak rate): a bucket of capacity
//! `burst` that leaks one unit per interval; a request pours its cost in and passes if it
//! fits.
//!
//! The classic Redis funnel truncates what leaked and resets its clock on every call, so
//! frequent callers stop it leaking. Leaking whole units while keeping the remainder fixes
//! that, and then the time it will be empty, `E`, says everything: the level at `now` is
//! `⌈(E − now) / interval⌉`, and pouring `c` in moves `E` by `c × interval`. That is GCRA
//! with `E` as its TAT and the capacity as its burst, so the funnel runs on `Gcra`
//! (`tests/proptests.rs` checks it against the funnel's picture).
//!
//! A clock behind `E` sees the funnel fuller than it was, never emptier.
