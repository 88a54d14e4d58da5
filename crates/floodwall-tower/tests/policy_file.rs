//! Policies from a file: the example file driving an axum app over real HTTP, the errors a
//! bad file gets (each naming its line and field), and reloads that change a running
//! layer, or change nothing when the new file is bad.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::{get, post};
use floodwall_core::Quota;
use floodwall_test_support::{http_get, http_request, serve, store};
use floodwall_tower::file::{FileError, PolicyFile};
use floodwall_tower::{Enforcement, Modes};
use http::{Request, StatusCode};
use tower::{Service, ServiceExt};

const MINUTE: Duration = Duration::from_secs(60);
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/policies.toml");

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/login", post(|| async { "welcome\n" }))
        .route("/hello/{name}", get(|| async { "hi\n" }))
        .route("/health", get(|| async { "ok\n" }))
}

#[tokio::test]
async fn the_example_file_limits_each_route_by_its_policies() {
    let file = PolicyFile::load(EXAMPLE).unwrap();
    let names: Vec<(&str, Option<Enforcement>)> =
        file.policies().map(|(p, m)| (p.name(), m)).collect();
    assert_eq!(
        names,
        [
            ("per-ip", None),
            ("login", None),
            ("greetings", Some(Enforcement::Shadow)),
        ]
    );
    let login = file.policies().nth(1).unwrap().0;
    let penalty = login.penalty().unwrap();
    assert_eq!(
        (penalty.after(), penalty.within(), penalty.ban()),
        (5, MINUTE * 10, MINUTE * 15)
    );
    assert_eq!((penalty.growth(), penalty.max_ban()), (2, MINUTE * 60 * 24));
    assert_eq!(login.algorithm().name(), "sliding_log");

    // A manual clock: no time passes between requests.
    let (store, clock) = store();
    let (layer, limits) = file.layer(store);
    let addr: SocketAddr = serve(app().layer(layer)).await;

    // /health is never limited, and gets no headers.
    for _ in 0..30 {
        let res = http_get(addr, "/health", &[]).await;
        assert_eq!(res.status, 200);
        assert_eq!(res.get("ratelimit-policy"), None);
    }

    // POST /login: per-ip and login; login's 5 per 10 minutes refuses the sixth.
    for i in 0..5 {
        let res = http_request(addr, "POST", "/login", &[]).await;
        assert_eq!(res.status, 200, "login {i}");
        let policies = res.header("ratelimit-policy");
        assert!(policies.contains("\"per-ip\"") && policies.contains("\"login\""));
    }
    let refused = http_request(addr, "POST", "/login", &[]).await;
    assert_eq!(refused.status, 429);

    // /hello: per-ip, and greetings in shadow (checked, never refusing: below).
    let hello = http_get(addr, "/hello/ada", &[]).await;
    assert_eq!(hello.status, 200);
    assert!(hello.header("ratelimit-policy").contains("\"per-ip\""));

    // Any other route: per-ip alone (the default), whose burst of 20 the five logins and
    // the greeting spent 6 of; the refused login counted in none.
    for i in 0..14 {
        let res = http_get(addr, "/", &[]).await;
        assert_eq!(res.status, 200, "request {i}");
        assert!(!res.header("ratelimit-policy").contains("login"));
    }
    assert_eq!(http_get(addr, "/", &[]).await.status, 429);
    assert_eq!(http_get(addr, "/health", &[]).await.status, 200);

    // /hello once more, an hour on (every count afresh), 150 times at per-ip's pace of
    // 10 a second: past greetings' 100 a minute, yet never refused, since greetings is in
    // shadow. The headers are per-ip's, the enforced policy's (`floodwall_tower::guide::live_changes`).
    clock.advance(MINUTE * 60);
    for i in 0..150 {
        if i > 0 {
            clock.advance(Duration::from_millis(100));
        }
        let res = http_get(addr, "/hello/ada", &[]).await;
        assert_eq!(res.status, 200, "greeting {i}");
        assert_eq!(
            res.header("ratelimit-policy"),
            "\"per-ip\";q=10;w=1;floodwall-burst=20",
            "greeting {i}"
        );
    }
    // Shadow checked and charged greetings all along: enforced at the same instant, it
    // refuses.
    limits
        .live()
        .set_enforcement("greetings", Enforcement::Enforce)
        .unwrap();
    let refused = http_get(addr, "/hello/ada", &[]).await;
    assert_eq!(refused.status, 429);
    assert!(
        refused.header("ratelimit").contains("\"greetings\";r=0"),
        "{refused:?}"
    );
}

/// The error `text` gets, as a file named `bad.toml`.
fn error(text: &str) -> FileError {
    PolicyFile::parse(text, "bad.toml").expect_err("a bad file")
}

