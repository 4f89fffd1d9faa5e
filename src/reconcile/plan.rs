//! The standing comparison as a pure function: from what is desired (one
//! target per module, or a hold) and what the engine shows, the steps that
//! bring one to the other. The same world always gives the same plan,
//! whatever order the engine lists it in; the planner is never told why it
//! runs.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet};

use crate::engine::{ContainerState, Observed};
use crate::model::intention::{DriftPolicy, RestartPolicy};
use crate::model::names::{Digest, InputName, ModuleName, NodeId};
use crate::model::spec::{Desired, Moved, moved};

/// What the planner reads of a module it should run.
pub trait Runs {
    /// The module.
    fn name(&self) -> &ModuleName;
    /// The desired spec digest.
    fn digest(&self) -> &Digest;
    /// The desired input digests.
    fn inputs(&self) -> &BTreeMap<InputName, Digest>;
    /// Recreate or report on drift.
    fn on_drift(&self) -> DriftPolicy;
    /// The engine's restart policy, which says whether an exited container
    /// is finished or stopped.
    fn restart(&self) -> RestartPolicy;
}

/// A target shared between passes runs as its target does.
impl<T: Runs> Runs for std::sync::Arc<T> {
    fn name(&self) -> &ModuleName {
        (**self).name()
    }
    fn digest(&self) -> &Digest {
        (**self).digest()
    }
    fn inputs(&self) -> &BTreeMap<InputName, Digest> {
        (**self).inputs()
    }
    fn on_drift(&self) -> DriftPolicy {
        (**self).on_drift()
    }
    fn restart(&self) -> RestartPolicy {
        (**self).restart()
    }
}

/// [`Runs`] for a type with the fields of the same names.
macro_rules! runs_by_fields {
    ($t:ty) => {
        impl Runs for $t {
            fn name(&self) -> &ModuleName {
                &self.name
            }
            fn digest(&self) -> &Digest {
                &self.digest
            }
            fn inputs(&self) -> &BTreeMap<InputName, Digest> {
                &self.inputs
            }
            fn on_drift(&self) -> DriftPolicy {
                self.on_drift
            }
            fn restart(&self) -> RestartPolicy {
                self.restart
            }
        }
    };
}

// A module's desired container, as the pass plans it.
runs_by_fields!(Desired);

/// A module's entry in what is desired: `T` is what the planner reads of a
/// module to run (a [`Desired`] in a pass).
#[derive(Clone, Debug, PartialEq)]
pub enum Want<T> {
    /// Run this target.
    Run(T),
    /// The module exists but its target cannot be computed now (a file is
    /// missing, the image is absent): leave its container as it is.
    Hold {
        /// The module.
        name: ModuleName,
        /// Why.
        reason: String,
    },
    /// A module it depends on does not meet its condition: not created
    /// or started until it does; its container is left as it is, or
    /// stopped when the engine keeps restarting it.
    Wait {
        /// The module.
        name: ModuleName,
        /// What it waits for.
        reason: String,
        /// Whether the engine restarts its container by itself (policy
        /// `always` or `unless-stopped`).
        engine_restarts: bool,
    },
    /// Its image is being pulled, or checked against the image policy (in
    /// the background: no other module waits for it): leave its container
    /// as it is until the image is there.
    Pull {
        /// The module.
        name: ModuleName,
        /// What is under way, said as the module's error.
        doing: String,
    },
}

