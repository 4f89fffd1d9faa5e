//! The log: one line per event on stderr (`2026-12-02T01:23:45.678Z  INFO
//! stead::agent: message key=value`), filtered by `STEAD_LOG`. A tracing
//! subscriber of its own, a few KiB, where tracing-subscriber's formatter
//! and filters took tens on a device: the agent records no spans, and its
//! filter is targets and levels only. Its last lines are kept in memory
//! too ([`recent`]), for a support bundle.

use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span;
use tracing::{Event, Level, Metadata, Subscriber};

/// Which events are written: the level of the longest target prefix that
/// matches (`stead::reconcile` matches `stead::reconcile::collect`), else
/// the default level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    default: LevelFilter,
    targets: Vec<(String, LevelFilter)>,
}

impl Filter {
    /// Reads `STEAD_LOG`'s form: a level, or comma-separated
    /// `target=level` directives with at most one bare level (the
    /// default, `info` when none). Levels are `trace`, `debug`, `info`,
    /// `warn`, `error` and `off`, in any case.
    pub fn parse(s: &str) -> Result<Filter, String> {
        let mut f = Filter {
            default: LevelFilter::INFO,
            targets: Vec::new(),
        };
        let mut default_set = false;
        for d in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match d.split_once('=') {
                Some((target, level)) => {
                    let target = target.trim();
                    let ok = !target.is_empty()
                        && target
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
                    if !ok {
                        return Err(format!("{target:?} is not a target"));
                    }
                    f.targets
                        .push((target.to_string(), level_of(level.trim())?));
                }
                None if default_set => return Err(format!("{d:?}: a second default level")),
                None => {
                    f.default = level_of(d)?;
                    default_set = true;
                }
            }
        }
        // The longest prefix first.
        crate::model::sort::sort_by(&mut f.targets, |a, b| b.0.len().cmp(&a.0.len()));
        Ok(f)
    }

    fn level(&self, target: &str) -> LevelFilter {
        self.targets
            .iter()
            .find(|(t, _)| {
                target == t
                    || target
                        .strip_prefix(t.as_str())
                        .is_some_and(|r| r.starts_with("::"))
            })
            .map_or(self.default, |(_, l)| *l)
    }

    fn max(&self) -> LevelFilter {
        self.targets
            .iter()
            .map(|(_, l)| *l)
            .fold(self.default, std::cmp::max)
    }
}

fn level_of(s: &str) -> Result<LevelFilter, String> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "trace" => LevelFilter::TRACE,
        "debug" => LevelFilter::DEBUG,
        "info" => LevelFilter::INFO,
        "warn" => LevelFilter::WARN,
        "error" => LevelFilter::ERROR,
        "off" => LevelFilter::OFF,
        _ => return Err(format!("{s:?} is not a level")),
    })
}

/// The filter from `STEAD_LOG`; one that does not parse falls back to
/// `info`, and says so.
pub fn from_env() -> Filter {
    let default = Filter {
        default: LevelFilter::INFO,
        targets: Vec::new(),
    };
    match std::env::var("STEAD_LOG") {
        Ok(s) if !s.trim().is_empty() => Filter::parse(&s).unwrap_or_else(|e| {
            eprintln!("stead: STEAD_LOG={s:?} is not a log filter ({e}); logging at info");
            default
        }),
        _ => default,
    }
}

/// How many of the log's last lines are kept in memory, and their most
/// bytes in all.
pub const RECENT_LINES: usize = 1000;
const RECENT_BYTES: usize = 256 * 1024;

static RECENT: std::sync::Mutex<(std::collections::VecDeque<String>, usize)> =
    std::sync::Mutex::new((std::collections::VecDeque::new(), 0));

fn keep(line: &str) {
    let Ok(mut r) = RECENT.lock() else { return };
    let (lines, bytes) = &mut *r;
    *bytes += line.len();
    lines.push_back(line.to_string());
    while lines.len() > RECENT_LINES || *bytes > RECENT_BYTES {
        match lines.pop_front() {
            Some(l) => *bytes -= l.len(),
            None => break,
        }
    }
}

/// The log's last lines (at most [`RECENT_LINES`], 256 KiB), oldest
/// first, each ending in a newline: what this process logged since it
/// started, as far back as they reach.
pub fn recent() -> String {
    RECENT
        .lock()
        .map(|r| r.0.iter().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Installs the log as the process's subscriber.
pub fn init(filter: Filter) {
    let _ = tracing::subscriber::set_global_default(Log(filter));
}

struct Log(Filter);

impl Subscriber for Log {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        *m.level() <= self.0.level(m.target())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.0.max())
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, e: &Event<'_>) {
        let m = e.metadata();
        let mut line = format!("{} {:>5} {}: ", now(), level_name(*m.level()), m.target());
        let mut fields = Fields {
            message: String::new(),
            rest: String::new(),
        };
        e.record(&mut fields);
        line.push_str(&fields.message);
        line.push_str(&fields.rest);
        line.push('\n');
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        keep(&line);
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

fn level_name(l: Level) -> &'static str {
    match l {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        Level::ERROR => "ERROR",
    }
}

/// The wall clock to the millisecond, as RFC 3339 in UTC.
fn now() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let s = crate::model::time::format_rfc3339(t.as_secs());
    match s.strip_suffix('Z') {
        Some(s) => format!("{s}.{:03}Z", t.subsec_millis()),
        None => s,
    }
}

struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "message" {
            self.message.push_str(v);
        } else {
            self.rest.push_str(&format!(" {}={v:?}", f.name()));
        }
    }

    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        if f.name() == "message" {
            self.message.push_str(&format!("{v:?}"));
        } else {
            self.rest.push_str(&format!(" {}={v:?}", f.name()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_read_as_the_docs_say_and_the_longest_target_wins() {
        let f = Filter::parse("stead::reconcile=debug,warn").unwrap();
        for (target, level) in [
            ("stead::reconcile", LevelFilter::DEBUG),
            ("stead::reconcile::collect", LevelFilter::DEBUG),
            ("stead::reconciler", LevelFilter::WARN),
            ("stead::agent", LevelFilter::WARN),
            ("hyper", LevelFilter::WARN),
        ] {
            assert_eq!(f.level(target), level, "{target}");
        }
        assert_eq!(f.max(), LevelFilter::DEBUG);
        let f = Filter::parse("stead=info,stead::api=off,stead::api::stream=trace").unwrap();
        assert_eq!(f.level("stead::api::stream::x"), LevelFilter::TRACE);
        assert_eq!(f.level("stead::api"), LevelFilter::OFF);
        assert_eq!(f.level("stead::agent"), LevelFilter::INFO);
        assert_eq!(f.level("other"), LevelFilter::INFO);
        assert_eq!(
            Filter::parse("DEBUG").unwrap().level("x"),
            LevelFilter::DEBUG
        );
        for bad in [
            "loud",
            "a b=info",
            "=info",
            "stead=loud",
            "info,debug",
            "stead[span]=info",
        ] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
    }
}
