//! `stead-plane import`'s mapping: a Compose file (the Compose Specification,
//! and the version 2 and 3 file formats people have; `version:` is
//! ignored) read into one intention file per service, in TOML ([`import`]).
//! Every key is carried into the intention, or reported by service and key
//! with the reason it is not ([`Imported::unmapped`]), or refused with the
//! reason nothing is written ([`ImportError`]); nothing is dropped
//! silently. Every intention written parses back with [`Intention::parse`].
//!
//! Pure: the files the mapping reads (the `.env` file next to the Compose
//! file, a config's `file:`, an env file it looks at) come through a
//! closure, and the environment is handed in; writing is the command
//! line's business (`cli::import`). docs/import.md is the user's table of
//! what maps to what.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value as J};

use crate::model::env_file;
use crate::model::intention::{DocFormat, Intention};
use crate::model::interpolate;
use crate::model::names::ModuleName;
use crate::model::runtime::RuntimeDoc;

mod fields;
pub mod text;
pub mod yaml;

use fields::*;

/// The "service" of a report or refusal about the file as a whole (its
/// YAML, a top-level declaration).
pub const FILE: &str = "(file)";

/// Something said about one key of a service (or of the file): not
/// carried, or carried in a way worth saying.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The service, or [`FILE`].
    pub service: String,
    /// The key, with its place: `ports[1]`, `deploy.replicas`,
    /// `networks.front.aliases`.
    pub key: String,
    /// Why.
    pub why: String,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.service, self.key, self.why)
    }
}

/// The Compose file cannot be imported: which service (or [`FILE`]),
/// which key, why. Nothing is written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{service}: {key}: {why}")]
pub struct ImportError {
    /// The service, or [`FILE`].
    pub service: String,
    /// The key at fault.
    pub key: String,
    /// What is wrong.
    pub why: String,
}

/// One service's intention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedFile {
    /// The Compose service.
    pub service: String,
    /// The module it became: the service's name lower-cased, `_` as `-`.
    pub module: ModuleName,
    /// `<module>.toml`.
    pub file_name: String,
    /// The intention document.
    pub toml: String,
    /// What was copied into it from outside the Compose file (a config's
    /// file or variable): it is written readable by its owner only.
    pub copied: Vec<Copied>,
}

/// Content copied into an intention from outside the Compose file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Copied {
    /// A config's `file:` (absolute, as the Compose file names it).
    File(PathBuf),
    /// A config's `environment:` variable.
    Variable(String),
}

/// What a Compose file became.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// One intention per service imported, by module name.
    pub files: Vec<ImportedFile>,
    /// Keys that are not carried into any intention (the command exits 3).
    pub unmapped: Vec<Report>,
    /// Keys carried in a way worth saying: a value taken from the
    /// importer's environment, a name given to an anonymous volume, an
    /// order that the modules do not need.
    pub notes: Vec<Report>,
}

/// Reads a file the Compose file names (whole).
pub type ReadFile<'a> = &'a dyn Fn(&Path) -> std::io::Result<Vec<u8>>;

