//! What a module needs from its container beyond its image, command, env,
//! ports and files: the entrypoint, the user, devices, capabilities, the
//! network mode, limits, the health check, logging and the rest, with
//! Compose's names and meanings ([`Runtime`]). Each field is checked with an
//! error naming it, normalised so that every spelling of one setting (and
//! the engine's own default, for unset) is one value, and is an input of
//! the spec digest of its own ([`Runtime::digests`]): only a field that is
//! set is an input, so a container made before the field existed keeps its
//! digest.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;

use crate::model::duration::parse_duration;
use crate::model::names::{AbsPath, Digest, InputName, ModuleName};

/// The inputs a runtime field may be: each is the field's name.
pub const FIELDS: [&str; 27] = [
    "entrypoint",
    "working_dir",
    "user",
    "labels",
    "devices",
    "device_cgroup_rules",
    "privileged",
    "cap_add",
    "cap_drop",
    "network_mode",
    "extra_hosts",
    "dns",
    "tmpfs",
    "read_only",
    "mem_limit",
    "memswap_limit",
    "cpus",
    "pids_limit",
    "ulimits",
    "sysctls",
    "init",
    "stop_signal",
    "stop_grace_period",
    "healthcheck",
    "logging",
    "volumes",
    "networks",
];

/// The grace period the engine gives a container to stop when none is set.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);
/// The longest grace period a module may ask for.
pub const MAX_STOP_GRACE: Duration = Duration::from_secs(300);

/// A host device handed to the container.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Device {
    /// The device on the host.
    pub host: AbsPath,
    /// Where the container sees it.
    pub container: AbsPath,
    /// Its cgroup permissions, some of `rwm` in that order.
    pub permissions: String,
}

/// How the container is networked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// The engine's default bridge.
    #[default]
    Bridge,
    /// The host's network stack.
    Host,
    /// A loopback interface only.
    None,
    /// Another module's container's network stack (a sidecar's): made
    /// once that container runs, and made again whenever it is replaced.
    Container(ModuleName),
}

impl NetworkMode {
    /// As an intention writes it: `bridge`, `host`, `none`,
    /// `container:<module>`.
    pub fn spelled(&self) -> String {
        match self {
            NetworkMode::Bridge => "bridge".into(),
            NetworkMode::Host => "host".into(),
            NetworkMode::None => "none".into(),
            NetworkMode::Container(m) => format!("container:{m}"),
        }
    }
}

/// A named volume the engine keeps: made (and labelled as this node's) by
/// the agent when missing, never removed with a container. Its content is
/// state, not an input: only its name, where it is mounted and how.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Volume {
    /// Its name on the engine.
    pub name: String,
    /// Where the container sees it.
    pub target: AbsPath,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A resource limit: soft and hard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Ulimit {
    /// The soft limit.
    pub soft: i64,
    /// The hard limit.
    pub hard: i64,
}

/// A health check, or the image's disabled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Healthcheck {
    /// `["CMD", …]`, `["CMD-SHELL", "…"]`, `["NONE"]` (disabled), or
    /// empty: the image's own test, with these timings.
    pub test: Vec<String>,
    /// Between probes (unset: the engine's 30 s).
    pub interval: Option<Duration>,
    /// How long a probe may take (unset: 30 s).
    pub timeout: Option<Duration>,
    /// Failures in a row that make it unhealthy (unset: 3).
    pub retries: Option<u32>,
    /// Failures during this time after a start do not count (unset: 0).
    pub start_period: Option<Duration>,
}

/// Where the container's output goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Logging {
    /// The engine's log driver (`local`, `json-file`, `journald`, …).
    pub driver: String,
    /// Its options.
    pub options: BTreeMap<String, String>,
}

/// The node's logging for modules without their own (`[logging]` in
/// stead.toml): not an input, so changing it recreates nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeLogging {
    /// Rotating files: in the driver named (`local` or `json-file`), else
    /// the engine's own for them (the engine layer picks it).
    Rotate {
        /// The driver named in stead.toml, if one was.
        driver: Option<String>,
        /// The size at which a file is rotated (`10m`).
        max_size: String,
        /// How many files are kept, if stead.toml says (the engine layer
        /// has the default, where its engine keeps more than one).
        max_file: Option<u32>,
    },
    /// Another driver the operator named (no options).
    Driver(Logging),
}

/// In `extra_hosts`, the host's address as the container reaches it (the
/// engine's gateway), as Docker and Compose spell it.
pub const HOST_GATEWAY: &str = "host-gateway";

/// Everything else the container is created with, checked and normalised.
/// `Default` is every field unset: the engine's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Runtime {
    /// Replaces the image's entrypoint (`Some([])` clears it).
    pub entrypoint: Option<Vec<String>>,
    /// The working directory.
    pub working_dir: Option<AbsPath>,
    /// `user`, `uid`, `user:group` or `uid:gid`.
    pub user: Option<String>,
    /// The user's own labels (`stead.*` is reserved).
    pub labels: BTreeMap<String, String>,
    /// Host devices, by where the container sees them.
    pub devices: Vec<Device>,
    /// Device cgroup rules (`c 188:* rwm`), sorted.
    pub device_cgroup_rules: Vec<String>,
    /// Every capability and device.
    pub privileged: bool,
    /// Capabilities added, without `CAP_`, upper case.
    pub cap_add: BTreeSet<String>,
    /// Capabilities dropped.
    pub cap_drop: BTreeSet<String>,
    /// The network mode.
    pub network_mode: NetworkMode,
    /// Extra `/etc/hosts` entries: host name → an IP address (as the
    /// address prints: one spelling each) or [`HOST_GATEWAY`].
    pub extra_hosts: BTreeMap<String, String>,
    /// DNS servers, in order.
    pub dns: Vec<IpAddr>,
    /// tmpfs mounts: where → options (empty: none).
    pub tmpfs: BTreeMap<AbsPath, String>,
    /// A read-only root filesystem.
    pub read_only: bool,
    /// Memory limit, bytes.
    pub mem_limit: Option<u64>,
    /// Memory plus swap limit, bytes (`-1`: unlimited swap).
    pub memswap_limit: Option<i64>,
    /// CPUs, in billionths.
    pub nano_cpus: Option<u64>,
    /// The most processes.
    pub pids_limit: Option<i64>,
    /// Resource limits by name.
    pub ulimits: BTreeMap<String, Ulimit>,
    /// Namespaced kernel parameters.
    pub sysctls: BTreeMap<String, String>,
    /// An init process as PID 1 that reaps zombies and forwards signals.
    pub init: bool,
    /// The signal that stops it (`SIGTERM` unset).
    pub stop_signal: Option<String>,
    /// How long a stop waits before killing (10 s unset).
    pub stop_grace_period: Option<Duration>,
    /// The health check (unset: the image's).
    pub healthcheck: Option<Healthcheck>,
    /// Where its output goes (unset: the agent's default, not an input).
    pub logging: Option<Logging>,
    /// Named volumes, by where they are mounted.
    pub volumes: Vec<Volume>,
    /// User-defined networks it joins (made and labelled by the agent,
    /// removed once no container of this node uses them); in each, the
    /// module's name resolves to it.
    pub networks: BTreeSet<String>,
}

/// A field's check failed: the field (with its index or key) and why.
pub type FieldError = (String, String);

/// A number of bytes: `536870912`, `512m`, `1g`, `512MiB`, …
#[derive(Clone, Debug)]
pub enum Bytes {
    /// A plain number.
    Number(i64),
    /// With a unit.
    Text(String),
}

/// One resource limit: both the same, or soft and hard.
#[derive(Clone, Debug)]
enum UlimitDoc {
    Single(i64),
    Pair { soft: i64, hard: i64 },
}

/// A list of `KEY=VALUE` (or `host:ip`) strings, or a table.
#[derive(Clone, Debug)]
enum ListOrMap {
    List(Vec<String>),
    Map(BTreeMap<String, serde_json::Value>),
}

/// A command as a string (run by a shell) or a list.
#[derive(Clone, Debug)]
enum StringOrList {
    String(String),
    List(Vec<String>),
}

/// A health check as written.
struct HealthcheckDoc {
    test: Option<StringOrList>,
    interval: Option<String>,
    timeout: Option<String>,
    retries: Option<u32>,
    start_period: Option<String>,
    disable: bool,
}

