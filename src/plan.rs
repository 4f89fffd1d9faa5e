//! The standing comparison as a pure function: from what is desired (one
//! target per module, or a hold) and what the engine shows, the steps that
//! bring one to the other. The same world always gives the same plan; the
//! planner is never told why it runs.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::intention::{DriftPolicy, RestartPolicy};
use crate::names::{Digest, InputName, ModuleName, NodeId};
use crate::spec::{LABEL_DIGEST, LABEL_MANAGED_BY, LABEL_MODULE, inputs_from_labels};

/// A container's state as the engine reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContainerState {
    /// Created, never started.
    Created,
    /// Running.
    Running,
    /// Paused.
    Paused,
    /// Being restarted by the engine.
    Restarting,
    /// Being removed.
    Removing,
    /// Exited.
    Exited,
    /// Dead.
    Dead,
    /// Anything else.
    Unknown,
}

impl ContainerState {
    /// Parses the engine's state word.
    pub fn parse(s: &str) -> ContainerState {
        match s {
            "created" => ContainerState::Created,
            "running" => ContainerState::Running,
            "paused" => ContainerState::Paused,
            "restarting" => ContainerState::Restarting,
            "removing" => ContainerState::Removing,
            "exited" => ContainerState::Exited,
            "dead" => ContainerState::Dead,
            _ => ContainerState::Unknown,
        }
    }

    /// The engine's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerState::Created => "created",
            ContainerState::Running => "running",
            ContainerState::Paused => "paused",
            ContainerState::Restarting => "restarting",
            ContainerState::Removing => "removing",
            ContainerState::Exited => "exited",
            ContainerState::Dead => "dead",
            ContainerState::Unknown => "unknown",
        }
    }
}

/// One container as listed by the engine.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The container ID.
    pub id: String,
    /// Its names, without the leading `/`.
    pub names: Vec<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its state.
    pub state: ContainerState,
    /// The engine's status line ("Up 3 minutes").
    pub status: String,
    /// The image ID it runs.
    pub image_id: String,
    /// When it was created, seconds since the epoch.
    pub created: i64,
    /// The host sources of its bind mounts.
    pub mount_sources: Vec<String>,
}

impl Observed {
    /// The spec digest it carries, if any.
    pub fn digest(&self) -> Option<Digest> {
        self.labels
            .get(LABEL_DIGEST)
            .and_then(|d| Digest::try_from(d.as_str()).ok())
    }

    fn managed_by(&self, node: &NodeId) -> bool {
        self.labels.get(LABEL_MANAGED_BY).map(String::as_str) == Some(node.as_str())
    }
}

/// What the planner needs to know of a module it should run.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The module.
    pub name: ModuleName,
    /// The desired spec digest.
    pub digest: Digest,
    /// The desired input digests.
    pub inputs: BTreeMap<InputName, Digest>,
    /// Recreate or report on drift.
    pub on_drift: DriftPolicy,
    /// The engine's restart policy, which says whether an exited container
    /// is finished or stopped.
    pub restart: RestartPolicy,
}

/// A module's entry in what is desired.
#[derive(Clone, Debug, PartialEq)]
pub enum Want {
    /// Run this target.
    Run(Target),
    /// The module exists but its target cannot be computed now (a file is
    /// missing, the image is absent): leave its container as it is.
    Hold {
        /// The module.
        name: ModuleName,
        /// Why.
        reason: String,
    },
}

impl Want {
    fn name(&self) -> &ModuleName {
        match self {
            Want::Run(t) => &t.name,
            Want::Hold { name, .. } => name,
        }
    }
}