impl<T: Runs> Want<T> {
    /// The module it is of.
    pub fn name(&self) -> &ModuleName {
        match self {
            Want::Run(t) => t.name(),
            Want::Hold { name, .. } | Want::Wait { name, .. } | Want::Pull { name, .. } => name,
        }
    }
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// The container matches and runs (or has finished as its policy allows).
    Keep {
        /// The module.
        module: ModuleName,
        /// The container.
        container: String,
    },
    /// No container: create and start one.
    Create {
        /// The module.
        module: ModuleName,
    },
    /// The container matches but is not running: start it.
    Start {
        /// The module.
        module: ModuleName,
        /// The container.
        container: String,
    },
    /// The container matches and runs, but what it depends on (with
    /// `restart = true`) was replaced or restarted since it started:
    /// restart it, once.
    Restart {
        /// The module.
        module: ModuleName,
        /// The container.
        container: String,
        /// Why.
        reason: String,
    },
    /// The container differs: replace it, once. Its successor is made
    /// beside it first, under the successor name; one already there that
    /// carries the target (left by an interrupted recreate) is used.
    Recreate {
        /// The module.
        module: ModuleName,
        /// The container to replace.
        container: String,
        /// A successor already made for this target.
        successor: Option<String>,
        /// The inputs that moved.
        moved: Vec<Moved>,
    },
    /// No container at the module's name, and its successor carries the
    /// target (a recreate interrupted after the old one went): start it and
    /// give it the module's name.
    Promote {
        /// The module.
        module: ModuleName,
        /// The successor.
        container: String,
    },
    /// The container differs and the module asks only to be told.
    ReportDrift {
        /// The module.
        module: ModuleName,
        /// The container.
        container: String,
        /// The inputs that moved.
        moved: Vec<Moved>,
    },
    /// The container differs, and replacing it waits for a maintenance
    /// window ([`defer`]): it is left as it runs.
    Defer {
        /// The module.
        module: ModuleName,
        /// The container.
        container: String,
        /// The inputs that moved.
        moved: Vec<Moved>,
        /// What it waits for, and until when.
        why: String,
    },
    /// The engine is busy with the container (restarting, paused, being
    /// removed): look again next pass.
    Wait {
        /// The module.
        module: ModuleName,
        /// The container.
        container: String,
        /// Its state.
        state: ContainerState,
    },
    /// The module's target is unknown now: its container is left alone.
    Hold {
        /// The module.
        module: ModuleName,
        /// Its container, if any.
        container: Option<String>,
        /// Why.
        reason: String,
    },
    /// A module it depends on is not there yet: its container is left
    /// alone, or stopped when the engine keeps restarting it.
    Depend {
        /// The module.
        module: ModuleName,
        /// Its container, if any.
        container: Option<String>,
        /// Whether to stop that container.
        stop: bool,
        /// What it waits for.
        reason: String,
    },
    /// The module's image is being pulled; its container is left alone.
    Pulling {
        /// The module.
        module: ModuleName,
        /// Its container, if any.
        container: Option<String>,
        /// What is under way (the image being pulled or checked).
        doing: String,
    },
    /// A container this node does not manage holds the module's name.
    Conflict {
        /// The module.
        module: ModuleName,
        /// The container that is in the way.
        container: String,
    },
    /// A managed container with no module to run: remove it.
    Remove {
        /// The module it ran, if it said.
        module: Option<String>,
        /// The container.
        container: String,
    },
}

impl Step {
    /// Whether it stops what runs (a recreate, a restart): it waits for
    /// the maintenance windows and the update locks ([`defer`]).
    pub fn disrupts(&self) -> bool {
        matches!(self, Step::Recreate { .. } | Step::Restart { .. })
    }

    /// The module it acts on, when it names one.
    pub fn module(&self) -> Option<&str> {
        match self {
            Step::Keep { module, .. }
            | Step::Restart { module, .. }
            | Step::Create { module }
            | Step::Start { module, .. }
            | Step::Recreate { module, .. }
            | Step::Promote { module, .. }
            | Step::ReportDrift { module, .. }
            | Step::Defer { module, .. }
            | Step::Wait { module, .. }
            | Step::Hold { module, .. }
            | Step::Depend { module, .. }
            | Step::Pulling { module, .. }
            | Step::Conflict { module, .. } => Some(module.as_str()),
            Step::Remove { module, .. } => module.as_deref(),
        }
    }
}

/// The steps for one pass, in module order, removals last.
pub type Plan = Vec<Step>;

