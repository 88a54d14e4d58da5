//! Each transition of a breaker and a fallback is logged once, never per request.

use super::*;

/// Records `tracing` events by thread, level and message. Installed once as the global
/// subscriber of this test binary: a subscriber scoped to one test can miss events when
/// another test's thread registers a callsite while it is being installed.
#[derive(Default)]
struct Events(Mutex<Vec<(std::thread::ThreadId, tracing::Level, String)>>);

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for &'static Events {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        let level = *event.metadata().level();
        let thread = std::thread::current().id();
        self.0.lock().unwrap().push((thread, level, message));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The events this thread logged while running `f`.
fn events_of(f: impl FnOnce()) -> Vec<(tracing::Level, String)> {
    static EVENTS: std::sync::OnceLock<&'static Events> = std::sync::OnceLock::new();
    let events = *EVENTS.get_or_init(|| {
        let events: &'static Events = Box::leak(Box::default());
        tracing::subscriber::set_global_default(events).expect("the only global subscriber");
        events
    });
    let thread = std::thread::current().id();
    f();
    let all = events.0.lock().unwrap();
    all.iter()
        .filter(|(t, _, _)| *t == thread)
        .map(|(_, l, m)| (*l, m.clone()))
        .collect()
}

#[test]
fn each_transition_is_logged_once_not_per_request() {
    let (clock, flaky, breaker) = setup();
    let store = Fallback::fail_open(breaker);
    let p = policy("100/s");
    let events = events_of(|| {
        flaky.set(Health::Down);
        for _ in 0..500 {
            check(&store, b"k", &p).unwrap();
        }
        for _ in 0..3 {
            clock.advance(Duration::from_millis(500));
            for _ in 0..100 {
                check(&store, b"k", &p).unwrap();
            }
        }
        flaky.set(Health::Up);
        clock.advance(Duration::from_millis(500));
        for _ in 0..100 {
            check(&store, b"k", &p).unwrap();
        }
    });
    let count = |level: tracing::Level, text: &str| {
        events
            .iter()
            .filter(|(l, m)| *l == level && m.contains(text))
            .count()
    };
    // Each transition once.
    for (level, text) in [
        (tracing::Level::WARN, "circuit open"),
        (tracing::Level::WARN, "fallback engaged"),
        (tracing::Level::INFO, "circuit closed"),
        (tracing::Level::INFO, "fallback disengaged"),
    ] {
        assert_eq!(count(level, text), 1, "{text}: {events:?}");
    }
    assert_eq!(
        count(tracing::Level::DEBUG, "half-open"),
        4,
        "one per probe"
    );
    let loud = events
        .iter()
        .filter(|(l, _)| *l <= tracing::Level::INFO)
        .count();
    assert_eq!(loud, 4, "{events:?}");
}
