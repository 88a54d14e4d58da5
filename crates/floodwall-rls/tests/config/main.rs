//! The configuration module from outside: envoyproxy/ratelimit's documented examples
//! (README, "Examples" 1 to 9) load unchanged and decide as that documentation says
//! (examples.rs); reading as the reference reads and floodwall's additions (reading.rs);
//! every error names its file, line and field (errors.rs); files and directories
//! (files.rs); hostile input (hostile.rs).

use floodwall_rls::config::{Config, FileError, Unit};

mod errors;
mod examples;
mod files;
mod hostile;
mod reading;

fn load(text: &str) -> Config {
    Config::from_yaml("test.yaml", text).unwrap_or_else(|e| panic!("{e}"))
}

fn refuse(text: &str) -> FileError {
    match Config::from_yaml("test.yaml", text) {
        Ok(_) => panic!("loaded:\n{text}"),
        Err(e) => e,
    }
}

/// `(requests_per_unit, unit)` of the limit one request descriptor reaches.
fn rate(config: &Config, domain: &str, entries: &[(&str, &str)]) -> Option<(u32, Unit)> {
    config
        .limit(domain, entries.iter().copied())
        .map(|l| (l.requests_per_unit(), l.unit().expect("a unit")))
}
