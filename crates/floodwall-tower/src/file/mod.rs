//! Policies from a file (feature `file`): the policies with their modes and penalties, the
//! key and the routes of a [`RateLimitLayer`], read from TOML and reloaded while it runs.
//!
//! [`PolicyFile::load`] reads and checks the whole file (a [`FileError`] names the line,
//! the field and what was expected); [`PolicyFile::layer`] builds the layer and a
//! [`FileLimits`] handle that reloads it.
//!
//! ```
//! use floodwall_core::MemoryStore;
//! use floodwall_tower::file::PolicyFile;
//!
//! let file = PolicyFile::parse(
//!     r#"
//!     [[policy]]
//!     name = "per-ip"
//!     quota = "10/s burst 20"
//!     default = true
//!     "#,
//!     "inline.toml",
//! )?;
//! let (layer, limits) = file.layer(MemoryStore::new());
//! // `.layer(layer)` on the router; `limits.reload(path)` when the file changed.
//! # let _ = (layer, limits);
//! # Ok::<(), floodwall_tower::file::FileError>(())
//! ```
//!
//! [`crate::guide::policy_file`] is the reference of the format, its errors and reloads.

mod build;
mod error;
mod format;
mod key;
mod reload;
mod routes;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use floodwall_core::{Policy, Store};

pub use error::FileError;
pub use key::FileKey;
pub use reload::FileLimits;

use self::error::Source;
use self::key::KeySpec;
use self::routes::{FileChooser, RouteTable};
use crate::{Enforcement, Modes, RateLimitLayer};

/// A policy file, read and checked whole: its policies (with their modes and penalties),
/// its key and its routes. Build the layer with [`layer`](Self::layer).
#[derive(Debug)]
pub struct PolicyFile {
    origin: String,
    key: KeySpec,
    /// Where `[key]` is, for a reload's refusal to change it.
    key_at: Option<FileError>,
    policies: Vec<Entry>,
    routes: RouteTable,
}

/// One `[[policy]]`, checked.
#[derive(Debug)]
struct Entry {
    policy: Policy,
    /// `None`: the file gives no mode, and the policy keeps the one the layer started with.
    mode: Option<Enforcement>,
    default: bool,
    /// Where its name is, for a reload's refusal to add it.
    name_at: FileError,
}

impl Entry {
    fn name(&self) -> &str {
        self.policy.name()
    }
}

impl PolicyFile {
    /// Reads and checks the file at `path`. Errors name `path` as given.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, FileError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| error::unreadable(&origin, &e))?;
        Self::parse(&text, &origin)
    }

    /// Checks a file's text; `origin` names it in errors (a path, or `"POLICY_FILE"`).
    pub fn parse(text: &str, origin: &str) -> Result<Self, FileError> {
        build::parse(Source { origin, text })
    }

    /// The file's policies with their modes, in the file's order (`None`: the file gives
    /// none, and the layer's applies).
    pub fn policies(&self) -> impl Iterator<Item = (&Policy, Option<Enforcement>)> {
        self.policies.iter().map(|e| (&e.policy, e.mode))
    }

    /// The names of the `default = true` policies (for requests no route names policies
    /// for), in the file's order.
    pub fn defaults(&self) -> impl Iterator<Item = &str> {
        self.policies.iter().filter(|e| e.default).map(|e| e.name())
    }

    /// The key extractor `[key]` names (the peer's IP when there is no `[key]`).
    pub fn key(&self) -> FileKey {
        self.key.extractor()
    }

    /// The layer this file describes, over `store`, and the handle that reloads it; the
    /// routes are its [chooser](RateLimitLayer::choose).
    pub fn layer<St>(&self, store: St) -> (RateLimitLayer<St, FileKey>, FileLimits)
    where
        St: Store + Clone + Send + Sync + 'static,
    {
        self.layer_with(store, |layer| layer)
    }

    /// [`layer`](Self::layer), with builder methods applied before the handle is taken:
    /// where [`modes`](RateLimitLayer::modes) goes. Leave the policies, the routes and the
    /// key to the file (see [`crate::guide::policy_file`]).
    pub fn layer_with<St, St2, M>(
        &self,
        store: St,
        customize: impl FnOnce(RateLimitLayer<St, FileKey>) -> RateLimitLayer<St2, FileKey, M>,
    ) -> (RateLimitLayer<St2, FileKey, M>, FileLimits)
    where
        St: Store + Clone + Send + Sync + 'static,
        St2: Clone + Send + Sync + 'static,
    {
        let table = Arc::new(ArcSwap::from_pointee(self.routes.clone()));
        let slot = Arc::new(OnceLock::new());
        let parsed: Arc<[Policy]> = self.policies.iter().map(|e| e.policy.clone()).collect();
        let chooser = FileChooser {
            table: Arc::clone(&table),
            live: Arc::clone(&slot),
            parsed: Arc::clone(&parsed),
            resolved: Default::default(),
        };
        // The chooser names every request's policies, so the layer's own (the first) is
        // only where `new` wants one; the rest are registered by name.
        let by_name = self.policies.iter();
        let modes = Modes {
            all: None,
            registered: parsed[1..].to_vec(),
            by_name: by_name
                .filter_map(|e| Some((e.name().to_owned(), e.mode?)))
                .collect(),
        };
        let layer = RateLimitLayer::new(store, parsed[0].clone());
        // Every name is known: `modes` registers every policy before it sets modes.
        let layer = layer.clone().modes(modes).unwrap_or(layer);
        let layer = layer.key(self.key()).choose(chooser);
        let layer = customize(layer);
        let live = layer.live();
        let _ = slot.set(live.clone());
        // What a policy without a mode in the file runs as, for reloads to keep.
        let started = self
            .policies
            .iter()
            .filter_map(|e| Some((e.name().to_owned(), live.enforcement(e.name())?)))
            .collect();
        let limits = FileLimits::new(live, table, self.key.clone(), started);
        (layer, limits)
    }
}
