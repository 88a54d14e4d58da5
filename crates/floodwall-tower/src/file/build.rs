//! From the file as written ([`RawFile`]) to a checked [`PolicyFile`]: every value parsed,
//! every name resolved, every error at its span.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use floodwall_core::{Algorithm, Penalty, Policy, Quota, parse_duration};
use http::{HeaderName, Method};
use toml::Spanned;

use super::error::{FileError, Source};
use super::format::{RawFile, RawKey, RawPenalty, RawPolicy, RawRoute};
use super::key::{KeyKind, KeySpec};
use super::routes::{Route, RouteTable, Target};
use super::{Entry, PolicyFile};
use crate::Enforcement;

const QUOTA_EXAMPLE: &str = "a quota such as \"10/s burst 20\" or \"5/10min\"";
const DURATION_EXAMPLE: &str = "a duration such as \"30s\", \"10min\", \"1h\" or \"1day\"";
const METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
    Method::OPTIONS,
    Method::CONNECT,
    Method::TRACE,
];

/// Parses and checks a whole file.
pub(super) fn parse(source: Source<'_>) -> Result<PolicyFile, FileError> {
    let raw = deserialize(source)?;
    let check = Check { source };
    let key = match &raw.key {
        Some(key) => check.key(key.get_ref())?,
        None => KeySpec::default(),
    };
    let key_position = raw.key.as_ref().map(|k| k.span());
    if raw.policy.is_empty() {
        return Err(source.error(Some(0..0), "policy", "at least one [[policy]] table", None));
    }
    let mut policies: Vec<Entry> = Vec::with_capacity(raw.policy.len());
    for (i, policy) in raw.policy.iter().enumerate() {
        let entry = check.policy(i, policy.get_ref())?;
        if let Some(first) = policies.iter().position(|e| e.name() == entry.name()) {
            let name = &policy.get_ref().name;
            let found = format!(
                "\"{}\", already the name of policy[{first}]",
                name.get_ref()
            );
            let expected = "a name no other policy has";
            return Err(check.at(name, format!("policy[{i}].name"), expected, found));
        }
        policies.push(entry);
    }
    let routes = check.routes(&raw.route, &policies)?;
    Ok(PolicyFile {
        origin: source.origin.to_owned(),
        key_at: key_position.map(|span| source.error(Some(span), "", "", None)),
        key,
        policies,
        routes,
    })
}

/// serde's pass: TOML syntax, unknown fields, wrong types.
fn deserialize(source: Source<'_>) -> Result<RawFile, FileError> {
    let document = toml::Deserializer::parse(source.text)
        .map_err(|e| source.error(e.span(), "", "valid TOML", Some(clean(e.message()))))?;
    serde_path_to_error::deserialize(document).map_err(|e| {
        let field = field_path(e.path());
        let inner = e.into_inner();
        let message = clean(inner.message());
        let (field, expected, found) = explain(field, &message);
        source.error(inner.span(), field, expected, found)
    })
}

/// The path serde_path_to_error tracked, without the fields `Spanned` reads through.
fn field_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } if key.starts_with("$__") => {}
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// Turns serde's message into (field, expected, found).
fn explain(mut field: String, message: &str) -> (String, String, Option<String>) {
    let join = |field: &str, name: &str| {
        if field.is_empty() {
            name.to_owned()
        } else {
            format!("{field}.{name}")
        }
    };
    if let Some(rest) = message.strip_prefix("missing field ") {
        let name = rest.trim_matches('`');
        return (
            join(&field, name),
            format!("a `{name}` field, which is required here"),
            None,
        );
    }
    if let Some((name, expected)) = message
        .strip_prefix("unknown field ")
        .and_then(|rest| rest.split_once(", expected "))
    {
        let name = name.trim_matches('`');
        if !field.ends_with(name) {
            field = join(&field, name);
        }
        let found = Some("an unknown field".to_owned());
        return (field, expected.to_owned(), found);
    }
    match message.split_once(", expected ") {
        Some((found, expected)) => {
            let found = found
                .strip_prefix("invalid type: ")
                .or_else(|| found.strip_prefix("invalid value: "))
                .unwrap_or(found);
            (field, expected.to_owned(), Some(found.to_owned()))
        }
        None => (field, "a valid value".to_owned(), Some(message.to_owned())),
    }
}

