//! What is wrong with a policy file, and where: [`FileError`].

use std::fmt;
use std::ops::Range;

/// Why a policy file was refused, and where: the file, the line and column, the field, and
/// what was expected there. Nothing was changed.
///
/// Its `Display` is one line an operator can act on:
///
/// ```text
/// policies.toml:12:9: policy[1].quota: expected a quota such as "10/s burst 20" or "5/10min" (found "5 per min": expected COUNT/PERIOD, e.g. 10/s)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    origin: String,
    position: Option<(usize, usize)>,
    field: String,
    expected: String,
    found: Option<String>,
}

impl FileError {
    /// The file (its path as given), or what was parsed when it was not a file.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The line of the problem, from 1; `None` when it is at no one place (an unreadable
    /// file, a policy a reload left out).
    pub fn line(&self) -> Option<usize> {
        self.position.map(|(line, _)| line)
    }

    /// The column of the problem, from 1, in characters.
    pub fn column(&self) -> Option<usize> {
        self.position.map(|(_, column)| column)
    }

    /// The field, as a path from the top of the file: `policy[1].quota`,
    /// `route[0].policies[2]`, `key.trusted_proxies[0]`; empty for a TOML syntax error.
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

impl FileError {
    /// This error's place (file, line, column) with another field and expectation: a
    /// place kept from parsing, for an error found later (a reload's).
    pub(super) fn with(
        &self,
        field: impl Into<String>,
        expected: impl Into<String>,
        found: Option<String>,
    ) -> FileError {
        let origin = &self.origin;
        let error = Source { origin, text: "" }.error(None, field, expected, found);
        FileError {
            position: self.position,
            ..error
        }
    }

    /// An error with no place in the file.
    pub(super) fn nowhere(
        origin: &str,
        field: impl Into<String>,
        expected: impl Into<String>,
        found: Option<String>,
    ) -> FileError {
        Source { origin, text: "" }.error(None, field, expected, found)
    }
}

/// Builds [`FileError`]s for one text: turns byte offsets into lines and columns.
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    pub(super) origin: &'a str,
    pub(super) text: &'a str,
}

impl Source<'_> {
    /// An error at `span` (a byte range of the text), in `field`.
    pub(super) fn error(
        &self,
        span: Option<Range<usize>>,
        field: impl Into<String>,
        expected: impl Into<String>,
        found: Option<String>,
    ) -> FileError {
        FileError {
            origin: self.origin.to_owned(),
            position: span.map(|span| self.position(span.start)),
            field: field.into(),
            expected: expected.into(),
            found,
        }
    }

    /// Line and column (from 1, the column in characters) of a byte offset.
    fn position(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }
}

/// An error with no place in a text: the file could not be read.
pub(super) fn unreadable(origin: &str, e: &std::io::Error) -> FileError {
    FileError::nowhere(origin, "", "a readable policy file", Some(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_columns() {
        let source = Source {
            origin: "f.toml",
            text: "a = 1\nbé = 2\n",
        };
        assert_eq!(source.position(0), (1, 1));
        assert_eq!(source.position(4), (1, 5));
        assert_eq!(source.position(6), (2, 1));
        // After the two-byte é: column 3, not 4.
        assert_eq!(source.position(9), (2, 3));
        // Past the end, or inside a character: still a position, never a panic.
        assert_eq!(source.position(100), (3, 1));
        assert_eq!(source.position(8), (2, 2));
    }

    #[test]
    fn display_names_file_line_field_and_expectation() {
        let source = Source {
            origin: "p.toml",
            text: "x\ny = 1\n",
        };
        let e = source.error(
            Some(2..3),
            "policy[0].quota",
            "a quota",
            Some("\"1\"".into()),
        );
        let shown = "p.toml:2:1: policy[0].quota: expected a quota (found \"1\")";
        assert_eq!(e.to_string(), shown);
        assert_eq!((e.line(), e.column()), (Some(2), Some(1)));
    }
}