/// One input that differs between the running container and the target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// The input.
    pub input: String,
    /// What the running container was created from (`None`: it had no such input).
    pub running: Option<Digest>,
    /// What the target says now (`None`: the input is gone).
    pub desired: Option<Digest>,
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |d: &Option<Digest>| d.as_ref().map_or("(none)", |d| d.short()).to_string();
        write!(
            f,
            "{}: {} → {}",
            self.input,
            s(&self.running),
            s(&self.desired)
        )
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
    /// The container differs: replace it, once.
    Recreate {
        /// The module.
        module: ModuleName,
        /// The container to replace.
        container: String,
        /// The inputs that moved.
        moved: Vec<Moved>,
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

/// The steps for one pass, in module order, removals last.
pub type Plan = Vec<Step>;

/// Which inputs differ between a container's labels and a target.
pub fn moved(
    running: &BTreeMap<InputName, Digest>,
    desired: &BTreeMap<InputName, Digest>,
) -> Vec<Moved> {
    let names: BTreeSet<&InputName> = running.keys().chain(desired.keys()).collect();
    names
        .into_iter()
        .filter(|n| running.get(*n) != desired.get(*n))
        .map(|n| Moved {
            input: n.to_string(),
            running: running.get(n).cloned(),
            desired: desired.get(n).cloned(),
        })
        .collect()
}

/// Computes the plan. Containers without this node's managed label are never
/// in it, except as the conflict they cause.
pub fn plan(node: &NodeId, wants: &[Want], observed: &[Observed]) -> Plan {
    let mut steps = Vec::new();
    let ours: Vec<&Observed> = observed.iter().filter(|o| o.managed_by(node)).collect();
    let wanted: BTreeSet<&str> = wants.iter().map(|w| w.name().as_str()).collect();

    for want in wants {
        let name = want.name();
        let cname = name.container_name();
        let at_name = observed.iter().find(|o| o.names.contains(&cname));
        if let Some(c) = at_name {
            if !c.managed_by(node) {
                steps.push(Step::Conflict {
                    module: name.clone(),
                    container: c.id.clone(),
                });
                continue;
            }
        }
        // Managed containers of this module under another name (renamed by
        // hand): only the one at the module's name is kept.
        for o in &ours {
            let module = o.labels.get(LABEL_MODULE).map(String::as_str);
            if module == Some(name.as_str()) && at_name.is_none_or(|c| c.id != o.id) {
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
            Want::Run(t) => t,
        };
        let Some(c) = at_name else {
            steps.push(Step::Create {
                module: name.clone(),
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
        } else if c.digest().as_ref() != Some(&target.digest) {
            let moved = moved(&inputs_from_labels(&c.labels), &target.inputs);
            steps.push(match target.on_drift {
                DriftPolicy::Recreate => Step::Recreate {
                    module,
                    container,
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
                ContainerState::Exited | ContainerState::Dead => match target.restart {
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
        let module = o.labels.get(LABEL_MODULE);
        if module.is_none_or(|m| !wanted.contains(m.as_str())) {
            steps.push(Step::Remove {
                module: module.cloned(),
                container: o.id.clone(),
            });
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeId {
        NodeId::try_from("n1").unwrap()
    }

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
        let mut labels = BTreeMap::new();
        if let Some(n) = node {
            labels.insert(LABEL_MANAGED_BY.to_string(), n.to_string());
        }
        if let Some(m) = module {
            labels.insert(LABEL_MODULE.to_string(), m.to_string());
        }
        labels.insert(LABEL_DIGEST.to_string(), d(digest).to_string());
        labels.insert("stead.input.config:/c".to_string(), d(digest).to_string());
        labels.insert("stead.input.image".to_string(), d("img").to_string());
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
    fn the_same_world_gives_the_same_plan() {
        let wants = vec![
            target("a", "v2", DriftPolicy::Recreate),
            target("b", "v1", DriftPolicy::Recreate),
        ];
        let obs = vec![container(
            "c1",
            "stead-a",
            Some("n1"),
            Some("a"),
            "v1",
            ContainerState::Running,
        )];
        assert_eq!(plan(&node(), &wants, &obs), plan(&node(), &wants, &obs));
    }
}
