//! The desired container of a module: everything it is created from, each
//! input with its own digest, and the spec digest over all of them. Pure:
//! the inputs read from the host arrive here already read
//! (`reconcile::resolve`).
//!
//! The spec digest is sha256 over the canonical encoding of the map from
//! input name to input digest, so a change of any input changes it, and the
//! labels a container carries (one per input) say which input moved.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::model::env_file;
use crate::model::files::{self, ComposedFile};
use crate::model::intention::{
    Access, DriftPolicy, Intention, PortSpec, RestartPolicy, UpdateOrder,
};
use crate::model::labels::Labels;
use crate::model::names::{AbsPath, Digest, DigestKey, HostPath, InputName, ModuleName, NodeId};
use crate::model::sealed::{Opened, Text};

/// A bind mount as handed to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindMount {
    /// The host path.
    pub source: String,
    /// Where the container sees it.
    pub target: String,
    /// Read-only or read-write.
    pub read_only: bool,
}

/// Everything the engine needs to create the container.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerSpec {
    /// `stead-<module>`.
    pub name: String,
    /// The image ID (never a tag).
    pub image_id: String,
    /// The command, or the image's default.
    pub command: Option<Vec<String>>,
    /// The environment after env files and inline env are merged, sorted.
    pub env: Vec<(String, String)>,
    /// Ports.
    pub ports: Vec<PortSpec>,
    /// Bind mounts: composed files first, then the intention's mounts.
    pub mounts: Vec<BindMount>,
    /// The engine's restart policy.
    pub restart: RestartPolicy,
    /// The labels: the agent's (node, module, digests) and the user's.
    pub labels: BTreeMap<String, String>,
    /// Everything else it is created with.
    pub runtime: crate::model::runtime::Sparse,
    /// With `network_mode = "container:<module>"`: that module's container,
    /// as the pass found it running.
    pub network_container: Option<String>,
}

/// A module's inputs resolved against the host, short of the image ID.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// Every input but `image`, with its digest.
    pub digests: BTreeMap<InputName, Digest>,
    /// The environment: env files in order, then the inline env over them.
    pub env: Vec<(String, String)>,
    /// The composed files, rendered.
    pub files: Vec<ComposedFile>,
}

impl Inputs {
    /// The digest over every input but the image: what `stead check` can
    /// say without the engine.
    pub fn digest_without_image(&self) -> Digest {
        Digest::canonical("stead-inputs-v1", &self.digests)
    }
}

/// A module's desired container.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The module.
    pub name: ModuleName,
    /// What to do when the running container differs.
    pub on_drift: DriftPolicy,
    /// In which order a recreate swaps the containers.
    pub update_order: UpdateOrder,
    /// The modules it waits for before it starts (not an input).
    pub depends_on: Vec<crate::model::intention::Dependency>,
    /// The engine's restart policy, which says whether an exited container
    /// is finished or stopped.
    pub restart: RestartPolicy,
    /// The spec digest.
    pub digest: Digest,
    /// Every input with its digest, `image` included.
    pub inputs: BTreeMap<InputName, Digest>,
    /// What to create.
    pub spec: ContainerSpec,
    /// Composed files to write before creating: host path and content.
    pub files: Vec<(PathBuf, ComposedFile)>,
    /// With `[config] reload`: the config and literal files, swapped in
    /// place and signalled rather than recreated.
    pub live: Option<Live>,
    /// The env variables whose values were sealed: what is recorded of the
    /// spec leaves their values out.
    pub sealed_env: BTreeSet<String>,
    /// The key its digests are keyed with, when they are.
    pub keyed: Option<DigestKey>,
    /// Its opened sealed values: masked in whatever the engine says of it.
    pub secrets: crate::model::sealed::Secrets,
}

impl Desired {
    /// The spec as it may be recorded: a sealed env value as `(sealed)`.
    pub fn spec_recorded(&self) -> ContainerSpec {
        let mut spec = self.spec.clone();
        for (k, v) in &mut spec.env {
            if self.sealed_env.contains(k.as_str()) {
                *v = SEALED_SHOWN.to_string();
            }
        }
        spec
    }
}

