//! The checks an [`Op::CheckAll`](super::Op::CheckAll) decides together: one key under
//! several policies (a client under all its limits), or a key, policy and cost each (a
//! gateway's descriptors), held by every store through the same accessors.

use crate::{Error, Policy};

/// One check of a [`Checks`]: a request of `cost` for `key` under `policy`.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The client's key: any bytes.
    pub key: &'a [u8],
    /// Which limit; it also namespaces the key.
    pub policy: &'a Policy,
    /// What the request spends under it; 0 reads the state and records nothing.
    pub cost: u64,
}

/// Several checks decided at once, all or nothing: recorded in all if all allow, else in
/// none ([all or nothing](crate::guide::all_or_nothing)).
///
/// Made by [`StoreExt::check_all`](super::StoreExt::check_all) (one key and cost under
/// several policies) and [`StoreExt::check_all_of`](super::StoreExt::check_all_of) (each
/// its own); a store reads both through [`len`](Self::len), [`get`](Self::get) and
/// [`iter`](Self::iter).
#[derive(Debug, Clone, Copy)]
pub enum Checks<'a> {
    /// One key and cost under every policy, in order.
    OneKey {
        /// The client's key.
        key: &'a [u8],
        /// The limits.
        policies: &'a [Policy],
        /// What the request spends under each.
        cost: u64,
    },
    /// A key, policy and cost each, in order.
    Each(&'a [Check<'a>]),
}

impl<'a> Checks<'a> {
    /// How many checks, and so how many decisions the reply holds.
    pub fn len(&self) -> usize {
        match self {
            Self::OneKey { policies, .. } => policies.len(),
            Self::Each(checks) => checks.len(),
        }
    }

    /// Whether there is nothing to check.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Check `i`; it panics when `i` is not below [`len`](Self::len), as indexing does.
    pub fn get(&self, i: usize) -> Check<'a> {
        match *self {
            Self::OneKey {
                key,
                policies,
                cost,
            } => Check {
                key,
                policy: &policies[i],
                cost,
            },
            Self::Each(checks) => checks[i],
        }
    }

    /// The checks, in order.
    pub fn iter(&self) -> Iter<'a> {
        match *self {
            Self::OneKey {
                key,
                policies,
                cost,
            } => Iter(Each::OneKey {
                key,
                policies: policies.iter(),
                cost,
            }),
            Self::Each(checks) => Iter(Each::Each(checks.iter())),
        }
    }

    /// The one key every check is for, if they share one.
    pub fn shared_key(&self) -> Option<&'a [u8]> {
        match *self {
            Self::OneKey { key, .. } => Some(key),
            Self::Each(checks) => {
                let (first, rest) = checks.split_first()?;
                rest.iter().all(|c| c.key == first.key).then_some(first.key)
            }
        }
    }

    /// The one cost every check spends, if they share one.
    pub fn shared_cost(&self) -> Option<u64> {
        match *self {
            Self::OneKey { cost, .. } => Some(cost),
            Self::Each(checks) => {
                let (first, rest) = checks.split_first()?;
                rest.iter()
                    .all(|c| c.cost == first.cost)
                    .then_some(first.cost)
            }
        }
    }

    /// [`Error::CostTooHigh`] when a check's cost can never pass its policy.
    pub fn check_costs(&self) -> Result<(), Error> {
        self.iter().try_for_each(|c| c.policy.check_cost(c.cost))
    }
}

/// The checks of a [`Checks`], in order ([`Checks::iter`]).
#[derive(Debug, Clone)]
pub struct Iter<'a>(Each<'a>);

#[derive(Debug, Clone)]
enum Each<'a> {
    OneKey {
        key: &'a [u8],
        policies: std::slice::Iter<'a, Policy>,
        cost: u64,
    },
    Each(std::slice::Iter<'a, Check<'a>>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Check<'a>;

    fn next(&mut self) -> Option<Check<'a>> {
        match &mut self.0 {
            Each::OneKey {
                key,
                policies,
                cost,
            } => policies.next().map(|policy| Check {
                key,
                policy,
                cost: *cost,
            }),
            Each::Each(checks) => checks.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            Each::OneKey { policies, .. } => policies.len(),
            Each::Each(checks) => checks.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_checks_share() {
        let p = Policy::gcra("p", "10/s".parse().unwrap()).unwrap();
        let policies = [p.clone(), p.clone()];
        let one = Checks::OneKey {
            key: b"k",
            policies: &policies,
            cost: 3,
        };
        assert_eq!((one.len(), one.is_empty()), (2, false));
        assert_eq!(
            (one.shared_key(), one.shared_cost()),
            (Some(&b"k"[..]), Some(3))
        );

        let check = |key: &'static [u8], cost| Check {
            key,
            policy: &p,
            cost,
        };
        let same = [check(b"a", 2), check(b"a", 2)];
        let each = Checks::Each(&same);
        assert_eq!(
            (each.shared_key(), each.shared_cost()),
            (Some(&b"a"[..]), Some(2))
        );
        let apart = [check(b"a", 2), check(b"b", 5)];
        let each = Checks::Each(&apart);
        assert_eq!((each.shared_key(), each.shared_cost()), (None, None));
        let costs: Vec<u64> = each.iter().map(|c| c.cost).collect();
        assert_eq!(costs, [2, 5]);
        assert_eq!(each.iter().len(), 2);
        assert!(each.check_costs().is_ok());
        let costly = [check(b"a", 2), check(b"b", 11)];
        assert!(matches!(
            Checks::Each(&costly).check_costs(),
            Err(Error::CostTooHigh { .. })
        ));
        let none = Checks::Each(&[]);
        assert!(none.is_empty());
        assert_eq!((none.shared_key(), none.shared_cost()), (None, None));
    }
}