#[track_caller]
fn assert_error(text: &str, line: usize, field: &str, says: &str) {
    let e = error(text);
    let shown = e.to_string();
    assert_eq!(e.line(), Some(line), "{shown}");
    assert_eq!(e.field(), field, "{shown}");
    assert!(
        shown.starts_with(&format!("bad.toml:{line}:")),
        "{shown} names the file and line"
    );
    assert!(shown.contains(field), "{shown} names the field");
    assert!(shown.contains(says), "{shown} says {says:?}");
}

const GOOD_POLICY: &str = "[[policy]]\nname = \"per-ip\"\nquota = \"10/s\"\ndefault = true\n";

#[test]
fn a_bad_file_gets_its_line_and_field() {
    // TOML syntax: an unterminated string on line 3.
    assert_error(
        "[[policy]]\nname = \"a\"\nquota = \"1/s\n",
        3,
        "",
        "valid TOML",
    );
    // An unknown field (a typo), on line 5.
    assert_error(
        &format!("{GOOD_POLICY}qouta = \"5/s\"\n"),
        5,
        "policy[0].qouta",
        "`quota`",
    );
    // A quota that does not parse.
    assert_error(
        &format!("{GOOD_POLICY}\n[[policy]]\nname = \"login\"\nquota = \"5 per min\"\n"),
        8,
        "policy[1].quota",
        "a quota such as",
    );
    // A quota the algorithm refuses: a window has no burst.
    assert_error(
        "[[policy]]\nname = \"w\"\nalgorithm = \"fixed_window\"\nquota = \"5/s burst 9\"\n",
        4,
        "policy[0].quota",
        "fixed_window",
    );
    // An unknown algorithm.
    assert_error(
        "[[policy]]\nname = \"a\"\nalgorithm = \"gcrq\"\nquota = \"1/s\"\n",
        3,
        "policy[0].algorithm",
        "sliding_log",
    );
    // A route naming an unknown policy.
    assert_error(
        &format!(
            "{GOOD_POLICY}\n[[route]]\npath = \"/login\"\npolicies = [\"per-ip\", \"login\"]\n"
        ),
        8,
        "route[0].policies[1]",
        "\"login\"",
    );
    // Two policies of one name.
    assert_error(
        &format!("{GOOD_POLICY}[[policy]]\nname = \"per-ip\"\nquota = \"1/s\"\n"),
        6,
        "policy[1].name",
        "already the name of policy[0]",
    );
    // A CIDR that is not one.
    assert_error(
        &format!(
            "[key]\nkind = \"client_ip\"\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0/33\"]\n{GOOD_POLICY}"
        ),
        3,
        "key.trusted_proxies[1]",
        "a network such as",
    );
    // A field given to the wrong kind of key.
    assert_error(
        &format!("[key]\nkind = \"peer_ip\"\nheader = \"x-api-key\"\n{GOOD_POLICY}"),
        3,
        "key.header",
        "kind = \"header\"",
    );
    // Penalties: a wrong type, a zero, a bad duration.
    assert_error(
        "[[policy]]\nname = \"a\"\nquota = \"1/s\"\npenalty = { after = \"five\", within = \"1min\", ban = \"1h\" }\n",
        4,
        "policy[0].penalty.after",
        "u32",
    );
    assert_error(
        "[[policy]]\nname = \"a\"\nquota = \"1/s\"\npenalty = { after = 0, within = \"1min\", ban = \"1h\" }\n",
        4,
        "policy[0].penalty.after",
        "after is 0",
    );
    assert_error(
        "[[policy]]\nname = \"a\"\nquota = \"1/s\"\n\npenalty = { after = 3, within = \"1 fortnight\", ban = \"1h\" }\n",
        5,
        "policy[0].penalty.within",
        "a duration such as",
    );
    // A mode, a method, a route with nothing to do.
    assert_error(
        &format!("{GOOD_POLICY}mode = \"dry-run\"\n"),
        5,
        "policy[0].mode",
        "\"shadow\"",
    );
    assert_error(
        &format!(
            "{GOOD_POLICY}[[route]]\npath = \"/a\"\nmethods = [\"GET\", \"POTS\"]\nskip = true\n"
        ),
        7,
        "route[0].methods[1]",
        "POST",
    );
    assert_error(
        &format!("{GOOD_POLICY}[[route]]\npath = \"/a\"\n"),
        6,
        "route[0].policies",
        "skip = true",
    );
    // The same route twice (a trailing slash changes nothing).
    assert_error(
        &format!(
            "{GOOD_POLICY}[[route]]\npath = \"/a\"\nskip = true\n[[route]]\npath = \"/a/\"\nskip = true\n"
        ),
        9,
        "route[1].path",
        "the same as route[0]",
    );
    // A missing field.
    assert_error(
        "[[policy]]\nname = \"a\"\n",
        1,
        "policy[0].quota",
        "`quota`",
    );
    // No policy at all.
    assert_error("", 1, "policy", "at least one [[policy]]");
}

