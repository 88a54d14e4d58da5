//! From one file's YAML tree to a checked [`Domain`]: every descriptor and limit read
//! where the format puts it, every error at its line and field path.

use std::collections::{HashMap, HashSet};

use super::error::{ErrorKind, FileError, Warning};
use super::limit::{RateLimit, Rule, Unit, full_key, policy_name};
use super::penalty;
use super::reader::{Place, Reader, join};
use super::tree::{Descriptor, Domain, Level};
use super::yaml::{self, Node, Pos, quote};
use floodwall_core::{Algorithm, Policy, Quota};

/// Reads one file's text into its domain, adding what it ignored to `warnings`.
pub(super) fn read_domain(
    origin: &str,
    text: &str,
    warnings: &mut Vec<Warning>,
) -> Result<Domain, FileError> {
    let root = yaml::parse(text).map_err(|e| {
        let kind = if e.too_complex {
            ErrorKind::TooComplex
        } else {
            ErrorKind::Yaml
        };
        FileError::new(kind, origin, e.at, "", "valid YAML", Some(e.message))
    })?;
    let mut reader = Reader {
        origin,
        warnings,
        domain: String::new(),
        names: HashSet::new(),
    };
    let Some(root) = root else {
        return Err(reader.error(
            ErrorKind::EmptyDomain,
            None,
            "domain",
            "a `domain` field naming the domain",
            Some("an empty file".to_owned()),
        ));
    };
    let fields = reader.fields(&root, Place::Root, "")?;
    let domain = match get(&fields, "domain") {
        Some(node) => reader.text(node, "domain")?.unwrap_or_default(),
        None => "",
    };
    if domain.is_empty() {
        let at = get(&fields, "domain").map_or(root.at, |n| n.at);
        return Err(reader.error(
            ErrorKind::EmptyDomain,
            Some(at),
            "domain",
            "a non-empty `domain` naming the domain",
            None,
        ));
    }
    reader.domain = domain.to_owned();
    let items = reader.list(get(&fields, "descriptors"), "descriptors")?;
    let descriptors = reader.level(items, "descriptors", &mut Vec::new())?;
    Ok(Domain {
        name: domain.to_owned(),
        origin: origin.to_owned(),
        descriptors,
    })
}

fn get<'n>(fields: &[(&str, &'n Node)], name: &str) -> Option<&'n Node> {
    fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}