/// toml's messages may run over several lines; an error is one.
fn clean(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The checks after serde's, each naming its value's span.
struct Check<'a> {
    source: Source<'a>,
}

impl Check<'_> {
    fn at<T>(
        &self,
        value: &Spanned<T>,
        field: impl Into<String>,
        expected: impl Into<String>,
        found: impl Into<Option<String>>,
    ) -> FileError {
        self.span(value.span(), field, expected, found)
    }

    /// An error at `value`, which was there instead of `expected`: found, quoted.
    fn bad(
        &self,
        value: &Spanned<String>,
        field: impl Into<String>,
        expected: impl Into<String>,
    ) -> FileError {
        self.at(value, field, expected, format!("\"{}\"", value.get_ref()))
    }

    fn span(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        expected: impl Into<String>,
        found: impl Into<Option<String>>,
    ) -> FileError {
        self.source.error(Some(span), field, expected, found.into())
    }

    fn key(&self, raw: &RawKey) -> Result<KeySpec, FileError> {
        let kinds = KeyKind::ALL
            .map(|(name, _)| format!("\"{name}\""))
            .join(", ");
        let kind = KeyKind::ALL
            .iter()
            .find(|(name, _)| *name == raw.kind.get_ref().trim())
            .map(|(_, kind)| *kind)
            .ok_or_else(|| self.bad(&raw.kind, "key.kind", format!("one of {kinds}")))?;
        let kind_name = raw.kind.get_ref().trim();
        // What each field that only some kinds take applies to.
        const CLIENT_IP: &str = "kind = \"client_ip\"";
        const HASHED: &str = "kind = \"header\" or \"bearer\"";
        const IPS: &str = "kind = \"peer_ip\" or \"client_ip\"";
        let misplaced = |span: Range<usize>, field: &str, applies: &str| {
            self.span(
                span,
                format!("key.{field}"),
                format!("no `{field}` with kind = \"{kind_name}\" (it applies to {applies})"),
                None,
            )
        };
        let ips = matches!(kind, KeyKind::PeerIp | KeyKind::ClientIp);
        let hashed = matches!(kind, KeyKind::Header | KeyKind::Bearer);
        let mut spec = KeySpec {
            kind,
            ..KeySpec::default()
        };
        if let Some(list) = &raw.trusted_proxies {
            if kind != KeyKind::ClientIp {
                return Err(misplaced(list.span(), "trusted_proxies", CLIENT_IP));
            }
            for (i, net) in list.get_ref().iter().enumerate() {
                let parsed = crate::extract::parse_cidrs(net.get_ref())
                    .ok()
                    .filter(|nets| nets.len() == 1)
                    .ok_or_else(|| {
                        let expected =
                            "a network such as \"10.0.0.0/8\" or an address such as \"127.0.0.1\"";
                        self.bad(net, format!("key.trusted_proxies[{i}]"), expected)
                    })?;
                spec.trusted.extend(parsed);
            }
        }
        if let Some(header) = &raw.forwarded_header {
            if kind != KeyKind::ClientIp {
                return Err(misplaced(header.span(), "forwarded_header", CLIENT_IP));
            }
            spec.forwarded = match header.get_ref().to_ascii_lowercase().as_str() {
                "x-forwarded-for" => false,
                "forwarded" => true,
                _ => {
                    let expected = "\"x-forwarded-for\" or \"forwarded\"";
                    return Err(self.bad(header, "key.forwarded_header", expected));
                }
            };
        }
        match (&raw.header, kind) {
            (Some(name), KeyKind::Header) => {
                let expected = "a header name such as \"x-api-key\"";
                let parsed = HeaderName::from_bytes(name.get_ref().trim().as_bytes());
                spec.header = Some(parsed.map_err(|_| self.bad(name, "key.header", expected))?);
            }
            (Some(name), _) => return Err(misplaced(name.span(), "header", "kind = \"header\"")),
            (None, KeyKind::Header) => {
                let expected = "a `header` field naming the header (kind = \"header\" reads one)";
                return Err(self.at(&raw.kind, "key.header", expected, None));
            }
            (None, _) => {}
        }
        if let Some(salt) = &raw.salt {
            if !hashed {
                return Err(misplaced(salt.span(), "salt", HASHED));
            }
            spec.salt = Some(salt.get_ref().clone());
        }
        for (value, field, max) in [
            (&raw.ipv4_prefix, "ipv4_prefix", 32),
            (&raw.ipv6_prefix, "ipv6_prefix", 128),
        ] {
            let Some(value) = value else { continue };
            if !ips {
                return Err(misplaced(value.span(), field, IPS));
            }
            if *value.get_ref() > max {
                return Err(self.at(
                    value,
                    format!("key.{field}"),
                    format!("a prefix length from 0 to {max}"),
                    value.get_ref().to_string(),
                ));
            }
        }
        spec.ipv4_prefix = raw.ipv4_prefix.as_ref().map(|v| *v.get_ref());
        spec.ipv6_prefix = raw.ipv6_prefix.as_ref().map(|v| *v.get_ref());
        Ok(spec)
    }

    fn policy(&self, i: usize, raw: &RawPolicy) -> Result<Entry, FileError> {
        let field = |name: &str| format!("policy[{i}].{name}");
        let algorithm = match &raw.algorithm {
            Some(text) => text.get_ref().parse::<Algorithm>().map_err(|_| {
                let names: Vec<&str> = Algorithm::all().iter().map(|a| a.name()).collect();
                let expected = format!("one of {}", names.join(", "));
                self.bad(text, field("algorithm"), expected)
            })?,
            None => Algorithm::Gcra,
        };
        let quota = raw.quota.get_ref().parse::<Quota>().map_err(|e| {
            self.at(
                &raw.quota,
                field("quota"),
                QUOTA_EXAMPLE,
                format!("\"{}\": {e}", raw.quota.get_ref()),
            )
        })?;
        let name = raw.name.get_ref();
        let valid_name = !name.is_empty()
            && name.len() <= Policy::MAX_NAME_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
        if !valid_name {
            let max = Policy::MAX_NAME_LEN;
            let expected = format!("a name of 1 to {max} characters from A-Z a-z 0-9 _ . : -");
            return Err(self.bad(&raw.name, field("name"), expected));
        }
        let mut policy = Policy::new(name.as_str(), algorithm, quota).map_err(|e| {
            self.at(
                &raw.quota,
                field("quota"),
                format!("a quota the {} algorithm accepts", algorithm.name()),
                format!("\"{}\": {e}", raw.quota.get_ref()),
            )
        })?;
        if let Some(penalty) = &raw.penalty {
            policy = policy.with_penalty(self.penalty(i, penalty)?);
        }
        let mode = match &raw.mode {
            None => None,
            Some(mode) => Some(match mode.get_ref().trim() {
                "enforce" => Enforcement::Enforce,
                "shadow" => Enforcement::Shadow,
                "off" => Enforcement::Off,
                other => {
                    let expected = "\"enforce\", \"shadow\" or \"off\"";
                    return Err(self.at(mode, field("mode"), expected, format!("\"{other}\"")));
                }
            }),
        };
        Ok(Entry {
            policy,
            mode,
            default: raw.default,
            name_at: self.at(&raw.name, field("name"), "", None),
        })
    }

    fn penalty(&self, i: usize, raw: &Spanned<RawPenalty>) -> Result<Penalty, FileError> {
        let field = |name: &str| format!("policy[{i}].penalty.{name}");
        let duration = |value: &Spanned<String>, name: &str| {
            parse_duration(value.get_ref()).map_err(|e| {
                self.at(
                    value,
                    field(name),
                    DURATION_EXAMPLE,
                    format!("\"{}\": {e}", value.get_ref()),
                )
            })
        };
        let p = raw.get_ref();
        let refused = |e: floodwall_core::ConfigError, name: &str, span: Range<usize>| {
            self.span(
                span,
                field(name),
                "a penalty floodwall accepts",
                e.to_string(),
            )
        };
        let within = duration(&p.within, "within")?;
        let ban = duration(&p.ban, "ban")?;
        let mut penalty = Penalty::new(*p.after.get_ref(), within, ban)
            .map_err(|e| refused(e, "after", p.after.span()))?;
        match (&p.growth, &p.max_ban) {
            (None, None) => {}
            (Some(growth), max_ban) => {
                let max_ban = match max_ban {
                    Some(max) => duration(max, "max_ban")?,
                    None => ban,
                };
                penalty = penalty
                    .growing(*growth.get_ref(), max_ban)
                    .map_err(|e| refused(e, "growth", growth.span()))?;
            }
            (None, Some(max_ban)) => {
                let expected = "`growth` beside `max_ban` (without growth every ban lasts `ban`)";
                return Err(self.at(max_ban, field("max_ban"), expected, None));
            }
        }
        if let Some(forget) = &p.forget_after {
            let forget_after = duration(forget, "forget_after")?;
            penalty = penalty
                .forget_after(forget_after)
                .map_err(|e| refused(e, "forget_after", forget.span()))?;
        }
        Ok(penalty)
    }

    fn routes(
        &self,
        raw: &[Spanned<RawRoute>],
        policies: &[Entry],
    ) -> Result<RouteTable, FileError> {
        let known = || {
            policies
                .iter()
                .map(|e| format!("\"{}\"", e.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut routes = Vec::with_capacity(raw.len());
        let mut seen: HashMap<(String, Option<Vec<Method>>), usize> = HashMap::new();
        for (i, spanned) in raw.iter().enumerate() {
            let route = spanned.get_ref();
            let field = |name: &str| format!("route[{i}].{name}");
            let path = route.path.get_ref().trim();
            if !path.starts_with('/') || path.contains(['?', '#', ' ']) {
                let expected = "a path prefix starting with \"/\", such as \"/login\"";
                return Err(self.bad(&route.path, field("path"), expected));
            }
            let methods = match &route.methods {
                None => None,
                Some(list) if list.is_empty() => {
                    let expected = "at least one method (leave `methods` out for every method)";
                    return Err(self.at(spanned, field("methods"), expected, None));
                }
                Some(list) => {
                    let mut methods = Vec::with_capacity(list.len());
                    for (j, text) in list.iter().enumerate() {
                        let upper = text.get_ref().trim().to_ascii_uppercase();
                        let Some(method) = METHODS.iter().find(|m| m.as_str() == upper) else {
                            let names: Vec<&str> = METHODS.iter().map(Method::as_str).collect();
                            let expected = format!("one of {}", names.join(", "));
                            let at = format!("route[{i}].methods[{j}]");
                            return Err(self.bad(text, at, expected));
                        };
                        if !methods.contains(method) {
                            methods.push(method.clone());
                        }
                    }
                    methods.sort_by(|a: &Method, b| a.as_str().cmp(b.as_str()));
                    Some(methods)
                }
            };
            let skip = route.skip.as_ref().is_some_and(|s| *s.get_ref());
            let target = match (&route.policies, skip) {
                (Some(list), true) => {
                    let expected = "either `policies` or `skip = true`, not both";
                    return Err(self.at(list, field("policies"), expected, None));
                }
                (None, true) => Target::Skip,
                (None, false) => {
                    let expected =
                        "`policies = [..]` naming the route's policies, or `skip = true`";
                    return Err(self.at(&route.path, field("policies"), expected, None));
                }
                (Some(list), false) => {
                    if list.get_ref().is_empty() {
                        let expected = "at least one policy name (or `skip = true` for none)";
                        return Err(self.at(list, field("policies"), expected, None));
                    }
                    let mut names: Vec<String> = Vec::with_capacity(list.get_ref().len());
                    for (j, name) in list.get_ref().iter().enumerate() {
                        if !policies.iter().any(|e| e.name() == name.get_ref()) {
                            let expected = format!("the name of a [[policy]]: {}", known());
                            let at = format!("route[{i}].policies[{j}]");
                            return Err(self.bad(name, at, expected));
                        }
                        if !names.contains(name.get_ref()) {
                            names.push(name.get_ref().clone());
                        }
                    }
                    Target::Policies(names.into())
                }
            };
            // `/login/` is `/login`: the same route twice.
            let prefix = match path.trim_end_matches('/') {
                "" => "/",
                trimmed => trimmed,
            };
            if let Some(first) = seen.insert((prefix.to_owned(), methods.clone()), i) {
                let found = format!("the same as route[{first}]");
                let expected = "a path and methods no other route has";
                return Err(self.at(&route.path, field("path"), expected, found));
            }
            routes.push(Route::new(path, methods, target));
        }
        let defaults: Vec<String> = policies
            .iter()
            .filter(|e| e.default)
            .map(|e| e.name().to_owned())
            .collect();
        let fallback = if defaults.is_empty() {
            Target::Skip
        } else {
            Target::Policies(Arc::from(defaults))
        };
        Ok(RouteTable::new(routes, fallback))
    }
}