#[test]
fn an_unreadable_file_is_an_error_too() {
    let e = PolicyFile::load("/nonexistent/policies.toml").unwrap_err();
    assert_eq!(e.line(), None);
    assert!(e.to_string().starts_with("/nonexistent/policies.toml: "));
}

/// A policy file in a directory of this test's own.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("floodwall-policy-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = Self(dir.join(name));
        file.write(text);
        file
    }

    fn write(&self, text: &str) {
        std::fs::write(&self.0, text).unwrap();
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn request(ip: &str, path: &str) -> Request<Body> {
    let mut req = Request::get(path).body(Body::empty()).unwrap();
    req.extensions_mut()
        .insert(SocketAddr::new(ip.parse().unwrap(), 40000));
    req
}

/// How many requests from `ip` to `path` pass before the first refusal (at most 50).
async fn passes<S>(service: &mut S, ip: &str, path: &str) -> usize
where
    S: Service<Request<Body>, Response = http::Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    for n in 0..50 {
        let res = service.clone().oneshot(request(ip, path)).await.unwrap();
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            return n;
        }
    }
    50
}

fn reloadable(quota: &str, admin: &str) -> String {
    format!(
        "[[policy]]\nname = \"per-ip\"\nquota = \"{quota}\"\ndefault = true\n\n\
         [[policy]]\nname = \"admin\"\nquota = \"1/min\"\n\n\
         [[route]]\npath = \"/admin\"\n{admin}\n"
    )
}

#[tokio::test]
async fn a_reload_changes_quotas_modes_and_routes_live() {
    let file = TempFile::new("live.toml", &reloadable("3/min", "policies = [\"admin\"]"));
    let (store, _clock) = store();
    let (layer, limits) = PolicyFile::load(&file.0).unwrap().layer(store);
    // A builder method that sets no policy nor mode keeps the layer's handle.
    let layer = layer.fail_mode(floodwall_core::resilience::FailMode::Open);
    let mut service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(floodwall_test_support::hello());

    assert_eq!(passes(&mut service, "192.0.2.1", "/").await, 3);
    assert_eq!(passes(&mut service, "192.0.2.1", "/admin").await, 1);

    // A new quota, and /admin no longer limited: no restart, the same service.
    file.write(&reloadable("6/min", "skip = true"));
    assert_eq!(limits.reload(&file.0).unwrap(), ["per-ip"]);
    assert_eq!(
        limits.live().policy("per-ip").unwrap().quota(),
        &"6/min".parse::<Quota>().unwrap()
    );
    assert_eq!(passes(&mut service, "192.0.2.2", "/").await, 6);
    assert_eq!(passes(&mut service, "192.0.2.1", "/admin").await, 50);

    // A mode: per-ip off is not checked at all.
    file.write(
        &reloadable("6/min", "skip = true")
            .replace("default = true", "default = true\nmode = \"off\""),
    );
    assert_eq!(limits.reload(&file.0).unwrap(), ["per-ip"]);
    assert_eq!(limits.live().enforcement("per-ip"), Some(Enforcement::Off));
    assert_eq!(passes(&mut service, "192.0.2.3", "/").await, 50);

    // Reloading the same file changes nothing.
    assert!(limits.reload(&file.0).unwrap().is_empty());
}

/// A change through the live handle, with no reload (the route table stays the same):
/// the routes naming the policy get its new version from the next request on, although
/// each route's choice was worked out before the change.
#[tokio::test]
async fn a_quota_changed_live_without_a_reload_reaches_the_routes() {
    let file = TempFile::new(
        "live-only.toml",
        &reloadable("1/min", "policies = [\"admin\"]"),
    );
    let (store, _clock) = store();
    let (layer, limits) = PolicyFile::load(&file.0).unwrap().layer(store);
    let mut service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(floodwall_test_support::hello());
    // Each route chosen once under the file's quotas.
    assert_eq!(passes(&mut service, "192.0.2.1", "/").await, 1);
    assert_eq!(passes(&mut service, "192.0.2.1", "/admin").await, 1);

    limits
        .live()
        .set_quota("per-ip", "5/min".parse().unwrap())
        .unwrap();
    assert_eq!(passes(&mut service, "192.0.2.2", "/").await, 5);
    assert_eq!(passes(&mut service, "192.0.2.2", "/admin").await, 1);
    limits
        .live()
        .set_policy(floodwall_core::Policy::gcra("admin", "3/min".parse().unwrap()).unwrap())
        .unwrap();
    assert_eq!(passes(&mut service, "192.0.2.3", "/admin").await, 3);
    assert_eq!(passes(&mut service, "192.0.2.3", "/").await, 5);

    // A reload sets the file's quotas back.
    assert_eq!(limits.reload(&file.0).unwrap(), ["per-ip", "admin"]);
    assert_eq!(passes(&mut service, "192.0.2.4", "/").await, 1);
    assert_eq!(passes(&mut service, "192.0.2.4", "/admin").await, 1);
}