/// Computes the plan. Containers without this node's managed label are never
/// in it, except as the conflict they cause.
pub fn plan<'a, T: Runs + 'a>(
    node: &NodeId,
    wants: impl IntoIterator<Item = &'a Want<T>>,
    observed: &[Observed],
) -> Plan {
    let wants: Vec<&Want<T>> = wants.into_iter().collect();
    let mut steps = Vec::new();
    // Sorted, so that the engine's list order never shows in the plan.
    let mut ours: Vec<&Observed> = observed
        .iter()
        .filter(|o| o.labels.managed_by(node))
        .collect();
    crate::model::sort::sort_by(&mut ours, |a, b| {
        (&a.labels.module, &a.id).cmp(&(&b.labels.module, &b.id))
    });
    let wanted: BTreeSet<&str> = wants.iter().map(|w| w.name().as_str()).into_set();

    for &want in &wants {
        let name = want.name();
        let cname = name.container_name();
        let at_name = observed.iter().find(|o| o.names.contains(&cname));
        if let Some(c) = at_name {
            if !c.labels.managed_by(node) {
                steps.push(Step::Conflict {
                    module: name.clone(),
                    container: c.id.clone(),
                });
                continue;
            }
        }
        // A successor left by an interrupted recreate: used when it carries
        // what the module wants now, removed otherwise (below).
        let sname = name.successor_name();
        let successor = ours.iter().find(|o| {
            o.names.contains(&sname) && o.labels.module.as_deref() == Some(name.as_str())
        });
        let wanted_successor = match (want, successor) {
            (Want::Run(t), Some(s)) if s.labels.digest.as_ref() == Some(t.digest()) => {
                match at_name {
                    // The module's container is the target already.
                    Some(c) if c.labels.digest.as_ref() == Some(t.digest()) => None,
                    // Reporting drift, not recreating.
                    Some(_) if t.on_drift() == DriftPolicy::Report => None,
                    _ => Some(s.id.clone()),
                }
            }
            // Holding: nothing is touched.
            (Want::Hold { .. } | Want::Wait { .. } | Want::Pull { .. }, Some(s)) => {
                Some(s.id.clone())
            }
            _ => None,
        };
        // Managed containers of this module under another name (renamed by
        // hand, a stale successor): only the one at the module's name, and a
        // successor of use, are kept.
        for o in &ours {
            if o.labels.module.as_deref() == Some(name.as_str())
                && at_name.is_none_or(|c| c.id != o.id)
                && wanted_successor.as_ref() != Some(&o.id)
            {
                steps.push(Step::Remove {
                    module: Some(name.to_string()),
                    container: o.id.clone(),
                });
            }
        }
        let target = match want {
            Want::Hold { reason, .. } => {
                steps.push(Step::Hold {
                    module: name.clone(),
                    container: at_name.map(|c| c.id.clone()),
                    reason: reason.clone(),
                });
                continue;
            }
            Want::Wait {
                reason,
                engine_restarts,
                ..
            } => {
                steps.push(Step::Depend {
                    module: name.clone(),
                    container: at_name.map(|c| c.id.clone()),
                    stop: at_name.is_some_and(|c| {
                        crate::status::depends::stop_while_waiting(c.state, *engine_restarts)
                    }),
                    reason: reason.clone(),
                });
                continue;
            }
            Want::Pull { doing, .. } => {
                steps.push(Step::Pulling {
                    module: name.clone(),
                    container: at_name.map(|c| c.id.clone()),
                    doing: doing.clone(),
                });
                continue;
            }
            Want::Run(t) => t,
        };
        let Some(c) = at_name else {
            steps.push(match wanted_successor {
                Some(container) => Step::Promote {
                    module: name.clone(),
                    container,
                },
                None => Step::Create {
                    module: name.clone(),
                },
            });
            continue;
        };
        let module = name.clone();
        let container = c.id.clone();
        if c.state == ContainerState::Removing {
            steps.push(Step::Wait {
                module,
                container,
                state: c.state,
            });
        } else if c.labels.digest.as_ref() != Some(target.digest()) {
            let moved = moved(&c.labels.inputs, target.inputs());
            steps.push(match target.on_drift() {
                DriftPolicy::Recreate => Step::Recreate {
                    module,
                    container,
                    successor: wanted_successor,
                    moved,
                },
                DriftPolicy::Report => Step::ReportDrift {
                    module,
                    container,
                    moved,
                },
            });
        } else {
            steps.push(match c.state {
                ContainerState::Running => Step::Keep { module, container },
                ContainerState::Created => Step::Start { module, container },
                ContainerState::Exited | ContainerState::Dead => match target.restart() {
                    // Stopped though its policy says it should run.
                    RestartPolicy::Always | RestartPolicy::UnlessStopped => {
                        Step::Start { module, container }
                    }
                    // Finished, as its policy allows.
                    RestartPolicy::No | RestartPolicy::OnFailure => {
                        Step::Keep { module, container }
                    }
                },
                state => Step::Wait {
                    module,
                    container,
                    state,
                },
            });
        }
    }

    for o in ours {
        let module = &o.labels.module;
        if module.as_ref().is_none_or(|m| !wanted.contains(m.as_str())) {
            steps.push(Step::Remove {
                module: module.clone(),
                container: o.id.clone(),
            });
        }
    }
    steps
}

