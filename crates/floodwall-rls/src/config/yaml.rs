//! One YAML document as a tree of [`Node`]s, each with the line and column it was written
//! at, built from saphyr-parser's events.
//!
//! The tree keeps every scalar's text as written (the reference server reads `value: 500`
//! into a string as "500"), resolves aliases and `<<` merge keys as the reference's YAML
//! library does, and refuses duplicate keys in a mapping. It is bounded: at most
//! [`MAX_DEPTH`] levels of nesting (so nothing built from it recurses deeply) and
//! [`MAX_NODES`] nodes once aliases are expanded (so a "billion laughs" file is refused,
//! not expanded).

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// The deepest nesting of sequences and mappings accepted: a descriptor level takes two
/// (its list and its mapping), so this allows about 60 levels of nested descriptors.
pub(crate) const MAX_DEPTH: usize = 128;

/// The most nodes a file may have, aliases expanded.
pub(crate) const MAX_NODES: usize = 1_000_000;

/// Where a node starts: line and column, both from 1, the column in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

impl Pos {
    fn of(span: &Span) -> Self {
        Self {
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

/// A scalar, a sequence or a mapping, and where it starts.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) at: Pos,
    pub(crate) kind: Kind,
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    /// The text as written (quotes and escapes resolved); `plain` when it had no quotes
    /// and was no block scalar: only a plain scalar can be a null, a boolean or a number.
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// A plain `~`, `null` or nothing at all (`key:` with no value).
    pub(crate) fn is_null(&self) -> bool {
        matches!(&self.kind, Kind::Scalar { text, plain: true }
            if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The scalar's text, if it is one.
    pub(crate) fn text(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// What the node is, for an error's "found": `a list`, `a mapping`, or the scalar
    /// quoted (cut to 60 characters).
    pub(crate) fn describe(&self) -> String {
        match &self.kind {
            Kind::Seq(_) => "a list".to_owned(),
            Kind::Map(_) => "a mapping".to_owned(),
            Kind::Scalar { .. } if self.is_null() => "nothing (null)".to_owned(),
            Kind::Scalar { text, .. } => quote(text),
        }
    }

    /// How many levels of collections this node is: 0 for a scalar.
    fn height(&self) -> usize {
        match &self.kind {
            Kind::Scalar { .. } => 0,
            Kind::Seq(items) => 1 + items.iter().map(Node::height).max().unwrap_or(0),
            Kind::Map(entries) => {
                1 + entries
                    .iter()
                    .map(|(k, v)| k.height().max(v.height()))
                    .max()
                    .unwrap_or(0)
            }
        }
    }

    /// How many nodes this one holds, itself included.
    fn count(&self) -> usize {
        match &self.kind {
            Kind::Scalar { .. } => 1,
            Kind::Seq(items) => 1 + items.iter().map(Node::count).sum::<usize>(),
            Kind::Map(entries) => {
                1 + entries
                    .iter()
                    .map(|(k, v)| k.count() + v.count())
                    .sum::<usize>()
            }
        }
    }
}

/// `text` in double quotes, cut to 60 characters, control characters escaped.
pub(crate) fn quote(text: &str) -> String {
    const MAX: usize = 60;
    let mut out = String::from("\"");
    for (i, c) in text.chars().enumerate() {
        if i == MAX {
            out.push_str("...");
            break;
        }
        out.extend(c.escape_debug());
    }
    out.push('"');
    out
}

/// A YAML syntax error, or a document past the bounds.
#[derive(Debug)]
pub(crate) struct YamlError {
    pub(crate) at: Option<Pos>,
    pub(crate) message: String,
    /// The document is valid YAML past our bounds ([`MAX_DEPTH`], [`MAX_NODES`]).
    pub(crate) too_complex: bool,
}

impl YamlError {
    fn syntax(at: Pos, message: impl Into<String>) -> Self {
        Self {
            at: Some(at),
            message: message.into(),
            too_complex: false,
        }
    }

    fn too_complex(at: Pos, message: impl Into<String>) -> Self {
        Self {
            at: Some(at),
            message: message.into(),
            too_complex: true,
        }
    }
}

/// A collection being read.
enum Open {
    Seq {
        at: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        at: Pos,
        anchor: usize,
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
    },
}

/// Parses the one document in `text`: `None` when there is none (an empty file, or only
/// comments).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, YamlError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut nodes = 0usize;
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            let at = Pos {
                line: e.marker().line(),
                column: e.marker().col() + 1,
            };
            // The parser's own bound on flow nesting.
            if e.info().contains("recursion limit") {
                YamlError::too_complex(at, e.info())
            } else {
                YamlError::syntax(at, e.info())
            }
        })?;
        let at = Pos::of(&span);
        let (node, anchor) = match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(YamlError::syntax(
                        at,
                        "one YAML document per file (one domain per file; found a second `---`)",
                    ));
                }
                continue;
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(YamlError::too_complex(
                        at,
                        format!("nesting deeper than {MAX_DEPTH} levels"),
                    ));
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Open::Seq {
                        at,
                        anchor,
                        items: Vec::new(),
                    }
                } else {
                    Open::Map {
                        at,
                        anchor,
                        entries: Vec::new(),
                        key: None,
                    }
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::Seq { at, anchor, items }) => (
                    Node {
                        at,
                        kind: Kind::Seq(items),
                    },
                    anchor,
                ),
                Some(Open::Map {
                    at,
                    anchor,
                    entries,
                    ..
                }) => (
                    Node {
                        at,
                        kind: Kind::Map(merge(entries)?),
                    },
                    anchor,
                ),
                None => continue,
            },
            Event::Scalar(text, style, anchor, _) => (
                Node {
                    at,
                    kind: Kind::Scalar {
                        text: text.into_owned(),
                        plain: style == ScalarStyle::Plain,
                    },
                },
                anchor,
            ),
            Event::Alias(id) => {
                let target = anchors
                    .get(&id)
                    .ok_or_else(|| YamlError::syntax(at, "an alias to an anchor not yet closed"))?;
                // Every node stays within MAX_DEPTH, copies too: nothing that walks the
                // tree (or drops it) recurses deeper.
                if stack.len() + target.height() > MAX_DEPTH {
                    return Err(YamlError::too_complex(
                        at,
                        format!("nesting deeper than {MAX_DEPTH} levels once aliases are expanded"),
                    ));
                }
                nodes = nodes.saturating_add(target.count());
                if nodes > MAX_NODES {
                    return Err(YamlError::too_complex(
                        at,
                        format!("more than {MAX_NODES} nodes once aliases are expanded"),
                    ));
                }
                let mut copy = target.clone();
                copy.at = at;
                (copy, 0)
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
        };
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(YamlError::too_complex(
                at,
                format!("more than {MAX_NODES} nodes"),
            ));
        }
        if anchor > 0 {
            anchors.insert(anchor, node.clone());
        }
        match stack.last_mut() {
            Some(Open::Seq { items, .. }) => items.push(node),
            Some(Open::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
            None => root = Some(node),
        }
    }
    Ok(root)
}

