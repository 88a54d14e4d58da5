//! Policies from a file (feature `file`): the policies with their modes and penalties, the
//! key and the routes of a [`RateLimitLayer`], read from TOML and reloaded while it runs.
//!
//! ```toml
//! [key]
//! kind = "client_ip"                 # peer_ip | client_ip | header | bearer | global
//! trusted_proxies = ["10.0.0.0/8"]
//!
//! [[policy]]
//! name = "per-ip"
//! quota = "10/s burst 20"
//! default = true                     # on every request no route names policies for
//!
//! [[policy]]
//! name = "login"
//! algorithm = "sliding_log"          # gcra by default
//! quota = "5/10min"
//! mode = "enforce"                   # enforce | shadow | off
//! penalty = { after = 5, within = "10min", ban = "15min", growth = 2, max_ban = "1day" }
//!
//! [[route]]
//! path = "/login"                    # a path prefix: /login and /login/...
//! methods = ["POST"]                 # every method when left out
//! policies = ["per-ip", "login"]
//!
//! [[route]]
//! path = "/health"
//! skip = true                        # never limited
//! ```
//!
//! [`PolicyFile::load`] reads and checks the whole file; a bad one is a [`FileError`]
//! naming the file, the line, the field and what was expected there, for TOML syntax and
//! for every check after it (an unknown algorithm, a bad quota, a route naming no policy).
//! [`PolicyFile::layer`] builds the layer and a [`FileLimits`] handle, whose
//! [`reload`](FileLimits::reload) applies a changed file to the running layer, and whose
//! [`reload_on_hangup`](FileLimits::reload_on_hangup) does so on each `SIGHUP`.
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
//! [`crate::guide::policy_file`] is the full reference of the format, with the errors and what a
//! reload does and refuses.

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
    /// `None`: the file gives no mode, and the policy keeps the one the layer started it
    /// with (enforced, or shadow under `layer_with` with [`Modes::all`](crate::Modes::all)).
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
    /// none, and the layer's own applies: enforced unless [`Modes::all`](crate::Modes::all)
    /// says otherwise). A policy
    /// carries its quota, algorithm and penalty.
    pub fn policies(&self) -> impl Iterator<Item = (&Policy, Option<Enforcement>)> {
        self.policies.iter().map(|e| (&e.policy, e.mode))
    }

    /// The names of the policies checked on a request no route names policies for
    /// (`default = true`), in the file's order.
    pub fn defaults(&self) -> impl Iterator<Item = &str> {
        self.policies.iter().filter(|e| e.default).map(|e| e.name())
    }

    /// The key extractor `[key]` names (the peer's IP when there is no `[key]`).
    pub fn key(&self) -> FileKey {
        self.key.extractor()
    }

    /// The layer this file describes, over `store`, and the handle that reloads it.
    ///
    /// Every policy is known to the layer by name (changeable through
    /// [`FileLimits::live`]); the routes are the layer's
    /// [chooser](RateLimitLayer::choose), which takes each route's policies from that
    /// handle (worked out again whenever the routes or the policies change), so a quota or
    /// mode a reload changes applies to every route at once.
    pub fn layer<St>(&self, store: St) -> (RateLimitLayer<St, FileKey>, FileLimits)
    where
        St: Store + Clone + Send + Sync + 'static,
    {
        self.layer_with(store, |layer| layer)
    }

    /// [`layer`](Self::layer), with more builder methods applied before the handle is
    /// taken: `file.layer_with(store, |l| l.modes(Modes::new().all(Enforcement::Shadow)).unwrap())`.
    /// The builder method that sets modes ([`modes`](RateLimitLayer::modes)) gives a layer
    /// a live handle of its own, so it goes here; a policy the file gives no `mode` keeps
    /// the mode it set across reloads. The others (`refusals`, `fail_mode`, ...) may as
    /// well come after [`layer`](Self::layer). The policies, the routes and the key are
    /// the file's: do not call `and_policy` or [`Modes::register`](crate::Modes::register)
    /// (the file's routes would never name the policy, and a reload would refuse a policy
    /// the file lacks), nor
    /// [`choose`](RateLimitLayer::choose) or [`key`](RateLimitLayer::key), which would
    /// replace the file's routes or key.
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
        let registered = parsed[1..]
            .iter()
            .cloned()
            .fold(Modes::new(), Modes::register);
        let modes = self
            .policies
            .iter()
            .filter_map(|e| Some((e.name(), e.mode?)))
            .fold(registered, |modes, (name, mode)| modes.policy(name, mode));
        let layer = RateLimitLayer::new(store, parsed[0].clone());
        // Every name is known: `modes` registers every policy before it sets modes.
        let layer = match layer.clone().modes(modes) {
            Ok(layer) => layer,
            Err(_) => layer,
        };
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