/// What is shown of a sealed value wherever it is shown.
pub const SEALED_SHOWN: &str = "(sealed)";

/// A module's live files: mounted as directories whose content is swapped
/// atomically (a new directory, then one symlink renamed), so a reader
/// never sees half a file, and then the module is signalled.
#[derive(Clone, Debug)]
pub struct Live {
    /// The signal (`SIGHUP`).
    pub signal: String,
    /// Each directory mounted, with its files.
    pub dirs: Vec<LiveDir>,
    /// The digest of every live file's path and content: what a container
    /// holds once it was signalled (or made) with them.
    pub digest: Digest,
}

/// One directory of live files.
#[derive(Clone, Debug)]
pub struct LiveDir {
    /// Where it is on the host.
    pub host: PathBuf,
    /// Where the container sees it.
    pub target: AbsPath,
    /// Its files: name and content.
    pub files: Vec<(String, Vec<u8>)>,
}

/// The name of an input built from a checked path or a fixed word.
pub fn input(name: String) -> InputName {
    InputName::try_from(name).expect("input names are built from checked paths")
}

/// An env value as its digest sees it: in clear, or the keyed digest of
/// the sealed value (an env of values in clear digests as it always did).
#[derive(Serialize)]
#[serde(untagged)]
enum EnvDigested<'a> {
    Plain(&'a str),
    Sealed { sealed: &'a str },
}

/// The digests of the inputs the intention holds itself: command, env,
/// ports and restart policy; a sealed env value by its keyed digest, from
/// `opened`.
pub fn own_input_digests(
    i: &Intention,
    opened: &Opened,
) -> Result<BTreeMap<InputName, Digest>, String> {
    let mut digests = BTreeMap::new();
    digests.insert(
        input("command".into()),
        Digest::canonical("command", &i.command),
    );
    let mut env = BTreeMap::new();
    for (k, v) in &i.env {
        let shown = match v {
            Text::Plain(s) => EnvDigested::Plain(s),
            Text::Sealed(_) => {
                let field = format!("env.{k}");
                let d = opened.digest(&field).ok_or_else(|| {
                    format!("{field}: a sealed value, opened only by the agent on its device")
                })?;
                EnvDigested::Sealed { sealed: d.as_str() }
            }
        };
        env.insert(k, shown);
    }
    digests.insert(input("env".into()), Digest::canonical("env", &env));
    let ports: Vec<String> = i.ports.iter().map(ToString::to_string).collect();
    digests.insert(input("ports".into()), Digest::canonical("ports", &ports));
    digests.insert(
        input("restart".into()),
        Digest::canonical("restart", i.restart.as_str()),
    );
    // Only the runtime fields that are set: a container made before they
    // existed keeps its digest.
    digests.extend(i.runtime.digests());
    Ok(digests)
}

/// The input name of an env file.
pub fn env_file_input(path: &AbsPath) -> InputName {
    input(format!("env_file:{path}"))
}

/// The digest of an env file as read in `format`: its bytes' own for the
/// raw format (as 0.5.0 digested every env file), and the format with them
/// for another, so that a file read another way is a moved input.
pub fn env_file_digest(bytes: &[u8], format: env_file::Format) -> Digest {
    match format {
        env_file::Format::Raw => Digest::of(bytes),
        f => Digest::canonical("env-file", &(f.as_str(), Digest::of(bytes).as_str())),
    }
}

/// The input name of a mount, by where the container sees it.
pub fn mount_input(target: &AbsPath) -> InputName {
    input(format!("mount:{target}"))
}

/// The digest of a mount: a read-only mount is an input, named by its
/// source and content; a read-write mount is state, named by its source; a
/// read-only view of host state is named by its source and its mode.
pub fn mount_digest(source: &HostPath, access: Access, content: Option<&Digest>) -> Digest {
    match (access, content) {
        (Access::ReadOnly, Some(c)) => {
            Digest::canonical("mount-ro", &(source.as_str(), c.as_str()))
        }
        (Access::ReadOnlyView, _) => Digest::canonical("mount-ro-view", source.as_str()),
        _ => Digest::canonical("mount-rw", source.as_str()),
    }
}

/// Normalises an engine image ID to a digest (`sha256:` is implied when an
/// engine reports bare hex, as Podman does).
pub fn image_digest(id: &str) -> Result<Digest, String> {
    let s = if id.contains(':') {
        id.to_string()
    } else {
        format!("sha256:{id}")
    };
    Digest::try_from(s).map_err(|e| e.0)
}

/// The spec digest over every input's digest.
pub fn spec_digest(inputs: &BTreeMap<InputName, Digest>) -> Digest {
    Digest::canonical("stead-spec-v1", inputs)
}

/// An input's digest keyed under `key` from its plain one: without the key
/// no guess of what it was made from can be checked against it.
pub fn keyed_input(key: &DigestKey, name: &InputName, plain: &Digest) -> Digest {
    Digest::keyed(key, &format!("input:{name}"), plain.as_str().as_bytes())
}

/// Every input's digest keyed ([`keyed_input`]).
pub fn keyed_inputs(
    key: &DigestKey,
    inputs: &BTreeMap<InputName, Digest>,
) -> BTreeMap<InputName, Digest> {
    inputs
        .iter()
        .map(|(n, d)| (n.clone(), keyed_input(key, n, d)))
        .into_map()
}

/// Completes the desired container with the image ID; with `keyed`
/// (`keyed_digests = true`), its digests keyed under the device's key.
pub fn desired(
    i: &Intention,
    inputs: Inputs,
    image_id: &Digest,
    node: &NodeId,
    files_dir: &Path,
    keyed: Option<&DigestKey>,
) -> Result<Desired, String> {
    let mut digests = inputs.digests;
    let reload = i.config.as_ref().and_then(|c| c.reload.clone());
    let mut inputs = Inputs {
        digests: BTreeMap::new(),
        env: inputs.env,
        files: inputs.files,
    };
    let mut live = None;
    if let Some(signal) = reload {
        // The label covers where the live files are and how the module is
        // told, not their content: that is delivered in place.
        digests
            .retain(|k, _| !(k.as_str().starts_with("config:") || k.as_str().starts_with("file:")));
        let targets: Vec<&str> = inputs.files.iter().map(|f| f.target.as_str()).collect();
        digests.insert(
            input("live".into()),
            Digest::canonical("live", &(signal.as_str(), &targets)),
        );
        let content: Vec<(&str, &str)> = inputs
            .files
            .iter()
            .map(|f| (f.target.as_str(), f.digest.as_str()))
            .collect();
        let content_digest = Digest::canonical("live-content", &content);
        let root = files_dir
            .parent()
            .unwrap_or(files_dir)
            .join("live")
            .join(i.name.as_str());
        let mut dirs: BTreeMap<AbsPath, Vec<(String, Vec<u8>)>> = BTreeMap::new();
        for f in std::mem::take(&mut inputs.files) {
            // The intention's check refuses such a path; one read from an
            // older store must still not take the agent down.
            let Some((parent, name)) = f.target.split_parent() else {
                return Err(format!(
                    "{}: a live file directly under / cannot be mounted by its directory",
                    f.target
                ));
            };
            let name = name.to_string();
            dirs.entry(parent).or_default().push((name, f.content));
        }
        live = Some(Live {
            signal,
            digest: content_digest,
            dirs: dirs
                .into_iter()
                .map(|(target, files)| LiveDir {
                    host: root.join(&Digest::of(target.as_str().as_bytes()).hex()[..16]),
                    target,
                    files,
                })
                .collect(),
        });
    }
    digests.insert(input("image".into()), image_id.clone());
    if let Some(k) = keyed {
        digests = keyed_inputs(k, &digests);
    }
    let digest = spec_digest(&digests);
    let mut labels = Labels::to_map(node, &i.name, &digest, &digests);
    if keyed.is_some() {
        labels.insert(
            crate::model::labels::DIGESTS.to_string(),
            crate::model::labels::KEYED.to_string(),
        );
    }
    // The user's own (never `stead.*`, which the intention refuses).
    for (k, v) in &i.runtime.labels {
        labels.entry(k.clone()).or_insert_with(|| v.clone());
    }

    let mut mounts = Vec::new();
    let mut files = Vec::new();
    for f in inputs.files {
        let host = files::host_path(files_dir, i.name.as_str(), &f.digest);
        mounts.push(BindMount {
            source: host.to_string_lossy().into_owned(),
            target: f.target.to_string(),
            read_only: true,
        });
        files.push((host, f));
    }
    for d in live.iter().flat_map(|l| l.dirs.iter()) {
        mounts.push(BindMount {
            source: d.host.to_string_lossy().into_owned(),
            target: d.target.to_string(),
            read_only: true,
        });
    }
    for m in &i.mounts {
        mounts.push(BindMount {
            source: m.source.to_string(),
            target: m.target.to_string(),
            read_only: m.access.read_only(),
        });
    }

    let spec = ContainerSpec {
        name: i.name.container_name(),
        image_id: image_id.to_string(),
        command: i.command.clone(),
        env: inputs.env,
        ports: i.ports.clone(),
        mounts,
        restart: i.restart,
        labels,
        runtime: i.runtime.clone(),
        network_container: None,
    };
    Ok(Desired {
        name: i.name.clone(),
        on_drift: i.on_drift,
        update_order: i.update_order,
        depends_on: i.depends_on.clone(),
        restart: i.restart,
        digest,
        inputs: digests,
        spec,
        files,
        live,
        keyed: keyed.copied(),
        secrets: Default::default(),
        sealed_env: i
            .env
            .iter()
            .filter(|(_, v)| matches!(v, Text::Sealed(_)))
            .map(|(k, _)| k.to_string())
            .collect(),
    })
}

impl Desired {
    /// Sets one input's digest (known only once the engine answered: the
    /// container whose network stack it joins), and the spec digest and
    /// labels with it.
    pub fn set_input(&mut self, input: InputName, digest: Digest) {
        let digest = match &self.keyed {
            Some(k) => keyed_input(k, &input, &digest),
            None => digest,
        };
        self.spec.labels.insert(
            format!("{}{input}", crate::model::labels::INPUT_PREFIX),
            digest.to_string(),
        );
        self.inputs.insert(input, digest);
        self.digest = spec_digest(&self.inputs);
        self.spec.labels.insert(
            crate::model::labels::DIGEST.to_string(),
            self.digest.to_string(),
        );
    }
}

/// One input that differs between the running container and the target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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

/// Which inputs differ between a container's labels and a target.
pub fn moved(
    running: &BTreeMap<InputName, Digest>,
    desired: &BTreeMap<InputName, Digest>,
) -> Vec<Moved> {
    let names: BTreeSet<&InputName> = running.keys().chain(desired.keys()).into_set();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn how_an_image_is_updated_is_not_an_input() {
        use crate::model::intention::DocFormat;
        let base = "name = \"a\"\nimage = \"r.io/x:1.2.0\"\n";
        let plain = Intention::parse(base, DocFormat::Toml, "t").unwrap();
        let updated = Intention::parse(
            &format!("{base}[update]\nlane = \"auto\"\nrange = \"^1\"\n"),
            DocFormat::Toml,
            "t",
        )
        .unwrap();
        assert_ne!(plain, updated);
        assert_eq!(
            own_input_digests(&plain, &Opened::default()),
            own_input_digests(&updated, &Opened::default())
        );
    }

    #[test]
    fn image_ids_normalise() {
        let hex = Digest::of(b"i").hex().to_string();
        assert_eq!(
            image_digest(&hex).unwrap(),
            image_digest(&format!("sha256:{hex}")).unwrap()
        );
        assert!(image_digest("sha256:nothex").is_err());
    }
}
