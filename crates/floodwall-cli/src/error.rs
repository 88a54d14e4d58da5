//! The one error a command ends with: one line for stderr, and the exit code.

use std::fmt;

/// Why a command stopped: printed as one line (`floodwall: <message>`), with its exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    /// 2 for input that is not valid or a Redis that cannot be reached, 1 otherwise.
    pub(crate) code: u8,
    message: String,
}

impl Failure {
    /// Input that is not valid (an argument, a file's line) or a store that cannot be
    /// reached: exit code 2. `what` names the argument or the line.
    pub(crate) fn input(what: impl fmt::Display, why: impl fmt::Display) -> Self {
        Self::new(2, format!("{what}: {why}"))
    }

    /// Anything else (a file that cannot be written, a store call that failed): exit 1.
    pub(crate) fn other(what: impl fmt::Display, why: impl fmt::Display) -> Self {
        Self::new(1, format!("{what}: {why}"))
    }

    fn new(code: u8, message: String) -> Self {
        Self {
            code,
            message: one_line(&message),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// `text` on one line: line breaks (a Redis error's, a clap message's) become spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_one_line_with_its_code() {
        let f = Failure::input("--traffic t.txt: line 3", "\"x\" is not\na number");
        assert_eq!(f.code, 2);
        assert_eq!(
            f.to_string(),
            "--traffic t.txt: line 3: \"x\" is not a number"
        );
        assert_eq!(Failure::other("--out", "denied").code, 1);
    }
}
