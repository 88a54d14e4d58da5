//! A policy file's routes as a [`ChoosePolicy`]: method and path prefix to policy names,
//! resolved through the layer's live handle once per version of the routes and policies.

use std::sync::{Arc, OnceLock};

use arc_swap::{ArcSwap, ArcSwapOption};
use floodwall_core::Policy;
use http::Method;
use http::request::Parts;

use crate::choose::{Choice, ChoosePolicy};
use crate::live::{LiveLimits, LiveState};

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
    #[cfg(test)]
    fn target(&self, method: &Method, path: &str) -> &Target {
        self.targets()
            .nth(self.index(method, path))
            .expect("an index of targets()")
    }

    /// The place in [`targets`](Self::targets) of the most specific matching route.
    fn index(&self, method: &Method, path: &str) -> usize {
        self.routes
            .iter()
            .position(|r| r.matches(method, path))
            .unwrap_or(self.routes.len())
    }

    /// Every route's target, most specific first, then the fallback's.
    fn targets(&self) -> impl Iterator<Item = &Target> {
        self.routes
            .iter()
            .map(|r| &r.target)
            .chain(std::iter::once(&self.fallback))
    }
}

/// The chooser a file's layer runs: its route table swaps whole on a reload, and the
/// policies are those of the layer's [`LiveLimits`], so a changed quota applies at once.
pub(super) struct FileChooser {
    pub(super) table: Arc<ArcSwap<RouteTable>>,
    /// The handle of the layer this chooser is in, set once the layer is built.
    pub(super) live: Arc<OnceLock<LiveLimits>>,
    /// The file's policies, for a layer whose handle was never set.
    pub(super) parsed: Arc<[Policy]>,
    /// Each route's choice for one route table and one version of the live policies, so
    /// that a request clones one `Arc` instead of looking its policies up by name.
    pub(super) resolved: ArcSwapOption<Resolved>,
}

/// [`FileChooser::resolved`]: what it was worked out from, and a choice per target.
pub(super) struct Resolved {
    table: Arc<RouteTable>,
    state: Option<Arc<LiveState>>,
    choices: Vec<Choice>,
}

impl FileChooser {
    fn resolve(&self, table: Arc<RouteTable>, state: Option<Arc<LiveState>>) -> Resolved {
        let find = |name: &str| match &state {
            Some(state) => state.find(name).cloned(),
            None => self.parsed.iter().find(|p| p.name() == name).cloned(),
        };
        let choices = table
            .targets()
            .map(|target| match target {
                Target::Skip => Choice::Skip,
                Target::Policies(names) => {
                    let mut found: Vec<Policy> = names.iter().filter_map(|n| find(n)).collect();
                    match found.len() {
                        0 => Choice::Skip,
                        1 => Choice::Policy(found.remove(0)),
                        _ => Choice::Policies(found.into()),
                    }
                }
            })
            .collect();
        Resolved {
            table,
            state,
            choices,
        }
    }
}

impl ChoosePolicy for FileChooser {
    fn choose(&self, req: &Parts, _key: &[u8]) -> Choice {
        let table = self.table.load_full();
        let state = self.live.get().map(LiveLimits::state);
        let cached = self.resolved.load_full();
        let resolved = match cached {
            Some(r)
                if Arc::ptr_eq(&r.table, &table)
                    && match (&r.state, &state) {
                        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                        (a, b) => a.is_none() && b.is_none(),
                    } =>
            {
                r
            }
            _ => {
                let r = Arc::new(self.resolve(table, state));
                self.resolved.store(Some(Arc::clone(&r)));
                r
            }
        };
        resolved.choices[resolved.table.index(&req.method, req.uri.path())].clone()
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

    /// A route's choice worked out before the layer's handle was set is worked out again
    /// once it is, and then on every change the handle makes.
    #[test]
    fn a_choice_made_before_the_handle_is_set_follows_the_handle_after() {
        use floodwall_core::MemoryStore;
        let gcra = |quota: &str| Policy::gcra("p", quota.parse().unwrap()).unwrap();
        let chooser = FileChooser {
            table: Arc::new(ArcSwap::from_pointee(RouteTable::new(
                vec![],
                names(&["p"]),
            ))),
            live: Arc::new(OnceLock::new()),
            parsed: vec![gcra("1/s")].into(),
            resolved: ArcSwapOption::empty(),
        };
        let req = http::Request::get("/").body(()).unwrap().into_parts().0;
        let limit = || match chooser.choose(&req, b"") {
            Choice::Policy(p) => p.limit(),
            _ => panic!("one policy"),
        };
        assert_eq!(limit(), 1);
        let live = crate::RateLimitLayer::new(MemoryStore::new(), gcra("1/s")).live();
        live.set_quota("p", "7/s".parse().unwrap()).unwrap();
        assert!(chooser.live.set(live.clone()).is_ok());
        assert_eq!(limit(), 7);
        live.set_quota("p", "9/s".parse().unwrap()).unwrap();
        assert_eq!(limit(), 9);
    }
}
