//! The text a person reads of a view: what `stead status`, `stead agent`
//! and `stead reloads` print. The agent writes it, from the view itself,
//! for a client that asks for `text/plain` (`Accept`), and the command
//! line prints it as it came: the device's binary reads none of these
//! views back from JSON (every view read from JSON is code of its own, in
//! a binary whose size is budgeted), and a renamed field is a compile
//! error here.

use crate::model::reload::Request;
use crate::model::time::format_rfc3339;

use super::{EngineView, ModuleView, StatusView};

/// What `stead status` prints: [`status_head`], then a line per module.
pub fn status(v: &StatusView) -> String {
    let mut out = status_head(v);
    for m in &v.modules {
        out.push_str(&module_line(m));
    }
    out
}

/// What `stead status` prints before its modules: the node, the agent,
/// the plane (when one is configured), what is fetched, the disk, and the
/// modules' heading. (`v.modules` is not read: the API writes a module's
/// line as it reads it from the board, [`module_line`].)
pub fn status_head(v: &StatusView) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let n = &v.node;
    let engine = match &n.engine {
        EngineView::Waiting { error, since } => {
            format!("waiting since {} ({error})", format_rfc3339(*since))
        }
        e => e.as_str().to_string(),
    };
    let last = match &n.last_pass {
        Some(p) => format!("{} ({:.0} ms)", format_rfc3339(p.at), p.duration_ms),
        None => "none yet".into(),
    };
    let _ = writeln!(out, "node {}  engine {engine}  last pass {last}", n.id);
    if let Some(a) = &v.agent {
        let _ = writeln!(out, "{}", a.line());
    }
    if let Some(f) = &n.facts {
        let _ = writeln!(out, "facts {}", f.line());
    }
    if let Some(p) = &v.plane.plane {
        let held = match &p.held {
            Some(h) if !h.floor => format!(
                "revision {} (still run, but no longer the floor: {})",
                h.revision,
                h.revoked.as_deref().unwrap_or("revoked")
            ),
            Some(h) if h.expired == Some(true) => {
                format!("revision {} (expired; still run)", h.revision)
            }
            Some(h) => format!("revision {}", h.revision),
            None => "no document yet".into(),
        };
        let contact = p.last_contact.map_or("never".to_string(), format_rfc3339);
        let mut note = String::new();
        if let Some(r) = &p.refusal {
            let revision = r.revision.map_or("null".to_string(), |r| r.to_string());
            let _ = write!(note, "; refused revision {revision}: {}", r.class);
        }
        if let Some(e) = &p.error {
            let _ = write!(note, "; {e}");
        }
        if let Some(c) = p.clock.as_deref().filter(|c| *c != "ok") {
            let _ = write!(note, "; clock {c}");
        }
        let _ = writeln!(out, "plane {held}  last contact {contact}{note}");
        for g in &p.groups {
            let _ = writeln!(out, "  {}", g.with_times(|t| format_rfc3339(*t)).line());
        }
    }
    if let Some(line) = n.fetching.as_ref().and_then(|f| f.line()) {
        let _ = writeln!(out, "fetching {line}");
    }
    if let Some(b) = &n.fetched {
        let _ = writeln!(out, "last fetched {}", b.line());
    }
    if let Some(d) = &n.disk {
        use crate::model::disk::human;
        let each: Vec<String> = d
            .filesystems
            .iter()
            .map(|f| {
                format!(
                    "{} ({}) {} free of {}",
                    f.path,
                    f.roles.join(", "),
                    human(f.free_bytes),
                    human(f.size_bytes)
                )
            })
            .collect();
        let paused = if d.events_paused {
            "; events paused (the store keeps its room)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "disk {}  {}; logs at most {}{paused}",
            d.level.as_str(),
            each.join("; "),
            human(d.logs.bound_bytes)
        );
    }
    let _ = writeln!(
        out,
        "{:<24} {:<14} {:>8}  {:<19}  {:<12}  NOTE",
        "MODULE", "STATE", "RESTARTS", "DIGEST", "CONTAINER"
    );
    out
}

/// A module's line of `stead status`, under [`status_head`]'s heading.
pub fn module_line(m: &ModuleView) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let short =
        |v: Option<&str>, n: usize| v.map_or("-".to_string(), |s| s.chars().take(n).collect());
    let mut note = String::new();
    for d in &m.inputs_differ {
        let _ = write!(note, "{} moved; ", d.input);
    }
    if let Some(e) = &m.last_error {
        note.push_str(e);
        if let Some(at) = m.next_attempt_at {
            let _ = write!(note, "; next attempt {}", format_rfc3339(at));
        }
    } else if let Some(act) = &m.last_action {
        let _ = write!(note, "{} {}", act.action, format_rfc3339(act.at));
    }
    let _ = writeln!(
        out,
        "{:<24} {:<14} {:>8}  {:<19}  {:<12}  {}",
        m.name,
        m.state,
        m.restart_count.map_or("-".into(), |n| n.to_string()),
        short(m.desired_digest.as_ref().map(|d| d.as_str()), 19),
        short(m.container_id.as_deref(), 12),
        note.trim_end_matches("; ")
    );
    out
}

/// What `stead agent` prints.
pub fn agent(v: &super::agent::AgentView) -> String {
    let mut out = format!(
        "running    {} ({}, {})\n",
        v.running.version, v.running.slot, v.running.target
    );
    let or_package = |x: &Option<String>| x.clone().unwrap_or_else(|| "the package's".into());
    out.push_str(&format!("current    {}\n", or_package(&v.current)));
    if let Some(p) = &v.previous {
        out.push_str(&format!("previous   {p}\n"));
    }
    if let Some(c) = &v.candidate {
        out.push_str(&format!(
            "candidate  {} (started {} times)\n",
            c.version, c.starts
        ));
    }
    if let Some(f) = &v.failed {
        out.push_str(&format!("failed     {}: {}\n", f.version, f.why));
    }
    if let Some(e) = &v.launcher_error {
        out.push_str(&format!("launcher   {e}\n"));
    }
    for u in &v.updates {
        out.push_str(&format!(
            "update {:<3} {} -> {}  {}{}  (by {})\n",
            u.id,
            u.from,
            u.version,
            u.state,
            u.failure
                .as_ref()
                .map(|f| format!(": {f}"))
                .unwrap_or_default(),
            u.requested_by
        ));
    }
    out
}

/// What `stead reloads` prints: a line per request.
pub fn reloads(reloads: &[Request]) -> String {
    let mut out = String::new();
    for r in reloads {
        let items: Vec<String> = r
            .items
            .iter()
            .map(|i| {
                format!(
                    "{}: {}",
                    i.module,
                    i.failure.as_deref().unwrap_or(&i.decision)
                )
            })
            .collect();
        out.push_str(&format!(
            "{:>4} {} {:<10} {:<24} {} — {}\n",
            r.id,
            format_rfc3339(r.requested_at),
            r.status().as_str(),
            r.module.as_deref().unwrap_or("(every module)"),
            r.reason,
            items.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::fixtures;

    // The status table's tests are the CLI's (`cli::tests`): they make
    // the plane's view as the API does.

    #[test]
    fn a_reload_prints_a_line_from_its_fields() {
        let (_, mut requests) = fixtures::reloads();
        requests[0].written_by = 0;
        assert_eq!(
            reloads(&requests),
            "   5 2023-11-14T22:13:30Z failed     web                      why — web: \n"
        );
    }
}