/// The runtime fields as an intention document holds them: each read as a
/// JSON value (TOML's too), and taken apart by [`RuntimeDoc::check`], so
/// that no field adds a deserializer of its own to the binary.
#[derive(Clone, Debug, Default)]
pub struct RuntimeDoc {
    pub(crate) entrypoint: Option<J>,
    pub(crate) working_dir: Option<J>,
    pub(crate) user: Option<J>,
    pub(crate) labels: Option<J>,
    pub(crate) devices: Option<J>,
    pub(crate) device_cgroup_rules: Option<J>,
    pub(crate) privileged: Option<J>,
    pub(crate) cap_add: Option<J>,
    pub(crate) cap_drop: Option<J>,
    pub(crate) network_mode: Option<J>,
    pub(crate) extra_hosts: Option<J>,
    pub(crate) dns: Option<J>,
    pub(crate) tmpfs: Option<J>,
    pub(crate) read_only: Option<J>,
    pub(crate) mem_limit: Option<J>,
    pub(crate) memswap_limit: Option<J>,
    pub(crate) cpus: Option<J>,
    pub(crate) pids_limit: Option<J>,
    pub(crate) ulimits: Option<J>,
    pub(crate) sysctls: Option<J>,
    pub(crate) init: Option<J>,
    pub(crate) stop_signal: Option<J>,
    pub(crate) stop_grace_period: Option<J>,
    pub(crate) healthcheck: Option<J>,
    pub(crate) logging: Option<J>,
    pub(crate) volumes: Option<J>,
    pub(crate) networks: Option<J>,
}

type J = serde_json::Value;

fn wrong(field: &str, what: &str) -> FieldError {
    (field.to_string(), format!("must be {what}"))
}

fn string(field: &str, v: Option<J>) -> Result<Option<String>, FieldError> {
    match v {
        None | Some(J::Null) => Ok(None),
        Some(J::String(s)) => Ok(Some(s)),
        Some(_) => Err(wrong(field, "a string")),
    }
}

fn boolean(field: &str, v: Option<J>) -> Result<bool, FieldError> {
    match v {
        None | Some(J::Null) => Ok(false),
        Some(J::Bool(b)) => Ok(b),
        Some(_) => Err(wrong(field, "true or false")),
    }
}

fn integer(field: &str, v: Option<J>) -> Result<Option<i64>, FieldError> {
    match v {
        None | Some(J::Null) => Ok(None),
        Some(J::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| wrong(field, "a whole number")),
        Some(_) => Err(wrong(field, "a whole number")),
    }
}

fn strings(field: &str, v: Option<J>) -> Result<Vec<String>, FieldError> {
    match v {
        None | Some(J::Null) => Ok(vec![]),
        Some(J::Array(a)) => a
            .into_iter()
            .enumerate()
            .map(|(i, x)| match x {
                J::String(s) => Ok(s),
                _ => Err(wrong(&format!("{field}[{i}]"), "a string")),
            })
            .collect(),
        Some(_) => Err(wrong(field, "a list of strings")),
    }
}

fn string_or_list(field: &str, v: Option<J>) -> Result<Option<StringOrList>, FieldError> {
    match v {
        None | Some(J::Null) => Ok(None),
        Some(J::String(s)) => Ok(Some(StringOrList::String(s))),
        Some(a @ J::Array(_)) => Ok(Some(StringOrList::List(strings(field, Some(a))?))),
        Some(_) => Err(wrong(field, "a string or a list of strings")),
    }
}

fn list_or_map(field: &str, v: Option<J>) -> Result<Option<ListOrMap>, FieldError> {
    match v {
        None | Some(J::Null) => Ok(None),
        Some(J::Object(m)) => Ok(Some(ListOrMap::Map(m.into_iter().collect()))),
        Some(a @ J::Array(_)) => Ok(Some(ListOrMap::List(strings(field, Some(a))?))),
        Some(_) => Err(wrong(field, "a table or a list of strings")),
    }
}

fn bytes_doc(field: &str, v: Option<J>) -> Result<Option<Bytes>, FieldError> {
    match v {
        None | Some(J::Null) => Ok(None),
        Some(J::String(s)) => Ok(Some(Bytes::Text(s))),
        Some(J::Number(n)) => n
            .as_i64()
            .map(|n| Some(Bytes::Number(n)))
            .ok_or_else(|| wrong(field, "a whole number of bytes")),
        Some(_) => Err(wrong(field, "a size, such as \"512m\"")),
    }
}

/// A name the engine takes for a volume or a network.
fn engine_name(field: &str, s: &str) -> Result<String, FieldError> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(s.to_string())
    } else {
        Err((
            field.to_string(),
            format!("{s:?} is not a name: [A-Za-z0-9][A-Za-z0-9_.-], at most 64"),
        ))
    }
}

/// A table's entries, refusing keys it does not know.
fn table(field: &str, v: J, known: &[&str]) -> Result<serde_json::Map<String, J>, FieldError> {
    let J::Object(m) = v else {
        return Err(wrong(field, "a table"));
    };
    if let Some(k) = m.keys().find(|k| !known.contains(&k.as_str())) {
        return Err((
            format!("{field}.{k}"),
            format!("unknown field; one of {}", known.join(", ")),
        ));
    }
    Ok(m)
}

/// The resource limits the engine knows.
const ULIMITS: [&str; 15] = [
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
];

/// Signal names by number (Linux).
const SIGNALS: [&str; 31] = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// A signal's canonical name: `SIGHUP` for `HUP`, `sighup` or `1`.
pub fn signal_name(s: &str) -> Result<String, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<usize>() {
        return match n {
            1..=31 => Ok(SIGNALS[n - 1].to_string()),
            34..=64 => Ok(format!("SIGRTMIN+{}", n - 34)),
            _ => Err(format!("{s:?} is not a signal number")),
        };
    }
    let up = t.to_ascii_uppercase();
    let name = if up.starts_with("SIG") {
        up
    } else {
        format!("SIG{up}")
    };
    if SIGNALS.contains(&name.as_str()) {
        Ok(name)
    } else {
        Err(format!("{s:?} is not a signal name"))
    }
}

/// Bytes from a number or a string with a unit (`b`, `k`, `m`, `g`, with
/// or without `b`/`ib`; powers of 1024, as the engine takes them).
pub fn parse_bytes(b: &Bytes) -> Result<i64, String> {
    let text = match b {
        Bytes::Number(n) => return Ok(*n),
        Bytes::Text(t) => t.trim().to_ascii_lowercase(),
    };
    if text == "-1" {
        return Ok(-1);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let unit = unit.trim();
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (b, k, m, g, t)")),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a number of bytes"))?;
    let v = (n * mult as f64).round();
    if !(0.0..=(i64::MAX as f64)).contains(&v) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(v as i64)
}

fn json_scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Null => Some(String::new()),
        _ => None,
    }
}

/// `KEY=VALUE` pairs from a list (split at `sep`) or a table.
fn pairs(field: &str, v: ListOrMap, sep: &[char]) -> Result<Vec<(String, String)>, FieldError> {
    match v {
        ListOrMap::List(l) => l
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                s.split_once(sep)
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .ok_or_else(|| {
                        (
                            format!("{field}[{i}]"),
                            format!("{s:?} is not KEY{}VALUE", sep[0]),
                        )
                    })
            })
            .collect(),
        ListOrMap::Map(m) => m
            .into_iter()
            .map(|(k, v)| {
                json_scalar(&v).map(|s| (k.clone(), s)).ok_or_else(|| {
                    (
                        format!("{field}.{k}"),
                        "must be a string or a number".into(),
                    )
                })
            })
            .collect(),
    }
}

fn no_nul(field: &str, s: &str) -> Result<(), FieldError> {
    if s.contains('\0') {
        Err((field.into(), "contains a NUL byte".into()))
    } else {
        Ok(())
    }
}

fn capability(field: &str, s: &str) -> Result<String, FieldError> {
    let up = s.trim().to_ascii_uppercase();
    let c = up.strip_prefix("CAP_").unwrap_or(&up).to_string();
    if !c.is_empty() && c.chars().all(|ch| ch.is_ascii_uppercase() || ch == '_') {
        Ok(c)
    } else {
        Err((field.into(), format!("{s:?} is not a capability name")))
    }
}

fn duration(field: &str, s: &Option<String>) -> Result<Option<Duration>, FieldError> {
    s.as_ref()
        .map(|s| parse_duration(s).map_err(|m| (field.to_string(), m)))
        .transpose()
}

