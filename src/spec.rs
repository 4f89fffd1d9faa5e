//! The desired container of a module: everything it is created from,
//! resolved against the files on disk and the engine's image ID, each input
//! with its own digest, and the spec digest over all of them.
//!
//! The spec digest is sha256 over the canonical encoding of the map from
//! input name to input digest, so a change of any input changes it, and the
//! labels a container carries (one per input) say which input moved.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::{FileDigester, canonical};
use crate::intention::{Access, DriftPolicy, Intention, PortSpec, RestartPolicy};
use crate::names::{AbsPath, Digest, EnvName, InputName, ModuleName, NodeId};
use crate::render::{self, RenderedFile};

/// Label: the node that manages this container.
pub const LABEL_MANAGED_BY: &str = "stead.managed-by";
/// Label: the module this container runs.
pub const LABEL_MODULE: &str = "stead.module";
/// Label: the spec digest this container was created from.
pub const LABEL_DIGEST: &str = "stead.digest";
/// Label prefix: one digest per input, `stead.input.<input name>`.
pub const LABEL_INPUT_PREFIX: &str = "stead.input.";

/// A bind mount as handed to the engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindMount {
    /// The host path.
    pub source: String,
    /// Where the container sees it.
    pub target: String,
    /// Read-only or read-write.
    pub read_only: bool,
}

/// Everything the engine needs to create the container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The labels, including the digests.
    pub labels: BTreeMap<String, String>,
}

/// Why a module's desired container could not be resolved. The module is
/// held: its container is left as it is until the input is back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input}: {message}")]
pub struct ResolveError {
    /// The input at fault (`env_file:/srv/x.env`, `image`, …).
    pub input: String,
    /// What is wrong.
    pub message: String,
}

/// A module's inputs resolved against the disk, short of the image ID.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// Every input but `image`, with its digest.
    pub digests: BTreeMap<InputName, Digest>,
    env: Vec<(String, String)>,
    /// The composed files, rendered.
    pub files: Vec<RenderedFile>,
}

impl Inputs {
    /// The digest over every input but the image: what `stead check` can
    /// say without the engine.
    pub fn digest_without_image(&self) -> Digest {
        canonical("stead-inputs-v1", &self.digests)
    }
}

/// A module's desired container.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The module.
    pub name: ModuleName,
    /// What to do when the running container differs.
    pub on_drift: DriftPolicy,
    /// The spec digest.
    pub digest: Digest,
    /// Every input with its digest, `image` included.
    pub inputs: BTreeMap<InputName, Digest>,
    /// What to create.
    pub spec: ContainerSpec,
    /// Composed files to write before creating: host path and content.
    pub files: Vec<(PathBuf, RenderedFile)>,
}

fn input(name: String) -> InputName {
    InputName::try_from(name).expect("input names are built from checked paths")
}

/// Resolves every input of an intention but the image: renders the composed
/// files, reads the env files and digests the read-only mounts.
pub fn resolve_inputs(i: &Intention, digester: &mut FileDigester) -> Result<Inputs, ResolveError> {
    let mut digests = BTreeMap::new();
    digests.insert(input("command".into()), canonical("command", &i.command));
    digests.insert(input("env".into()), canonical("env", &i.env));
    let ports: Vec<String> = i.ports.iter().map(ToString::to_string).collect();
    digests.insert(input("ports".into()), canonical("ports", &ports));
    digests.insert(
        input("restart".into()),
        canonical("restart", i.restart.as_str()),
    );

    let files = render::render_all(i).map_err(|e| ResolveError {
        input: e.field,
        message: e.message,
    })?;
    for f in &files {
        digests.insert(f.input.clone(), f.digest.clone());
    }

    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for path in &i.env_files {
        let name = format!("env_file:{path}");
        let bytes = std::fs::read(path.as_path()).map_err(|e| ResolveError {
            input: name.clone(),
            message: format!("cannot read {path}: {e}"),
        })?;
        for (k, v) in parse_env_file(&bytes).map_err(|m| ResolveError {
            input: name.clone(),
            message: m,
        })? {
            env.insert(k, v);
        }
        digests.insert(input(name), Digest::of(&bytes));
    }
    for (k, v) in &i.env {
        env.insert(k.to_string(), v.clone());
    }

    for m in &i.mounts {
        let name = format!("mount:{}", m.target);
        let d = match m.access {
            Access::ReadOnly => {
                let content =
                    digester
                        .digest_path(m.source.as_path())
                        .map_err(|e| ResolveError {
                            input: name.clone(),
                            message: e.to_string(),
                        })?;
                canonical("mount-ro", &(m.source.as_str(), content.as_str()))
            }
            Access::ReadWrite => canonical("mount-rw", m.source.as_str()),
        };
        digests.insert(input(name), d);
    }
    Ok(Inputs {
        digests,
        env: env.into_iter().collect(),
        files,
    })
}

