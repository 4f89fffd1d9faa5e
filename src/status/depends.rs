//! Whether what a module depends on is there: the conditions of
//! `depends_on` (Compose's), judged from what the engine says of the
//! dependency's container. A module whose dependency is not met waits
//! (`waiting`): it is not created, and a container of it that the engine
//! keeps restarting is stopped until it is met, so an ordering never reads
//! as a crash loop.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::engine::ContainerState;
use crate::model::intention::Condition;

/// What is seen of a dependency's container: its state, its health (the
/// status line's), its exit code when it exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen<'a> {
    /// Its state.
    pub state: ContainerState,
    /// `starting`, `healthy`, `unhealthy`; `None` without a health check.
    pub health: Option<&'a str>,
    /// Its exit code, when it exited.
    pub exit_code: Option<i64>,
}

/// `None` when `condition` holds of `dep` (its container as seen, `None`
/// without one); otherwise what is waited for, for a status line.
pub fn unmet(module: &str, condition: Condition, dep: Option<Seen<'_>>) -> Option<String> {
    let Some(d) = dep else {
        return Some(format!(
            "waits for module {module}: it has no container yet"
        ));
    };
    let running = d.state == ContainerState::Running;
    match condition {
        Condition::Started if running => None,
        Condition::Started => Some(format!(
            "waits for module {module} to run (it is {})",
            d.state.as_str()
        )),
        Condition::Healthy if running && d.health == Some("healthy") => None,
        Condition::Healthy if running && d.health.is_none() => Some(format!(
            "waits for module {module} to be healthy: it has no health check (give it one, or depend on it with condition = \"started\")"
        )),
        Condition::Healthy if running => Some(format!(
            "waits for module {module} to be healthy (it is {})",
            d.health.unwrap_or("starting")
        )),
        Condition::Healthy => Some(format!(
            "waits for module {module} to be healthy (it is {})",
            d.state.as_str()
        )),
        Condition::Completed if d.state == ContainerState::Exited && d.exit_code == Some(0) => None,
        Condition::Completed if d.state == ContainerState::Exited => Some(format!(
            "waits for module {module} to complete: it exited {}",
            d.exit_code
                .map_or("with an unknown code".to_string(), |c| format!("with {c}"))
        )),
        Condition::Completed => Some(format!(
            "waits for module {module} to complete (it is {})",
            d.state.as_str()
        )),
    }
}

/// Whether a waiting module's container is stopped: only one the engine
/// restarts by itself (its policy `always` or `unless-stopped`) and is
/// restarting (between two of its exits), which would otherwise read as a
/// crash loop. A running one is left running: a dependency that comes and
/// goes does not stop what works.
pub fn stop_while_waiting(state: ContainerState, engine_restarts: bool) -> bool {
    engine_restarts && state == ContainerState::Restarting
}

/// Whether a running dependent with `restart = true` is restarted, once:
/// its dependency (meeting its condition now) has been up for less time
/// than it has, so it was replaced or restarted since the dependent
/// started. Both are read from one list of the engine's, whose up-times
/// round down alike: a dependent started after its dependency never reads
/// as up for longer, so a restart is never repeated.
pub fn restart_after(dependent_up: Option<Duration>, dependency_up: Option<Duration>) -> bool {
    matches!((dependent_up, dependency_up), (Some(a), Some(b)) if a > b)
}