impl RuntimeDoc {
    /// Checks and normalises every field.
    pub fn check(self) -> Result<Runtime, FieldError> {
        let entrypoint = match string_or_list("entrypoint", self.entrypoint)? {
            None => None,
            Some(StringOrList::List(l)) => Some(l),
            // A string is run by a shell, as the engine's shell form does.
            Some(StringOrList::String(s)) if s.is_empty() => Some(vec![]),
            Some(StringOrList::String(s)) => Some(vec!["/bin/sh".into(), "-c".into(), s]),
        };
        let mut r = Runtime {
            entrypoint,
            ..Runtime::default()
        };
        for (i, a) in r.entrypoint.iter().flatten().enumerate() {
            no_nul(&format!("entrypoint[{i}]"), a)?;
        }
        r.working_dir = string("working_dir", self.working_dir)?
            .map(|w| {
                // `/srv/` is `/srv`, as the engine takes it.
                let t = if w.len() > 1 {
                    w.trim_end_matches('/')
                } else {
                    &w
                };
                AbsPath::try_from(t).map_err(|e| ("working_dir".to_string(), e.0))
            })
            .transpose()?;
        r.user = match string("user", self.user)?.map(|u| u.trim().to_string()) {
            None => None,
            Some(u) if u.is_empty() => None,
            Some(u)
                if u.contains(char::is_whitespace)
                    || u.contains('\0')
                    || u.matches(':').count() > 1 =>
            {
                return Err((
                    "user".into(),
                    format!("{u:?} is not user, uid, user:group or uid:gid"),
                ));
            }
            Some(u) => Some(u),
        };
        if let Some(l) = list_or_map("labels", self.labels)? {
            for (k, v) in pairs("labels", l, &['='])? {
                if k.is_empty() || k.contains(char::is_whitespace) {
                    return Err((
                        format!("labels.{k}"),
                        "a label needs a name without spaces".into(),
                    ));
                }
                if k.to_ascii_lowercase().starts_with("stead.") {
                    return Err((
                        format!("labels.{k}"),
                        "labels stead.* are the agent's own".into(),
                    ));
                }
                no_nul(&format!("labels.{k}"), &v)?;
                r.labels.insert(k, v);
            }
        }
        let mut seen = BTreeSet::new();
        for (i, d) in strings("devices", self.devices)?.iter().enumerate() {
            let field = format!("devices[{i}]");
            let mut parts = d.split(':');
            let host = parts.next().unwrap_or("");
            let container = parts.next().filter(|c| !c.is_empty()).unwrap_or(host);
            let perms = parts.next().unwrap_or("rwm");
            if parts.next().is_some()
                || perms.is_empty()
                || !perms.chars().all(|c| "rwm".contains(c))
            {
                return Err((
                    field,
                    format!("{d:?} is not HOST[:CONTAINER[:PERMISSIONS]] with permissions of rwm"),
                ));
            }
            let host = AbsPath::try_from(host).map_err(|e| (field.clone(), e.0))?;
            let container = AbsPath::try_from(container).map_err(|e| (field.clone(), e.0))?;
            if !seen.insert(container.clone()) {
                return Err((field, format!("{container} is given twice")));
            }
            let permissions = "rwm".chars().filter(|c| perms.contains(*c)).collect();
            r.devices.push(Device {
                host,
                container,
                permissions,
            });
        }
        r.devices.sort_by(|a, b| a.container.cmp(&b.container));
        for (i, rule) in strings("device_cgroup_rules", self.device_cgroup_rules)?
            .iter()
            .enumerate()
        {
            let words: Vec<&str> = rule.split_whitespace().collect();
            let ok = words.len() == 3
                && matches!(words[0], "a" | "b" | "c")
                && words[1].split_once(':').is_some_and(|(maj, min)| {
                    let part = |p: &str| p == "*" || p.parse::<u32>().is_ok();
                    part(maj) && part(min)
                })
                && !words[2].is_empty()
                && words[2].chars().all(|c| "rwm".contains(c));
            if !ok {
                return Err((
                    format!("device_cgroup_rules[{i}]"),
                    format!(
                        "{rule:?} is not TYPE MAJOR:MINOR PERMISSIONS (such as \"c 188:* rwm\")"
                    ),
                ));
            }
            r.device_cgroup_rules.push(words.join(" "));
        }
        r.device_cgroup_rules.sort();
        r.device_cgroup_rules.dedup();
        r.privileged = boolean("privileged", self.privileged)?;
        for (i, c) in strings("cap_add", self.cap_add)?.iter().enumerate() {
            r.cap_add.insert(capability(&format!("cap_add[{i}]"), c)?);
        }
        for (i, c) in strings("cap_drop", self.cap_drop)?.iter().enumerate() {
            r.cap_drop.insert(capability(&format!("cap_drop[{i}]"), c)?);
        }
        r.network_mode = match string("network_mode", self.network_mode)?
            .as_deref()
            .map(str::trim)
        {
            None | Some("bridge" | "default") => NetworkMode::Bridge,
            Some("host") => NetworkMode::Host,
            Some("none") => NetworkMode::None,
            Some(other) => match other.strip_prefix("container:") {
                Some(m) => NetworkMode::Container(ModuleName::try_from(m).map_err(|e| {
                    (
                        "network_mode".to_string(),
                        format!("container:<module>: {}", e.0),
                    )
                })?),
                None => {
                    return Err((
                        "network_mode".into(),
                        format!("{other:?}: use bridge, host, none or container:<module>"),
                    ));
                }
            },
        };
        if let Some(h) = list_or_map("extra_hosts", self.extra_hosts)? {
            // Compose writes `host:ip` (an IPv6 address holds colons too)
            // or `host=ip`.
            let list = match h {
                ListOrMap::List(l) => ListOrMap::List(
                    l.into_iter()
                        .map(|s| match s.split_once('=') {
                            Some(_) => s,
                            None => s.replacen(':', "=", 1),
                        })
                        .collect(),
                ),
                m => m,
            };
            for (host, ip) in pairs("extra_hosts", list, &['='])? {
                let field = format!("extra_hosts.{host}");
                if host.is_empty() || host.contains(char::is_whitespace) {
                    return Err((field, "a host name without spaces".into()));
                }
                let ip = if ip == HOST_GATEWAY {
                    ip
                } else {
                    ip.trim_matches(|c| c == '[' || c == ']')
                        .parse::<IpAddr>()
                        .map_err(|_| {
                            (
                                field.clone(),
                                format!("{ip:?} is not an IP address or {HOST_GATEWAY}"),
                            )
                        })?
                        .to_string()
                };
                if r.extra_hosts
                    .insert(host, ip.clone())
                    .is_some_and(|prev| prev != ip)
                {
                    return Err((field, "given twice with different addresses".into()));
                }
            }
        }
        let dns = match string_or_list("dns", self.dns)? {
            None => vec![],
            Some(StringOrList::String(s)) => vec![s],
            Some(StringOrList::List(l)) => l,
        };
        for (i, d) in dns.iter().enumerate() {
            r.dns.push(
                d.trim()
                    .parse()
                    .map_err(|_| (format!("dns[{i}]"), format!("{d:?} is not an IP address")))?,
            );
        }
        let tmpfs = match string_or_list("tmpfs", self.tmpfs)? {
            None => vec![],
            Some(StringOrList::String(s)) => vec![s],
            Some(StringOrList::List(l)) => l,
        };
        for (i, t) in tmpfs.iter().enumerate() {
            let field = format!("tmpfs[{i}]");
            let (target, opts) = t.split_once(':').unwrap_or((t, ""));
            let target = AbsPath::try_from(target).map_err(|e| (field.clone(), e.0))?;
            let mut opts: Vec<&str> = opts
                .split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .collect();
            opts.sort();
            opts.dedup();
            if r.tmpfs.insert(target.clone(), opts.join(",")).is_some() {
                return Err((field, format!("{target} is given twice")));
            }
        }
        r.read_only = boolean("read_only", self.read_only)?;
        r.mem_limit = match bytes_doc("mem_limit", self.mem_limit)?
            .as_ref()
            .map(parse_bytes)
            .transpose()
        {
            Err(m) => return Err(("mem_limit".into(), m)),
            Ok(None | Some(0)) => None,
            Ok(Some(n)) if n < 0 => {
                return Err(("mem_limit".into(), "must not be negative".into()));
            }
            Ok(Some(n)) if n < 6 << 20 => {
                return Err(("mem_limit".into(), "the engine takes at least 6 MiB".into()));
            }
            Ok(Some(n)) => Some(n as u64),
        };
        r.memswap_limit = match bytes_doc("memswap_limit", self.memswap_limit)?
            .as_ref()
            .map(parse_bytes)
            .transpose()
        {
            Err(m) => return Err(("memswap_limit".into(), m)),
            Ok(None | Some(0)) => None,
            Ok(Some(n)) if n < -1 => {
                return Err((
                    "memswap_limit".into(),
                    "must be -1 (unlimited) or a size".into(),
                ));
            }
            Ok(Some(n)) => {
                if n > 0 && r.mem_limit.is_none_or(|m| (n as u64) < m) {
                    return Err((
                        "memswap_limit".into(),
                        "needs mem_limit, and must not be less than it".into(),
                    ));
                }
                Some(n)
            }
        };
        r.nano_cpus = match self.cpus {
            None | Some(J::Null) => None,
            Some(c) => {
                let n: f64 = match c {
                    J::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                    J::String(t) => t
                        .trim()
                        .parse()
                        .map_err(|_| ("cpus".to_string(), format!("{t:?} is not a number")))?,
                    _ => return Err(wrong("cpus", "a number")),
                };
                if !(0.0..=1024.0).contains(&n) {
                    return Err(("cpus".into(), format!("{n} is not between 0 and 1024")));
                }
                let nanos = (n * 1e9).round() as u64;
                (nanos > 0).then_some(nanos)
            }
        };
        r.pids_limit = integer("pids_limit", self.pids_limit)?.filter(|n| *n > 0);
        let ulimits = match self.ulimits {
            None | Some(J::Null) => serde_json::Map::new(),
            Some(J::Object(m)) => m,
            Some(_) => return Err(wrong("ulimits", "a table")),
        };
        for (name, u) in ulimits {
            let field = format!("ulimits.{name}");
            let u = match u {
                J::Number(_) => UlimitDoc::Single(integer(&field, Some(u))?.unwrap_or(0)),
                J::Object(_) => {
                    let mut t = table(&field, u, &["soft", "hard"])?;
                    let mut get = |k: &str| {
                        integer(&format!("{field}.{k}"), t.remove(k))?
                            .ok_or_else(|| (format!("{field}.{k}"), "is missing".to_string()))
                    };
                    UlimitDoc::Pair {
                        soft: get("soft")?,
                        hard: get("hard")?,
                    }
                }
                _ => return Err(wrong(&field, "a number or {soft, hard}")),
            };
            if !ULIMITS.contains(&name.as_str()) {
                return Err((
                    field,
                    format!("unknown resource; one of {}", ULIMITS.join(", ")),
                ));
            }
            let (soft, hard) = match u {
                UlimitDoc::Single(n) => (n, n),
                UlimitDoc::Pair { soft, hard } => (soft, hard),
            };
            if soft > hard && hard >= 0 {
                return Err((field, "soft is above hard".into()));
            }
            r.ulimits.insert(name, Ulimit { soft, hard });
        }
        if let Some(s) = list_or_map("sysctls", self.sysctls)? {
            for (k, v) in pairs("sysctls", s, &['='])? {
                let field = format!("sysctls.{k}");
                if k.is_empty()
                    || !k
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
                {
                    return Err((field, "not a kernel parameter name".into()));
                }
                no_nul(&field, &v)?;
                // `net/ipv4/ip_forward` and `net.ipv4.ip_forward` are one.
                r.sysctls.insert(k.replace('/', "."), v);
            }
        }
        r.init = boolean("init", self.init)?;
        r.stop_signal = match string("stop_signal", self.stop_signal)? {
            None => None,
            Some(s) => Some(signal_name(&s).map_err(|m| ("stop_signal".to_string(), m))?)
                .filter(|s| s != "SIGTERM"),
        };
        r.stop_grace_period = duration(
            "stop_grace_period",
            &string("stop_grace_period", self.stop_grace_period)?,
        )?
        .filter(|d| *d != DEFAULT_STOP_GRACE);
        if let Some(d) = r.stop_grace_period {
            if d > MAX_STOP_GRACE || d.subsec_nanos() != 0 {
                return Err((
                    "stop_grace_period".into(),
                    "whole seconds, at most 5m".into(),
                ));
            }
        }
        let health = match self.healthcheck {
            None | Some(J::Null) => None,
            Some(v) => {
                let mut t = table(
                    "healthcheck",
                    v,
                    &[
                        "test",
                        "interval",
                        "timeout",
                        "retries",
                        "start_period",
                        "disable",
                    ],
                )?;
                let retries = match integer("healthcheck.retries", t.remove("retries"))? {
                    Some(n) if !(0..=i64::from(u32::MAX)).contains(&n) => {
                        return Err(wrong("healthcheck.retries", "a count"));
                    }
                    n => n.map(|n| n as u32),
                };
                Some(HealthcheckDoc {
                    test: string_or_list("healthcheck.test", t.remove("test"))?,
                    interval: string("healthcheck.interval", t.remove("interval"))?,
                    timeout: string("healthcheck.timeout", t.remove("timeout"))?,
                    retries,
                    start_period: string("healthcheck.start_period", t.remove("start_period"))?,
                    disable: boolean("healthcheck.disable", t.remove("disable"))?,
                })
            }
        };
        r.healthcheck = match health {
            None => None,
            Some(h) if h.disable => Some(Healthcheck {
                test: vec!["NONE".into()],
                interval: None,
                timeout: None,
                retries: None,
                start_period: None,
            }),
            Some(h) => {
                let test = match h.test {
                    // The image's own test, with other timings (as
                    // Compose and the engine take it).
                    None => vec![],
                    Some(StringOrList::String(s)) => vec!["CMD-SHELL".into(), s],
                    Some(StringOrList::List(l)) => match l.first().map(String::as_str) {
                        Some("CMD" | "CMD-SHELL") if l.len() > 1 => l,
                        Some("NONE") if l.len() == 1 => l,
                        _ => {
                            return Err((
                                "healthcheck.test".into(),
                                "a list starts with CMD or CMD-SHELL and has a command (or is [\"NONE\"])".into(),
                            ));
                        }
                    },
                };
                for (i, a) in test.iter().enumerate() {
                    no_nul(&format!("healthcheck.test[{i}]"), a)?;
                }
                let none = test == ["NONE"];
                let d = |field, s: &Option<String>, default: Duration| {
                    duration(field, s).map(|d| d.filter(|d| *d != default && !none))
                };
                let check = Healthcheck {
                    interval: d("healthcheck.interval", &h.interval, Duration::from_secs(30))?,
                    timeout: d("healthcheck.timeout", &h.timeout, Duration::from_secs(30))?,
                    retries: h.retries.filter(|r| *r != 3 && !none),
                    start_period: d("healthcheck.start_period", &h.start_period, Duration::ZERO)?,
                    test,
                };
                // The image's check with the engine's timings: unset.
                let image_s_own = check.test.is_empty()
                    && check.interval.is_none()
                    && check.timeout.is_none()
                    && check.retries.is_none()
                    && check.start_period.is_none();
                (!image_s_own).then_some(check)
            }
        };
        r.logging = match self.logging {
            None | Some(J::Null) => None,
            Some(v) => {
                let mut t = table("logging", v, &["driver", "options"])?;
                let driver = string("logging.driver", t.remove("driver"))?
                    .ok_or_else(|| ("logging.driver".to_string(), "is missing".to_string()))?
                    .trim()
                    .to_string();
                let opts = match t.remove("options") {
                    None | Some(J::Null) => serde_json::Map::new(),
                    Some(J::Object(m)) => m,
                    Some(_) => return Err(wrong("logging.options", "a table")),
                };
                if driver.is_empty()
                    || !driver
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c))
                {
                    return Err((
                        "logging.driver".into(),
                        format!("{driver:?} is not a log driver name"),
                    ));
                }
                let mut options = BTreeMap::new();
                for (k, v) in opts {
                    let s = json_scalar(&v).ok_or_else(|| {
                        (
                            format!("logging.options.{k}"),
                            "must be a string or a number".to_string(),
                        )
                    })?;
                    options.insert(k, s);
                }
                Some(Logging { driver, options })
            }
        };
        let volumes = match self.volumes {
            None | Some(J::Null) => vec![],
            Some(J::Array(a)) => a,
            Some(_) => return Err(wrong("volumes", "a list")),
        };
        let mut targets = BTreeSet::new();
        for (i, v) in volumes.into_iter().enumerate() {
            let field = format!("volumes[{i}]");
            let (name, target, read_only) = match v {
                J::String(s) => {
                    let mut parts = s.split(':');
                    let name = parts.next().unwrap_or("").to_string();
                    let target = parts.next().unwrap_or("").to_string();
                    let ro = match parts.next() {
                        None | Some("rw") => false,
                        Some("ro") => true,
                        Some(o) => {
                            return Err((field, format!("{o:?}: the mode is ro or rw")));
                        }
                    };
                    if parts.next().is_some() {
                        return Err((field, format!("{s:?} is not NAME:TARGET[:ro]")));
                    }
                    (name, target, ro)
                }
                v @ J::Object(_) => {
                    let mut t = table(&field, v, &["name", "target", "read_only"])?;
                    (
                        string(&format!("{field}.name"), t.remove("name"))?.unwrap_or_default(),
                        string(&format!("{field}.target"), t.remove("target"))?.unwrap_or_default(),
                        boolean(&format!("{field}.read_only"), t.remove("read_only"))?,
                    )
                }
                _ => {
                    return Err(wrong(
                        &field,
                        "NAME:TARGET[:ro] or {name, target, read_only}",
                    ));
                }
            };
            if name.starts_with(['/', '.', '~']) {
                return Err((
                    field,
                    format!("{name:?} is a host path: a bind mount is a `mounts` entry"),
                ));
            }
            let name = engine_name(&field, &name)?;
            let target = AbsPath::try_from(target).map_err(|e| (field.clone(), e.0))?;
            if !targets.insert(target.clone()) {
                return Err((field, format!("{target} is given twice")));
            }
            r.volumes.push(Volume {
                name,
                target,
                read_only,
            });
        }
        r.volumes.sort_by(|a, b| a.target.cmp(&b.target));
        for (i, n) in strings("networks", self.networks)?.iter().enumerate() {
            let field = format!("networks[{i}]");
            if matches!(n.as_str(), "bridge" | "host" | "none" | "default") {
                return Err((
                    field,
                    format!("{n:?} is the engine's own: use network_mode"),
                ));
            }
            r.networks.insert(engine_name(&field, n)?);
        }
        if !r.networks.is_empty() && r.network_mode != NetworkMode::Bridge {
            return Err((
                "networks".into(),
                format!(
                    "a container with network_mode = {:?} joins no network",
                    r.network_mode.spelled()
                ),
            ));
        }
        if matches!(r.network_mode, NetworkMode::Container(_))
            && (!r.dns.is_empty() || !r.extra_hosts.is_empty())
        {
            return Err((
                "network_mode".into(),
                "a container in another's network stack takes that one's dns and extra_hosts"
                    .into(),
            ));
        }
        Ok(r)
    }
}

