//! What is wrong with a configuration, and where: [`FileError`]; and what was ignored in
//! it: [`Warning`].

use std::fmt;

use super::yaml::Pos;

/// Which check a configuration failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file or directory could not be read.
    Unreadable,
    /// The file is not UTF-8 text.
    NotUtf8,
    /// The file is not valid YAML (syntax, a key twice in one mapping, several documents).
    Yaml,
    /// Valid YAML past the loader's bounds: nesting too deep, too many nodes.
    TooComplex,
    /// A field the format does not have, here or anywhere.
    UnknownField,
    /// A field of the wrong kind: a list where a mapping belongs, text for a boolean.
    WrongType,
    /// The file has no `domain`, or an empty one.
    EmptyDomain,
    /// A domain already defined by another file.
    DuplicateDomain,
    /// A descriptor without a `key`, or with an empty one.
    MissingKey,
    /// Two descriptors with the same key and value in one list.
    DuplicateDescriptor,
    /// A `unit` missing or not one of second, minute, hour, day, week, month, year.
    BadUnit,
    /// A `requests_per_unit` missing, negative, not a whole number or above `u32::MAX`.
    BadRequestsPerUnit,
    /// `unlimited: true` beside a `unit`, `requests_per_unit` or a floodwall field.
    UnlimitedWithRate,
    /// A `replaces` entry without a name, or naming its own limit.
    BadReplaces,
    /// A floodwall field (`algorithm`, `burst`, `penalty`) or a rate that floodwall
    /// refuses: an unknown algorithm, a burst a window algorithm cannot have, more than
    /// one request per microsecond.
    BadLimit,
    /// A directory without any `*.yaml` or `*.yml` file.
    NoFiles,
}

/// Why a configuration was refused, and where: the file, the line and column, the field,
/// what was expected there and what was found. Nothing was loaded.
///
/// Its `Display` is one line an operator can act on:
///
/// ```text
/// config/api.yaml:7:15: descriptors[1].rate_limit.unit: expected one of second, minute, hour, day, week, month, year (found "fortnight")
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    kind: ErrorKind,
    origin: String,
    /// Line and column, as u32s: the error stays small enough to return by value.
    position: Option<(u32, u32)>,
    field: String,
    expected: String,
    found: Option<String>,
}

impl FileError {
    pub(crate) fn new(
        kind: ErrorKind,
        origin: &str,
        at: Option<Pos>,
        field: impl Into<String>,
        expected: impl Into<String>,
        found: Option<String>,
    ) -> Self {
        Self {
            kind,
            origin: origin.to_owned(),
            position: at.map(|p| (narrow(p.line), narrow(p.column))),
            field: field.into(),
            expected: expected.into(),
            found,
        }
    }

    /// Which check failed.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file (its path as given), or what was parsed when it was not a file.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The line of the problem, from 1; `None` when it is at no one place (an unreadable
    /// file, an empty file, a directory without files).
    pub fn line(&self) -> Option<usize> {
        self.position.map(|(line, _)| line as usize)
    }

    /// The column of the problem, from 1, in characters.
    pub fn column(&self) -> Option<usize> {
        self.position.map(|(_, column)| column as usize)
    }

    /// The field, as a path from the top of the file: `domain`,
    /// `descriptors[1].rate_limit.unit`, `descriptors[0].descriptors[2].key`; empty for a
    /// YAML syntax error.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What the field should have been.
    pub fn expected(&self) -> &str {
        &self.expected
    }

    /// What was there instead, or why it did not do, when that says more.
    pub fn found(&self) -> Option<&str> {
        self.found.as_deref()
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "expected {}", self.expected)?;
        if let Some(found) = &self.found {
            write!(f, " (found {found})")?;
        }
        Ok(())
    }
}

impl std::error::Error for FileError {}

/// A line or column past `u32::MAX` (a file of 4 GiB) reads as `u32::MAX`.
fn narrow(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A field the configuration sets where it has no effect, ignored as envoyproxy/ratelimit
/// ignores it: a field of the format in the wrong place (`unit` beside `key` instead of
/// inside `rate_limit`, `shadow_mode` inside `rate_limit`). The reference refuses only
/// names it has nowhere, so a file it loads loads here too; the service logs these.
///
/// Its `Display`: `api.yaml:4:5: descriptors[0].unit: ignored (unit belongs in rate_limit)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    origin: String,
    position: (usize, usize),
    field: String,
    message: String,
}

impl Warning {
    pub(crate) fn new(origin: &str, at: Pos, field: String, message: String) -> Self {
        Self {
            origin: origin.to_owned(),
            position: (at.line, at.column),
            field,
            message,
        }
    }

    /// The file.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The line of the ignored field, from 1.
    pub fn line(&self) -> usize {
        self.position.0
    }

    /// The column of the ignored field, from 1.
    pub fn column(&self) -> usize {
        self.position.1
    }

    /// The ignored field's path, as in [`FileError::field`].
    pub fn field(&self) -> &str {
        &self.field
    }

    /// Why it has no effect.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (line, column) = self.position;
        write!(
            f,
            "{}:{line}:{column}: {}: ignored ({})",
            self.origin, self.field, self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_line_field_and_expectation() {
        let at = Pos {
            line: 7,
            column: 15,
        };
        let e = FileError::new(
            ErrorKind::BadUnit,
            "api.yaml",
            Some(at),
            "descriptors[1].rate_limit.unit",
            "one of second, minute",
            Some("\"fortnight\"".into()),
        );
        assert_eq!(
            e.to_string(),
            "api.yaml:7:15: descriptors[1].rate_limit.unit: expected one of second, minute \
             (found \"fortnight\")"
        );
        assert_eq!(
            (e.line(), e.column(), e.kind()),
            (Some(7), Some(15), ErrorKind::BadUnit)
        );
        let nowhere = FileError::new(ErrorKind::NoFiles, "dir", None, "", "a file", None);
        assert_eq!(nowhere.to_string(), "dir: expected a file");
        let w = Warning::new("a.yaml", at, "descriptors[0].unit".into(), "why".into());
        assert_eq!(
            w.to_string(),
            "a.yaml:7:15: descriptors[0].unit: ignored (why)"
        );
    }
}