impl Reader<'_> {
    /// The descriptors of one list, each checked, with those nested in them.
    fn level(
        &mut self,
        items: &[Node],
        field: &str,
        path: &mut Vec<(String, Option<String>)>,
    ) -> Result<Level, FileError> {
        let mut nodes = Vec::with_capacity(items.len());
        let mut seen: HashMap<(String, Option<String>), (usize, Pos)> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            let here = format!("{field}[{i}]");
            let fields = self.fields(item, Place::Descriptor, &here)?;
            let key_node = get(&fields, "key");
            let key = match key_node {
                Some(node) => self.text(node, &join(&here, "key"))?.unwrap_or_default(),
                None => "",
            };
            if key.is_empty() {
                return Err(self.error(
                    ErrorKind::MissingKey,
                    Some(key_node.map_or(item.at, |n| n.at)),
                    join(&here, "key"),
                    "a non-empty `key` (every descriptor has one)",
                    None,
                ));
            }
            let value = match get(&fields, "value") {
                Some(node) => self.text(node, &join(&here, "value"))?,
                None => None,
            }
            .filter(|v| !v.is_empty());
            let at = key_node.map_or(item.at, |n| n.at);
            let id = (key.to_owned(), value.map(str::to_owned));
            if let Some((first, first_at)) = seen.get(&id) {
                let what = match value {
                    Some(value) => format!("key {} and value {}", quote(key), quote(value)),
                    None => format!("key {} without a value", quote(key)),
                };
                return Err(self.error(
                    ErrorKind::DuplicateDescriptor,
                    Some(at),
                    here,
                    "a key and value no other descriptor of this list has",
                    Some(format!(
                        "the {what} of {field}[{first}] at line {}",
                        first_at.line
                    )),
                ));
            }
            seen.insert(id.clone(), (i, at));
            let shadow_mode =
                self.boolean(get(&fields, "shadow_mode"), &join(&here, "shadow_mode"))?;
            let detailed_metric = self.boolean(
                get(&fields, "detailed_metric"),
                &join(&here, "detailed_metric"),
            )?;
            path.push(id);
            let rate_limit = match get(&fields, "rate_limit").filter(|n| !n.is_null()) {
                Some(node) => Some(self.rate_limit(
                    node,
                    &join(&here, "rate_limit"),
                    path,
                    shadow_mode,
                    detailed_metric,
                )?),
                None => None,
            };
            let nested_field = join(&here, "descriptors");
            let nested = self.list(get(&fields, "descriptors"), &nested_field)?;
            let descriptors = self.level(nested, &nested_field, path)?;
            path.pop();
            nodes.push(Descriptor {
                key: key.to_owned(),
                value: value.map(str::to_owned),
                rate_limit,
                shadow_mode,
                detailed_metric,
                descriptors,
            });
        }
        Ok(Level::new(nodes))
    }

    fn rate_limit(
        &mut self,
        node: &Node,
        field: &str,
        path: &[(String, Option<String>)],
        shadow_mode: bool,
        detailed_metric: bool,
    ) -> Result<RateLimit, FileError> {
        let fields = self.fields(node, Place::RateLimit, field)?;
        let at = |name: &str| get(&fields, name).filter(|n| !n.is_null());
        let unlimited = self.boolean(get(&fields, "unlimited"), &join(field, "unlimited"))?;
        let name = match get(&fields, "name") {
            Some(n) => self
                .text(n, &join(field, "name"))?
                .filter(|s| !s.is_empty()),
            None => None,
        };
        let replaces = self.replaces(get(&fields, "replaces"), &join(field, "replaces"), name)?;
        let steps: Vec<(&str, Option<&str>)> = path
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        let mut limit = RateLimit {
            rule: Rule::Unlimited,
            unit: None,
            requests_per_unit: 0,
            name: name.map(str::to_owned),
            replaces,
            shadow_mode,
            detailed_metric,
            full_key: full_key(&self.domain, &steps),
        };
        let floodwall = ["algorithm", "burst", "penalty"];
        if unlimited {
            for other in ["unit", "requests_per_unit"].iter().chain(&floodwall) {
                if let Some(n) = at(other) {
                    return Err(self.error(
                        ErrorKind::UnlimitedWithRate,
                        Some(n.at),
                        join(field, other),
                        format!(
                            "no `{other}` beside `unlimited: true` (an unlimited limit has no rate)"
                        ),
                        Some(n.describe()),
                    ));
                }
            }
            return Ok(limit);
        }
        let names = Unit::ALL.map(Unit::name).join(", ");
        let unit = match at("unit") {
            None => {
                return Err(self.error(
                    ErrorKind::BadUnit,
                    Some(node.at),
                    join(field, "unit"),
                    format!("a `unit`: one of {names} (or `unlimited: true`)"),
                    None,
                ));
            }
            Some(n) => {
                let text = self.text(n, &join(field, "unit"))?.unwrap_or_default();
                Unit::from_name(text).ok_or_else(|| {
                    self.error(
                        ErrorKind::BadUnit,
                        Some(n.at),
                        join(field, "unit"),
                        format!("one of {names}"),
                        Some(quote(text)),
                    )
                })?
            }
        };
        let rpu_field = join(field, "requests_per_unit");
        let Some(rpu_node) = at("requests_per_unit") else {
            return Err(self.error(
                ErrorKind::BadRequestsPerUnit,
                Some(node.at),
                rpu_field,
                "a `requests_per_unit` (0 refuses every request)",
                None,
            ));
        };
        let rpu = self.integer(
            rpu_node,
            &rpu_field,
            ErrorKind::BadRequestsPerUnit,
            u64::from(u32::MAX),
        )?;
        limit.unit = Some(unit);
        limit.requests_per_unit = u32::try_from(rpu).unwrap_or(u32::MAX);
        if rpu == 0 {
            if let Some((other, n)) = floodwall.iter().find_map(|f| at(f).map(|n| (f, n))) {
                return Err(self.error(
                    ErrorKind::BadLimit,
                    Some(n.at),
                    join(field, other),
                    format!(
                        "no `{other}` with `requests_per_unit: 0`, which refuses every request"
                    ),
                    Some(n.describe()),
                ));
            }
            limit.rule = Rule::RefuseAll;
            return Ok(limit);
        }
        let policy = self.policy(field, &fields, &steps, rpu, unit, rpu_node)?;
        limit.rule = Rule::Limited(policy);
        Ok(limit)
    }

    /// The policy of a limit with a rate: floodwall's algorithm, burst and penalty.
    fn policy(
        &mut self,
        field: &str,
        fields: &[(&str, &Node)],
        steps: &[(&str, Option<&str>)],
        rpu: u64,
        unit: Unit,
        rpu_node: &Node,
    ) -> Result<Policy, FileError> {
        let at = |name: &str| get(fields, name).filter(|n| !n.is_null());
        let bad = |n: &Node, name: &str, expected: String, found: String| {
            self.error(
                ErrorKind::BadLimit,
                Some(n.at),
                join(field, name),
                expected,
                Some(found),
            )
        };
        let algorithm = match at("algorithm") {
            None => Algorithm::Gcra,
            Some(n) => {
                let text = self.text(n, &join(field, "algorithm"))?.unwrap_or_default();
                text.parse::<Algorithm>().map_err(|_| {
                    let names: Vec<&str> = Algorithm::all().iter().map(|a| a.name()).collect();
                    bad(
                        n,
                        "algorithm",
                        format!("one of {}", names.join(", ")),
                        quote(text),
                    )
                })?
            }
        };
        let mut quota = Quota::new(rpu, unit.duration()).map_err(|e| {
            bad(
                rpu_node,
                "requests_per_unit",
                "a rate floodwall accepts".into(),
                e.to_string(),
            )
        })?;
        let burst_node = at("burst");
        if let Some(n) = burst_node {
            let burst = self.integer(
                n,
                &join(field, "burst"),
                ErrorKind::BadLimit,
                Quota::MAX_COUNT,
            )?;
            quota = quota
                .with_burst(burst)
                .map_err(|e| bad(n, "burst", "a burst of at least 1".into(), e.to_string()))?;
        }
        let name = policy_name(&self.domain, steps);
        let mut policy = Policy::new(name.as_str(), algorithm, quota).map_err(|e| {
            let (n, which) = match (&e, burst_node) {
                (floodwall_core::ConfigError::BurstUnsupported { .. }, Some(b)) => (b, "burst"),
                _ => (rpu_node, "requests_per_unit"),
            };
            let expected = format!("a rate the {} algorithm can enforce", algorithm.name());
            bad(n, which, expected, e.to_string())
        })?;
        if let Some(n) = at("penalty") {
            let penalty = penalty::read(self, n, &join(field, "penalty"))?;
            policy = policy.with_penalty(penalty);
        }
        if !self.names.insert(name.clone()) {
            return Err(self.error(
                ErrorKind::BadLimit,
                Some(rpu_node.at),
                field,
                "a limit whose policy name no other limit of the domain has",
                Some(format!("{} again (a digest collision)", quote(&name))),
            ));
        }
        Ok(policy)
    }

    fn replaces(
        &mut self,
        node: Option<&Node>,
        field: &str,
        own: Option<&str>,
    ) -> Result<Vec<String>, FileError> {
        let items = self.list(node, field)?;
        let mut names = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let here = format!("{field}[{i}]");
            let fields = self.fields(item, Place::Replaces, &here)?;
            let name_node = get(&fields, "name");
            let name = match name_node {
                Some(n) => self.text(n, &join(&here, "name"))?.unwrap_or_default(),
                None => "",
            };
            let at = Some(name_node.map_or(item.at, |n| n.at));
            if name.is_empty() {
                return Err(self.error(
                    ErrorKind::BadReplaces,
                    at,
                    join(&here, "name"),
                    "the `name` of the limit this one replaces",
                    None,
                ));
            }
            if Some(name) == own {
                return Err(self.error(
                    ErrorKind::BadReplaces,
                    at,
                    join(&here, "name"),
                    "the name of another limit (a limit cannot replace itself)",
                    Some(quote(name)),
                ));
            }
            names.push(name.to_owned());
        }
        Ok(names)
    }
}
