//! Applying a changed policy file to a running layer: [`FileLimits`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use super::key::KeySpec;
use super::routes::RouteTable;
use super::{FileError, PolicyFile};
use crate::Enforcement;
use crate::live::LiveLimits;

/// The handle on a layer built from a policy file: reloads the file into the running
/// layer, through its [`LiveLimits`]. Cheap to clone. An invalid file, or one with another
/// key or other policy names, changes nothing ([`crate::guide::policy_file`]).
#[derive(Clone)]
pub struct FileLimits {
    live: LiveLimits,
    table: Arc<ArcSwap<RouteTable>>,
    /// The key the layer runs with; the lock also makes reloads one at a time.
    key: Arc<Mutex<KeySpec>>,
    /// Each policy's mode once the layer was built: what a policy the file gives no mode
    /// runs as, so a reload never turns a layer-wide shadow into enforcement.
    started: Arc<HashMap<String, Enforcement>>,
}

impl FileLimits {
    pub(super) fn new(
        live: LiveLimits,
        table: Arc<ArcSwap<RouteTable>>,
        key: KeySpec,
        started: HashMap<String, Enforcement>,
    ) -> Self {
        Self {
            live,
            table,
            key: Arc::new(Mutex::new(key)),
            started: Arc::new(started),
        }
    }

    /// The layer's live handle: read the current policies and modes, or change one
    /// without the file (a later reload sets it back to what the file says).
    pub fn live(&self) -> &LiveLimits {
        &self.live
    }

    /// Reads the file at `path` and applies it (see [`apply`](Self::apply)). Returns the
    /// names of the policies whose quota, algorithm, penalty or mode changed.
    pub fn reload(&self, path: impl AsRef<Path>) -> Result<Vec<String>, FileError> {
        self.apply(&PolicyFile::load(path)?)
    }

    /// Applies a checked file to the running layer: its policies' quotas, algorithms,
    /// penalties and modes, and its routes. Refused, changing nothing, when it has
    /// another key, a policy the layer was not built with, or lacks one it was.
    /// Returns the names of the policies that changed.
    pub fn apply(&self, file: &PolicyFile) -> Result<Vec<String>, FileError> {
        let key = self.key.lock().unwrap_or_else(|e| e.into_inner());
        if file.key != *key {
            let expected = "the key the service started with (changing the key needs a \
                            restart: every count would start afresh under new keys)";
            return Err(match &file.key_at {
                Some(at) => at.with("key", expected, None),
                None => FileError::nowhere(&file.origin, "key", expected, None),
            });
        }
        let running = self.live.policies();
        for entry in &file.policies {
            if !running.iter().any(|(p, _)| p.name() == entry.name()) {
                let (at, name) = (&entry.name_at, entry.name());
                let found = format!("\"{name}\", a new policy: adding a policy needs a restart");
                let expected = "the name of a policy the service started with";
                return Err(at.with(at.field(), expected, Some(found)));
            }
        }
        for (policy, _) in &running {
            if !file.policies.iter().any(|e| e.name() == policy.name()) {
                let found = format!(
                    "no policy \"{}\": removing a policy needs a restart (mode = \"off\" stops \
                     checking it)",
                    policy.name()
                );
                let expected = "every policy the service started with";
                return Err(FileError::nowhere(
                    &file.origin,
                    "policy",
                    expected,
                    Some(found),
                ));
            }
        }
        let mut changed = Vec::new();
        for entry in &file.policies {
            let name = entry.name();
            let at = &entry.name_at;
            let expected = "a policy the layer accepts";
            let refused =
                |e: crate::live::LiveError| at.with(at.field(), expected, Some(e.to_string()));
            let mut differs = false;
            if self.live.policy(name).as_ref() != Some(&entry.policy) {
                self.live
                    .set_policy(entry.policy.clone())
                    .map_err(refused)?;
                differs = true;
            }
            let mode = entry
                .mode
                .or_else(|| self.started.get(name).copied())
                .unwrap_or_default();
            if self.live.enforcement(name) != Some(mode) {
                self.live.set_enforcement(name, mode).map_err(refused)?;
                differs = true;
            }
            if differs {
                changed.push(name.to_owned());
            }
        }
        self.table.store(Arc::new(file.routes.clone()));
        Ok(changed)
    }

    /// Reloads the file at `path` on every `SIGHUP`, on a task of its own (call it within
    /// a tokio runtime), logging each outcome. Why a signal and not a watch:
    /// [`crate::guide::policy_file`]; other triggers call [`reload`](Self::reload).
    #[cfg(unix)]
    pub fn reload_on_hangup(
        &self,
        path: impl AsRef<Path>,
    ) -> std::io::Result<tokio::task::JoinHandle<()>> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = signal(SignalKind::hangup())?;
        let this = self.clone();
        let path = path.as_ref().to_owned();
        Ok(tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                // A policy file is small: read it on this task.
                match this.reload(&path) {
                    Ok(changed) => tracing::info!(
                        target: "floodwall",
                        file = %path.display(),
                        ?changed,
                        "policy file reloaded"
                    ),
                    Err(e) => tracing::warn!(
                        target: "floodwall",
                        error = %e,
                        "policy file not reloaded: nothing changed"
                    ),
                }
            }
        }))
    }
}

impl std::fmt::Debug for FileLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileLimits")
            .field("live", &self.live)
            .finish_non_exhaustive()
    }
}