/// Maps a Compose file to intentions. `base_dir` is the Compose file's
/// directory (absolute): relative paths resolve against it and its `.env`
/// is read from there. `env` is the importer's environment (it wins over
/// `.env`, as for Compose). `read` reads `.env`, configs' files and env
/// files (to check them); a missing `.env` is none.
pub fn import(
    yaml_text: &str,
    base_dir: &Path,
    env: &BTreeMap<String, String>,
    read: ReadFile<'_>,
    opts: &Options,
) -> Result<Imported, ImportError> {
    let file_err = |key: &str, why: String| ImportError {
        service: FILE.into(),
        key: key.into(),
        why,
    };
    let doc = yaml::load(yaml_text).map_err(|e| file_err("(yaml)", e.to_string()))?;
    let J::Object(mut doc) = doc else {
        return Err(file_err(
            "(yaml)",
            "a Compose file is a mapping with `services:`".into(),
        ));
    };
    let mut cx = Ctx {
        base_dir: normal(base_dir),
        env: env.clone(),
        read,
        allow_outside: opts.allow_outside,
        plain_volume_names: opts.plain_volume_names,
        project: String::new(),
        top: Top::default(),
        out: Imported::default(),
        said: BTreeSet::new(),
    };
    // The `.env` file next to the Compose file; the environment wins.
    match read(&base_dir.join(".env")) {
        Ok(bytes) => {
            let lookup = |k: &str| env.get(k).cloned();
            // Read as Compose reads it; a key given twice keeps its last
            // value.
            let dotenv: BTreeMap<String, String> = env_file::read(
                &bytes,
                env_file::Format::Compose,
                &lookup,
                &env_file::Known::new(),
            )
            .map_err(|m| file_err(".env", m))?
            .into_iter()
            .collect();
            for (k, v) in dotenv {
                cx.env.entry(k).or_insert(v);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(file_err(".env", format!("cannot read it: {e}"))),
    }

    for key in doc.keys() {
        match key.as_str() {
            "version" | "name" | "services" | "volumes" | "networks" | "configs" | "secrets" => {}
            k if k.starts_with("x-") => {}
            "include" => cx.unmapped(
                FILE,
                "include",
                "the included files are not read: import each of them",
            ),
            "models" => cx.unmapped(FILE, "models", "stead runs containers only"),
            k => cx.unmapped(FILE, k, "not a top-level key of the Compose Specification"),
        }
    }
    let services = match doc.remove("services") {
        Some(J::Object(s)) => s,
        Some(J::Null) | None => {
            return Err(file_err(
                "services",
                "no services (the version 1 file format, services at the top level, is not read)"
                    .into(),
            ));
        }
        Some(_) => return Err(file_err("services", "must be a mapping".into())),
    };
    for (section, slot) in [
        ("volumes", &mut cx.top.volumes),
        ("networks", &mut cx.top.networks),
        ("configs", &mut cx.top.configs),
        ("secrets", &mut cx.top.secrets),
    ] {
        match doc.remove(section) {
            None | Some(J::Null) => {}
            Some(J::Object(m)) => *slot = m,
            Some(_) => return Err(file_err(section, "must be a mapping".into())),
        }
    }
    // Interpolated where Compose interpolates: the services and the
    // top-level declarations (not `x-` fragments on their own).
    let env = cx.env.clone();
    let lookup = |k: &str| env.get(k).cloned();
    let mut unset = Vec::new();
    let mut budget = interpolate::MAX_EXPANDED;
    for (section, decls) in [
        ("volumes", &mut cx.top.volumes),
        ("networks", &mut cx.top.networks),
        ("configs", &mut cx.top.configs),
        ("secrets", &mut cx.top.secrets),
    ] {
        for (name, v) in decls.iter_mut() {
            interpolate_tree(
                v,
                &format!("{section}.{name}"),
                &lookup,
                &mut unset,
                &mut budget,
            )
            .map_err(|(k, m)| file_err(&k, m))?;
        }
    }
    for (key, var) in unset.drain(..) {
        cx.note_once(FILE, &key, &unset_why(&var));
    }

    // The project's name, as Compose chooses it.
    let named = match doc.remove("name") {
        None | Some(J::Null) => None,
        Some(mut n) => {
            interpolate_tree(&mut n, "name", &lookup, &mut unset, &mut budget)
                .map_err(|(k, m)| file_err(&k, m))?;
            Some(scalar("name", &n).map_err(|(k, m)| file_err(&k, m))?)
        }
    };
    let chosen = opts
        .project
        .clone()
        .or_else(|| {
            env.get("COMPOSE_PROJECT_NAME")
                .filter(|p| !p.is_empty())
                .cloned()
        })
        .or(named)
        .or_else(|| {
            cx.base_dir
                .file_name()
                .map(|d| d.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    cx.project = project_name(&chosen).map_err(|m| file_err("name", m))?;

    let mut modules: BTreeMap<String, String> = BTreeMap::new();
    let mut depends: Vec<(String, Vec<String>)> = Vec::new();
    for (service, mut def) in services {
        let serr = |key: &str, why: String| ImportError {
            service: service.clone(),
            key: key.into(),
            why,
        };
        interpolate_tree(&mut def, "", &lookup, &mut unset, &mut budget)
            .map_err(|(k, m)| serr(&k, m))?;
        for (key, var) in unset.drain(..) {
            cx.note_once(&service, &key, &unset_why(&var));
        }
        let module = module_name(&service).map_err(|m| serr("(name)", m))?;
        if let Some(other) = modules.insert(module.to_string(), service.clone()) {
            return Err(serr(
                "(name)",
                format!("it becomes module {module}, as service {other} does"),
            ));
        }
        let J::Object(def) = def else {
            return Err(serr("(service)", "must be a mapping".into()));
        };
        let Some(out) = cx
            .service(&service, &module, def)
            .map_err(|(k, m)| serr(&k, m))?
        else {
            continue;
        };
        depends.push((
            service.clone(),
            out.depends_on
                .iter()
                .map(|d| d.module.clone())
                .collect::<Vec<_>>(),
        ));
        let mut toml =
            format!("# Imported by `stead-plane import` from the Compose service {service:?}.\n");
        toml.push_str(
            &toml::to_string(&out)
                .map_err(|e| serr("(intention)", format!("cannot be written as TOML: {e}")))?,
        );
        let file_name = format!("{module}.toml");
        // Every file written is one the agent takes: a refusal here is a
        // value stead does not take, named by the intention's field.
        Intention::parse(&toml, DocFormat::Toml, &file_name).map_err(|e| {
            serr(
                &e.field,
                format!("{} (as the intention reads it)", e.message),
            )
        })?;
        cx.out.files.push(ImportedFile {
            service: service.clone(),
            module,
            file_name,
            toml,
            copied: out.copied,
        });
    }
    // A dependency on a service that was not imported is waited for.
    let imported: BTreeSet<String> = cx.out.files.iter().map(|f| f.module.to_string()).collect();
    for (service, deps) in depends {
        for m in deps.iter().filter(|m| !imported.contains(*m)) {
            cx.note(
                &service,
                &format!("depends_on.{m}"),
                &format!("module {m} is not imported: this module waits until one is stated"),
            );
        }
    }
    Ok(cx.out)
}

/// How a Compose file is imported, beyond the file itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// A config's `file:` outside the Compose file's tree is copied into
    /// the intention (refused otherwise).
    pub allow_outside: bool,
    /// The project's name (`-p`), over `COMPOSE_PROJECT_NAME`, the file's
    /// `name:` and its directory's name, as Compose chooses it.
    pub project: Option<String>,
    /// A named volume's engine name is its key, as stead 0.5.0 named it,
    /// not Compose's `<project>_<volume>`.
    pub plain_volume_names: bool,
}

/// A project's name as Compose makes it: lower-cased, letters, digits, `_`
/// and `-` kept, starting with a letter or digit.
pub fn project_name(chosen: &str) -> Result<String, String> {
    let name: String = chosen
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    let name = name.trim_start_matches(['_', '-']).to_string();
    if name.is_empty() {
        return Err(format!(
            "{chosen:?} cannot be made a project name (letters, digits, _ and -): name the project with -p"
        ));
    }
    Ok(name)
}

/// The module a service becomes: lower-cased, `_` as `-`.
pub fn module_name(service: &str) -> Result<ModuleName, String> {
    let name = service.to_ascii_lowercase().replace('_', "-");
    ModuleName::try_from(name.as_str()).map_err(|e| {
        format!("the service name cannot be made a module name (lower-cased, _ as -): {e}")
    })
}

/// What is said of a variable used unset.
fn unset_why(var: &str) -> String {
    format!("the variable {var} is not set: an empty string, as Compose reads it")
}

/// Interpolates every string under `v` (not keys); `path` names where.
/// `budget` is what the interpolated strings may still come to, in bytes.
fn interpolate_tree(
    v: &mut J,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    unset: &mut Vec<(String, String)>,
    budget: &mut usize,
) -> Result<(), Fail> {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        J::String(s) if s.contains('$') => {
            let mut vars = Vec::new();
            *s = interpolate::interpolate(s, lookup, &mut vars, *budget).map_err(|e| {
                let m = match e {
                    interpolate::Error::TooLong(_) if *budget < interpolate::MAX_EXPANDED => {
                        format!(
                            "the variables of the file expand to more than {} bytes in all",
                            interpolate::MAX_EXPANDED
                        )
                    }
                    e => e.to_string(),
                };
                (path.to_string(), m)
            })?;
            *budget = budget.saturating_sub(s.len());
            unset.extend(vars.into_iter().map(|var| (path.to_string(), var)));
        }
        J::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                interpolate_tree(x, &format!("{path}[{i}]"), lookup, unset, budget)?;
            }
        }
        J::Object(m) => {
            for (k, x) in m.iter_mut() {
                // `x-` fragments are Compose's to ignore, and so ours.
                if !k.starts_with("x-") {
                    interpolate_tree(x, &join(k), lookup, unset, budget)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The top-level declarations services refer to.
#[derive(Default)]
struct Top {
    volumes: Map<String, J>,
    networks: Map<String, J>,
    configs: Map<String, J>,
    secrets: Map<String, J>,
}

/// One import under way: where relative paths start, the environment,
/// the declarations, and what is written and said.
struct Ctx<'a> {
    base_dir: PathBuf,
    /// The importer's environment over `.env`.
    env: BTreeMap<String, String>,
    read: ReadFile<'a>,
    /// Whether a config's file may be copied from outside `base_dir`.
    allow_outside: bool,
    /// Whether a named volume keeps its key as its name.
    plain_volume_names: bool,
    /// The project's name, which names its networks and volumes.
    project: String,
    top: Top,
    out: Imported,
    /// File-level reports already made (a declaration used twice is
    /// reported once).
    said: BTreeSet<(String, String)>,
}

/// One intention as written: the intention schema's fields, in this order
/// (TOML puts the tables last). The runtime fields are the field table's
/// own document type, so a row added to the table is a field here too.
#[derive(Serialize, Default)]
struct Out {
    /// Not a field: what was copied into it.
    #[serde(skip)]
    copied: Vec<Copied>,
    name: String,
    image: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restart: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    env_files: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    env_file_format: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ports: Vec<String>,
    #[serde(flatten)]
    runtime: RuntimeDoc,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    depends_on: Vec<DependsOut>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    mounts: Vec<MountOut>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    files: Vec<FileOut>,
}

impl Out {
    /// Sets a runtime field, named as the table names it.
    fn set(&mut self, field: &str, v: impl Serialize) {
        let known = self.runtime.set(field, v);
        debug_assert!(known, "{field} is not a runtime field");
    }

    /// Sets a runtime field that is a collection, unless it is empty.
    fn gather<C: Serialize + IntoIterator>(&mut self, field: &str, c: C)
    where
        for<'a> &'a C: IntoIterator,
    {
        if (&c).into_iter().next().is_some() {
            self.set(field, c);
        }
    }

    /// Its network mode, when one is set.
    fn network_mode(&self) -> Option<&str> {
        self.runtime.get("network_mode").and_then(J::as_str)
    }
}

#[derive(Serialize, Default)]
struct HealthOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    test: Option<J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retries: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_period: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disable: Option<bool>,
}

#[derive(Serialize)]
struct LoggingOut {
    driver: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    options: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct DependsOut {
    module: String,
    condition: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    restart: bool,
}

#[derive(Serialize)]
struct MountOut {
    source: String,
    target: String,
    read_only: bool,
    /// `false` for a read-only view of the host's state (not an input).
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<bool>,
}

#[derive(Serialize)]
struct FileOut {
    path: String,
    content: String,
}

/// A host directory of the system's own (kernel, devices, run time,
/// engine state), which a read-only mount would hash as an input.
fn is_system_tree(path: &str) -> bool {
    [
        "/sys", "/proc", "/dev", "/run", "/var/run", "/var/lib", "/var/log",
    ]
    .iter()
    .any(|t| path == *t || path.starts_with(&format!("{t}/")))
}

/// Why each Compose service key stead does not carry is not carried.
fn unmapped_why(key: &str) -> &'static str {
    match key {
        "extends" => "the service it extends is not merged in: write its keys out",
        "profiles" => "imported as if its profile were active: stead runs every module it is given",
        "links" | "external_links" => {
            "legacy links: modules in a common `networks` entry find each other by name"
        }
        "pid" | "ipc" | "uts" | "userns_mode" | "cgroup" => {
            "stead shares no namespace between containers or with the host beyond network_mode"
        }
        "scale" => "a module is one container",
        "pre_start" => {
            "an init container run to completion first: stead runs one container per module"
        }
        "domainname" => "stead has no such field",
        "stdin_open" | "tty" | "attach" => "a module runs without a terminal",
        "security_opt" | "cgroup_parent" | "oom_kill_disable" | "oom_score_adj" | "mac_address"
        | "cpu_shares" | "cpu_quota" | "cpu_period" | "cpu_count" | "cpu_percent"
        | "cpu_rt_period" | "cpu_rt_runtime" | "cpuset" | "mem_reservation" | "mem_swappiness"
        | "blkio_config" | "storage_opt" | "group_add" | "dns_search" | "dns_opt" | "isolation"
        | "runtime" | "platform" | "gpus" | "volumes_from" | "credential_spec" | "annotations"
        | "label_file" | "pull_policy" | "pull_refresh_after" | "post_start" | "pre_stop"
        | "develop" | "use_api_socket" | "provider" | "models" => "stead has no such field",
        _ => "not a service key of the Compose Specification",
    }
}

impl Ctx<'_> {
    /// A key not carried.
    fn unmapped(&mut self, service: &str, key: &str, why: &str) {
        self.out.unmapped.push(Report {
            service: service.into(),
            key: key.into(),
            why: why.into(),
        });
    }

    /// A key carried in a way worth saying.
    fn note(&mut self, service: &str, key: &str, why: &str) {
        self.out.notes.push(Report {
            service: service.into(),
            key: key.into(),
            why: why.into(),
        });
    }

    /// A file-level report, once per key and reason.
    fn unmapped_once(&mut self, service: &str, key: &str, why: &str) {
        if self.said.insert((format!("u:{service}:{key}"), why.into())) {
            self.unmapped(service, key, why);
        }
    }

    /// A file-level note, once per key and reason.
    fn note_once(&mut self, service: &str, key: &str, why: &str) {
        if self.said.insert((format!("n:{service}:{key}"), why.into())) {
            self.note(service, key, why);
        }
    }

    /// One service's intention; `None` when it cannot be one (reported).
    fn service(
        &mut self,
        service: &str,
        module: &ModuleName,
        mut def: Map<String, J>,
    ) -> Result<Option<Out>, Fail> {
        let mut out = Out {
            name: module.to_string(),
            ..Out::default()
        };
        let build = def.remove("build");
        match def.remove("image") {
            Some(J::String(image)) => {
                out.image = image;
                if build.is_some() {
                    self.unmapped(
                        service,
                        "build",
                        "stead runs images: the image named in `image` is run, not built",
                    );
                }
            }
            Some(_) => return fail("image", "must be a string"),
            None if build.is_some() => {
                self.unmapped(
                    service,
                    "build",
                    "no image: stead runs images; build it, name it in `image`, and import again: the service is not imported",
                );
                return Ok(None);
            }
            None if def.contains_key("extends") => {
                self.unmapped(
                    service,
                    "extends",
                    "the service it extends is not merged in, and this one names no image of its own: write the keys out; the service is not imported",
                );
                return Ok(None);
            }
            None => return fail("image", "a service needs an image"),
        }
        let mut tmpfs: Vec<String> = Vec::new();
        let mut volumes: Vec<String> = Vec::new();
        let (mut labels, mut sysctls) = (BTreeMap::new(), BTreeMap::new());
        let mut devices: Vec<String> = Vec::new();
        // The service's own limits, and those under `deploy`.
        let (mut mem_limit, mut cpus, mut pids) = (None, None, None);
        let mut deploy_limits = (None, None, None);
        let mut networks: Vec<String> = Vec::new();
        let mut aliases: BTreeSet<String> = BTreeSet::new();
        let mut container_name = None;
        // Ports, then `expose` (a published port needs no exposing).
        let mut ports: Vec<String> = Vec::new();
        let mut exposed: Vec<String> = Vec::new();
        let mut env_checks = Vec::new();
        for (key, v) in def {
            let k = key.as_str();
            if v.is_null() {
                continue;
            }
            match k {
                // stead's own field, as a Compose extension (Compose
                // itself has no update lock).
                "x-stead-update-lock" => out.set("update_lock", scalar(k, &v)?),
                k if k.starts_with("x-") => {}
                "command" => out.command = Some(command(k, &v)?),
                "entrypoint" => out.set(k, command(k, &v)?),
                "environment" => self.environment(service, &v, &mut out.env)?,
                "env_file" => env_checks = self.env_files(service, &v, &mut out)?,
                "ports" => {
                    for (i, p) in list(k, &v)?.iter().enumerate() {
                        let at = format!("{k}[{i}]");
                        let (specs, random) = port_entry(&at, p)?;
                        for (field, why) in random {
                            self.unmapped(service, &field, &why);
                        }
                        ports.extend(specs);
                    }
                }
                "expose" => {
                    for (i, p) in list(k, &v)?.iter().enumerate() {
                        exposed.extend(expose_entry(&format!("{k}[{i}]"), p)?);
                    }
                }
                "restart" => {
                    let (policy, dropped) = restart(k, &v)?;
                    out.restart = Some(policy);
                    if let Some(why) = dropped {
                        self.unmapped(service, k, &why);
                    }
                }
                "volumes" => {
                    self.volumes(service, module, &v, &mut out, &mut volumes, &mut tmpfs)?
                }
                "tmpfs" => tmpfs.extend(strings_or_one(k, &v)?),
                "configs" => {
                    for (i, e) in list(k, &v)?.iter().enumerate() {
                        self.config(service, &format!("{k}[{i}]"), e, &mut out)?;
                    }
                }
                "secrets" => {
                    for (i, e) in list(k, &v)?.iter().enumerate() {
                        self.secret(service, &format!("{k}[{i}]"), e, &mut out)?;
                    }
                }
                "working_dir" => out.set(k, scalar(k, &v)?),
                "user" => out.set(k, scalar(k, &v)?),
                "labels" => {
                    for (name, value) in pairs(k, &v, '=')? {
                        labels.insert(name, value.unwrap_or_default());
                    }
                }
                "devices" => {
                    for (i, d) in list(k, &v)?.iter().enumerate() {
                        devices.push(device(&format!("{k}[{i}]"), d)?);
                    }
                }
                "device_cgroup_rules" => out.gather(k, strings(k, &v)?),
                "privileged" => out.set(k, bool_of(k, &v)?),
                "read_only" => out.set(k, bool_of(k, &v)?),
                "init" => out.set(k, bool_of(k, &v)?),
                "cap_add" => out.gather(k, strings(k, &v)?),
                "cap_drop" => out.gather(k, strings(k, &v)?),
                "network_mode" => out.set(k, network_mode(k, &v)?),
                "networks" => (networks, aliases) = self.networks(service, &v)?,
                "hostname" => out.set(k, scalar(k, &v)?),
                "container_name" => container_name = Some(scalar(k, &v)?),
                "extra_hosts" => out.gather(k, extra_hosts(k, &v)?),
                // An empty entry (`dns: ${UNSET}`) is none, as in Compose.
                "dns" => {
                    let servers = strings_or_one(k, &v)?;
                    out.gather(
                        k,
                        servers
                            .into_iter()
                            .filter(|s| !s.is_empty())
                            .collect::<Vec<_>>(),
                    );
                }
                "mem_limit" => mem_limit = Some(v),
                "memswap_limit" => out.set(k, v),
                "shm_size" => out.set(k, v),
                "cpus" => cpus = Some(v),
                "pids_limit" => pids = Some(J::from(int_of(k, &v)?)),
                "ulimits" => out.gather(k, ulimits(k, &v)?),
                "sysctls" => {
                    for (name, value) in pairs(k, &v, '=')? {
                        sysctls.insert(name, value.unwrap_or_default());
                    }
                }
                "stop_signal" => out.set(k, scalar(k, &v)?),
                "stop_grace_period" => {
                    let grace = compose_duration(k, &v)?.unwrap_or_else(|| "0s".to_string());
                    out.set(k, grace);
                }
                "healthcheck" => out.set(k, self.healthcheck(service, k, &v)?),
                "logging" => out.set(k, self.logging(service, k, &v)?),
                "deploy" => deploy_limits = self.deploy(service, &v)?,
                "depends_on" => self.depends_on(service, &v, &mut out)?,
                other => self.unmapped(service, other, unmapped_why(other)),
            }
        }
        // The service's own keys win; a different value under `deploy` is
        // reported.
        let (dm, dc, dp) = deploy_limits;
        for (own, under_deploy, name, own_name) in [
            (&mut mem_limit, dm, "memory", "mem_limit"),
            (&mut cpus, dc, "cpus", "cpus"),
            (&mut pids, dp.map(J::from), "pids", "pids_limit"),
        ] {
            match (&own, under_deploy) {
                (_, None) => {}
                (None, d) => *own = d,
                (Some(o), Some(d)) if *o == d => {}
                (Some(_), Some(_)) => self.unmapped(
                    service,
                    &format!("deploy.resources.limits.{name}"),
                    &format!("{own_name} is also set: it is used"),
                ),
            }
        }
        out.set("mem_limit", mem_limit);
        out.set("cpus", cpus);
        out.set("pids_limit", pids.and_then(|p| p.as_i64()));
        out.gather("tmpfs", tmpfs);
        out.gather("volumes", volumes);
        out.gather("labels", labels);
        out.gather("sysctls", sysctls);
        out.gather("devices", devices);
        if let Some(mode) = out.network_mode() {
            if matches!(mode, "host" | "none") {
                for (key, list) in [("ports", &mut ports), ("expose", &mut exposed)] {
                    if !list.is_empty() {
                        self.unmapped(
                            service,
                            key,
                            &format!(
                                "a container with network_mode {mode} publishes and exposes no ports (the engine discards them too)"
                            ),
                        );
                        list.clear();
                    }
                }
            }
            if !networks.is_empty() {
                return fail(
                    "networks",
                    "network_mode and networks cannot be combined (Compose refuses them too)",
                );
            }
        }
        if networks.is_empty() && out.network_mode().is_none() {
            // The project's own network, which Compose puts every service
            // without `networks` on.
            networks.push(self.network_name("networks.default", "default")?);
        }
        // Its names there: the service's, its container_name, its aliases
        // (with a network_mode it is on no network, as under Compose).
        let on_networks = out.network_mode().is_none();
        if on_networks && service != module.as_str() {
            aliases.insert(service.to_string());
        }
        if let Some(c) = container_name {
            let why = if on_networks {
                format!(
                    "the container is named stead-{module}; {c} is one of its names on its networks, as it was under Compose"
                )
            } else {
                format!("the container is named stead-{module}")
            };
            self.note(service, "container_name", &why);
            if on_networks && c != module.as_str() {
                aliases.insert(c);
            }
        }
        out.gather("networks", networks);
        out.gather("aliases", aliases);
        let published: BTreeSet<String> = ports.iter().map(|p| container_side(p)).collect();
        for e in exposed {
            if !published.contains(&e) && !ports.contains(&e) {
                ports.push(e);
            }
        }
        out.ports = ports;
        self.check_env_files(service, &env_checks, &out);
        Ok(Some(out))
    }

    /// `environment`: a key without a value takes the importer's value
    /// now (Compose reads the shell's at each `up`), said so.
    fn environment(
        &mut self,
        service: &str,
        v: &J,
        env: &mut BTreeMap<String, String>,
    ) -> Result<(), Fail> {
        for (name, value) in pairs("environment", v, '=')? {
            let value = match value {
                Some(value) => Some(value),
                None => {
                    let from_env = self.env.get(&name).cloned();
                    let why = if from_env.is_some() {
                        "no value: taken from the importer's environment now and written into the intention (Compose reads it from the shell at each `up`)"
                    } else {
                        "no value, and not set in the importer's environment: left out, as Compose leaves it out"
                    };
                    self.note(service, &format!("environment.{name}"), why);
                    from_env
                }
            };
            if let Some(value) = value {
                env.insert(name, value);
            }
        }
        Ok(())
    }

    /// `env_file`: paths (or `{path, required, format}`), made absolute,
    /// with the format all of them are read in (Compose's own unless each
    /// says `format: raw`). Each is looked at, once the service's
    /// environment is known ([`Ctx::check_env_files`]).
    fn env_files(
        &mut self,
        service: &str,
        v: &J,
        out: &mut Out,
    ) -> Result<Vec<(String, String)>, Fail> {
        let mut checks = Vec::new();
        let mut format = None;
        for (i, e) in list_or_one("env_file", v)?.iter().enumerate() {
            let at = format!("env_file[{i}]");
            let mut this = env_file::Format::Compose;
            let path = match e {
                J::String(s) => s.clone(),
                J::Object(m) => {
                    for (f, fv) in m {
                        let fat = format!("{at}.{f}");
                        match f.as_str() {
                            "path" => {}
                            "required" if bool_of(&fat, fv)? => {}
                            "required" => self.unmapped(
                                service,
                                &fat,
                                "stead holds a module whose env file is missing",
                            ),
                            "format" => match fv.as_str() {
                                Some("raw") => this = env_file::Format::Raw,
                                Some(".env") => {}
                                _ => {
                                    return fail(
                                        &fat,
                                        "Compose reads an env file as .env (the default) or raw",
                                    );
                                }
                            },
                            _ => self.unmapped(service, &fat, "not a key of env_file"),
                        }
                    }
                    match m.get("path") {
                        Some(J::String(s)) => s.clone(),
                        _ => return fail(&at, "needs a path"),
                    }
                }
                _ => return fail(&at, "must be a path or {path, required, format}"),
            };
            let path = self.host_path(&at, &path)?;
            match format {
                None => format = Some(this),
                Some(f) if f != this => self.unmapped(
                    service,
                    &at,
                    &format!(
                        "stead reads a module's env files in one format: this one is read as the first is ({})",
                        f.as_str()
                    ),
                ),
                Some(_) => {}
            }
            checks.push((at, path.clone()));
            out.env_files.push(path);
        }
        out.env_file_format = format.map(env_file::Format::as_str);
        Ok(checks)
    }

    /// Looks at each env file as the agent will read it on the device, and
    /// as Compose reads it here: a file that does not read, and a value
    /// that would differ, are said. Compose looks a reference up in the
    /// shell's environment and `.env` first, which the device does not
    /// have; the agent in the module's env and the files before.
    fn check_env_files(&mut self, service: &str, checks: &[(String, String)], out: &Out) {
        let format = out
            .env_file_format
            .and_then(|f| serde_json::from_value(J::from(f)).ok())
            .unwrap_or_default();
        let own = |k: &str| out.env.get(k).cloned();
        let here = |k: &str| self.env.get(k).cloned().or_else(|| own(k));
        let (mut on_device, mut in_compose) = (env_file::Known::new(), env_file::Known::new());
        let mut said = Vec::new();
        for (at, path) in checks {
            let Ok(bytes) = (self.read)(Path::new(path)) else {
                said.push((
                    at,
                    false,
                    format!("{path} cannot be read now: the agent holds the module until it can"),
                ));
                continue;
            };
            let device = env_file::read(&bytes, format, &own, &on_device);
            let compose = env_file::read(&bytes, format, &here, &in_compose);
            match (device, compose) {
                (Err(m), _) | (_, Err(m)) => said.push((
                    at,
                    true,
                    format!("{path}: {m}: the agent holds the module until the file is fixed"),
                )),
                (Ok(d), Ok(c)) => {
                    // The first key read differently (a key on its own is
                    // one reading only where it is set).
                    let longer = if d.len() > c.len() { &d } else { &c };
                    let moved = d
                        .iter()
                        .zip(&c)
                        .find(|(a, b)| a != b)
                        .map(|(a, _)| &a.0)
                        .or_else(|| longer.get(d.len().min(c.len())).map(|(k, _)| k));
                    if let Some(key) = moved {
                        said.push((at, true, format!(
                            "{path}: {key} refers to a variable that Compose takes from the shell or .env, which the device does not have (there the file's references are to the module's env and the files before it): write the value in the file or under environment"
                        )));
                    }
                    on_device.extend(d);
                    in_compose.extend(c);
                }
            }
        }
        for (at, unmapped, why) in said {
            if unmapped {
                self.unmapped(service, at, &why);
            } else {
                self.note(service, at, &why);
            }
        }
    }

    /// `volumes`: bind mounts, named volumes (an anonymous one is given
    /// a name) and tmpfs mounts.
    fn volumes(
        &mut self,
        service: &str,
        module: &ModuleName,
        v: &J,
        out: &mut Out,
        volumes: &mut Vec<String>,
        tmpfs: &mut Vec<String>,
    ) -> Result<(), Fail> {
        let mut anonymous = 0;
        for (i, e) in list("volumes", v)?.iter().enumerate() {
            let at = format!("volumes[{i}]");
            let (m, reports) = volume_entry(&at, e)?;
            for (field, why, carried) in reports {
                if carried {
                    self.note(service, &field, &why);
                } else {
                    self.unmapped(service, &field, &why);
                }
            }
            let ro = |read_only: bool| if read_only { ":ro" } else { "" };
            match m {
                VolumeSpec::Bind {
                    source,
                    target,
                    read_only,
                } => {
                    let source = self.host_path(&format!("{at}.source"), &source)?;
                    if source == "/" && !read_only {
                        self.unmapped(
                            service,
                            &at,
                            "stead mounts the host's root only read-only, as a view (input = false)",
                        );
                        continue;
                    }
                    // The host's live state is read by the module, not an
                    // input of its container.
                    let view = read_only
                        && (source == "/" || source.ends_with(".sock") || is_system_tree(&source));
                    if view {
                        self.note(
                            service,
                            &at,
                            &format!(
                                "{source} is the host's live state (the system's own, or a socket): carried with input = false, so the agent does not hash it and a change there recreates nothing"
                            ),
                        );
                    }
                    let missing = (self.read)(Path::new(&source))
                        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
                    // A read-write one is made, as Compose makes it.
                    if missing && read_only {
                        self.note(
                            service,
                            &at,
                            &format!(
                                "{source} does not exist now: a read-only mount is an input, and the module is held until it exists"
                            ),
                        );
                    }
                    out.mounts.push(MountOut {
                        source,
                        target,
                        read_only,
                        input: view.then_some(false),
                    });
                }
                VolumeSpec::Named {
                    key,
                    target,
                    read_only,
                } => {
                    let name = self.volume_name(&at, &key)?;
                    volumes.push(format!("{name}:{target}{}", ro(read_only)));
                }
                VolumeSpec::Anonymous { target, read_only } => {
                    anonymous += 1;
                    let name = format!("{module}-{anonymous}");
                    self.note(
                        service,
                        &at,
                        &format!(
                            "an anonymous volume: made the named volume {name:?} (kept, as Compose keeps it across recreates)"
                        ),
                    );
                    volumes.push(format!("{name}:{target}{}", ro(read_only)));
                }
                VolumeSpec::Tmpfs(t) => tmpfs.push(t),
            }
        }
        Ok(())
    }

    /// A host path of the Compose file: `~` is the importer's home, a
    /// relative path is under the Compose file's directory.
    fn host_path(&self, key: &str, p: &str) -> Result<String, Fail> {
        if is_windows_path(p) {
            return windows_path_refused(key, p);
        }
        let p = if p == "~" || p.starts_with("~/") {
            let Some(home) = self.env.get("HOME") else {
                return fail(key, "~ needs HOME set");
            };
            format!("{home}{}", &p[1..])
        } else if p.starts_with('~') {
            return fail(
                key,
                format!("{p:?}: ~user paths are not read; write the path"),
            );
        } else {
            p.to_string()
        };
        Ok(normal(&self.base_dir.join(p)).display().to_string())
    }

    /// The engine name of a named volume, from the top-level declaration.
    fn volume_name(&mut self, key: &str, name: &str) -> Result<String, Fail> {
        let Some(decl) = self.top.volumes.get(name).cloned() else {
            return fail(
                key,
                format!(
                    "the volume {name:?} is not declared under the top-level volumes (Compose refuses it too)"
                ),
            );
        };
        let decl = match decl {
            J::Null => Map::new(),
            J::Object(m) => m,
            _ => return Err((format!("volumes.{name}"), "must be a mapping".into())),
        };
        let mut engine_name = None;
        let mut external = false;
        for (f, v) in &decl {
            let at = format!("volumes.{name}.{f}");
            match f.as_str() {
                "name" => engine_name = Some(scalar(&at, v)?),
                "external" => match v {
                    J::Object(m) => {
                        external = true;
                        if let Some(n) = m.get("name") {
                            engine_name = Some(scalar(&at, n)?);
                        }
                    }
                    v => external = bool_of(&at, v)?,
                },
                "driver" if matches!(v.as_str(), Some("local")) => {}
                "driver" | "driver_opts" => self.unmapped_once(
                    FILE,
                    &at,
                    "the agent makes volumes with the engine's local driver and no options",
                ),
                "labels" => self.unmapped_once(
                    FILE,
                    &at,
                    "the agent labels the volumes it makes as its own",
                ),
                k if k.starts_with("x-") => {}
                _ => self.unmapped_once(FILE, &at, "not a key of a volume"),
            }
        }
        if let Some(n) = engine_name {
            return Ok(n);
        }
        if external {
            return Ok(name.to_string());
        }
        if self.plain_volume_names {
            self.note_once(
                FILE,
                &format!("volumes.{name}"),
                &format!(
                    "the engine volume is named {name:?} (--volume-names=plain); Compose names it {}_{name}",
                    self.project
                ),
            );
            return Ok(name.to_string());
        }
        // As Compose names it, so that a stack moved over finds its data.
        Ok(format!("{}_{name}", self.project))
    }

    /// The engine networks a service joins, and the aliases it has on them.
    fn networks(&mut self, service: &str, v: &J) -> Result<(Vec<String>, BTreeSet<String>), Fail> {
        let entries: Vec<(String, J)> = match v {
            J::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, n)| Ok((scalar(&format!("networks[{i}]"), n)?, J::Null)))
                .collect::<Result<_, Fail>>()?,
            J::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            _ => return fail("networks", "must be a list or a mapping"),
        };
        let mut out = Vec::new();
        let mut aliases: BTreeSet<String> = BTreeSet::new();
        let mut each: Vec<BTreeSet<String>> = Vec::new();
        for (name, opts) in entries {
            let at = format!("networks.{name}");
            let mut these = BTreeSet::new();
            if let J::Object(o) = &opts {
                for (k, kv) in o {
                    let why = match k.as_str() {
                        "aliases" => {
                            these.extend(strings_or_one(&format!("{at}.aliases"), kv)?);
                            continue;
                        }
                        "ipv4_address" | "ipv6_address" | "link_local_ips" => {
                            "the engine gives the address"
                        }
                        _ => "stead joins networks with no endpoint settings",
                    };
                    self.unmapped(service, &format!("{at}.{k}"), why);
                }
            } else if !opts.is_null() {
                return fail(&at, "must be a mapping or empty");
            }
            out.push(self.network_name(&at, &name)?);
            aliases.extend(these.iter().cloned());
            each.push(these);
        }
        if each.iter().any(|a| *a != aliases) {
            self.note(
                service,
                "networks",
                "its aliases are names on every network it joins, not only on the one that lists them",
            );
        }
        Ok((out, aliases))
    }

    /// The engine name of a network, from its top-level declaration:
    /// `<project>_<network>` as Compose names it (`<project>_default` for
    /// the project's own), unless it is given a name or is external.
    fn network_name(&mut self, at: &str, name: &str) -> Result<String, Fail> {
        let decl = match self.top.networks.get(name).cloned() {
            Some(J::Object(m)) => m,
            Some(J::Null) => Map::new(),
            Some(_) => return Err((format!("networks.{name}"), "must be a mapping".into())),
            None if name == "default" => Map::new(),
            None => {
                return fail(
                    at,
                    format!(
                        "the network {name:?} is not declared under the top-level networks (Compose refuses it too)"
                    ),
                );
            }
        };
        {
            let mut engine_name = format!("{}_{name}", self.project);
            for (f, fv) in &decl {
                let fat = format!("networks.{name}.{f}");
                match f.as_str() {
                    "name" => engine_name = scalar(&fat, fv)?,
                    "external" => {
                        if let J::Object(m) = fv {
                            engine_name = match m.get("name") {
                                Some(n) => scalar(&fat, n)?,
                                None => name.to_string(),
                            };
                        } else if bool_of(&fat, fv)? && !decl.contains_key("name") {
                            engine_name = name.to_string();
                        }
                    }
                    "driver" if matches!(fv.as_str(), Some("bridge")) => {}
                    "driver" | "driver_opts" | "ipam" | "internal" | "attachable"
                    | "enable_ipv6" | "enable_ipv4" => {
                        self.unmapped_once(FILE, &fat, "the agent makes plain bridge networks")
                    }
                    "labels" => self.unmapped_once(
                        FILE,
                        &fat,
                        "the agent labels the networks it makes as its own",
                    ),
                    k if k.starts_with("x-") => {}
                    _ => self.unmapped_once(FILE, &fat, "not a key of a network"),
                }
            }
            Ok(engine_name)
        }
    }

    /// A config: its content is written into the intention (a file the
    /// container sees, whose content is an input of the container).
    fn config(&mut self, service: &str, at: &str, e: &J, out: &mut Out) -> Result<(), Fail> {
        let (source, target) = self.reference(service, at, e)?;
        let target = match target {
            None => format!("/{source}"),
            Some(t) if t.starts_with('/') => t,
            Some(t) => {
                return fail(
                    &format!("{at}.target"),
                    format!("{t:?} must be an absolute path"),
                );
            }
        };
        let decl = match self.top.configs.get(&source).cloned() {
            Some(J::Object(m)) => m,
            _ => {
                return fail(
                    at,
                    format!(
                        "the config {source:?} is not declared under the top-level configs (Compose refuses it too)"
                    ),
                );
            }
        };
        let dat = format!("configs.{source}");
        let mut copied = None;
        let content: Vec<u8> = if let Some(f) = decl.get("file") {
            let path = self.host_path(&format!("{dat}.file"), &scalar(&dat, f)?)?;
            if !self.allow_outside && !Path::new(&path).starts_with(&self.base_dir) {
                return fail(
                    &format!("{dat}.file"),
                    format!(
                        "{path} is outside the Compose file's directory ({}): its content would be copied into the intention; --allow-outside copies it anyway",
                        self.base_dir.display()
                    ),
                );
            }
            let bytes = (self.read)(Path::new(&path))
                .map_err(|e| (format!("{dat}.file"), format!("cannot read {path}: {e}")))?;
            copied = Some((
                Copied::File(PathBuf::from(&path)),
                format!("the content of {path}"),
            ));
            bytes
        } else if let Some(c) = decl.get("content") {
            scalar(&format!("{dat}.content"), c)?.into_bytes()
        } else if let Some(var) = decl.get("environment") {
            let var = scalar(&format!("{dat}.environment"), var)?;
            copied = Some((
                Copied::Variable(var.clone()),
                format!("the value of the variable {var}"),
            ));
            match self.env.get(&var) {
                Some(v) => v.clone().into_bytes(),
                None => {
                    return fail(
                        &format!("{dat}.environment"),
                        format!("the variable {var} is not set"),
                    );
                }
            }
        } else {
            self.unmapped(
                service,
                at,
                &format!(
                    "the config {source:?} is external or has no file, content or environment: nothing to write"
                ),
            );
            return Ok(());
        };
        for f in decl.keys() {
            if !matches!(f.as_str(), "file" | "content" | "environment" | "name")
                && !f.starts_with("x-")
            {
                self.unmapped_once(FILE, &format!("{dat}.{f}"), "not carried");
            }
        }
        match String::from_utf8(content) {
            Ok(content) => {
                if let Some((c, what)) = copied {
                    self.note(
                        service,
                        at,
                        &format!(
                            "{what} is copied into the intention, which is written readable by its owner only (0600)"
                        ),
                    );
                    out.copied.push(c);
                }
                out.files.push(FileOut {
                    path: target,
                    content,
                })
            }
            Err(_) => {
                let Some(J::String(f)) = decl.get("file") else {
                    return fail(&dat, "is not UTF-8 text");
                };
                self.note(
                    service,
                    at,
                    "not UTF-8 text: bind-mounted read-only from its file (its content is still an input) rather than written into the intention",
                );
                out.mounts.push(MountOut {
                    source: self.host_path(&dat, f)?,
                    target,
                    read_only: true,
                    input: None,
                });
            }
        }
        Ok(())
    }

    /// A secret from a file: bind-mounted read-only at /run/secrets/<name>
    /// as Compose does (its content is an input; it is not copied into the
    /// intention).
    fn secret(&mut self, service: &str, at: &str, e: &J, out: &mut Out) -> Result<(), Fail> {
        let (source, target) = self.reference(service, at, e)?;
        let target = match target {
            None => format!("/run/secrets/{source}"),
            Some(t) if t.starts_with('/') => t,
            Some(t) => format!("/run/secrets/{t}"),
        };
        let decl = match self.top.secrets.get(&source).cloned() {
            Some(J::Object(m)) => m,
            _ => {
                return fail(
                    at,
                    format!(
                        "the secret {source:?} is not declared under the top-level secrets (Compose refuses it too)"
                    ),
                );
            }
        };
        let dat = format!("secrets.{source}");
        let Some(file) = decl.get("file") else {
            self.unmapped(
                service,
                at,
                &format!(
                    "the secret {source:?} is not from a file (external or from the environment): stead would have to write it into the intention; put it in a file"
                ),
            );
            return Ok(());
        };
        let source = self.host_path(&format!("{dat}.file"), &scalar(&dat, file)?)?;
        out.mounts.push(MountOut {
            source,
            target,
            read_only: true,
            input: None,
        });
        Ok(())
    }

    /// A config or secret reference: the name, and the target when given
    /// (uid, gid and mode are reported).
    fn reference(
        &mut self,
        service: &str,
        at: &str,
        e: &J,
    ) -> Result<(String, Option<String>), Fail> {
        match e {
            J::String(s) => Ok((s.clone(), None)),
            J::Object(m) => {
                let source = match m.get("source") {
                    Some(s) => scalar(&format!("{at}.source"), s)?,
                    None => return fail(at, "needs a source"),
                };
                let mut target = None;
                for (k, v) in m {
                    match k.as_str() {
                        "source" => {}
                        "target" => target = Some(scalar(&format!("{at}.target"), v)?),
                        "uid" | "gid" | "mode" => self.unmapped(
                            service,
                            &format!("{at}.{k}"),
                            "stead's files are read-only and readable by every user",
                        ),
                        _ => self.unmapped(service, &format!("{at}.{k}"), "not carried"),
                    }
                }
                Ok((source, target))
            }
            _ => fail(at, "must be a name or {source, target}"),
        }
    }

    /// `healthcheck`, its durations written as stead writes them.
    fn healthcheck(&mut self, service: &str, k: &str, v: &J) -> Result<Option<HealthOut>, Fail> {
        let J::Object(m) = v else {
            return fail(k, "must be a mapping");
        };
        let mut h = HealthOut::default();
        for (f, fv) in m {
            let at = format!("{k}.{f}");
            match f.as_str() {
                "test" => {
                    h.test = Some(match fv {
                        J::String(_) => fv.clone(),
                        J::Array(_) => J::from(strings(&at, fv)?),
                        _ => return fail(&at, "must be a string or a list"),
                    })
                }
                "interval" => h.interval = compose_duration(&at, fv)?,
                "timeout" => h.timeout = compose_duration(&at, fv)?,
                "start_period" => h.start_period = compose_duration(&at, fv)?,
                "retries" => h.retries = Some(int_of(&at, fv)?),
                "disable" => {
                    if bool_of(&at, fv)? {
                        h.disable = Some(true);
                    }
                }
                "start_interval" => self.unmapped(
                    service,
                    &at,
                    "stead has no such field (the engine's 5 s applies)",
                ),
                _ => self.unmapped(service, &at, "not a key of healthcheck"),
            }
        }
        if h.disable == Some(true) {
            // Compose ignores the rest of a disabled check.
            return Ok(Some(HealthOut {
                disable: Some(true),
                ..HealthOut::default()
            }));
        }
        if h.test.is_none()
            && h.interval.is_none()
            && h.timeout.is_none()
            && h.retries.is_none()
            && h.start_period.is_none()
        {
            // The image's own check, as it is.
            return Ok(None);
        }
        Ok(Some(h))
    }

    /// `logging`: the driver and its options.
    fn logging(&mut self, service: &str, k: &str, v: &J) -> Result<LoggingOut, Fail> {
        let J::Object(m) = v else {
            return fail(k, "must be a mapping");
        };
        let mut driver = None;
        let mut options = BTreeMap::new();
        for (f, fv) in m {
            let at = format!("{k}.{f}");
            match f.as_str() {
                "driver" => driver = Some(scalar(&at, fv)?),
                "options" => {
                    for (name, value) in pairs(&at, fv, '=')? {
                        if let Some(value) = value {
                            options.insert(name, value);
                        }
                    }
                }
                _ => self.unmapped(service, &at, "not a key of logging"),
            }
        }
        let driver = match driver {
            Some(d) => d,
            None => {
                self.note(
                    service,
                    "logging.driver",
                    "not set: json-file, the engine's default driver, is written (stead's own default is the node's)",
                );
                "json-file".to_string()
            }
        };
        Ok(LoggingOut { driver, options })
    }

    /// `deploy`: the resource limits (memory, cpus, pids); the rest is
    /// reported.
    #[allow(clippy::type_complexity)]
    fn deploy(
        &mut self,
        service: &str,
        v: &J,
    ) -> Result<(Option<J>, Option<J>, Option<i64>), Fail> {
        let J::Object(d) = v else {
            return fail("deploy", "must be a mapping");
        };
        let (mut mem, mut cpus, mut pids) = (None, None, None);
        for (k, dv) in d {
            let at = format!("deploy.{k}");
            match k.as_str() {
                "resources" => {
                    let J::Object(r) = dv else {
                        return fail(&at, "must be a mapping");
                    };
                    for (rk, rv) in r {
                        let rat = format!("{at}.{rk}");
                        if rk != "limits" {
                            self.unmapped(service, &rat, "stead sets limits only");
                            continue;
                        }
                        let J::Object(l) = rv else {
                            return fail(&rat, "must be a mapping");
                        };
                        for (lk, lv) in l {
                            let lat = format!("{rat}.{lk}");
                            match lk.as_str() {
                                "memory" => mem = Some(lv.clone()),
                                "cpus" => cpus = Some(lv.clone()),
                                "pids" => pids = Some(int_of(&lat, lv)?),
                                _ => self.unmapped(service, &lat, "stead has no such limit"),
                            }
                        }
                    }
                }
                "replicas" => self.unmapped(service, &at, "a module is one container"),
                "restart_policy" => self.unmapped(service, &at, "not carried: use `restart`"),
                k if k.starts_with("x-") => {}
                _ => self.unmapped(
                    service,
                    &at,
                    "a swarm setting: one node's agent has no use for it",
                ),
            }
        }
        Ok((mem, cpus, pids))
    }

    /// `depends_on`: the modules it waits for, with Compose's conditions
    /// (a list: each started).
    fn depends_on(&mut self, service: &str, v: &J, out: &mut Out) -> Result<(), Fail> {
        let entries: Vec<(String, J)> = match v {
            J::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, n)| Ok((scalar(&format!("depends_on[{i}]"), n)?, J::Null)))
                .collect::<Result<_, Fail>>()?,
            J::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            _ => return fail("depends_on", "must be a list or a mapping"),
        };
        for (name, opts) in entries {
            let at = format!("depends_on.{name}");
            let module = module_name(&name).map_err(|m| (at.clone(), m))?;
            let mut dep = DependsOut {
                module: module.to_string(),
                condition: "started",
                restart: false,
            };
            match opts {
                J::Null => {}
                J::Object(o) => {
                    for (k, kv) in &o {
                        let kat = format!("{at}.{k}");
                        match k.as_str() {
                            "condition" => {
                                dep.condition = match kv.as_str() {
                                    Some("service_started") => "started",
                                    Some("service_healthy") => "healthy",
                                    Some("service_completed_successfully") => "completed",
                                    _ => {
                                        return fail(
                                            &kat,
                                            "service_started, service_healthy or service_completed_successfully",
                                        );
                                    }
                                }
                            }
                            "restart" => dep.restart = bool_of(&kat, kv)?,
                            "required" if bool_of(&kat, kv)? => {}
                            "required" => self.unmapped(
                                service,
                                &kat,
                                "stead waits for every module a module depends on",
                            ),
                            _ => self.unmapped(service, &kat, "not a key of depends_on"),
                        }
                    }
                }
                _ => return fail(&at, "must be a mapping or empty"),
            }
            out.depends_on.push(dep);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The Compose file's directory in these tests.
    const BASE: &str = "/srv/app";

    /// A host of a few files: `.env` only when `dotenv` is given.
    fn read_with(dotenv: Option<&'static str>) -> impl Fn(&Path) -> std::io::Result<Vec<u8>> {
        move |p: &Path| {
            let found: Option<&[u8]> = match p.to_str().unwrap() {
                "/srv/app/.env" => dotenv.map(str::as_bytes),
                "/srv/app/nginx.conf" => Some(b"server { listen 80; }\n"),
                "/srv/app/logo.bin" => Some(&[0xff, 0xfe, 0x00]),
                "/srv/app/app.env" => Some(b"A=1\n"),
                "/srv/app/quoted.env" => Some(b"A=\"1\"\nB=${A}\n"),
                "/srv/app/refers.env" => Some(b"A=1\nURL=http://${SET}:80\n"),
                "/srv/app/broken.env" => Some(b"A=\"unclosed\n"),
                "/srv/app/db_password.txt" => Some(b"hunter2\n"),
                "/srv/app/html" | "/srv/app/data" | "/home/u/x" | "/etc/ssl" => {
                    return Err(std::io::Error::other("a directory"));
                }
                _ => None,
            };
            found
                .map(<[u8]>::to_vec)
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    fn env() -> BTreeMap<String, String> {
        [
            ("HOME", "/home/u"),
            ("SET", "v"),
            ("PORT", "8080"),
            ("SECRET", "s3"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn run(yaml: &str) -> Result<Imported, ImportError> {
        import(
            yaml,
            Path::new(BASE),
            &env(),
            &read_with(None),
            &Options::default(),
        )
    }

    /// The declarations every service snippet may use.
    const TOP: &str = r#"volumes:
  data: {}
  named: {name: real-name}
  ext: {external: true, name: outside}
  old: {external: {name: legacy}}
networks:
  back: {}
  front: {name: front-net}
configs:
  nginx: {file: ./nginx.conf}
  inline: {content: "a=${SET}\n"}
  fromenv: {environment: SECRET}
  logo: {file: ./logo.bin}
  ext: {external: true}
secrets:
  db_password: {file: ./db_password.txt}
  token: {environment: SECRET}
"#;

    /// One service `s` (image `img:1`) with these lines (indented as
    /// service keys), and the top-level declarations.
    fn service(body: &str) -> Result<Imported, ImportError> {
        let body: String = body.lines().map(|l| format!("    {l}\n")).collect();
        run(&format!("services:\n  s:\n    image: img:1\n{body}{TOP}"))
    }

    /// The one intention's document, as JSON.
    fn doc(i: &Imported) -> J {
        assert_eq!(i.files.len(), 1, "{i:?}");
        toml::from_str(&i.files[0].toml).unwrap()
    }

    fn lines(r: &[Report]) -> Vec<String> {
        r.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_field_maps_to_its_intention_field() {
        let cases: Vec<(&str, &str, J)> = vec![
            ("command: echo hi", "command", json!(["echo", "hi"])),
            (
                "command: sh -c 'echo \"a b\"; exit 1'",
                "command",
                json!(["sh", "-c", "echo \"a b\"; exit 1"]),
            ),
            (
                "command: [sh, -c, 'x y']",
                "command",
                json!(["sh", "-c", "x y"]),
            ),
            ("command: [sleep, 10]", "command", json!(["sleep", "10"])),
            (
                "entrypoint: /bin/sh -c",
                "entrypoint",
                json!(["/bin/sh", "-c"]),
            ),
            ("entrypoint: ''", "entrypoint", json!([])),
            ("entrypoint: [/init]", "entrypoint", json!(["/init"])),
            (
                "environment: [A=1, B=x=y, C=, HOME]",
                "env",
                json!({"A": "1", "B": "x=y", "C": "", "HOME": "/home/u"}),
            ),
            (
                "environment: {A: 1, B: true, C: '', SET: ~, NOPE: ~}",
                "env",
                json!({"A": "1", "B": "true", "C": "", "SET": "v"}),
            ),
            // Elasticsearch's canonical stack, and names with dashes.
            (
                "environment: [discovery.type=single-node, VAR-WITH-DASHES=1]",
                "env",
                json!({"discovery.type": "single-node", "VAR-WITH-DASHES": "1"}),
            ),
            (
                "volumes: ['./prometheus/:/etc/prometheus/']",
                "mounts",
                json!([{"source": "/srv/app/prometheus", "target": "/etc/prometheus", "read_only": false}]),
            ),
            (
                "env_file: ./app.env",
                "env_files",
                json!(["/srv/app/app.env"]),
            ),
            (
                "env_file: [app.env, ../shared/x.env, /etc/y.env]",
                "env_files",
                json!(["/srv/app/app.env", "/srv/shared/x.env", "/etc/y.env"]),
            ),
            (
                "env_file: [{path: ./app.env, required: true}]",
                "env_files",
                json!(["/srv/app/app.env"]),
            ),
            // Read by Compose's rules on the device, as Compose reads them.
            ("env_file: ./app.env", "env_file_format", json!("compose")),
            (
                "env_file: [{path: ./app.env, format: raw}]",
                "env_file_format",
                json!("raw"),
            ),
            ("command: x", "env_file_format", J::Null),
            ("ports: ['8080:80']", "ports", json!(["8080:80/tcp"])),
            (
                "ports: ['127.0.0.1:8080:80/udp', '[::1]:53:53/udp']",
                "ports",
                json!(["127.0.0.1:8080:80/udp", "[::1]:53:53/udp"]),
            ),
            (
                "ports: ['9000-9001:9000-9001']",
                "ports",
                json!(["9000:9000/tcp", "9001:9001/tcp"]),
            ),
            (
                "ports: [{target: 80, published: 8080, host_ip: 127.0.0.1, protocol: udp, mode: host}]",
                "ports",
                json!(["127.0.0.1:8080:80/udp"]),
            ),
            (
                "ports: [{target: 80, published: '8080'}]",
                "ports",
                json!(["8080:80/tcp"]),
            ),
            ("ports: ['${PORT}:80']", "ports", json!(["8080:80/tcp"])),
            (
                "expose: ['80', 90/udp, 8000-8001]\nports: ['8080:80']",
                "ports",
                json!(["8080:80/tcp", "90/udp", "8000/tcp", "8001/tcp"]),
            ),
            ("restart: 'no'", "restart", json!("no")),
            ("restart: no", "restart", json!("no")),
            ("restart: always", "restart", json!("always")),
            ("restart: on-failure", "restart", json!("on-failure")),
            ("restart: on-failure:5", "restart", json!("on-failure")),
            (
                "restart: unless-stopped",
                "restart",
                json!("unless-stopped"),
            ),
            (
                "volumes: ['./html:/usr/share/nginx/html:ro', '../data:/data', '~/x:/x:rw', '/etc/ssl:/ssl:ro,z']",
                "mounts",
                json!([
                    {"source": "/srv/app/html", "target": "/usr/share/nginx/html", "read_only": true},
                    {"source": "/srv/data", "target": "/data", "read_only": false},
                    {"source": "/home/u/x", "target": "/x", "read_only": false},
                    {"source": "/etc/ssl", "target": "/ssl", "read_only": true},
                ]),
            ),
            (
                "volumes: ['.:/src']",
                "mounts",
                json!([{"source": "/srv/app", "target": "/src", "read_only": false}]),
            ),
            (
                "volumes: ['/proc:/host/proc:ro', '/run/docker.sock:/run/docker.sock:ro', '/proc:/p']",
                "mounts",
                json!([
                    {"source": "/proc", "target": "/host/proc", "read_only": true, "input": false},
                    {"source": "/run/docker.sock", "target": "/run/docker.sock", "read_only": true, "input": false},
                    {"source": "/proc", "target": "/p", "read_only": false},
                ]),
            ),
            (
                "volumes: ['/:/host:ro,rslave']",
                "mounts",
                json!([{"source": "/", "target": "/host", "read_only": true, "input": false}]),
            ),
            (
                "volumes: ['data:/var/lib/x', 'named:/n:ro', 'ext:/e', 'old:/o', /anon]",
                "volumes",
                json!([
                    "app_data:/var/lib/x",
                    "real-name:/n:ro",
                    "outside:/e",
                    "legacy:/o",
                    "s-1:/anon"
                ]),
            ),
            (
                "volumes:\n  - {type: bind, source: ./html, target: /h, read_only: true}\n  - {type: volume, source: data, target: /d}\n  - {type: volume, target: /a}",
                "mounts",
                json!([{"source": "/srv/app/html", "target": "/h", "read_only": true}]),
            ),
            (
                "volumes:\n  - {type: volume, source: data, target: /d}\n  - {type: volume, target: /a}",
                "volumes",
                json!(["app_data:/d", "s-1:/a"]),
            ),
            (
                "volumes: [{type: tmpfs, target: /cache, tmpfs: {size: 64m, mode: 1777}}]\ntmpfs: /run",
                "tmpfs",
                json!(["/run", "/cache:mode=1777,size=64m"]),
            ),
            (
                "tmpfs: ['/run:size=16m', /tmp]",
                "tmpfs",
                json!(["/run:size=16m", "/tmp"]),
            ),
            (
                "configs: [nginx, {source: inline, target: /etc/a.conf}, {source: fromenv, target: /s}]",
                "files",
                json!([
                    {"path": "/nginx", "content": "server { listen 80; }\n"},
                    {"path": "/etc/a.conf", "content": "a=v\n"},
                    {"path": "/s", "content": "s3"},
                ]),
            ),
            (
                "configs: [{source: logo, target: /logo.bin}]",
                "mounts",
                json!([{"source": "/srv/app/logo.bin", "target": "/logo.bin", "read_only": true}]),
            ),
            (
                "secrets: [db_password, {source: db_password, target: pw}, {source: db_password, target: /etc/pw}]",
                "mounts",
                json!([
                    {"source": "/srv/app/db_password.txt", "target": "/run/secrets/db_password", "read_only": true},
                    {"source": "/srv/app/db_password.txt", "target": "/run/secrets/pw", "read_only": true},
                    {"source": "/srv/app/db_password.txt", "target": "/etc/pw", "read_only": true},
                ]),
            ),
            ("working_dir: /srv", "working_dir", json!("/srv")),
            ("user: 1000", "user", json!("1000")),
            ("user: '1000:1000'", "user", json!("1000:1000")),
            (
                "labels: [a=1, b, c=x=y]",
                "labels",
                json!({"a": "1", "b": "", "c": "x=y"}),
            ),
            ("labels: {a: 1, b: ~}", "labels", json!({"a": "1", "b": ""})),
            (
                "devices: ['/dev/ttyUSB0', {source: /dev/a, target: /dev/b, permissions: r}]",
                "devices",
                json!(["/dev/ttyUSB0", "/dev/a:/dev/b:r"]),
            ),
            (
                "device_cgroup_rules: ['c 188:* rmw']",
                "device_cgroup_rules",
                json!(["c 188:* rmw"]),
            ),
            ("privileged: true", "privileged", json!(true)),
            ("privileged: 'yes'", "privileged", json!(true)),
            ("cap_add: [NET_ADMIN]", "cap_add", json!(["NET_ADMIN"])),
            ("cap_drop: [ALL]", "cap_drop", json!(["ALL"])),
            ("network_mode: host", "network_mode", json!("host")),
            ("network_mode: none", "network_mode", json!("none")),
            // Named as Compose names them: <project>_<network>, unless
            // named.
            (
                "networks: [back, front]",
                "networks",
                json!(["app_back", "front-net"]),
            ),
            (
                "networks: {back: {aliases: [x]}, front: ~}",
                "networks",
                json!(["app_back", "front-net"]),
            ),
            ("user: '1'", "networks", json!(["app_default"])),
            ("network_mode: host", "networks", J::Null),
            // Found on them by its service name (as its module name), its
            // container_name and its aliases, and by its host name.
            (
                "networks: {back: {aliases: [x, y]}, front: {aliases: [y]}}",
                "aliases",
                json!(["x", "y"]),
            ),
            ("container_name: web-1", "aliases", json!(["web-1"])),
            ("container_name: s", "aliases", J::Null),
            ("hostname: db.local", "hostname", json!("db.local")),
            // What it waits for: Compose's conditions.
            (
                "depends_on: [db, cache_1]",
                "depends_on",
                json!([{"module": "db", "condition": "started"}, {"module": "cache-1", "condition": "started"}]),
            ),
            // `required: true` is what `docker compose config` writes.
            (
                "depends_on: {broker: {condition: service_healthy, restart: true, required: true}}",
                "depends_on",
                json!([{"module": "broker", "condition": "healthy", "restart": true}]),
            ),
            (
                "depends_on: {init: {condition: service_completed_successfully}}",
                "depends_on",
                json!([{"module": "init", "condition": "completed"}]),
            ),
            (
                "extra_hosts: ['db:10.0.0.2', 'gw=fe80::1']",
                "extra_hosts",
                json!(["db:10.0.0.2", "gw=fe80::1"]),
            ),
            (
                "extra_hosts: {db: 10.0.0.2}",
                "extra_hosts",
                json!(["db=10.0.0.2"]),
            ),
            // One name with several addresses: all of them.
            (
                "extra_hosts: ['db=10.0.0.2,10.0.0.3']",
                "extra_hosts",
                json!(["db=10.0.0.2,10.0.0.3"]),
            ),
            (
                "extra_hosts: {db: [10.0.0.2, '::1']}",
                "extra_hosts",
                json!(["db=10.0.0.2,::1"]),
            ),
            (
                "extra_hosts: ['host.docker.internal:host-gateway', 'db:10.0.0.2']",
                "extra_hosts",
                json!(["host.docker.internal:host-gateway", "db:10.0.0.2"]),
            ),
            ("dns: 1.1.1.1", "dns", json!(["1.1.1.1"])),
            ("dns: ${NOPE}", "dns", J::Null),
            ("dns: ['${NOPE}', 9.9.9.9]", "dns", json!(["9.9.9.9"])),
            (
                "dns: [1.1.1.1, 9.9.9.9]",
                "dns",
                json!(["1.1.1.1", "9.9.9.9"]),
            ),
            ("read_only: true", "read_only", json!(true)),
            ("mem_limit: 512m", "mem_limit", json!("512m")),
            ("mem_limit: 536870912", "mem_limit", json!(536870912)),
            (
                "mem_limit: 256m\nmemswap_limit: 1g",
                "memswap_limit",
                json!("1g"),
            ),
            ("shm_size: 128mb", "shm_size", json!("128mb")),
            ("shm_size: 67108864", "shm_size", json!(67108864)),
            ("cpus: 0.5", "cpus", json!(0.5)),
            ("cpus: '1.5'", "cpus", json!("1.5")),
            ("pids_limit: 100", "pids_limit", json!(100)),
            (
                "ulimits: {nofile: {soft: 1024, hard: 2048}, nproc: 65535}",
                "ulimits",
                json!({"nofile": {"soft": 1024, "hard": 2048}, "nproc": 65535}),
            ),
            (
                "sysctls: [net.core.somaxconn=1024]",
                "sysctls",
                json!({"net.core.somaxconn": "1024"}),
            ),
            (
                "sysctls: {net.ipv4.ip_forward: 1}",
                "sysctls",
                json!({"net.ipv4.ip_forward": "1"}),
            ),
            ("init: true", "init", json!(true)),
            ("stop_signal: SIGINT", "stop_signal", json!("SIGINT")),
            (
                "stop_grace_period: 1m30s",
                "stop_grace_period",
                json!("90s"),
            ),
            ("stop_grace_period: 30s", "stop_grace_period", json!("30s")),
            (
                "healthcheck:\n  test: curl -f http://localhost\n  interval: 1m30s\n  timeout: 1.5s\n  retries: 3\n  start_period: 0s",
                "healthcheck",
                json!({"test": "curl -f http://localhost", "interval": "90s", "timeout": "1500ms", "retries": 3}),
            ),
            (
                "healthcheck: {test: [CMD, curl, -f, 'http://x'], interval: 500ms}",
                "healthcheck",
                json!({"test": ["CMD", "curl", "-f", "http://x"], "interval": "500ms"}),
            ),
            (
                "healthcheck: {disable: true, test: [CMD, x]}",
                "healthcheck",
                json!({"disable": true}),
            ),
            (
                "healthcheck: {interval: 5s, retries: 5}",
                "healthcheck",
                json!({"interval": "5s", "retries": 5}),
            ),
            (
                "logging: {driver: json-file, options: {max-size: 10m, max-file: 3}}",
                "logging",
                json!({"driver": "json-file", "options": {"max-size": "10m", "max-file": "3"}}),
            ),
            (
                "deploy: {resources: {limits: {memory: 50M, cpus: '0.50', pids: 20}}}",
                "mem_limit",
                json!("50M"),
            ),
            (
                "deploy: {resources: {limits: {memory: 50M, cpus: '0.50', pids: 20}}}",
                "cpus",
                json!("0.50"),
            ),
            (
                "deploy: {resources: {limits: {memory: 50M, cpus: '0.50', pids: 20}}}",
                "pids_limit",
                json!(20),
            ),
            (
                "mem_limit: 64m\ndeploy: {resources: {limits: {memory: 50M}}}",
                "mem_limit",
                json!("64m"),
            ),
            (
                "environment: ['A=$$HOME ${SET}']",
                "env",
                json!({"A": "$HOME v"}),
            ),
            (
                "environment: ['A=${NOPE:-dflt}', 'B=${NOPE}']",
                "env",
                json!({"A": "dflt", "B": ""}),
            ),
        ];
        for (body, field, want) in cases {
            let i = service(body).unwrap_or_else(|e| panic!("{body}: {e}"));
            let d = doc(&i);
            assert_eq!(d[field], want, "{body}:\n{}", i.files[0].toml);
            assert_eq!(d["name"], "s");
            assert_eq!(d["image"], "img:1");
        }
    }

    #[test]
    fn what_is_not_carried_is_listed_by_service_and_key() {
        let cases: &[(&str, &str)] = &[
            ("build: .", "s: build: stead runs images"),
            (
                "restart: on-failure:3",
                "s: restart: the retry count 3 is dropped",
            ),
            (
                "ports: ['3000']",
                "s: ports[0]: published on a host port the engine picks",
            ),
            (
                "ports: ['127.0.0.1::3000']",
                "s: ports[0]: published on a host port",
            ),
            (
                "ports: [{target: 80}]",
                "s: ports[0]: published on a host port",
            ),
            (
                "ports: [{target: 80, published: 80, name: web}]",
                "s: ports[0].name: not carried",
            ),
            (
                "deploy: {replicas: 2}",
                "s: deploy.replicas: a module is one container",
            ),
            (
                "deploy: {restart_policy: {condition: any}}",
                "s: deploy.restart_policy: not carried",
            ),
            (
                "deploy: {placement: {}}",
                "s: deploy.placement: a swarm setting",
            ),
            (
                "deploy: {resources: {reservations: {memory: 1g}}}",
                "s: deploy.resources.reservations: stead sets limits only",
            ),
            (
                "deploy: {resources: {limits: {devices: []}}}",
                "s: deploy.resources.limits.devices: stead has no such limit",
            ),
            (
                "mem_limit: 64m\ndeploy: {resources: {limits: {memory: 50M}}}",
                "s: deploy.resources.limits.memory: mem_limit is also set",
            ),
            (
                "depends_on: {db: {required: false}}",
                "s: depends_on.db.required: stead waits for every module a module depends on",
            ),
            (
                "extends: {service: base}",
                "s: extends: the service it extends is not merged in",
            ),
            (
                "profiles: [debug]",
                "s: profiles: imported as if its profile were active",
            ),
            ("links: [db]", "s: links: legacy links"),
            ("external_links: [db]", "s: external_links: legacy links"),
            ("pid: host", "s: pid: stead shares no namespace"),
            ("ipc: host", "s: ipc: stead shares no namespace"),
            ("scale: 3", "s: scale: a module is one container"),
            (
                "domainname: example.org",
                "s: domainname: stead has no such field",
            ),
            (
                "security_opt: [no-new-privileges]",
                "s: security_opt: stead has no such field",
            ),
            (
                "stdin_open: true",
                "s: stdin_open: a module runs without a terminal",
            ),
            (
                "bogus: 1",
                "s: bogus: not a service key of the Compose Specification",
            ),
            (
                "networks: {back: {ipv4_address: 10.0.0.9}}",
                "s: networks.back.ipv4_address: the engine gives the address",
            ),
            (
                "networks: {back: {ipv4_address: 172.20.0.5}}",
                "s: networks.back.ipv4_address: the engine gives the address",
            ),
            (
                "volumes: ['/etc/ssl:/ssl:z']",
                "s: volumes[0]: the mode z is not carried",
            ),
            (
                "volumes: [{type: bind, source: ./html, target: /h, bind: {propagation: shared}}]",
                "s: volumes[0].bind.propagation: not carried",
            ),
            (
                "healthcheck: {test: 'true', start_interval: 1s}",
                "s: healthcheck.start_interval: stead has no such field",
            ),
            (
                "configs: [{source: nginx, target: /n, mode: 0440}]",
                "s: configs[0].mode: stead's files are read-only",
            ),
            (
                "configs: [ext]",
                "s: configs[0]: the config \"ext\" is external",
            ),
            (
                "secrets: [token]",
                "s: secrets[0]: the secret \"token\" is not from a file",
            ),
            (
                "env_file: [{path: app.env, required: false}]",
                "s: env_file[0].required: stead holds a module whose env file is missing",
            ),
            (
                "env_file: broken.env",
                "s: env_file[0]: /srv/app/broken.env: line 1: an unterminated quoted value",
            ),
            (
                "env_file: [quoted.env, refers.env]",
                "s: env_file[1]: /srv/app/refers.env: URL refers to a variable that Compose takes from the shell or .env",
            ),
            (
                "env_file: [quoted.env, {path: refers.env, format: raw}]",
                "s: env_file[1]: stead reads a module's env files in one format: this one is read as the first is (compose)",
            ),
            (
                "network_mode: host\nports: ['80:80']",
                "s: ports: a container with network_mode host publishes and exposes no ports",
            ),
            (
                "volumes: ['/:/host']",
                "s: volumes[0]: stead mounts the host's root only read-only",
            ),
            (
                "network_mode: none\nexpose: ['80']",
                "s: expose: a container with network_mode none publishes and exposes no ports",
            ),
        ];
        for (body, want) in cases {
            let i = service(body).unwrap_or_else(|e| panic!("{body}: {e}"));
            let got = lines(&i.unmapped);
            assert!(got.iter().any(|l| l.starts_with(want)), "{body}: {got:#?}");
        }
        // File-level: top-level keys and declarations.
        for (yaml, want) in [
            (
                "include: [other.yml]\nservices: {s: {image: x}}",
                "(file): include: the included files are not read",
            ),
            (
                "services: {s: {image: x}}\nsecretz: {}",
                "(file): secretz: not a top-level key",
            ),
            (
                "services: {s: {extends: {service: base}}, base: {image: x}}",
                "s: extends: the service it extends is not merged in, and this one names no image of its own",
            ),
            (
                "services: {s: {image: x, pre_start: [{image: y}]}}",
                "s: pre_start: an init container run to completion first",
            ),
            (
                "services: {s: {image: x, volumes: ['dv:/d']}}\nvolumes: {dv: {driver: nfs}}",
                "(file): volumes.dv.driver: the agent makes volumes with the engine's local driver",
            ),
            (
                "services: {s: {image: x, networks: [n]}}\nnetworks: {n: {ipam: {}}}",
                "(file): networks.n.ipam: the agent makes plain bridge networks",
            ),
        ] {
            let i = run(yaml).unwrap();
            let got = lines(&i.unmapped);
            assert!(got.iter().any(|l| l.starts_with(want)), "{yaml}: {got:#?}");
        }
        // A service built from source is not imported; the others are.
        let i = run("services: {a: {build: .}, b: {image: x}}").unwrap();
        assert_eq!(i.files.len(), 1);
        assert_eq!(i.files[0].service, "b");
        // Nothing unmapped when everything maps; `x-` keys and `version`
        // are Compose's own to ignore.
        let i = run("version: '3.8'\nx-common: &c {restart: always}\nservices:\n  s:\n    <<: *c\n    image: x\n    x-note: hi\n").unwrap();
        assert!(i.unmapped.is_empty(), "{:?}", i.unmapped);
        assert_eq!(doc(&i)["restart"], "always");
    }

    #[test]
    fn what_is_carried_differently_is_noted() {
        let cases: &[(&str, &str)] = &[
            (
                "environment: [HOME]",
                "s: environment.HOME: no value: taken from the importer's environment",
            ),
            (
                "environment: [NOPE]",
                "s: environment.NOPE: no value, and not set",
            ),
            (
                "volumes: [/anon]",
                "s: volumes[0]: an anonymous volume: made the named volume \"s-1\"",
            ),
            (
                "container_name: web",
                "s: container_name: the container is named stead-s; web is one of its names on its networks",
            ),
            (
                "network_mode: host\ncontainer_name: web",
                "s: container_name: the container is named stead-s",
            ),
            (
                "networks: {back: {aliases: [x]}, front: ~}",
                "s: networks: its aliases are names on every network it joins",
            ),
            (
                "volumes: ['./nope:/n:ro']",
                "s: volumes[0]: /srv/app/nope does not exist now: a read-only mount is an input",
            ),
            (
                "volumes: ['./html:/h:cached']",
                "s: volumes[0]: cached: a macOS option",
            ),
            (
                "volumes: ['/sys:/sys:ro']",
                "s: volumes[0]: /sys is the host's live state (the system's own, or a socket): carried with input = false",
            ),
            (
                "volumes: ['/var/run/docker.sock:/var/run/docker.sock:ro']",
                "s: volumes[0]: /var/run/docker.sock is the host's live state",
            ),
            (
                "command: echo ${NOPE}",
                "s: command: the variable NOPE is not set",
            ),
            (
                "configs: [{source: logo, target: /l}]",
                "s: configs[0]: not UTF-8 text",
            ),
            (
                "env_file: missing.env",
                "s: env_file[0]: /srv/app/missing.env cannot be read now",
            ),
            (
                "logging: {options: {max-size: 1m}}",
                "s: logging.driver: not set: json-file",
            ),
        ];
        for (body, want) in cases {
            let i = service(body).unwrap_or_else(|e| panic!("{body}: {e}"));
            let got = lines(&i.notes);
            assert!(got.iter().any(|l| l.starts_with(want)), "{body}: {got:#?}");
            // A note is no loss: none of these is listed as not carried,
            // but for the ones that are both.
        }
        // Services without `networks` are on the project's network, where
        // each finds the others by service name: nothing to say.
        let i = run("services: {a: {image: x}, b: {image: x}}").unwrap();
        assert_eq!(lines(&i.notes), Vec::<String>::new());
        let i = run("services: {my_app: {image: x, networks: [n]}}\nnetworks: {n: {}}").unwrap();
        assert_eq!(doc(&i)["aliases"], json!(["my_app"]));
        // A dependency on a service not imported is waited for, said so.
        let i = run("services: {a: {image: x, depends_on: [b]}, b: {build: .}}").unwrap();
        assert!(
            lines(&i.notes)
                .iter()
                .any(|l| l == "a: depends_on.b: module b is not imported: this module waits until one is stated"),
            "{:?}",
            lines(&i.notes)
        );
        // Compose's `default` network made explicit is joined by every
        // service without networks.
        let i =
            run("services: {a: {image: x}}\nnetworks: {default: {external: true, name: proxy}}")
                .unwrap();
        assert_eq!(doc(&i)["networks"], json!(["proxy"]));
    }

    #[test]
    fn a_file_that_cannot_be_imported_is_refused_naming_the_service_and_key() {
        let svc = |body: &str| {
            let body: String = body.lines().map(|l| format!("    {l}\n")).collect();
            format!("services:\n  s:\n    image: img:1\n{body}{TOP}")
        };
        let cases: Vec<(String, &str, &str, &str)> = vec![
            ("a: [1\n".into(), FILE, "(yaml)", "line 2"),
            ("- a\n".into(), FILE, "(yaml)", "a mapping with `services:`"),
            (
                "web:\n  image: x\n".into(),
                FILE,
                "services",
                "version 1 file format",
            ),
            (
                "services: [a]\n".into(),
                FILE,
                "services",
                "must be a mapping",
            ),
            (
                "services: {my.app: {image: x}}\n".into(),
                "my.app",
                "(name)",
                "cannot be made a module name",
            ),
            (
                "services: {a_b: {image: x}, a-b: {image: x}}\n".into(),
                "a_b",
                "(name)",
                "as service a-b does",
            ),
            (
                "services: {s: {command: x}}\n".into(),
                "s",
                "image",
                "needs an image",
            ),
            (
                "services: {s: {image: [x]}}\n".into(),
                "s",
                "image",
                "must be a string",
            ),
            (
                svc("network_mode: service:db"),
                "s",
                "network_mode",
                "another's network namespace",
            ),
            (
                svc("network_mode: container:abc"),
                "s",
                "network_mode",
                "another's network namespace",
            ),
            (
                svc("network_mode: mynet"),
                "s",
                "network_mode",
                "with `networks`",
            ),
            (
                svc("network_mode: host\nnetworks: [back]"),
                "s",
                "networks",
                "cannot be combined",
            ),
            (svc("ports: ['80-81:90']"), "s", "ports[0]", "ranges differ"),
            (svc("ports: ['x:80']"), "s", "ports[0]", "not a port number"),
            (
                svc("ports: ['1.2.3:80:80']"),
                "s",
                "ports[0]",
                "not an IP address",
            ),
            (
                svc("ports: ['80/icmp']"),
                "s",
                "ports[0]",
                "tcp, udp or sctp",
            ),
            (
                svc("ports: ['::1:80:80']"),
                "s",
                "ports[0]",
                "IPv6 address goes in brackets",
            ),
            (
                svc("ports: ['8080:80', '8080:81']"),
                "s",
                "ports[1]",
                "already published",
            ),
            (
                svc("volumes: ['nodecl:/x']"),
                "s",
                "volumes[0]",
                "not declared",
            ),
            (
                svc("volumes: ['a:b:c:d']"),
                "s",
                "volumes[0]",
                "not SOURCE:TARGET",
            ),
            (
                svc("volumes: ['./x:/x:rx']"),
                "s",
                "volumes[0]",
                "not a volume mode",
            ),
            (
                svc("volumes: ['~bob/x:/x']"),
                "s",
                "volumes[0].source",
                "~user",
            ),
            (
                svc("volumes: [{type: npipe, source: x, target: /x}]"),
                "s",
                "volumes[0].type",
                "bind, volume and tmpfs only",
            ),
            (
                svc("volumes: ['data:relative']"),
                "s",
                "volumes[0]",
                "absolute",
            ),
            (
                svc("volumes: ['/data:ro']"),
                "s",
                "volumes[0]",
                "the target \"ro\" must be an absolute path",
            ),
            (
                svc("networks: [nodecl]"),
                "s",
                "networks.nodecl",
                "not declared",
            ),
            (svc("configs: [nodecl]"), "s", "configs[0]", "not declared"),
            (
                svc("configs: [{source: nginx, target: rel}]"),
                "s",
                "configs[0].target",
                "absolute",
            ),
            (svc("secrets: [nodecl]"), "s", "secrets[0]", "not declared"),
            (
                svc("command: echo ${NEED:?set NEED}"),
                "s",
                "command",
                "required variable NEED is missing a value: set NEED",
            ),
            (svc("command: echo $ x"), "s", "command", "write $$"),
            (
                svc("command: echo 'open"),
                "s",
                "command",
                "no closing quotation",
            ),
            (svc("restart: sometimes"), "s", "restart", "not no, always"),
            (svc("mem_limit: 1k"), "s", "mem_limit", "at least 6 MiB"),
            (
                svc("environment: ['my var=1']"),
                "s",
                "env.my var",
                "invalid environment variable name",
            ),
            (
                svc("stop_grace_period: 1500ms"),
                "s",
                "stop_grace_period",
                "whole seconds",
            ),
            (
                svc("stop_grace_period: 10m"),
                "s",
                "stop_grace_period",
                "at most 5m",
            ),
            (
                svc("healthcheck: {test: 'true', interval: 1us}"),
                "s",
                "healthcheck.interval",
                "whole number of milliseconds",
            ),
            (
                svc("healthcheck: {test: 'true', interval: soon}"),
                "s",
                "healthcheck.interval",
                "not a duration",
            ),
            (
                svc("labels: {stead.module: x}"),
                "s",
                "labels.stead.module",
                "the agent's own",
            ),
            (svc("cap_add: NET_ADMIN"), "s", "cap_add", "must be a list"),
            (svc("privileged: maybe"), "s", "privileged", "true or false"),
            (svc("pids_limit: lots"), "s", "pids_limit", "whole number"),
            (
                svc("ulimits: {nofile: {soft: 1}}"),
                "s",
                "ulimits.nofile.hard",
                "is missing",
            ),
            (
                "services: {s: {image: x, configs: [c]}}\nconfigs: {c: {file: ./nope.conf}}\n"
                    .into(),
                "s",
                "configs.c.file",
                "cannot read /srv/app/nope.conf",
            ),
            (
                "services: {s: {image: x}}\nvolumes: {d: {name: '${NEED?}'}}\n".into(),
                FILE,
                "volumes.d.name",
                "required variable NEED",
            ),
            // Windows paths, kept as written.
            (
                svc("volumes: ['C:\\data:/data']"),
                "s",
                "volumes[0]",
                "\"C:\\\\data:/data\" is a Windows path",
            ),
            (
                svc("volumes: [{type: bind, source: 'D:/x', target: /x}]"),
                "s",
                "volumes[0].source",
                "\"D:/x\" is a Windows path",
            ),
            (
                svc("env_file: ['\\\\server\\share\\a.env']"),
                "s",
                "env_file[0]",
                "is a Windows path: stead runs on Linux",
            ),
            // Two files at one path, once the variables are read.
            (
                svc("volumes: ['./a.conf:${HOME}/x.conf', './b.conf:/home/u/x.conf/']"),
                "s",
                "mounts[1].target",
                "path /home/u/x.conf is already used by mounts[0].target",
            ),
        ];
        for (yaml, service, key, needle) in cases {
            let e = run(&yaml).unwrap_err();
            assert_eq!(
                (e.service.as_str(), e.key.as_str()),
                (service, key),
                "{yaml}: {e}"
            );
            assert!(e.why.contains(needle), "{yaml}: {e}");
        }
    }

    #[test]
    fn bombs_of_nesting_and_of_expansion_are_refused_by_name() {
        let deep = format!(
            "services: {{s: {{image: '{}x{}'}}}}",
            "${A:-".repeat(50_000),
            "}".repeat(50_000)
        );
        let e = run(&deep).unwrap_err();
        assert_eq!((e.service.as_str(), e.key.as_str()), ("s", "image"), "{e}");
        assert!(e.why.contains("nested deeper than 32 levels"), "{e}");
        // One variable of 1 MiB used 20 times: within each string's
        // bound, over the file's.
        let mut env = env();
        env.insert("BIG".into(), "b".repeat(1 << 20));
        let uses: String = (0..20).map(|i| format!("'E{i}=$BIG', ")).collect();
        let yaml = format!("services: {{s: {{image: x, environment: [{uses}]}}}}");
        let e = import(
            &yaml,
            Path::new(BASE),
            &env,
            &read_with(None),
            &Options::default(),
        )
        .unwrap_err();
        assert!(
            e.why
                .contains("the variables of the file expand to more than 16777216 bytes in all"),
            "{e}"
        );
    }

    #[test]
    fn copied_content_is_noted_and_a_file_outside_the_tree_is_refused() {
        let top = "configs: {n: {file: ./nginx.conf}, e: {environment: SECRET}, i: {content: x}}";
        let i = run(&format!(
            "services: {{s: {{image: x, configs: [n, e, i]}}, t: {{image: x, configs: [i]}}}}\n{top}"
        ))
        .unwrap();
        let copied: Vec<(&str, &[Copied])> = i
            .files
            .iter()
            .map(|f| (f.service.as_str(), f.copied.as_slice()))
            .collect();
        assert_eq!(
            copied,
            [
                (
                    "s",
                    &[
                        Copied::File("/srv/app/nginx.conf".into()),
                        Copied::Variable("SECRET".into())
                    ][..]
                ),
                ("t", &[][..]),
            ]
        );
        let got = lines(&i.notes);
        for want in [
            "s: configs[0]: the content of /srv/app/nginx.conf is copied into the intention, which is written readable by its owner only (0600)",
            "s: configs[1]: the value of the variable SECRET is copied into the intention, which is written readable by its owner only (0600)",
        ] {
            assert!(got.iter().any(|l| l == want), "{want}: {got:#?}");
        }
        // (source, refused without --allow-outside)
        let cases = [
            ("./nginx.conf", false),
            ("/srv/app/nginx.conf", false),
            ("/etc/shadow", true),
            ("../other/key", true),
            ("./sub/../../app-other/key", true),
            ("~/key", true),
        ];
        for (source, refused) in cases {
            let yaml = format!(
                "services: {{s: {{image: x, configs: [c]}}}}\nconfigs: {{c: {{file: '{source}'}}}}"
            );
            let got = run(&yaml);
            if refused {
                let e = got.unwrap_err();
                assert_eq!(
                    (e.service.as_str(), e.key.as_str()),
                    ("s", "configs.c.file")
                );
                assert!(
                    e.why
                        .contains("outside the Compose file's directory (/srv/app)"),
                    "{e}"
                );
                assert!(e.why.contains("--allow-outside"), "{e}");
                // Allowed, it is read (and here not found).
                let e = import(
                    &yaml,
                    Path::new(BASE),
                    &env(),
                    &read_with(None),
                    &Options {
                        allow_outside: true,
                        ..Options::default()
                    },
                )
                .unwrap_err();
                assert!(e.why.contains("cannot read"), "{source}: {e}");
            } else {
                assert!(got.is_ok(), "{source}: {got:?}");
            }
        }
    }

    #[test]
    fn the_dotenv_file_next_to_the_compose_file_is_read_and_the_environment_wins() {
        let yaml = "services:\n  s:\n    image: img:${TAG}\n    environment: ['A=${FROM_DOTENV}', 'B=${SET}']\n";
        let with = |dotenv: &'static str| {
            doc(&import(
                yaml,
                Path::new(BASE),
                &env(),
                &read_with(Some(dotenv)),
                &Options::default(),
            )
            .unwrap())
        };
        let d = with("TAG=1.2\nFROM_DOTENV=d\nSET=from-dotenv\n");
        assert_eq!(d["image"], "img:1.2");
        assert_eq!(d["env"], json!({"A": "d", "B": "v"}));
        // A key given twice keeps its last value, as Compose keeps it.
        let d = with("TAG=1.0\nFROM_DOTENV=first\nTAG=1.2\nFROM_DOTENV=last\n");
        assert_eq!(d["image"], "img:1.2");
        assert_eq!(d["env"]["A"], "last");
        // Read by Compose's rules: quotes, comments, `export`, and the one
        // interpolator, from the environment and the keys before.
        let d = with("FROM_DOTENV=\"quoted ${TAG:-none} ${SET:+alt}\" # c\nexport TAG=2 # two\n");
        assert_eq!(d["image"], "img:2");
        assert_eq!(d["env"]["A"], "quoted none alt");
        let e = import(
            yaml,
            Path::new(BASE),
            &env(),
            &read_with(Some("A B=x\n")),
            &Options::default(),
        )
        .unwrap_err();
        assert_eq!((e.service.as_str(), e.key.as_str()), (FILE, ".env"));
    }

    /// Every row of the runtime field table is carried from the Compose
    /// key of its name: one of the row's examples, written as a Compose
    /// value (the JSON form is YAML), lands on the intention set. A field
    /// added to the table without its importer line fails here, named.
    #[test]
    fn every_runtime_field_of_the_table_is_imported() {
        for (name, examples) in crate::model::runtime::EXAMPLES {
            let carried = examples.iter().any(|e| {
                let v: toml::Table = toml::from_str(&format!("v = {e}")).unwrap();
                let beside = if name == "mem_limit" {
                    ""
                } else {
                    "mem_limit: 64m\n"
                };
                let value = serde_json::to_string(&v["v"]).unwrap();
                // Compose says a network's aliases under the network.
                let body = match name {
                    "aliases" => format!("networks: {{default: {{aliases: {value}}}}}"),
                    "update_lock" => format!("{beside}x-stead-update-lock: {value}"),
                    _ => format!("{beside}{name}: {value}"),
                };
                let Ok(i) = service(&body) else { return false };
                let it = Intention::parse(&i.files[0].toml, DocFormat::Toml, "s.toml").unwrap();
                let input = crate::model::names::InputName::try_from(name).unwrap();
                it.runtime.digests().contains_key(&input)
            });
            assert!(carried, "{name}: no example of its row is imported");
        }
    }

    #[test]
    fn every_intention_written_parses_back_with_its_runtime_fields() {
        let i = service(
            "command: sleep 1\nports: ['127.0.0.1:8080:80']\nmem_limit: 64m\ncpus: 0.5\npids_limit: 50\nulimits: {nofile: 1024}\nsysctls: [net.ipv4.ip_forward=1]\ncap_add: [NET_ADMIN]\ninit: true\nstop_signal: INT\nstop_grace_period: 3s\nhealthcheck: {test: 'true', interval: 1s, retries: 2}\nlogging: {driver: json-file, options: {max-size: 1m}}\nvolumes: ['data:/data', './html:/html:ro']\nconfigs: [nginx]\nuser: '1000'\nworking_dir: /tmp\nread_only: true\ntmpfs: /run\nextra_hosts: ['db:10.0.0.2']\ndns: 10.0.0.53\ndevices: [/dev/zero]\nlabels: {a: b}",
        )
        .unwrap();
        let f = &i.files[0];
        assert_eq!(
            (f.service.as_str(), f.module.as_str(), f.file_name.as_str()),
            ("s", "s", "s.toml")
        );
        let it = Intention::parse(&f.toml, DocFormat::Toml, "s.toml").unwrap();
        let r = &it.runtime;
        assert_eq!(it.command, Some(vec!["sleep".to_string(), "1".to_string()]));
        assert_eq!(r.mem_limit, Some(64 << 20));
        assert_eq!(r.nano_cpus, Some(500_000_000));
        assert_eq!(r.pids_limit, Some(50));
        assert_eq!(r.stop_signal.as_deref(), Some("SIGINT"));
        assert_eq!(r.stop_grace_period, Some(std::time::Duration::from_secs(3)));
        assert_eq!(r.healthcheck.as_ref().unwrap().test, ["CMD-SHELL", "true"]);
        assert_eq!(r.volumes[0].name, "app_data");
        assert_eq!(
            it.files[0].content,
            crate::model::sealed::Text::Plain("server { listen 80; }\n".into())
        );
        assert_eq!(it.mounts[0].source.as_str(), "/srv/app/html");
        assert!(
            f.toml.starts_with(
                "# Imported by `stead-plane import` from the Compose service \"s\".\n"
            )
        );
        // Service names become module names.
        let i = run("services: {Web_App: {image: x}}").unwrap();
        assert_eq!(i.files[0].module.as_str(), "web-app");
        assert_eq!(i.files[0].file_name, "web-app.toml");
        assert_eq!(doc(&i)["name"], "web-app");
    }
}
