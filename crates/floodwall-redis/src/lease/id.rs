//! Lease ids: unique across every process sharing a Redis, with no coordination.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// 64 random bits drawn once per process, then a counter: 128 bits in all, written as 32
/// hex digits. Two processes share a prefix with probability 2^-64 per pair; within one
/// process the counter never repeats. A counter behind a random prefix rather than 128
/// random bits per lease: one system call per process, not per request.
static PREFIX: LazyLock<u64> = LazyLock::new(|| {
    // The OS's randomness (getrandom), since lease ids must differ between processes
    // started at the same instant from the same image; should it ever fail, the time and
    // the process id still tell processes apart on one host, and the chance that two hosts
    // meet there is small.
    getrandom::u64().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (u64::from(std::process::id()) << 32)
    })
});

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A new lease id, never given before in this process.
pub(crate) fn next() -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}{n:016x}", *PREFIX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_distinct_and_fixed_width() {
        let (a, b) = (super::next(), super::next());
        assert_ne!(a, b);
        assert_eq!((a.len(), b.len()), (32, 32));
        assert_eq!(a[..16], b[..16], "one prefix per process");
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
