//! envoyproxy/ratelimit's configuration, unchanged: one YAML file per domain, or a
//! directory of them, read into a [`Config`] that finds the limit of each request
//! descriptor.
//!
//! ```yaml
//! domain: messaging
//! descriptors:
//!   - key: message_type
//!     value: marketing
//!     descriptors:
//!       - key: to_number
//!         rate_limit:
//!           unit: day
//!           requests_per_unit: 5
//!   - key: to_number
//!     rate_limit:
//!       unit: day
//!       requests_per_unit: 100
//!       algorithm: sliding_window   # floodwall's additions: algorithm, burst, penalty
//! ```
//!
//! ```
//! use floodwall_rls::config::Config;
//!
//! let config = Config::from_yaml("messaging.yaml", r#"
//! domain: messaging
//! descriptors:
//!   - key: to_number
//!     rate_limit: { unit: day, requests_per_unit: 100 }
//! "#)?;
//! let limit = config.limit("messaging", [("to_number", "2061111111")]).expect("a limit");
//! assert_eq!(limit.requests_per_unit(), 100);
//! assert!(config.limit("messaging", [("from_number", "2061111111")]).is_none());
//! # Ok::<(), floodwall_rls::config::FileError>(())
//! ```
//!
//! # The format
//!
//! As the reference reads it: a `domain` and its `descriptors`, each with a `key`, an
//! optional `value`, an optional `rate_limit` (`unit`: second, minute, hour, day, week,
//! month or year in any case; `requests_per_unit`, 0 refusing every request; `name`;
//! `replaces`, a list of `- name:`; or `unlimited: true` alone), `shadow_mode`,
//! `detailed_metric` and nested `descriptors`. A `value` ending in `*` matches any value
//! starting with what precedes it. Scalars are read as the reference's YAML 1.1 library
//! reads them: `value: 500` is the text "500", `shadow_mode: yes` is true,
//! `requests_per_unit: 0x10` is 16.
//!
//! floodwall adds three fields to `rate_limit`: `algorithm` (`gcra`, the default,
//! `token_bucket`, `leaky_bucket`, `fixed_window`, `sliding_window`, `sliding_log`),
//! `burst` (GCRA and the buckets) and `penalty` (the TOML policy file's fields as a
//! mapping: `after`, `within`, `ban`, optional `growth`, `max_ban`, `forget_after`). Each
//! limit with a rate becomes a [`Policy`](floodwall_core::Policy) of `requests_per_unit`
//! per `unit`, named after its domain and descriptor path (see [`RateLimit::policy`]).
//!
//! # Where it differs from the reference
//!
//! It refuses what the reference would load but never meant: a `rate_limit` without
//! `requests_per_unit` (the reference reads 0 and blocks everything), `unlimited: true`
//! beside a `requests_per_unit`, a second YAML document in a file (the reference reads the
//! first only). A field of the format in the wrong place (`unit` beside `key`) loads, as
//! in the reference, and is reported in [`Config::warnings`]. A `value` with `*` matches at
//! every level (the reference's matches at the top level only), and a key and value are
//! matched as a pair (the reference joins them with `_`, so that key `a_b` and key `a`
//! with value `b` collide).
//!
//! # Errors
//!
//! A bad file is a [`FileError`] naming the file, line, column and field path
//! (`descriptors[1].rate_limit.unit`) and what was expected there; nothing is loaded. The
//! loader never panics, whatever the input: it refuses non-UTF-8 text, nesting deeper than
//! 128 levels and files of more than a million nodes, aliases expanded.

mod build;
mod error;
mod limit;
mod penalty;
mod reader;
mod tree;
mod yaml;

use std::collections::BTreeMap;
use std::path::Path;

pub use error::{ErrorKind, FileError, Warning};
pub use limit::{RateLimit, Rule, Unit};
pub use tree::{Descriptor, Domain};

/// Every domain of a configuration, checked.
#[derive(Debug, Clone, Default)]
pub struct Config {
    domains: BTreeMap<String, Domain>,
    warnings: Vec<Warning>,
}