/// The modules whose `depends_on` leads back to themselves, each with the
/// cycle as it reads from it (`a → b → a`). `graph` is each module's
/// dependencies. Linear in the graph for the modules on no cycle (which
/// most are), without recursion.
pub fn cycles(graph: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, String> {
    // Kahn's peeling, both ways: what is left once every module without
    // dependencies, or without dependents, is taken away (and so on) is on
    // a cycle or between two.
    let edges = |m: &String| -> Vec<&String> {
        graph
            .get(m)
            .into_iter()
            .flatten()
            .filter(|d| graph.contains_key(*d))
            .collect()
    };
    let mut dependents: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    let mut out: BTreeMap<&String, usize> = BTreeMap::new();
    let mut into: BTreeMap<&String, usize> = graph.keys().map(|m| (m, 0)).into_map();
    for m in graph.keys() {
        let e = edges(m);
        out.insert(m, e.len());
        for d in e {
            *into.entry(d).or_default() += 1;
            dependents.entry(d).or_default().push(m);
        }
    }
    let mut gone: BTreeSet<&String> = BTreeSet::new();
    let mut queue: Vec<&String> = graph
        .keys()
        .filter(|m| out.get(m) == Some(&0) || into.get(m) == Some(&0))
        .collect();
    while let Some(m) = queue.pop() {
        if !gone.insert(m) {
            continue;
        }
        for d in edges(m) {
            if let Some(n) = into.get_mut(d) {
                *n = n.saturating_sub(1);
                if *n == 0 && !gone.contains(d) {
                    queue.push(d);
                }
            }
        }
        for p in dependents.get(m).into_iter().flatten() {
            if let Some(n) = out.get_mut(p) {
                *n = n.saturating_sub(1);
                if *n == 0 && !gone.contains(p) {
                    queue.push(p);
                }
            }
        }
    }
    let left: BTreeSet<&String> = graph.keys().filter(|m| !gone.contains(m)).into_set();
    // From each module left, the shortest way back to itself, if any.
    let mut found = BTreeMap::new();
    for start in &left {
        let mut from: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([*start]);
        let mut back = None;
        while let Some(at) = queue.pop_front() {
            for next in edges(at) {
                if next == *start {
                    back = Some(at);
                    break;
                }
                if left.contains(next) && !from.contains_key(next) {
                    from.insert(next, at);
                    queue.push_back(next);
                }
            }
            if back.is_some() {
                break;
            }
        }
        let Some(mut at) = back else { continue };
        let mut path = vec![(*start).clone()];
        while at != *start {
            path.push(at.clone());
            let Some(prev) = from.get(at) else { break };
            at = prev;
        }
        path.push((*start).clone());
        let n = path.len();
        path[1..n - 1].reverse();
        found.insert((*start).clone(), path.join(" → "));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use ContainerState::*;

    fn seen(state: ContainerState, health: Option<&str>, exit: Option<i64>) -> Option<Seen<'_>> {
        Some(Seen {
            state,
            health,
            exit_code: exit,
        })
    }

    #[test]
    fn each_condition_is_met_only_as_compose_means_it() {
        use Condition::*;
        // (condition, the dependency's container, met, what is said)
        let cases: &[(Condition, Option<Seen>, bool, &str)] = &[
            (Started, None, false, "has no container yet"),
            (
                Started,
                seen(Created, None, None),
                false,
                "to run (it is created)",
            ),
            (Started, seen(Running, None, None), true, ""),
            (Started, seen(Running, Some("unhealthy"), None), true, ""),
            (
                Started,
                seen(Restarting, None, None),
                false,
                "to run (it is restarting)",
            ),
            (
                Started,
                seen(Exited, None, Some(0)),
                false,
                "to run (it is exited)",
            ),
            (Healthy, seen(Running, Some("healthy"), None), true, ""),
            (
                Healthy,
                seen(Running, Some("starting"), None),
                false,
                "to be healthy (it is starting)",
            ),
            (
                Healthy,
                seen(Running, Some("unhealthy"), None),
                false,
                "(it is unhealthy)",
            ),
            (
                Healthy,
                seen(Running, None, None),
                false,
                "it has no health check",
            ),
            (
                Healthy,
                seen(Exited, None, Some(1)),
                false,
                "(it is exited)",
            ),
            (Healthy, None, false, "has no container yet"),
            (Completed, seen(Exited, None, Some(0)), true, ""),
            (
                Completed,
                seen(Exited, None, Some(3)),
                false,
                "it exited with 3",
            ),
            (
                Completed,
                seen(Running, None, None),
                false,
                "to complete (it is running)",
            ),
            (Completed, None, false, "has no container yet"),
        ];
        for (c, d, met, says) in cases {
            let got = unmet("broker", *c, *d);
            assert_eq!(got.is_none(), *met, "{c:?} {d:?}: {got:?}");
            if let Some(g) = got {
                assert!(g.contains(says) && g.contains("broker"), "{c:?} {d:?}: {g}");
            }
        }
    }

    #[test]
    fn only_a_container_the_engine_keeps_restarting_is_stopped_while_waiting() {
        // (state, the engine restarts it, stopped)
        let cases = [
            (Restarting, true, true),
            (Restarting, false, false),
            (Running, true, false),
            (Exited, true, false),
            (Created, true, false),
            (Paused, true, false),
        ];
        for (state, engine_restarts, stopped) in cases {
            assert_eq!(
                stop_while_waiting(state, engine_restarts),
                stopped,
                "{state:?} {engine_restarts}"
            );
        }
    }

    #[test]
    fn a_cycle_is_found_for_each_module_on_it_and_named() {
        let g = |edges: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
            edges
                .iter()
                .map(|(a, b)| (a.to_string(), b.iter().map(|s| s.to_string()).collect()))
                .collect()
        };
        // (graph, the modules on a cycle and how it reads from each)
        type Graph = BTreeMap<String, Vec<String>>;
        let cases: Vec<(Graph, Vec<(&str, &str)>)> = vec![
            (g(&[("a", &["b"]), ("b", &[])]), vec![]),
            (
                g(&[("a", &["b"]), ("b", &["a"])]),
                vec![("a", "a → b → a"), ("b", "b → a → b")],
            ),
            (
                g(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]),
                vec![
                    ("a", "a → b → c → a"),
                    ("b", "b → c → a → b"),
                    ("c", "c → a → b → c"),
                ],
            ),
            // A diamond is no cycle.
            (
                g(&[("a", &["b", "c"]), ("b", &["d"]), ("c", &["d"]), ("d", &[])]),
                vec![],
            ),
            // A dependency on a module that is not there is no cycle.
            (g(&[("a", &["x"])]), vec![]),
        ];
        for (graph, want) in cases {
            let got = cycles(&graph);
            let want: BTreeMap<String, String> = want
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            assert_eq!(got, want, "{graph:?}");
        }
        // A long chain is walked without recursion.
        let chain: BTreeMap<String, Vec<String>> = (0..5000)
            .map(|i| (format!("m{i}"), vec![format!("m{}", i + 1)]))
            .collect();
        assert!(cycles(&chain).is_empty());
    }

    #[test]
    fn a_dependent_is_restarted_only_when_its_dependency_is_younger() {
        let s = |n: u64| Some(Duration::from_secs(n));
        // (the dependent up for, its dependency up for, restarted)
        let cases = [
            (s(600), s(5), true),
            (s(5), s(600), false),
            (s(60), s(60), false),
            (None, s(5), false),
            (s(5), None, false),
            (None, None, false),
        ];
        for (a, b, want) in cases {
            assert_eq!(restart_after(a, b), want, "{a:?} {b:?}");
        }
    }
}
