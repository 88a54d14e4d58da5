//! A domain's descriptor tree, and the walk that finds a request descriptor's limit in it.

use std::collections::HashMap;

use super::limit::RateLimit;

/// One domain: the descriptors of one file.
#[derive(Debug, Clone)]
pub struct Domain {
    pub(crate) name: String,
    pub(crate) origin: String,
    pub(crate) descriptors: Level,
}

impl Domain {
    /// The domain's name, as requests give it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file it was read from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Its top-level descriptors, in the file's order.
    pub fn descriptors(&self) -> &[Descriptor] {
        &self.descriptors.nodes
    }

    /// The limit that applies to a request descriptor (its entries, in order), as the
    /// reference decides it: see [`Config::limit`](super::Config::limit).
    pub fn limit<K, V>(&self, entries: impl IntoIterator<Item = (K, V)>) -> Option<&RateLimit>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut level = &self.descriptors;
        let mut reached: Option<&Descriptor> = None;
        for (key, value) in entries {
            // An entry past the tree's depth along this path finds an empty level.
            let node = level.find(key.as_ref(), value.as_ref())?;
            reached = Some(node);
            level = &node.descriptors;
        }
        reached?.rate_limit.as_ref()
    }
}

/// A descriptor of the file: its key, optional value, limit and nested descriptors.
#[derive(Debug, Clone)]
pub struct Descriptor {
    pub(crate) key: String,
    pub(crate) value: Option<String>,
    pub(crate) rate_limit: Option<RateLimit>,
    pub(crate) shadow_mode: bool,
    pub(crate) detailed_metric: bool,
    pub(crate) descriptors: Level,
}

impl Descriptor {
    /// The `key`, never empty.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The `value`, when the file gives a non-empty one. One that ends in `*` matches any
    /// request value starting with what comes before it (the README's ninth example).
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// The `rate_limit`, checked.
    pub fn rate_limit(&self) -> Option<&RateLimit> {
        self.rate_limit.as_ref()
    }

    /// `shadow_mode`, as written (it matters only with a `rate_limit`).
    pub fn shadow_mode(&self) -> bool {
        self.shadow_mode
    }

    /// `detailed_metric`, as written (it matters only with a `rate_limit`).
    pub fn detailed_metric(&self) -> bool {
        self.detailed_metric
    }

    /// The nested descriptors, in the file's order.
    pub fn descriptors(&self) -> &[Descriptor] {
        &self.descriptors.nodes
    }
}

/// One list of descriptors, indexed by key for the walk.
#[derive(Debug, Clone, Default)]
pub(crate) struct Level {
    pub(crate) nodes: Vec<Descriptor>,
    by_key: HashMap<String, Group>,
}

/// A level's descriptors with one key.
#[derive(Debug, Clone, Default)]
struct Group {
    /// Those with a value, by value.
    exact: HashMap<String, usize>,
    /// Those whose value ends in `*`, in the file's order, with the prefix before it.
    wildcards: Vec<(String, usize)>,
    /// The one with no value.
    bare: Option<usize>,
}

impl Level {
    /// A level of these descriptors, which have no key and value twice (the loader
    /// checked).
    pub(crate) fn new(nodes: Vec<Descriptor>) -> Self {
        let mut by_key: HashMap<String, Group> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            let group = by_key.entry(node.key.clone()).or_default();
            match &node.value {
                None => group.bare = Some(i),
                Some(value) => {
                    group.exact.insert(value.clone(), i);
                    if let Some(prefix) = value.strip_suffix('*') {
                        group.wildcards.push((prefix.to_owned(), i));
                    }
                }
            }
        }
        Self { nodes, by_key }
    }

    /// The descriptor an entry reaches at this level: the one with its key and value,
    /// else the first with its key and a wildcard value it starts with, else the one with
    /// its key alone.
    fn find(&self, key: &str, value: &str) -> Option<&Descriptor> {
        let group = self.by_key.get(key)?;
        let index = group
            .exact
            .get(value)
            .copied()
            .or_else(|| {
                group
                    .wildcards
                    .iter()
                    .find(|(prefix, _)| value.starts_with(prefix.as_str()))
                    .map(|(_, i)| *i)
            })
            .or(group.bare)?;
        self.nodes.get(index)
    }
}