/// A mapping's entries, its duplicate keys refused and its `<<` merge keys resolved as
/// YAML 1.1 (and the reference's library) does: the entries of the merged mapping, or of
/// each in a list of them (the earlier first), that the mapping does not set itself.
fn merge(entries: Vec<(Node, Node)>) -> Result<Vec<(Node, Node)>, YamlError> {
    let is_merge = |k: &Node| matches!(&k.kind, Kind::Scalar { text, plain: true } if text == "<<");
    let mut own: Vec<(Node, Node)> = Vec::with_capacity(entries.len());
    let mut merged: Vec<Node> = Vec::new();
    for (key, value) in entries {
        if is_merge(&key) {
            merged.push(value);
            continue;
        }
        if let Some(text) = key.text()
            && let Some((first, _)) = own.iter().find(|(k, _)| k.text() == Some(text))
        {
            return Err(YamlError::syntax(
                key.at,
                format!(
                    "each key once in a mapping ({} is already at line {})",
                    quote(text),
                    first.at.line
                ),
            ));
        }
        own.push((key, value));
    }
    for value in merged {
        let sources = match value.kind {
            Kind::Map(entries) => vec![entries],
            Kind::Seq(items) => {
                let mut maps = Vec::with_capacity(items.len());
                for item in items {
                    match item.kind {
                        Kind::Map(entries) => maps.push(entries),
                        _ => {
                            return Err(YamlError::syntax(item.at, "a mapping to merge with `<<`"));
                        }
                    }
                }
                maps
            }
            Kind::Scalar { .. } => {
                return Err(YamlError::syntax(
                    value.at,
                    "a mapping (or a list of them) to merge with `<<`",
                ));
            }
        };
        for entries in sources {
            for (key, value) in entries {
                let present = key
                    .text()
                    .is_some_and(|text| own.iter().any(|(k, _)| k.text() == Some(text)));
                if !present {
                    own.push((key, value));
                }
            }
        }
    }
    Ok(own)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(node: &Node) -> Vec<(String, &Node)> {
        match &node.kind {
            Kind::Map(entries) => entries
                .iter()
                .map(|(k, v)| (k.text().unwrap_or("?").to_owned(), v))
                .collect(),
            _ => panic!("not a mapping: {node:?}"),
        }
    }

    #[test]
    fn scalars_keep_their_text_and_nodes_their_place() {
        let root = parse("a: 500\nb: '007'\nc:\n  - x\n").unwrap().unwrap();
        let fields = map(&root);
        assert_eq!(fields[0].1.text(), Some("500"));
        assert_eq!(fields[1].1.text(), Some("007"));
        assert!(matches!(
            fields[1].1.kind,
            Kind::Scalar { plain: false, .. }
        ));
        assert_eq!(fields[2].1.at, Pos { line: 4, column: 3 });
        assert!(fields.iter().all(|(_, v)| !v.is_null()));
        let root = parse("a:\nb: ~\n").unwrap().unwrap();
        assert!(map(&root).iter().all(|(_, v)| v.is_null()));
    }

    #[test]
    fn empty_documents_and_second_documents() {
        assert!(parse("").unwrap().is_none());
        assert!(parse("# only a comment\n").unwrap().is_none());
        let e = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert_eq!(e.at.map(|p| p.line), Some(2));
    }

    #[test]
    fn aliases_and_merge_keys_resolve() {
        let text = "base: &b {x: 1, y: 2}\nuse: {<<: *b, y: 3}\ncopy: *b\n";
        let root = parse(text).unwrap().unwrap();
        let fields = map(&root);
        let merged = map(fields[1].1);
        let texts: Vec<(&str, &str)> = merged
            .iter()
            .map(|(k, v)| (k.as_str(), v.text().unwrap()))
            .collect();
        assert_eq!(texts, [("y", "3"), ("x", "1")]);
        assert_eq!(map(fields[2].1).len(), 2);
        assert_eq!(fields[2].1.at.line, 3);
    }

    #[test]
    fn duplicate_keys_are_refused_where_the_second_is() {
        let e = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(e.at, Some(Pos { line: 3, column: 1 }));
        assert!(e.message.contains("line 1"), "{}", e.message);
    }

    #[test]
    fn bounds_refuse_deep_and_exploding_documents() {
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).unwrap_err().too_complex);
        // Each level doubles: 2^25 nodes were it expanded.
        let mut laughs = String::from("a0: &a0 [x, x]\n");
        for i in 1..25 {
            laughs.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}]\n", p = i - 1));
        }
        assert!(parse(&laughs).unwrap_err().too_complex);
        // Aliases nested in aliases grow deeper than any one of them.
        let mut chain = String::from("a0: &a0 x\n");
        for i in 1..200 {
            chain.push_str(&format!("a{i}: &a{i} [*a{p}]\n", p = i - 1));
        }
        assert!(parse(&chain).unwrap_err().too_complex);
    }

    #[test]
    fn quote_cuts_and_escapes() {
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(quote(&"x".repeat(100)).len(), 60 + 2 + 3);
    }
}
