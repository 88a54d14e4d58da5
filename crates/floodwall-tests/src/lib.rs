//! floodwall's cross-crate tests live in `tests/`: the Redis store and the tower layer
//! together (faults, hostile input, stalls, HTTP over a shared Redis) and the decision
//! vectors every store must reproduce. This library is empty; the crate is not published.
