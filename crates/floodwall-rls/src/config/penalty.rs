//! A limit's `penalty`: the fields and the checks of the TOML policy file's
//! (floodwall-tower's `file` module), written as a YAML mapping:
//!
//! ```yaml
//! penalty:
//!   after: 5          # refusals ...
//!   within: 10min     # ... within this span ban the key
//!   ban: 15min        # for this long,
//!   growth: 2         # optional: each further ban this many times longer,
//!   max_ban: 1day     # optional: up to this (needs growth),
//!   forget_after: 1day  # optional: how long earlier bans are remembered
//! ```

use std::time::Duration;

use floodwall_core::{ConfigError, Penalty, parse_duration};

use super::error::{ErrorKind, FileError};
use super::reader::{Place, Reader};
use super::yaml::{Node, quote};

const DURATION_EXAMPLE: &str = "a duration such as 30s, 10min, 1h or 1day";

/// Reads and checks the `penalty` at `node`; `field` is its path.
pub(super) fn read(
    reader: &mut Reader<'_>,
    node: &Node,
    field: &str,
) -> Result<Penalty, FileError> {
    let fields = reader.fields(node, Place::Penalty, field)?;
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
            .filter(|n| !n.is_null())
    };
    let path = |name: &str| format!("{field}.{name}");
    let required = |name: &str, expected: &str| {
        get(name).ok_or_else(|| {
            reader.error(
                ErrorKind::BadLimit,
                Some(node.at),
                path(name),
                format!("a `{name}` field: {expected}"),
                None,
            )
        })
    };
    let duration = |name: &str, n: &Node| -> Result<Duration, FileError> {
        let text = reader.text(n, &path(name))?.unwrap_or_default();
        parse_duration(text).map_err(|e| {
            reader.error(
                ErrorKind::BadLimit,
                Some(n.at),
                path(name),
                DURATION_EXAMPLE,
                Some(format!("{}: {e}", quote(text))),
            )
        })
    };
    let refused = |e: ConfigError, name: &str, n: &Node| {
        reader.error(
            ErrorKind::BadLimit,
            Some(n.at),
            path(name),
            "a penalty floodwall accepts",
            Some(e.to_string()),
        )
    };
    let after_node = required("after", "how many refusals ban the key")?;
    let after = reader.integer(
        after_node,
        &path("after"),
        ErrorKind::BadLimit,
        u64::from(u32::MAX),
    )?;
    let within = duration("within", required("within", DURATION_EXAMPLE)?)?;
    let ban = duration("ban", required("ban", DURATION_EXAMPLE)?)?;
    let after = u32::try_from(after).unwrap_or(u32::MAX);
    let mut penalty =
        Penalty::new(after, within, ban).map_err(|e| refused(e, "after", after_node))?;
    match (get("growth"), get("max_ban")) {
        (None, None) => {}
        (Some(growth_node), max_ban) => {
            let growth = reader.integer(
                growth_node,
                &path("growth"),
                ErrorKind::BadLimit,
                u64::from(u32::MAX),
            )?;
            let max_ban = match max_ban {
                Some(n) => duration("max_ban", n)?,
                None => ban,
            };
            let growth = u32::try_from(growth).unwrap_or(u32::MAX);
            penalty = penalty
                .growing(growth, max_ban)
                .map_err(|e| refused(e, "growth", growth_node))?;
        }
        (None, Some(n)) => {
            return Err(reader.error(
                ErrorKind::BadLimit,
                Some(n.at),
                path("max_ban"),
                "`growth` beside `max_ban` (without growth every ban lasts `ban`)",
                None,
            ));
        }
    }
    if let Some(n) = get("forget_after") {
        let forget_after = duration("forget_after", n)?;
        penalty = penalty
            .forget_after(forget_after)
            .map_err(|e| refused(e, "forget_after", n))?;
    }
    Ok(penalty)
}