/// Parses an env file: `KEY=VALUE` lines, the value taken verbatim to the end
/// of the line; blank lines and lines starting with `#` are skipped.
pub fn parse_env_file(bytes: &[u8]) -> Result<Vec<(String, String)>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((k, v)) = trimmed.split_once('=') else {
            return Err(format!("line {}: expected KEY=VALUE", n + 1));
        };
        let k = EnvName::try_from(k.trim_end()).map_err(|e| format!("line {}: {e}", n + 1))?;
        out.push((k.to_string(), v.trim_end_matches('\r').to_string()));
    }
    Ok(out)
}

/// Normalises an engine image ID to a digest (`sha256:` is implied when an
/// engine reports bare hex, as Podman does).
pub fn image_digest(id: &str) -> Result<Digest, ResolveError> {
    let s = if id.contains(':') {
        id.to_string()
    } else {
        format!("sha256:{id}")
    };
    Digest::try_from(s).map_err(|e| ResolveError {
        input: "image".into(),
        message: e.0,
    })
}

/// Completes the desired container with the image ID.
pub fn desired(
    i: &Intention,
    inputs: Inputs,
    image_id: &Digest,
    node: &NodeId,
    files_dir: &Path,
) -> Desired {
    let mut digests = inputs.digests;
    digests.insert(input("image".into()), image_id.clone());
    let digest = canonical("stead-spec-v1", &digests);

    let mut labels = BTreeMap::new();
    labels.insert(LABEL_MANAGED_BY.to_string(), node.to_string());
    labels.insert(LABEL_MODULE.to_string(), i.name.to_string());
    labels.insert(LABEL_DIGEST.to_string(), digest.to_string());
    for (k, v) in &digests {
        labels.insert(format!("{LABEL_INPUT_PREFIX}{k}"), v.to_string());
    }

    let mut mounts = Vec::new();
    let mut files = Vec::new();
    for f in inputs.files {
        let host = render::host_path(files_dir, i.name.as_str(), &f.digest);
        mounts.push(BindMount {
            source: host.to_string_lossy().into_owned(),
            target: f.target.to_string(),
            read_only: true,
        });
        files.push((host, f));
    }
    for m in &i.mounts {
        mounts.push(BindMount {
            source: m.source.to_string(),
            target: m.target.to_string(),
            read_only: m.access == Access::ReadOnly,
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
    };
    Desired {
        name: i.name.clone(),
        on_drift: i.on_drift,
        digest,
        inputs: digests,
        spec,
        files,
    }
}

/// Reads the input digests a container carries in its labels.
pub fn inputs_from_labels(labels: &BTreeMap<String, String>) -> BTreeMap<InputName, Digest> {
    labels
        .iter()
        .filter_map(|(k, v)| {
            let name = InputName::try_from(k.strip_prefix(LABEL_INPUT_PREFIX)?).ok()?;
            let d = Digest::try_from(v.as_str()).ok()?;
            Some((name, d))
        })
        .collect()
}

/// A path the container sees, for composing input names elsewhere.
pub fn mount_input(target: &AbsPath) -> InputName {
    input(format!("mount:{target}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intention::DocFormat;

    fn intention(text: &str) -> Intention {
        Intention::parse(text, DocFormat::Toml, "t.toml").unwrap()
    }

    fn resolve(i: &Intention) -> Desired {
        let inputs = resolve_inputs(i, &mut FileDigester::new()).unwrap();
        let img = Digest::of(b"image");
        desired(
            i,
            inputs,
            &img,
            &NodeId::try_from("n1").unwrap(),
            Path::new("/data/files"),
        )
    }

    #[test]
    fn every_input_moves_the_digest_and_only_its_own_label() {
        let d = tempfile::tempdir().unwrap();
        let env = d.path().join("s.env");
        std::fs::write(&env, "A=1\n").unwrap();
        let model = d.path().join("model.bin");
        std::fs::write(&model, "m1").unwrap();
        let base = format!(
            "name = \"m\"\nimage = \"x\"\nenv_files = [{env:?}]\n[config]\npath = \"/c.json\"\nformat = \"json\"\ndefaults = {{ a = 1 }}\n[[mounts]]\nsource = {model:?}\ntarget = \"/model.bin\"\nread_only = true\n"
        );
        let one = resolve(&intention(&base));
        assert_eq!(
            one.digest,
            resolve(&intention(&base)).digest,
            "deterministic"
        );

        let changed = |a: &Desired, b: &Desired| -> Vec<String> {
            a.inputs
                .iter()
                .filter(|(k, v)| b.inputs.get(*k) != Some(*v))
                .map(|(k, _)| k.to_string())
                .collect()
        };

        std::fs::write(&env, "A=2\n").unwrap();
        let two = resolve(&intention(&base));
        assert_ne!(one.digest, two.digest);
        assert_eq!(changed(&one, &two), [format!("env_file:{}", env.display())]);
        assert!(two.spec.env.contains(&("A".into(), "2".into())));

        std::fs::write(&model, "m2").unwrap();
        let three = resolve(&intention(&base));
        assert_eq!(changed(&two, &three), ["mount:/model.bin"]);

        let four = resolve(&intention(&format!("{base}[settings]\na = 2\n")));
        assert_eq!(changed(&three, &four), ["config:/c.json"]);

        let five = resolve(&intention(
            &base.replace("image = \"x\"", "image = \"x\"\ncommand = [\"sh\"]"),
        ));
        assert_eq!(changed(&three, &five), ["command"]);
        assert_eq!(inputs_from_labels(&five.spec.labels), five.inputs);
    }

    #[test]
    fn unset_and_default_encode_the_same() {
        let a = resolve(&intention("name = \"m\"\nimage = \"x\""));
        let b = resolve(&intention(
            "name = \"m\"\nimage = \"x\"\ncommand = []\nrestart = \"no\"\non_drift = \"recreate\"\nenv = {}",
        ));
        assert_eq!(a.digest, b.digest);
        let c = resolve(&intention(
            "name = \"m\"\nimage = \"x\"\nports = [\"8080:80\"]",
        ));
        let d = resolve(&intention(
            "name = \"m\"\nimage = \"x\"\nports = [\"0.0.0.0:8080:80/tcp\"]",
        ));
        assert_eq!(c.digest, d.digest);
    }

    #[test]
    fn rw_mounts_are_state_not_inputs() {
        let d = tempfile::tempdir().unwrap();
        let t = format!(
            "name = \"m\"\nimage = \"x\"\n[[mounts]]\nsource = {:?}\ntarget = \"/data\"\n",
            d.path()
        );
        let a = resolve(&intention(&t));
        std::fs::write(d.path().join("state"), "x").unwrap();
        assert_eq!(a.digest, resolve(&intention(&t)).digest);
    }

    #[test]
    fn env_files_parse_and_refuse_bad_lines() {
        assert_eq!(
            parse_env_file(b"# c\n\nA=1\nB= two words \r\nC=x=y\n").unwrap(),
            vec![
                ("A".into(), "1".into()),
                ("B".into(), " two words ".into()),
                ("C".into(), "x=y".into())
            ]
        );
        assert!(
            parse_env_file(b"A=1\nnovalue\n")
                .unwrap_err()
                .starts_with("line 2")
        );
    }

    #[test]
    fn a_missing_env_file_holds_the_module_naming_it() {
        let i = intention("name = \"m\"\nimage = \"x\"\nenv_files = [\"/nonexistent/stead.env\"]");
        let e = resolve_inputs(&i, &mut FileDigester::new()).unwrap_err();
        assert_eq!(e.input, "env_file:/nonexistent/stead.env");
    }
}