impl Config {
    /// Reads a file (one domain), or every `*.yaml` and `*.yml` file directly in a
    /// directory (one domain each, in name order; names starting with `.` are skipped, so
    /// are subdirectories, as a Kubernetes ConfigMap's `..data` is).
    pub fn load(path: impl AsRef<Path>) -> Result<Config, FileError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let unreadable = |origin: &str, e: std::io::Error| {
            FileError::new(
                ErrorKind::Unreadable,
                origin,
                None,
                "",
                "a readable configuration file or directory",
                Some(e.to_string()),
            )
        };
        let meta = std::fs::metadata(path).map_err(|e| unreadable(&origin, e))?;
        if !meta.is_dir() {
            let text = read_text(path, &origin)?;
            return Config::from_files([(origin.as_str(), text.as_str())]);
        }
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| unreadable(&origin, e))? {
            let entry = entry.map_err(|e| unreadable(&origin, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            if !yaml || name.starts_with('.') {
                continue;
            }
            let file = entry.path();
            let file_origin = file.display().to_string();
            let is_file = std::fs::metadata(&file)
                .map_err(|e| unreadable(&file_origin, e))?
                .is_file();
            if is_file {
                files.push((name.into_owned(), file, file_origin));
            }
        }
        if files.is_empty() {
            return Err(FileError::new(
                ErrorKind::NoFiles,
                &origin,
                None,
                "",
                "at least one *.yaml or *.yml file (one per domain)",
                Some("none".to_owned()),
            ));
        }
        files.sort();
        let mut texts = Vec::with_capacity(files.len());
        for (_, file, file_origin) in &files {
            texts.push((file_origin.as_str(), read_text(file, file_origin)?));
        }
        Config::from_files(texts.iter().map(|(o, t)| (*o, t.as_str())))
    }

    /// Reads one domain's YAML; `origin` names it in errors (a file name).
    pub fn from_yaml(origin: &str, text: &str) -> Result<Config, FileError> {
        Config::from_files([(origin, text)])
    }

    /// Reads several domains' YAML, one `(origin, text)` each; a domain given twice is an
    /// error, as the reference's is by default.
    pub fn from_files<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Config, FileError> {
        let mut config = Config::default();
        for (origin, text) in files {
            let domain = build::read_domain(origin, text, &mut config.warnings)?;
            if let Some(first) = config.domains.get(domain.name()) {
                return Err(FileError::new(
                    ErrorKind::DuplicateDomain,
                    origin,
                    None,
                    "domain",
                    "a domain no other file defines (one file per domain)",
                    Some(format!(
                        "{}, already defined in {}",
                        yaml::quote(domain.name()),
                        first.origin()
                    )),
                ));
            }
            config.domains.insert(domain.name().to_owned(), domain);
        }
        Ok(config)
    }

    /// The domain called `name`.
    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// Every domain, by name.
    pub fn domains(&self) -> impl Iterator<Item = &Domain> {
        self.domains.values()
    }

    /// What the files set where it has no effect, ignored as the reference ignores it.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The limit that applies to one request descriptor: its entries, `(key, value)`, in
    /// order. Allocates nothing.
    ///
    /// As the reference decides: the first entry is looked up among the domain's
    /// descriptors, each next one among the nested descriptors of the one the entry
    /// before reached. At each level a descriptor with the entry's key and value wins over
    /// one whose value ends in `*` and prefixes the entry's (the first in the file), which
    /// wins over one with the key alone. The limit is that of the descriptor the last
    /// entry reaches. There is none when the domain is unknown, an entry reaches nothing
    /// (a descriptor with more entries than the tree is deep along its path, too), or the
    /// last descriptor reached has no `rate_limit`.
    ///
    /// A request's descriptors are looked up one by one; several limits apply to a
    /// request through several descriptors, and [`drop_replaced`] then applies the
    /// `replaces` between them.
    pub fn limit<K, V>(
        &self,
        domain: &str,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Option<&RateLimit>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        self.domains.get(domain)?.limit(entries)
    }
}

/// Applies `replaces` across the limits of one request's descriptors, as the reference
/// does: a limit whose name another limit in `limits` replaces is set to `None`, and so
/// not checked. The others are left as they are.
pub fn drop_replaced(limits: &mut [Option<&RateLimit>]) {
    let replaced = |name: &str, limits: &[Option<&RateLimit>]| {
        limits
            .iter()
            .flatten()
            .any(|other| other.replaces().iter().any(|r| r == name))
    };
    let dropped: Vec<bool> = limits
        .iter()
        .map(|limit| {
            limit
                .and_then(RateLimit::name)
                .is_some_and(|n| replaced(n, limits))
        })
        .collect();
    for (limit, dropped) in limits.iter_mut().zip(dropped) {
        if dropped {
            *limit = None;
        }
    }
}

/// A file's text, or why it is none.
fn read_text(path: &Path, origin: &str) -> Result<String, FileError> {
    let bytes = std::fs::read(path).map_err(|e| {
        FileError::new(
            ErrorKind::Unreadable,
            origin,
            None,
            "",
            "a readable configuration file",
            Some(e.to_string()),
        )
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let before = String::from_utf8_lossy(valid);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        FileError::new(
            ErrorKind::NotUtf8,
            origin,
            Some(yaml::Pos { line, column }),
            "",
            "UTF-8 text",
            Some(format!(
                "a byte that is not UTF-8 at offset {}",
                valid.len()
            )),
        )
    })
}
