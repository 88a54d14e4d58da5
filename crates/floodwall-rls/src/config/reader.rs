//! The fields of a mapping and the scalars in them, read as envoyproxy/ratelimit's YAML
//! library (YAML 1.1) reads them; each error at its line and field path.

use std::collections::HashSet;

use super::error::{ErrorKind, FileError, Warning};
use super::yaml::{Kind, Node, Pos, quote};

/// Where a mapping is, and so which fields it has.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Root,
    Descriptor,
    RateLimit,
    Replaces,
    Penalty,
}

impl Place {
    fn fields(self) -> &'static [&'static str] {
        match self {
            Place::Root => &["domain", "descriptors"],
            Place::Descriptor => &[
                "key",
                "value",
                "rate_limit",
                "shadow_mode",
                "detailed_metric",
                "descriptors",
            ],
            Place::RateLimit => &[
                "unit",
                "requests_per_unit",
                "unlimited",
                "name",
                "replaces",
                "algorithm",
                "burst",
                "penalty",
            ],
            Place::Replaces => &["name"],
            Place::Penalty => &[
                "after",
                "within",
                "ban",
                "growth",
                "max_ban",
                "forget_after",
            ],
        }
    }

    fn what(self) -> &'static str {
        match self {
            Place::Root => "the file",
            Place::Descriptor => "a descriptor",
            Place::RateLimit => "a rate_limit",
            Place::Replaces => "a replaces entry",
            Place::Penalty => "a penalty",
        }
    }
}

/// Every field name envoyproxy/ratelimit knows. It refuses a file with any other name, at
/// any depth, and ignores one of these in the wrong place.
const REFERENCE_FIELDS: [&str; 12] = [
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "name",
    "replaces",
    "detailed_metric",
];

/// Reads one file's fields, collecting what it ignores.
pub(super) struct Reader<'a> {
    pub(super) origin: &'a str,
    pub(super) warnings: &'a mut Vec<Warning>,
    pub(super) domain: String,
    /// The policy names given so far: each limit's must differ.
    pub(super) names: HashSet<String>,
}

pub(super) fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

impl Reader<'_> {
    pub(super) fn error(
        &self,
        kind: ErrorKind,
        at: Option<Pos>,
        field: impl Into<String>,
        expected: impl Into<String>,
        found: Option<String>,
    ) -> FileError {
        FileError::new(kind, self.origin, at, field, expected, found)
    }

    pub(super) fn wrong_type(&self, node: &Node, field: &str, expected: &str) -> FileError {
        self.error(
            ErrorKind::WrongType,
            Some(node.at),
            field,
            expected,
            Some(node.describe()),
        )
    }

    /// A mapping's fields that belong at `place` (nothing for a null). A field of the
    /// format in the wrong place is a warning, as the reference ignores it; any other
    /// name is an error.
    pub(super) fn fields<'n>(
        &mut self,
        node: &'n Node,
        place: Place,
        path: &str,
    ) -> Result<Vec<(&'n str, &'n Node)>, FileError> {
        let entries = match &node.kind {
            Kind::Map(entries) => entries,
            _ if node.is_null() => return Ok(Vec::new()),
            _ => {
                let expected = format!("a mapping ({})", place.what());
                return Err(self.wrong_type(node, path, &expected));
            }
        };
        let mut fields = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            let Some(name) = key.text() else {
                return Err(self.wrong_type(key, path, "a field name"));
            };
            if place.fields().contains(&name) {
                fields.push((name, value));
            } else if place != Place::Penalty && REFERENCE_FIELDS.contains(&name) {
                let message = format!(
                    "`{name}` has no effect in {}; envoyproxy/ratelimit ignores it there too",
                    place.what()
                );
                let warning = Warning::new(self.origin, key.at, join(path, name), message);
                self.warnings.push(warning);
            } else {
                let known = place.fields().join(", ");
                return Err(self.error(
                    ErrorKind::UnknownField,
                    Some(key.at),
                    join(path, name),
                    format!("a field of {}: {known}", place.what()),
                    Some(format!("the unknown field {}", quote(name))),
                ));
            }
        }
        Ok(fields)
    }

    /// A scalar's text; `None` for a null.
    pub(super) fn text<'n>(
        &self,
        node: &'n Node,
        field: &str,
    ) -> Result<Option<&'n str>, FileError> {
        if node.is_null() {
            return Ok(None);
        }
        node.text()
            .map(Some)
            .ok_or_else(|| self.wrong_type(node, field, "a text value"))
    }

    /// A list's items; none for a missing field or a null.
    pub(super) fn list<'n>(
        &self,
        node: Option<&'n Node>,
        field: &str,
    ) -> Result<&'n [Node], FileError> {
        match node {
            None => Ok(&[]),
            Some(node) if node.is_null() => Ok(&[]),
            Some(Node {
                kind: Kind::Seq(items),
                ..
            }) => Ok(items),
            Some(node) => Err(self.wrong_type(node, field, "a list")),
        }
    }

    /// A boolean as the reference's YAML 1.1 library reads it (`true`, `yes`, `on`, `y`
    /// and their false twins, in three cases); false for a null.
    pub(super) fn boolean(&self, node: Option<&Node>, field: &str) -> Result<bool, FileError> {
        let Some(node) = node.filter(|n| !n.is_null()) else {
            return Ok(false);
        };
        if let Kind::Scalar { text, plain: true } = &node.kind {
            match text.as_str() {
                "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y"
                | "Y" => return Ok(true),
                "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n"
                | "N" => return Ok(false),
                _ => {}
            }
        }
        Err(self.wrong_type(node, field, "true or false"))
    }

    /// A whole number from 0 to `max`, written as the reference's YAML library reads one:
    /// decimal, `0x` hexadecimal, `0o` or leading-zero octal, `0b` binary, `_` anywhere.
    pub(super) fn integer(
        &self,
        node: &Node,
        field: &str,
        kind: ErrorKind,
        max: u64,
    ) -> Result<u64, FileError> {
        let refused = || {
            self.error(
                kind,
                Some(node.at),
                field,
                format!("a whole number from 0 to {max}"),
                Some(node.describe()),
            )
        };
        match &node.kind {
            Kind::Scalar { text, plain: true } => parse_integer(text)
                .filter(|n| *n <= max)
                .ok_or_else(refused),
            _ => Err(refused()),
        }
    }
}

/// Reads an integer as Go's `strconv.ParseInt(s, 0, 64)` after removing every `_`, as the
/// reference's YAML library does; no sign but `+`.
fn parse_integer(text: &str) -> Option<u64> {
    let digits: String = text.chars().filter(|c| *c != '_').collect();
    let digits = digits.strip_prefix('+').unwrap_or(&digits);
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    u64::from_str_radix(body, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_read_as_the_reference_reads_them() {
        assert_eq!(parse_integer("500"), Some(500));
        assert_eq!(parse_integer("+5"), Some(5));
        assert_eq!(parse_integer("1_000"), Some(1000));
        assert_eq!(parse_integer("0x1F"), Some(31));
        assert_eq!(parse_integer("010"), Some(8));
        assert_eq!(parse_integer("0o10"), Some(8));
        assert_eq!(parse_integer("0b101"), Some(5));
        assert_eq!(parse_integer("0"), Some(0));
        for bad in [
            "",
            "-1",
            "1.5",
            "ten",
            "++1",
            "0x",
            "09",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_integer(bad), None, "{bad}");
        }
    }
}