impl Runtime {
    /// One input per field that is set, named by the field, with the digest
    /// of its normalised value.
    pub fn digests(&self) -> BTreeMap<InputName, Digest> {
        let mut out = BTreeMap::new();
        let mut put = |field: &str, d: Digest| {
            out.insert(
                InputName::try_from(field).expect("runtime fields are input names"),
                d,
            );
        };
        let r = self;
        if let Some(e) = &r.entrypoint {
            put("entrypoint", Digest::canonical("entrypoint", e));
        }
        if let Some(w) = &r.working_dir {
            put("working_dir", Digest::canonical("working_dir", w.as_str()));
        }
        if let Some(u) = &r.user {
            put("user", Digest::canonical("user", u));
        }
        if !r.labels.is_empty() {
            put("labels", Digest::canonical("labels", &r.labels));
        }
        if !r.devices.is_empty() {
            put("devices", Digest::canonical("devices", &r.devices));
        }
        if !r.device_cgroup_rules.is_empty() {
            put(
                "device_cgroup_rules",
                Digest::canonical("device_cgroup_rules", &r.device_cgroup_rules),
            );
        }
        if r.privileged {
            put("privileged", Digest::canonical("privileged", &true));
        }
        if !r.cap_add.is_empty() {
            put("cap_add", Digest::canonical("cap_add", &r.cap_add));
        }
        if !r.cap_drop.is_empty() {
            put("cap_drop", Digest::canonical("cap_drop", &r.cap_drop));
        }
        if r.network_mode != NetworkMode::Bridge {
            put(
                "network_mode",
                Digest::canonical("network_mode", &r.network_mode.spelled()),
            );
        }
        if !r.extra_hosts.is_empty() {
            put(
                "extra_hosts",
                Digest::canonical("extra_hosts", &r.extra_hosts),
            );
        }
        if !r.dns.is_empty() {
            put("dns", Digest::canonical("dns", &r.dns));
        }
        if !r.tmpfs.is_empty() {
            put("tmpfs", Digest::canonical("tmpfs", &r.tmpfs));
        }
        if r.read_only {
            put("read_only", Digest::canonical("read_only", &true));
        }
        if let Some(m) = r.mem_limit {
            put("mem_limit", Digest::canonical("mem_limit", &m));
        }
        if let Some(m) = r.memswap_limit {
            put("memswap_limit", Digest::canonical("memswap_limit", &m));
        }
        if let Some(c) = r.nano_cpus {
            put("cpus", Digest::canonical("cpus", &c));
        }
        if let Some(p) = r.pids_limit {
            put("pids_limit", Digest::canonical("pids_limit", &p));
        }
        if !r.ulimits.is_empty() {
            put("ulimits", Digest::canonical("ulimits", &r.ulimits));
        }
        if !r.sysctls.is_empty() {
            put("sysctls", Digest::canonical("sysctls", &r.sysctls));
        }
        if r.init {
            put("init", Digest::canonical("init", &true));
        }
        if let Some(s) = &r.stop_signal {
            put("stop_signal", Digest::canonical("stop_signal", s));
        }
        if let Some(d) = r.stop_grace_period {
            put(
                "stop_grace_period",
                Digest::canonical("stop_grace_period", &d.as_millis()),
            );
        }
        if let Some(h) = &r.healthcheck {
            put("healthcheck", Digest::canonical("healthcheck", h));
        }
        if let Some(l) = &r.logging {
            put("logging", Digest::canonical("logging", l));
        }
        if !r.volumes.is_empty() {
            put("volumes", Digest::canonical("volumes", &r.volumes));
        }
        if !r.networks.is_empty() {
            put("networks", Digest::canonical("networks", &r.networks));
        }
        out
    }