/// Outside the maintenance windows, or while an update lock holds a
/// module, its recreate waits (`why`: of each module's recreate, what it
/// waits for and until when, or `None` when it goes on): what runs is left
/// running. Nothing else a plan does disrupts what runs (a create or a
/// start makes run what did not; a removal is of a module no longer
/// wanted, or of a leftover; a promotion finishes a recreate begun).
pub fn defer(steps: &mut Plan, mut why: impl FnMut(&ModuleName) -> Option<String>) {
    for step in steps.iter_mut() {
        let (module, container, moved) = match step {
            Step::Recreate {
                module,
                container,
                moved,
                ..
            } => (module, container, std::mem::take(moved)),
            Step::Restart {
                module, container, ..
            } => (module, container, Vec::new()),
            _ => continue,
        };
        if let Some(why) = why(module) {
            *step = Step::Defer {
                module: module.clone(),
                container: container.clone(),
                moved,
                why,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::labels::Labels;

    fn node() -> NodeId {
        NodeId::try_from("n1").unwrap()
    }

    /// What the planner needs to know of a module it should run.
    #[derive(Clone, Debug, PartialEq)]
    struct Target {
        name: ModuleName,
        digest: Digest,
        inputs: BTreeMap<InputName, Digest>,
        on_drift: DriftPolicy,
        restart: RestartPolicy,
    }

    runs_by_fields!(Target);

    type Want = super::Want<Target>;

    fn d(s: &str) -> Digest {
        Digest::of(s.as_bytes())
    }

    fn target(name: &str, digest: &str, on_drift: DriftPolicy) -> Want {
        let mut inputs = BTreeMap::new();
        inputs.insert(InputName::try_from("config:/c").unwrap(), d(digest));
        inputs.insert(InputName::try_from("image").unwrap(), d("img"));
        Want::Run(Target {
            name: ModuleName::try_from(name).unwrap(),
            digest: d(digest),
            inputs,
            on_drift,
            restart: RestartPolicy::UnlessStopped,
        })
    }

    fn container(
        id: &str,
        name: &str,
        node: Option<&str>,
        module: Option<&str>,
        digest: &str,
        state: ContainerState,
    ) -> Observed {
        let mut inputs = BTreeMap::new();
        inputs.insert(InputName::try_from("config:/c").unwrap(), d(digest));
        inputs.insert(InputName::try_from("image").unwrap(), d("img"));
        let labels = Labels {
            managed_by: node.map(str::to_string),
            module: module.map(str::to_string),
            digest: Some(d(digest)),
            agent: None,
            inputs,
            stated: None,
            keyed: false,
        };
        Observed {
            id: id.into(),
            names: vec![name.into()],
            labels,
            state,
            status: String::new(),
            image_id: "sha256:x".into(),
            created: 0,
            mount_sources: vec![],
        }
    }

    fn m(s: &str) -> ModuleName {
        ModuleName::try_from(s).unwrap()
    }

    #[test]
    fn outside_the_windows_only_a_recreate_waits() {
        use ContainerState::*;
        use DriftPolicy::*;
        let wants = vec![
            target("moved", "v2", Recreate),
            target("told", "v2", Report),
            target("new", "v1", Recreate),
            target("stopped", "v1", Recreate),
            target("same", "v1", Recreate),
        ];
        let observed = vec![
            container(
                "c1",
                "stead-moved",
                Some("n1"),
                Some("moved"),
                "v1",
                Running,
            ),
            container("c2", "stead-told", Some("n1"), Some("told"), "v1", Running),
            container(
                "c3",
                "stead-stopped",
                Some("n1"),
                Some("stopped"),
                "v1",
                Exited,
            ),
            container("c4", "stead-same", Some("n1"), Some("same"), "v1", Running),
            container("c5", "stead-gone", Some("n1"), Some("gone"), "v1", Running),
        ];
        let mut steps = plan(&node(), &wants, &observed);
        let before = steps.clone();
        defer(&mut steps, |_| Some("waits for the window".into()));
        for (was, now) in before.iter().zip(&steps) {
            match (was, now) {
                (
                    Step::Recreate {
                        module,
                        container,
                        moved,
                        ..
                    },
                    Step::Defer {
                        module: m,
                        container: c,
                        moved: mv,
                        why,
                    },
                ) => {
                    assert_eq!((module, container, moved), (m, c, mv));
                    assert_eq!(why, "waits for the window");
                }
                (Step::Recreate { .. }, other) => panic!("a recreate went on: {other:?}"),
                (was, now) => assert_eq!(was, now, "only a recreate waits"),
            }
        }
        assert!(matches!(&steps[0], Step::Defer { module, .. } if module.as_str() == "moved"));
        assert_eq!(
            steps
                .iter()
                .filter(|s| matches!(s, Step::Defer { .. }))
                .count(),
            1
        );
    }

    #[test]
    fn table() {
        use ContainerState::*;
        use DriftPolicy::*;
        let moved_c = vec![Moved {
            input: "config:/c".into(),
            running: Some(d("v1")),
            desired: Some(d("v2")),
        }];
        let cases: Vec<(&str, Vec<Want>, Vec<Observed>, Plan)> = vec![
            (
                "missing → create",
                vec![target("a", "v1", Recreate)],
                vec![],
                vec![Step::Create { module: m("a") }],
            ),
            (
                "same digest, running → keep",
                vec![target("a", "v1", Recreate)],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Running,
                )],
                vec![Step::Keep {
                    module: m("a"),
                    container: "c1".into(),
                }],
            ),
            (
                "digest differs → recreate naming the input",
                vec![target("a", "v2", Recreate)],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Running,
                )],
                vec![Step::Recreate {
                    module: m("a"),
                    container: "c1".into(),
                    successor: None,
                    moved: moved_c.clone(),
                }],
            ),
            (
                "digest differs, report policy → drift only",
                vec![target("a", "v2", Report)],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Running,
                )],
                vec![Step::ReportDrift {
                    module: m("a"),
                    container: "c1".into(),
                    moved: moved_c.clone(),
                }],
            ),
            (
                "created, never started → start",
                vec![target("a", "v1", Recreate)],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Created,
                )],
                vec![Step::Start {
                    module: m("a"),
                    container: "c1".into(),
                }],
            ),
            (
                "stopped against its policy → start",
                vec![target("a", "v1", Recreate)],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Exited,
                )],
                vec![Step::Start {
                    module: m("a"),
                    container: "c1".into(),
                }],
            ),
            (
                "restarting → wait for the engine",
                vec![target("a", "v1", Recreate)],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Restarting,
                )],
                vec![Step::Wait {
                    module: m("a"),
                    container: "c1".into(),
                    state: Restarting,
                }],
            ),
            (
                "orphan → remove",
                vec![],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Running,
                )],
                vec![Step::Remove {
                    module: Some("a".into()),
                    container: "c1".into(),
                }],
            ),
            (
                "unmanaged → ignore",
                vec![],
                vec![
                    container("c1", "stead-a", None, Some("a"), "v1", Running),
                    container("c2", "web", None, None, "v1", Running),
                ],
                vec![],
            ),
            (
                "another node's container → ignore",
                vec![],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n2"),
                    Some("a"),
                    "v1",
                    Running,
                )],
                vec![],
            ),
            (
                "unmanaged at our name → conflict, never touched",
                vec![target("a", "v1", Recreate)],
                vec![container("c1", "stead-a", None, None, "v1", Running)],
                vec![Step::Conflict {
                    module: m("a"),
                    container: "c1".into(),
                }],
            ),
            (
                "held module keeps its container",
                vec![Want::Hold {
                    name: m("a"),
                    reason: "env file missing".into(),
                }],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Running,
                )],
                vec![Step::Hold {
                    module: m("a"),
                    container: Some("c1".into()),
                    reason: "env file missing".into(),
                }],
            ),
            (
                "a module whose image is being pulled keeps its container",
                vec![Want::Pull {
                    name: m("a"),
                    doing: "image img:2 is being pulled".into(),
                }],
                vec![container(
                    "c1",
                    "stead-a",
                    Some("n1"),
                    Some("a"),
                    "v1",
                    Running,
                )],
                vec![Step::Pulling {
                    module: m("a"),
                    container: Some("c1".into()),
                    doing: "image img:2 is being pulled".into(),
                }],
            ),
            (
                "a successor carrying the target is used, not made again",
                vec![target("a", "v2", Recreate)],
                vec![
                    container("c1", "stead-a", Some("n1"), Some("a"), "v1", Exited),
                    container("c2", "stead-a.next", Some("n1"), Some("a"), "v2", Created),
                ],
                vec![Step::Recreate {
                    module: m("a"),
                    container: "c1".into(),
                    successor: Some("c2".into()),
                    moved: moved_c.clone(),
                }],
            ),
            (
                "a stale successor is removed and a new one made",
                vec![target("a", "v2", Recreate)],
                vec![
                    container("c1", "stead-a", Some("n1"), Some("a"), "v1", Running),
                    container("c2", "stead-a.next", Some("n1"), Some("a"), "v0", Created),
                ],
                vec![
                    Step::Remove {
                        module: Some("a".into()),
                        container: "c2".into(),
                    },
                    Step::Recreate {
                        module: m("a"),
                        container: "c1".into(),
                        successor: None,
                        moved: moved_c.clone(),
                    },
                ],
            ),
            (
                "the old one gone, the successor is promoted",
                vec![target("a", "v2", Recreate)],
                vec![container(
                    "c2",
                    "stead-a.next",
                    Some("n1"),
                    Some("a"),
                    "v2",
                    Running,
                )],
                vec![Step::Promote {
                    module: m("a"),
                    container: "c2".into(),
                }],
            ),
            (
                "a successor left beside a container already on target is removed",
                vec![target("a", "v2", Recreate)],
                vec![
                    container("c1", "stead-a", Some("n1"), Some("a"), "v2", Running),
                    container("c2", "stead-a.next", Some("n1"), Some("a"), "v2", Created),
                ],
                vec![
                    Step::Remove {
                        module: Some("a".into()),
                        container: "c2".into(),
                    },
                    Step::Keep {
                        module: m("a"),
                        container: "c1".into(),
                    },
                ],
            ),
            (
                "a renamed duplicate is removed, the one at the name kept",
                vec![target("a", "v1", Recreate)],
                vec![
                    container("c1", "stead-a", Some("n1"), Some("a"), "v1", Running),
                    container("c2", "old-a", Some("n1"), Some("a"), "v1", Running),
                ],
                vec![
                    Step::Remove {
                        module: Some("a".into()),
                        container: "c2".into(),
                    },
                    Step::Keep {
                        module: m("a"),
                        container: "c1".into(),
                    },
                ],
            ),
        ];
        for (what, wants, observed, want) in cases {
            assert_eq!(plan(&node(), &wants, &observed), want, "{what}");
        }
    }

    #[test]
    fn the_engines_list_order_never_shows_in_the_plan() {
        use ContainerState::*;
        let wants = vec![
            target("a", "v2", DriftPolicy::Recreate),
            target("b", "v1", DriftPolicy::Recreate),
            target("c", "v1", DriftPolicy::Recreate),
        ];
        let world = vec![
            container("c1", "stead-a", Some("n1"), Some("a"), "v1", Running),
            container("c2", "old-a", Some("n1"), Some("a"), "v1", Running),
            container("c3", "stead-x", Some("n1"), Some("x"), "v1", Exited),
            container("c4", "stead-y", Some("n1"), Some("y"), "v1", Running),
            container("c5", "stead-y2", Some("n1"), None, "v1", Running),
            container("c6", "stead-c", None, None, "v1", Running),
            container("c7", "web", None, None, "v1", Running),
        ];
        let want = plan(&node(), &wants, &world);
        // Every rotation of the list, forwards and backwards.
        for k in 0..world.len() {
            let mut shuffled = world.clone();
            shuffled.rotate_left(k);
            assert_eq!(plan(&node(), &wants, &shuffled), want, "rotated by {k}");
            shuffled.reverse();
            assert_eq!(
                plan(&node(), &wants, &shuffled),
                want,
                "rotated by {k}, reversed"
            );
        }
        let removed: Vec<&str> = want
            .iter()
            .filter_map(|s| match s {
                Step::Remove { container, .. } => Some(container.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(removed, ["c2", "c5", "c3", "c4"], "{want:?}");
    }
}
