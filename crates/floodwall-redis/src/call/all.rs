//! The scripts a store runs for checks of several policies at once (see `crate::all`):
//! with the numbers written in up to the store's bound, then one per combination of
//! algorithms and penalties, reading them from `ARGV`.

use std::sync::Arc;

use redis::{Script, ScriptInvocation};

use super::Scripts;
use crate::kind::Layout;
use crate::script::{self, PenaltyParams};

/// What a check of several policies runs (see [`Scripts::all`]).
pub(crate) struct All {
    script: Arc<Script>,
    /// The policies' numbers the script reads from `ARGV` (see [`script::all::all`]); empty
    /// when they are written in.
    numbers: Vec<u64>,
}

impl All {
    /// The EVALSHA call deciding `cost` on `keys` (the rate keys, then the penalized
    /// policies' keys) at `now` (µs; `None` reads the server's clock). `ARGV`: the cost,
    /// the policies' numbers unless written in, then the time if explicit.
    pub(crate) fn invocation(
        &self,
        keys: &[Vec<u8>],
        cost: u64,
        now: Option<u64>,
    ) -> ScriptInvocation<'_> {
        let mut inv = self.script.prepare_invoke();
        for k in keys {
            inv.key(k.as_slice());
        }
        inv.arg(cost);
        for &n in self.numbers.iter().chain(&now) {
            inv.arg(n);
        }
        inv
    }
}

impl Scripts {
    /// The script deciding one key under each of `layouts` (with `penalties`) at once, or
    /// `None` (see [`script::all::all`]): numbers written in up to the bound, past it one
    /// script per combination of kinds and penalties, reading them from `ARGV`.
    pub(crate) fn all(
        &self,
        layouts: &[Layout],
        penalties: &[Option<PenaltyParams>],
    ) -> Option<All> {
        let text_of: Vec<_> = layouts
            .iter()
            .zip(penalties)
            .map(|(l, p)| (l.kind, l.args, *p))
            .collect();
        let map = self.all.pin();
        if let Some(script) = map.get(&text_of) {
            return Some(All {
                script: Arc::clone(script),
                numbers: Vec::new(),
            });
        }
        // Checked, then inserted, without a lock, as `single`.
        if map.len() < self.bound {
            let text = script::all::all(layouts, penalties, true)?;
            let script = map.get_or_insert_with(text_of, || Arc::new(Script::new(&text)));
            return Some(All {
                script: Arc::clone(script),
                numbers: Vec::new(),
            });
        }
        let shape: Vec<_> = text_of.iter().map(|&(k, _, p)| (k, p.is_some())).collect();
        let read = self.all_read.pin();
        let script = match read.get(&shape) {
            Some(script) => Arc::clone(script),
            None => {
                let text = script::all::all(layouts, penalties, false)?;
                Arc::clone(read.get_or_insert_with(shape, || Arc::new(Script::new(&text))))
            }
        };
        let numbers = layouts
            .iter()
            .zip(penalties)
            .flat_map(|(l, p)| l.params().iter().chain(p.iter().flatten()).copied())
            .collect();
        Some(All { script, numbers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_several_policies_share_a_script_reading_their_numbers() {
        const BOUND: usize = 3;
        let scripts = Scripts::new(BOUND);
        let layout = |p: floodwall_core::Policy| Layout::of(p.parameters()).unwrap();
        let global = layout(floodwall_core::Policy::gcra("g", "99/s".parse().unwrap()).unwrap());
        let penalty = [2, 3, 4, 1, 4, 5];
        let mut shared = None;
        for n in 1..=BOUND as u64 + 3 {
            let fw = floodwall_core::Policy::fixed_window("t", format!("{n}/s").parse().unwrap());
            let fw = layout(fw.unwrap());
            let all = scripts.all(&[global, fw], &[None, Some(penalty)]).unwrap();
            if n as usize <= BOUND {
                assert!(all.numbers.is_empty(), "{n}: written in");
                continue;
            }
            // The gcra's two, the window's two, its penalty's six.
            let mut numbers = global.params().to_vec();
            numbers.extend(fw.params());
            numbers.extend(penalty);
            assert_eq!(all.numbers, numbers, "{n}");
            let first = shared.get_or_insert_with(|| Arc::clone(&all.script));
            let one = Arc::ptr_eq(first, &all.script);
            assert!(one, "{n}: one script past the bound");
        }
        assert_eq!(scripts.all.len(), BOUND);
        assert_eq!(scripts.all_read.len(), 1);
        // Another combination of penalties has a script of its own.
        let fw = layout(floodwall_core::Policy::fixed_window("t", "7/h".parse().unwrap()).unwrap());
        let plain = scripts.all(&[global, fw], &[None, None]).unwrap();
        assert!(!Arc::ptr_eq(shared.as_ref().unwrap(), &plain.script));
        assert_eq!(plain.numbers.len(), 4);
    }
}
