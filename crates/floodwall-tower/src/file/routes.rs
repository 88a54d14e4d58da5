//! A policy file's routes as a [`ChoosePolicy`]: method and path prefix to policy names,
//! each name looked up through the layer's live handle on every request.

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use floodwall_core::Policy;
use http::Method;
use http::request::Parts;

use crate::choose::{Choice, ChoosePolicy};
use crate::live::LiveLimits;

/// What a route says: no limit, or these policies by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    Skip,
    Policies(Arc<[String]>),
}

/// One `[[route]]`.
#[derive(Clone, Debug)]
pub(super) struct Route {
    /// Without a trailing slash, except for the root `/`.
    prefix: String,
    /// Sorted; `None` is every method.
    methods: Option<Vec<Method>>,
    target: Target,
}

impl Route {
    pub(super) fn new(prefix: &str, methods: Option<Vec<Method>>, target: Target) -> Self {
        let trimmed = prefix.trim_end_matches('/');
        let prefix = if trimmed.is_empty() { "/" } else { trimmed };
        Self {
            prefix: prefix.to_owned(),
            methods,
            target,
        }
    }

    /// Whether `path` is the prefix or below it: `/login` matches `/login` and
    /// `/login/otp`, never `/login2`.
    fn matches(&self, method: &Method, path: &str) -> bool {
        let below = self.prefix == "/"
            || path
                .strip_prefix(self.prefix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        below && self.methods.as_ref().is_none_or(|m| m.contains(method))
    }
}

/// The routes, most specific first, and what a request no route matches gets: the
/// `default = true` policies (or no limit when none is).
#[derive(Clone, Debug)]
pub(super) struct RouteTable {
    routes: Vec<Route>,
    fallback: Target,
}

impl RouteTable {
    pub(super) fn new(mut routes: Vec<Route>, fallback: Target) -> Self {
        // The longest prefix first; at one prefix, a route naming methods before one for
        // every method. The sort is stable: otherwise the file's order.
        routes.sort_by_key(|r| (std::cmp::Reverse(r.prefix.len()), r.methods.is_none()));
        Self { routes, fallback }
    }

    /// What the most specific matching route says.
    pub(super) fn target(&self, method: &Method, path: &str) -> &Target {
        self.routes
            .iter()
            .find(|r| r.matches(method, path))
            .map_or(&self.fallback, |r| &r.target)
    }
}

/// The chooser a file's layer runs: its route table swaps whole on a reload; the policies
/// are looked up by name in the layer's [`LiveLimits`] on each request, so a quota changed
/// by a reload (or by any holder of the handle) applies to the routes at once.
pub(super) struct FileChooser {
    pub(super) table: Arc<ArcSwap<RouteTable>>,
    /// The handle of the layer this chooser is in, set once the layer is built (a layer's
    /// handle exists only after its last builder method).
    pub(super) live: Arc<OnceLock<LiveLimits>>,
    /// The file's policies, for a layer whose handle was never set.
    pub(super) parsed: Arc<[Policy]>,
}

impl FileChooser {
    fn find(&self, name: &str) -> Option<Policy> {
        match self.live.get() {
            Some(live) => live.policy(name),
            None => self.parsed.iter().find(|p| p.name() == name).cloned(),
        }
    }
}

impl ChoosePolicy for FileChooser {
    fn choose(&self, req: &Parts, _key: &[u8]) -> Choice {
        let table = self.table.load();
        match table.target(&req.method, req.uri.path()) {
            Target::Skip => Choice::Skip,
            Target::Policies(names) => match &names[..] {
                [one] => self.find(one).map_or(Choice::Skip, Choice::Policy),
                many => {
                    let found: Vec<Policy> = many.iter().filter_map(|n| self.find(n)).collect();
                    if found.is_empty() {
                        Choice::Skip
                    } else {
                        Choice::Policies(found.into())
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Target {
        Target::Policies(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn the_most_specific_route_wins() {
        let table = RouteTable::new(
            vec![
                Route::new("/", None, names(&["root"])),
                Route::new("/login/", None, names(&["any-login"])),
                Route::new("/login", Some(vec![Method::POST]), names(&["post-login"])),
                Route::new("/health", None, Target::Skip),
            ],
            names(&["default"]),
        );
        let at = |method: Method, path: &str| table.target(&method, path).clone();
        assert_eq!(at(Method::POST, "/login"), names(&["post-login"]));
        assert_eq!(at(Method::POST, "/login/otp"), names(&["post-login"]));
        assert_eq!(at(Method::GET, "/login"), names(&["any-login"]));
        assert_eq!(at(Method::GET, "/login2"), names(&["root"]));
        assert_eq!(at(Method::GET, "/health"), Target::Skip);
        assert_eq!(at(Method::GET, "/healthz"), names(&["root"]));

        let without_root =
            RouteTable::new(vec![Route::new("/a", None, Target::Skip)], names(&["d"]));
        assert_eq!(without_root.target(&Method::GET, "/b"), &names(&["d"]));
    }
}