    /// How long a stop of this container waits before it kills.
    pub fn stop_grace(&self) -> Duration {
        self.stop_grace_period.unwrap_or(DEFAULT_STOP_GRACE)
    }
}

impl Runtime {
    /// Writes every set field into an intention document, in a form that
    /// parses back to the same runtime.
    pub fn write_json(&self, doc: &mut serde_json::Map<String, serde_json::Value>) {
        use crate::model::duration::format_duration;
        use serde_json::{Value as J, json};
        let r = self;
        let mut put = |k: &str, v: J| {
            doc.insert(k.to_string(), v);
        };
        if let Some(e) = &r.entrypoint {
            put("entrypoint", json!(e));
        }
        if let Some(w) = &r.working_dir {
            put("working_dir", json!(w.as_str()));
        }
        if let Some(u) = &r.user {
            put("user", json!(u));
        }
        if !r.labels.is_empty() {
            put("labels", json!(r.labels));
        }
        if !r.devices.is_empty() {
            let d: Vec<String> = r
                .devices
                .iter()
                .map(|d| format!("{}:{}:{}", d.host, d.container, d.permissions))
                .collect();
            put("devices", json!(d));
        }
        if !r.device_cgroup_rules.is_empty() {
            put("device_cgroup_rules", json!(r.device_cgroup_rules));
        }
        if r.privileged {
            put("privileged", J::Bool(true));
        }
        if !r.cap_add.is_empty() {
            put("cap_add", json!(r.cap_add));
        }
        if !r.cap_drop.is_empty() {
            put("cap_drop", json!(r.cap_drop));
        }
        if r.network_mode != NetworkMode::Bridge {
            put("network_mode", json!(r.network_mode.spelled()));
        }
        if !r.extra_hosts.is_empty() {
            put("extra_hosts", json!(r.extra_hosts));
        }
        if !r.dns.is_empty() {
            let d: Vec<String> = r.dns.iter().map(ToString::to_string).collect();
            put("dns", json!(d));
        }
        if !r.tmpfs.is_empty() {
            let t: Vec<String> = r
                .tmpfs
                .iter()
                .map(|(p, o)| {
                    if o.is_empty() {
                        p.to_string()
                    } else {
                        format!("{p}:{o}")
                    }
                })
                .collect();
            put("tmpfs", json!(t));
        }
        if r.read_only {
            put("read_only", J::Bool(true));
        }
        if let Some(m) = r.mem_limit {
            put("mem_limit", json!(m));
        }
        if let Some(m) = r.memswap_limit {
            put("memswap_limit", json!(m));
        }
        if let Some(c) = r.nano_cpus {
            put("cpus", json!(c as f64 / 1e9));
        }
        if let Some(p) = r.pids_limit {
            put("pids_limit", json!(p));
        }
        if !r.ulimits.is_empty() {
            let u: BTreeMap<&String, J> = r
                .ulimits
                .iter()
                .map(|(k, u)| (k, json!({"soft": u.soft, "hard": u.hard})))
                .collect();
            put("ulimits", json!(u));
        }
        if !r.sysctls.is_empty() {
            put("sysctls", json!(r.sysctls));
        }
        if r.init {
            put("init", J::Bool(true));
        }
        if let Some(s) = &r.stop_signal {
            put("stop_signal", json!(s));
        }
        if let Some(d) = r.stop_grace_period {
            put("stop_grace_period", json!(format_duration(d)));
        }
        if let Some(h) = &r.healthcheck {
            let mut o = serde_json::Map::new();
            if !h.test.is_empty() {
                o.insert("test".into(), json!(h.test));
            }
            for (k, d) in [
                ("interval", h.interval),
                ("timeout", h.timeout),
                ("start_period", h.start_period),
            ] {
                if let Some(d) = d {
                    o.insert(k.into(), json!(format_duration(d)));
                }
            }
            if let Some(r) = h.retries {
                o.insert("retries".into(), json!(r));
            }
            put("healthcheck", J::Object(o));
        }
        if let Some(l) = &r.logging {
            put("logging", json!({"driver": l.driver, "options": l.options}));
        }
        if !r.volumes.is_empty() {
            let v: Vec<J> = r
                .volumes
                .iter()
                .map(|v| json!({"name": v.name, "target": v.target.as_str(), "read_only": v.read_only}))
                .collect();
            put("volumes", J::Array(v));
        }
        if !r.networks.is_empty() {
            put("networks", json!(r.networks));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::model::intention::{DocFormat, Intention};
    use crate::model::names::{Digest, InputName};

    const BASE: &str = "name = \"m\"\nimage = \"busybox:1\"\n";

    fn parse(extra: &str) -> Result<Intention, String> {
        Intention::parse(&format!("{BASE}{extra}"), DocFormat::Toml, "t.toml")
            .map_err(|e| e.to_string())
    }

    fn digests(extra: &str) -> BTreeMap<InputName, Digest> {
        parse(extra)
            .unwrap_or_else(|e| panic!("{extra}: {e}"))
            .runtime
            .digests()
    }

    /// Every field: set, it is an input of its own that a change moves;
    /// each spelling in a group is one value; the engine's default is unset.
    #[test]
    fn every_field_is_an_input_and_every_spelling_of_one_value_is_one_digest() {
        // (field, spellings of one value, another value)
        let mut cases: Vec<(&str, Vec<&str>, &str)> = vec![
            (
                "entrypoint",
                vec![
                    "entrypoint = [\"/bin/sh\", \"-c\", \"x\"]",
                    "entrypoint = \"x\"",
                ],
                "entrypoint = [\"/init\"]",
            ),
            (
                "working_dir",
                vec!["working_dir = \"/srv\"", "working_dir = \"/srv/\""],
                "working_dir = \"/opt\"",
            ),
            (
                "user",
                vec!["user = \"1000:1000\"", "user = \" 1000:1000 \""],
                "user = \"1000\"",
            ),
            (
                "labels",
                vec![
                    "labels = {a = \"1\", b = \"x\"}",
                    "labels = [\"b=x\", \"a=1\"]",
                    "labels = {a = 1, b = \"x\"}",
                ],
                "labels = {a = \"2\"}",
            ),
            (
                "devices",
                vec![
                    "devices = [\"/dev/ttyUSB0\"]",
                    "devices = [\"/dev/ttyUSB0:/dev/ttyUSB0\"]",
                    "devices = [\"/dev/ttyUSB0:/dev/ttyUSB0:mwr\"]",
                ],
                "devices = [\"/dev/ttyUSB0:/dev/ttyUSB0:r\"]",
            ),
            (
                "device_cgroup_rules",
                vec![
                    "device_cgroup_rules = [\"c 188:* rwm\", \"c 189:* rwm\"]",
                    "device_cgroup_rules = [\"c  189:*  rwm\", \"c 188:* rwm\", \"c 188:* rwm\"]",
                ],
                "device_cgroup_rules = [\"c 188:* r\"]",
            ),
            ("privileged", vec!["privileged = true"], "user = \"0\""),
            (
                "cap_add",
                vec![
                    "cap_add = [\"NET_ADMIN\", \"SYS_TIME\"]",
                    "cap_add = [\"cap_sys_time\", \"CAP_NET_ADMIN\", \"NET_ADMIN\"]",
                ],
                "cap_add = [\"NET_ADMIN\"]",
            ),
            (
                "cap_drop",
                vec!["cap_drop = [\"ALL\"]", "cap_drop = [\"all\"]"],
                "cap_drop = [\"NET_RAW\"]",
            ),
            (
                "network_mode",
                vec!["network_mode = \"host\""],
                "network_mode = \"none\"",
            ),
            (
                "extra_hosts",
                vec![
                    "extra_hosts = [\"db:10.0.0.2\", \"gw:fe80::1\"]",
                    "extra_hosts = {gw = \"fe80:0::1\", db = \"10.0.0.2\"}",
                    "extra_hosts = [\"gw=fe80::1\", \"db=10.0.0.2\"]",
                ],
                "extra_hosts = [\"db:10.0.0.3\"]",
            ),
            (
                "dns",
                vec!["dns = [\"1.1.1.1\"]", "dns = \"1.1.1.1\""],
                "dns = [\"9.9.9.9\"]",
            ),
            (
                "tmpfs",
                vec![
                    "tmpfs = [\"/run:size=64m,mode=1777\"]",
                    "tmpfs = \"/run:mode=1777,size=64m\"",
                ],
                "tmpfs = [\"/run\"]",
            ),
            ("read_only", vec!["read_only = true"], "init = true"),
            (
                "mem_limit",
                vec![
                    "mem_limit = \"512m\"",
                    "mem_limit = \"512MiB\"",
                    "mem_limit = 536870912",
                    "mem_limit = \"0.5g\"",
                ],
                "mem_limit = \"256m\"",
            ),
            (
                "memswap_limit",
                vec![
                    "mem_limit = \"256m\"\nmemswap_limit = \"1g\"",
                    "mem_limit = \"256m\"\nmemswap_limit = 1073741824",
                ],
                "mem_limit = \"256m\"\nmemswap_limit = -1",
            ),
            (
                "cpus",
                vec!["cpus = 0.5", "cpus = \"0.5\"", "cpus = \".50\""],
                "cpus = 1.5",
            ),
            ("pids_limit", vec!["pids_limit = 100"], "pids_limit = 200"),
            (
                "ulimits",
                vec![
                    "ulimits = {nofile = 1024}",
                    "ulimits = {nofile = {soft = 1024, hard = 1024}}",
                ],
                "ulimits = {nofile = {soft = 1024, hard = 4096}}",
            ),
            (
                "sysctls",
                vec![
                    "sysctls = {\"net.ipv4.ip_forward\" = \"1\"}",
                    "sysctls = [\"net/ipv4/ip_forward=1\"]",
                    "sysctls = {\"net.ipv4.ip_forward\" = 1}",
                ],
                "sysctls = {\"net.ipv4.ip_forward\" = \"0\"}",
            ),
            ("init", vec!["init = true"], "read_only = true"),
            (
                "stop_signal",
                vec![
                    "stop_signal = \"SIGINT\"",
                    "stop_signal = \"int\"",
                    "stop_signal = \"2\"",
                ],
                "stop_signal = \"SIGQUIT\"",
            ),
            (
                "stop_grace_period",
                vec![
                    "stop_grace_period = \"30s\"",
                    "stop_grace_period = \"30000ms\"",
                ],
                "stop_grace_period = \"1m\"",
            ),
            (
                "healthcheck",
                vec![
                    "[healthcheck]\ntest = \"wget -q -O- localhost\"",
                    "[healthcheck]\ntest = [\"CMD-SHELL\", \"wget -q -O- localhost\"]\ninterval = \"30s\"\nretries = 3",
                ],
                "[healthcheck]\ntest = \"true\"",
            ),
            (
                "logging",
                vec![
                    "[logging]\ndriver = \"local\"\noptions = {max-size = \"10m\"}",
                    "[logging]\ndriver = \" local\"\noptions = {max-size = \"10m\"}",
                ],
                "[logging]\ndriver = \"local\"\noptions = {max-size = \"20m\"}",
            ),
        ];
        cases.push((
            "volumes",
            vec![
                "volumes = [\"data:/var/lib/x\"]",
                "volumes = [\"data:/var/lib/x:rw\"]",
                "volumes = [{name = \"data\", target = \"/var/lib/x\"}]",
            ],
            "volumes = [\"data:/var/lib/x:ro\"]",
        ));
        cases.push((
            "networks",
            vec![
                "networks = [\"back\", \"front\"]",
                "networks = [\"front\", \"back\", \"back\"]",
            ],
            "networks = [\"back\"]",
        ));
        let none = digests("");
        assert!(none.is_empty(), "{none:?}");
        let mut seen = std::collections::BTreeSet::new();
        for (field, same, other) in cases {
            seen.insert(field);
            let key = InputName::try_from(field).unwrap();
            let first = digests(same[0]);
            let d = first
                .get(&key)
                .unwrap_or_else(|| panic!("{field}: {:?} is not an input", same[0]))
                .clone();
            for s in &same[1..] {
                assert_eq!(
                    digests(s).get(&key),
                    Some(&d),
                    "{field}: {s:?} differs from {:?}",
                    same[0]
                );
            }
            assert_ne!(
                digests(other).get(&key),
                Some(&d),
                "{field}: {other:?} does not move it"
            );
            // Written back, it parses to the same runtime.
            let i = parse(same[0]).unwrap();
            let back = Intention::parse_json(i.to_json().to_string().as_bytes(), "back").unwrap();
            assert_eq!(back.runtime, i.runtime, "{field}: {}", i.to_json());
        }
        assert_eq!(seen.len(), super::FIELDS.len(), "a field without a case");
    }

    #[test]
    fn a_health_check_without_a_test_is_the_image_s_with_other_timings() {
        let i = parse("[healthcheck]\ninterval = \"5s\"\nretries = 5").unwrap();
        let h = i.runtime.healthcheck.as_ref().unwrap();
        assert!(h.test.is_empty());
        assert_eq!(h.interval, Some(std::time::Duration::from_secs(5)));
        assert_eq!(h.retries, Some(5));
        let name = InputName::try_from("healthcheck").unwrap();
        assert_ne!(
            digests("[healthcheck]\ninterval = \"5s\"")[&name],
            digests("[healthcheck]\ninterval = \"6s\"")[&name]
        );
        // The image's check with the engine's timings is no check of ours.
        for same in [
            "[healthcheck]",
            "[healthcheck]\ninterval = \"30s\"\nretries = 3",
        ] {
            assert!(parse(same).unwrap().runtime.healthcheck.is_none(), "{same}");
        }
        // Written out and read back, the same.
        let back =
            crate::model::intention::Intention::parse_json(i.to_json().to_string().as_bytes(), "t")
                .unwrap();
        assert_eq!(back, i);
    }

    #[test]
    fn extra_hosts_take_the_host_gateway_and_addresses_digest_as_before() {
        let gw = digests("extra_hosts = [\"host.docker.internal:host-gateway\"]");
        let ip = digests("extra_hosts = [\"host.docker.internal:172.17.0.1\"]");
        let name = InputName::try_from("extra_hosts").unwrap();
        assert_ne!(gw[&name], ip[&name]);
        // Addresses were kept as IP values before host-gateway: the same
        // digest now (no recreate on upgrade).
        let before: BTreeMap<String, std::net::IpAddr> = [
            ("db".to_string(), "10.0.0.2".parse().unwrap()),
            ("gw".to_string(), "fe80::1".parse().unwrap()),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            digests("extra_hosts = {gw = \"fe80:0::1\", db = \"10.0.0.2\"}")[&name],
            Digest::canonical("extra_hosts", &before)
        );
    }

    #[test]
    fn the_engine_s_defaults_are_unset() {
        for d in [
            "privileged = false",
            "read_only = false",
            "init = false",
            "network_mode = \"bridge\"",
            "stop_signal = \"SIGTERM\"",
            "stop_signal = \"15\"",
            "stop_grace_period = \"10s\"",
            "mem_limit = 0",
            "pids_limit = -1",
            "pids_limit = 0",
            "cpus = 0",
            "user = \"\"",
            "labels = {}",
            "devices = []",
        ] {
            assert!(digests(d).is_empty(), "{d}: {:?}", digests(d));
        }
    }

    #[test]
    fn bad_fields_are_named() {
        for (extra, field, needle) in [
            (
                "labels = {\"stead.module\" = \"x\"}",
                "labels.stead.module",
                "the agent's own",
            ),
            ("devices = [\"dev/tty\"]", "devices[0]", "absolute"),
            (
                "devices = [\"/dev/a:/dev/b:rwx\"]",
                "devices[0]",
                "permissions",
            ),
            (
                "devices = [\"/dev/a\", \"/dev/b:/dev/a\"]",
                "devices[1]",
                "twice",
            ),
            (
                "device_cgroup_rules = [\"x 1:2 rwm\"]",
                "device_cgroup_rules[0]",
                "TYPE MAJOR:MINOR",
            ),
            ("cap_add = [\"net admin\"]", "cap_add[0]", "capability"),
            (
                "network_mode = \"pod:db\"",
                "network_mode",
                "container:<module>",
            ),
            (
                "network_mode = \"container:Bad\"",
                "network_mode",
                "container:<module>",
            ),
            (
                "network_mode = \"container:vpn\"\ndns = [\"1.1.1.1\"]",
                "network_mode",
                "dns",
            ),
            ("network_mode = \"container:m\"", "network_mode", "its own"),
            ("extra_hosts = [\"db\"]", "extra_hosts[0]", "KEY=VALUE"),
            (
                "extra_hosts = [\"db:nope\"]",
                "extra_hosts.db",
                "IP address",
            ),
            ("dns = [\"x\"]", "dns[0]", "IP address"),
            ("tmpfs = [\"run\"]", "tmpfs[0]", "absolute"),
            ("mem_limit = \"12q\"", "mem_limit", "unknown unit"),
            ("mem_limit = \"1k\"", "mem_limit", "at least 6 MiB"),
            ("memswap_limit = \"1g\"", "memswap_limit", "needs mem_limit"),
            ("cpus = -1", "cpus", "between 0"),
            (
                "ulimits = {files = 10}",
                "ulimits.files",
                "unknown resource",
            ),
            (
                "ulimits = {nofile = {soft = 10, hard = 5}}",
                "ulimits.nofile",
                "soft is above hard",
            ),
            ("sysctls = [\"kernel.x\"]", "sysctls[0]", "KEY=VALUE"),
            ("stop_signal = \"SIGNOPE\"", "stop_signal", "not a signal"),
            (
                "stop_grace_period = \"soon\"",
                "stop_grace_period",
                "duration",
            ),
            (
                "[healthcheck]\ntest = [\"curl\"]",
                "healthcheck.test",
                "starts with CMD",
            ),
            (
                "[logging]\ndriver = \"a b\"",
                "logging.driver",
                "log driver",
            ),
            (
                "mounts = [{source = \"/a\", target = \"/run\"}]\ntmpfs = [\"/run\"]",
                "tmpfs[0]",
                "already used",
            ),
            ("privileged = \"yes\"", "privileged", "true or false"),
            ("cpus = [1]", "cpus", "a number"),
            (
                "volumes = [\"./data:/x\"]",
                "volumes[0]",
                "a `mounts` entry",
            ),
            (
                "volumes = [\"data:/x\", \"logs:/x\"]",
                "volumes[1]",
                "twice",
            ),
            ("volumes = [\"data:/x:rx\"]", "volumes[0]", "ro or rw"),
            ("networks = [\"host\"]", "networks[0]", "network_mode"),
            ("networks = [\"a b\"]", "networks[0]", "not a name"),
            (
                "network_mode = \"host\"\nnetworks = [\"back\"]",
                "networks",
                "joins no network",
            ),
            (
                "mounts = [{source = \"/a\", target = \"/x\"}]\nvolumes = [\"d:/x\"]",
                "volumes[0]",
                "already used",
            ),
            (
                "ulimits = {nofile = {soft = 1}}",
                "ulimits.nofile.hard",
                "missing",
            ),
            (
                "[healthcheck]\ntest = \"true\"\nevery = \"1s\"",
                "healthcheck.every",
                "unknown field",
            ),
            ("[logging]\noptions = {}", "logging.driver", "missing"),
            ("devices = \"/dev/x\"", "devices", "a list of strings"),
        ] {
            let e = parse(extra).unwrap_err();
            assert!(
                e.contains(&format!(": {field}: ")) && e.contains(needle),
                "{extra}: {e}"
            );
        }
    }
}

/// The digests and the JSON of runtimes as the code before the field table
/// made them, pinned as literals: an upgrade recreates nothing.
#[cfg(test)]
mod pinned {
    use crate::model::intention::{DocFormat, Intention};

    /// Every field but `network_mode` (which excludes `networks`, `dns`
    /// and `extra_hosts`).
    const ALL: &str = r#"
entrypoint = "x"
working_dir = "/srv/"
user = "1000:1000"
labels = {a = "1", b = "x"}
devices = ["/dev/ttyUSB0"]
device_cgroup_rules = ["c 188:* rwm"]
privileged = true
cap_add = ["NET_ADMIN", "cap_sys_time"]
cap_drop = ["ALL"]
extra_hosts = ["db:10.0.0.2", "gw:host-gateway"]
dns = ["1.1.1.1", "fe80::1"]
tmpfs = ["/run:size=64m,mode=1777", "/tmp"]
read_only = true
mem_limit = "512m"
memswap_limit = "1g"
cpus = 0.5
pids_limit = 100
ulimits = {nofile = {soft = 1024, hard = 4096}, nproc = 64}
sysctls = {"net.ipv4.ip_forward" = 1}
init = true
stop_signal = "int"
stop_grace_period = "30s"
volumes = ["data:/var/lib/x", "logs:/var/log/x:ro"]
networks = ["back", "front"]
[healthcheck]
test = "true"
interval = "5s"
retries = 5
[logging]
driver = "local"
options = {max-size = "10m"}
"#;

    fn runtime(extra: &str) -> crate::model::runtime::Runtime {
        Intention::parse(
            &format!("name = \"m\"\nimage = \"busybox:1\"\n{extra}"),
            DocFormat::Toml,
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{extra}: {e}"))
        .runtime
    }

    fn digests(extra: &str) -> Vec<(String, String)> {
        runtime(extra)
            .digests()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.hex().to_string()))
            .collect()
    }

    fn json(extra: &str) -> String {
        let mut doc = serde_json::Map::new();
        runtime(extra).write_json(&mut doc);
        serde_json::Value::Object(doc).to_string()
    }

    /// The digests and the JSON the code before the field table gave.
    #[test]
    fn digests_and_json_are_as_before_the_table() {
        let cases: [(&str, &[(&str, &str)], &str); 4] = [
            (
                ALL,
                &[
                    (
                        "cap_add",
                        "fc989123adb0302c0c7311acb9aad69db42caa938bac31a05517e457419362e0",
                    ),
                    (
                        "cap_drop",
                        "45b7d2a3c0a27e4b5c4e2d4d62a9cefc3783fa3676d2749ced0d5546ccfbb15c",
                    ),
                    (
                        "cpus",
                        "1e8b4108cbf37f625ea9d458e8e96233170908aa02a9f1615a48d5117cf4ef12",
                    ),
                    (
                        "device_cgroup_rules",
                        "13ce11a3f3d2b9b4af813434ba81a50d127195d607063b1178aeb790fa90619e",
                    ),
                    (
                        "devices",
                        "7ccce7a7259ee7a93b93577aaeb7ea4a57d92e68c33d039ae2a5aaa3648c36f1",
                    ),
                    (
                        "dns",
                        "64b163ccaf66a52842e27e55d4cf8883c1332ded468f8ce4adf39d4908c1c21a",
                    ),
                    (
                        "entrypoint",
                        "d4bf1e8a3ed6fd0c038a5f35509388bc2817969eb989831e7173a0c5c910e2ac",
                    ),
                    (
                        "extra_hosts",
                        "4dd87badd33b3b36ead2299e90ef3ebb29f82f52633f735232ef0488cb09815d",
                    ),
                    (
                        "healthcheck",
                        "c5a178bd3b3d3d97a89cb36a21ac253537bfdce79457edfde4ba1bc3ec792b52",
                    ),
                    (
                        "init",
                        "58ccbd90f30c1b6033dc2b4fec15f600fb80befae1155314eda262fe411e7fd6",
                    ),
                    (
                        "labels",
                        "e85c0db0f569bc86259666eb8e1fa334f7e5880475872e76bede41bc83272acc",
                    ),
                    (
                        "logging",
                        "3a0e987f9aeb039ce38c2a2608cf5da13456d6e162db6a2b89fe31419180557c",
                    ),
                    (
                        "mem_limit",
                        "6e24df35d94db2ad6e7c8e1281fdaa251a2e07d2fc01d8b764597c7c2389042d",
                    ),
                    (
                        "memswap_limit",
                        "5f28b9c049fbc9c09ab778ea05f2a75e4de1ca9d2573a332693b651b69c0f599",
                    ),
                    (
                        "networks",
                        "ccfab4f1fbc9edaeb5aa86cc36d6516ea322ed66a77427fdb545933df9ec7705",
                    ),
                    (
                        "pids_limit",
                        "50b701af96774c8275295d9f593a560c60e1946a2d16f550a471953b9fddf199",
                    ),
                    (
                        "privileged",
                        "30b4be968a12651876959ac8b011c0d069a60ac60bc06e0c5ab3fcd70c84b51f",
                    ),
                    (
                        "read_only",
                        "54bd1c918e1ea10e74ce513dd1107844cc33f591333a498003949fedafc0feca",
                    ),
                    (
                        "stop_grace_period",
                        "5d54429ca5cfda95f7cf0ef0b0d5c2eb18f25324d1d63bb1784cb90ff1e38180",
                    ),
                    (
                        "stop_signal",
                        "c6c32c01b4e3342b3ea1d44ceede8398910490261b6d858d5c32643479bebee4",
                    ),
                    (
                        "sysctls",
                        "2a2efd19b920d3157ca2e72b550a09a20c762fe331a718e00689c984ff1aa772",
                    ),
                    (
                        "tmpfs",
                        "5a39ed49be1952d3499ba0ff56ddf1b06911ff5e0b4540c658320a81469e235a",
                    ),
                    (
                        "ulimits",
                        "43f4c17ba0f4c76396dd59fe596124efef7e2e77e0fef8d87d238b6fb0ea00e0",
                    ),
                    (
                        "user",
                        "ee8c43bc4ee4b82d32fd88f7915e1b001fd17fd1de68d1aa6057b6a1a1919d1a",
                    ),
                    (
                        "volumes",
                        "851edc92c3948b6cc168e1f230f099f2b75d8dba30a4d5a5f0efe4e2b474bb85",
                    ),
                    (
                        "working_dir",
                        "e6dbf78548b1579cd7ab249b904b6902f9b3ce8d993cc12ae7ffc5eec1bb235e",
                    ),
                ],
                r#"{"cap_add":["NET_ADMIN","SYS_TIME"],"cap_drop":["ALL"],"cpus":0.5,"device_cgroup_rules":["c 188:* rwm"],"devices":["/dev/ttyUSB0:/dev/ttyUSB0:rwm"],"dns":["1.1.1.1","fe80::1"],"entrypoint":["/bin/sh","-c","x"],"extra_hosts":{"db":"10.0.0.2","gw":"host-gateway"},"healthcheck":{"interval":"5s","retries":5,"test":["CMD-SHELL","true"]},"init":true,"labels":{"a":"1","b":"x"},"logging":{"driver":"local","options":{"max-size":"10m"}},"mem_limit":536870912,"memswap_limit":1073741824,"networks":["back","front"],"pids_limit":100,"privileged":true,"read_only":true,"stop_grace_period":"30s","stop_signal":"SIGINT","sysctls":{"net.ipv4.ip_forward":"1"},"tmpfs":["/run:mode=1777,size=64m","/tmp"],"ulimits":{"nofile":{"hard":4096,"soft":1024},"nproc":{"hard":64,"soft":64}},"user":"1000:1000","volumes":[{"name":"data","read_only":false,"target":"/var/lib/x"},{"name":"logs","read_only":true,"target":"/var/log/x"}],"working_dir":"/srv"}"#,
            ),
            (
                "network_mode = \"container:db\"",
                &[(
                    "network_mode",
                    "376c181c8f78874948f7f708d3579ba83f80979fdc4582f50611a96fb93c6c04",
                )],
                r#"{"network_mode":"container:db"}"#,
            ),
            (
                "network_mode = \"host\"\nmem_limit = 67108864\n[healthcheck]\ndisable = true",
                &[
                    (
                        "healthcheck",
                        "d0ca111ccdc24466a7d69450a0652f5a3e875c81eef047391c4da86c09a28aef",
                    ),
                    (
                        "mem_limit",
                        "cf25609b4596e44efbe1623f45c3bb5ef2c295043afd4860e732abde079ff4e2",
                    ),
                    (
                        "network_mode",
                        "774ff010bb1972e1c68ac525ff572612c28b13d8e4d69e53726a1b3fc231b33a",
                    ),
                ],
                r#"{"healthcheck":{"test":["NONE"]},"mem_limit":67108864,"network_mode":"host"}"#,
            ),
            (
                "network_mode = \"none\"\nstop_grace_period = \"1m\"\ncpus = \"2\"",
                &[
                    (
                        "cpus",
                        "d0c42302685fa728259473e930a07420babfc29137284dc89847cd7de65e9dcf",
                    ),
                    (
                        "network_mode",
                        "eb7e199ced79c4812e77f5097546ee88035320e10794e189362e25644186e985",
                    ),
                    (
                        "stop_grace_period",
                        "3ba9d64b26c163c3a6deec1b34ad1e7a61c014a3c0d513f8b07354c63be9cb20",
                    ),
                ],
                r#"{"cpus":2.0,"network_mode":"none","stop_grace_period":"1m"}"#,
            ),
        ];
        for (extra, want, json_want) in cases {
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(digests(extra), want, "{extra}");
            assert_eq!(json(extra), json_want, "{extra}");
        }
    }
}