#[tokio::test]
async fn a_reload_keeps_a_layer_wide_shadow_for_policies_the_file_gives_no_mode() {
    let file = TempFile::new("dry.toml", &reloadable("2/min", "policies = [\"admin\"]"));
    let (store, _clock) = store();
    // A dry run of the whole file: nothing refused.
    let (layer, limits) = PolicyFile::load(&file.0).unwrap().layer_with(store, |l| {
        l.modes(Modes::new().all(Enforcement::Shadow)).unwrap()
    });
    let mut service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(floodwall_test_support::hello());
    assert_eq!(passes(&mut service, "192.0.2.1", "/").await, 50);

    // The same file again, then a new quota: still a dry run.
    assert!(limits.reload(&file.0).unwrap().is_empty());
    file.write(&reloadable("3/min", "policies = [\"admin\"]"));
    assert_eq!(limits.reload(&file.0).unwrap(), ["per-ip"]);
    assert_eq!(
        limits.live().enforcement("per-ip"),
        Some(Enforcement::Shadow)
    );
    assert_eq!(passes(&mut service, "192.0.2.2", "/").await, 50);

    // A mode the file does give is applied.
    file.write(
        &reloadable("3/min", "policies = [\"admin\"]")
            .replace("default = true", "default = true\nmode = \"enforce\""),
    );
    assert_eq!(limits.reload(&file.0).unwrap(), ["per-ip"]);
    assert_eq!(passes(&mut service, "192.0.2.3", "/").await, 3);
}

#[tokio::test]
async fn a_bad_reload_changes_nothing() {
    let file = TempFile::new(
        "bad-reload.toml",
        &reloadable("3/min", "policies = [\"admin\"]"),
    );
    let (store, _clock) = store();
    let (layer, limits) = PolicyFile::load(&file.0).unwrap().layer(store);
    let mut service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(floodwall_test_support::hello());
    let before = limits.live().policies();

    let refusals = [
        // A bad quota for per-ip, and /admin skipped: neither applies.
        (
            reloadable("lots", "skip = true"),
            Some(3),
            "policy[0].quota",
        ),
        // A new policy needs a restart.
        (
            reloadable("9/min", "skip = true")
                + "\n[[policy]]\nname = \"extra\"\nquota = \"1/s\"\n",
            Some(15),
            "policy[2].name",
        ),
        // So does a removed one, and another key.
        (
            "[[policy]]\nname = \"per-ip\"\nquota = \"9/min\"\ndefault = true\n".to_owned(),
            None,
            "policy",
        ),
        (
            "[key]\nkind = \"global\"\n\n".to_owned() + &reloadable("9/min", "skip = true"),
            Some(1),
            "key",
        ),
    ];
    for (text, line, field) in refusals {
        file.write(&text);
        let e = limits.reload(&file.0).unwrap_err();
        assert_eq!((e.line(), e.field()), (line, field), "{e}");
        assert!(e.to_string().starts_with(&file.0.display().to_string()));
        if field != "policy[0].quota" {
            assert!(e.to_string().contains("restart"), "{e}");
        }
    }

    assert_eq!(limits.live().policies(), before);
    assert_eq!(passes(&mut service, "192.0.2.1", "/").await, 3);
    assert_eq!(passes(&mut service, "192.0.2.1", "/admin").await, 1);
}

#[cfg(unix)]
#[tokio::test]
async fn a_hangup_signal_reloads_the_file() {
    let file = TempFile::new("hangup.toml", &reloadable("3/min", "skip = true"));
    let (store, _clock) = store();
    let (_layer, limits) = PolicyFile::load(&file.0).unwrap().layer(store);
    // Registered before the signal is sent: from then on SIGHUP reloads, never kills.
    let task = limits.reload_on_hangup(&file.0).unwrap();

    file.write(&reloadable("7/min", "skip = true"));
    let pid = std::process::id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    floodwall_test_support::eventually("the reload on SIGHUP", || {
        limits.live().policy("per-ip").unwrap().limit() == 7
    })
    .await;
    task.abort();
}
