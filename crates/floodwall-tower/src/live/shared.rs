//! A layer's policies and modes, shared by its live handles and the cells of its services:
//! a change is made here once and sent to every cell.

use std::sync::Arc;
#[cfg(feature = "live")]
use std::sync::{Mutex, PoisonError, Weak};

#[cfg(feature = "live")]
use arc_swap::ArcSwap;

use super::Cell;
use super::state::LiveState;
#[cfg(feature = "live")]
use super::{Apply, LiveError};
use crate::config::Config;

/// The current policies and modes, and the cells that build their versions from them.
pub(crate) struct Shared {
    /// Read without a lock (a chooser may read it per request).
    #[cfg(feature = "live")]
    state: ArcSwap<LiveState>,
    /// Without the `live` feature they never change once the layer is built.
    #[cfg(not(feature = "live"))]
    state: Arc<LiveState>,
    /// The cells to send each change to; holding it makes changes one at a time.
    #[cfg(feature = "live")]
    cells: Mutex<Vec<Weak<dyn Apply>>>,
}

impl Shared {
    pub(crate) fn new(state: LiveState) -> Arc<Self> {
        Arc::new(Self {
            #[cfg(feature = "live")]
            state: ArcSwap::from_pointee(state),
            #[cfg(not(feature = "live"))]
            state: Arc::new(state),
            #[cfg(feature = "live")]
            cells: Mutex::new(Vec::new()),
        })
    }

    /// The current policies and modes.
    pub(crate) fn state(&self) -> Arc<LiveState> {
        #[cfg(feature = "live")]
        return self.state.load_full();
        #[cfg(not(feature = "live"))]
        Arc::clone(&self.state)
    }

    /// A new `Shared` from this one's state changed by `change`, so that layers built from
    /// one base do not share their changes.
    pub(crate) fn fork(&self, change: impl FnOnce(&mut LiveState)) -> Arc<Self> {
        let mut state = LiveState::clone(&self.state());
        change(&mut state);
        Self::new(state)
    }

    /// Applies `change` and sends the result to every cell; nothing changes if it fails.
    #[cfg(feature = "live")]
    pub(crate) fn update(
        &self,
        change: impl FnOnce(&mut LiveState) -> Result<(), LiveError>,
    ) -> Result<(), LiveError> {
        let mut cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = LiveState::clone(&self.state.load());
        change(&mut state)?;
        let state = Arc::new(state);
        self.state.store(Arc::clone(&state));
        cells.retain(|cell| match cell.upgrade() {
            Some(cell) => {
                cell.apply(&state);
                true
            }
            None => false,
        });
        Ok(())
    }

    /// A cell for services configured as `template`, following this state's changes (none
    /// without the `live` feature).
    pub(crate) fn cell<St, K>(&self, template: Config<St, K>) -> Arc<Cell<St, K>>
    where
        St: Clone + Send + Sync + 'static,
        K: Send + Sync + 'static,
    {
        #[cfg(feature = "live")]
        let mut cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
        let cell = Arc::new(Cell::new(template, self.state()));
        #[cfg(feature = "live")]
        {
            let weak: Weak<dyn Apply> = Arc::downgrade(&cell) as Weak<Cell<St, K>>;
            cells.retain(|c| c.strong_count() > 0);
            cells.push(weak);
        }
        cell
    }
}
