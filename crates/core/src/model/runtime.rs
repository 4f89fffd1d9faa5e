//! What a module needs from its container beyond its image, command, env,
//! ports and files: the entrypoint, the user, devices, capabilities, the
//! network mode, limits, the health check, logging and the rest, with
//! Compose's names and meanings ([`Runtime`]). Each field is checked with an
//! error naming it, normalised so that every spelling of one setting (and
//! the engine's own default, for unset) is one value, and is an input of
//! the spec digest of its own ([`Runtime::digests`]): only a field that is
//! set is an input, so a container made before the field existed keeps its
//! digest. Each field is one row of `runtime_fields!` and one [`Field`]
//! impl; everything that lists the fields is made from the rows.

use crate::model::sort::Insert as _;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;

use crate::model::names::{AbsPath, Digest, InputName, ModuleName};
use crate::model::time::parse_duration;

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
        Some(J::Object(m)) => Ok(Some(ListOrMap::Map(m.into_iter().into_map()))),
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

/// The runtime fields as an intention keeps them: nothing allocated while
/// every field is unset (most modules), so that each copy of an intention
/// (the files' parses, the store's decodes, a pass's entries) stays small.
/// Reads as the [`Runtime`] it holds, or the unset one.
#[derive(Clone, Default)]
pub struct Sparse(Option<Box<Runtime>>);

impl Sparse {
    /// Keeps `r`, allocating only when a field is set.
    pub fn new(r: Runtime) -> Sparse {
        Sparse((r != Runtime::default()).then(|| Box::new(r)))
    }
}

impl From<Runtime> for Sparse {
    fn from(r: Runtime) -> Sparse {
        Sparse::new(r)
    }
}

impl std::ops::Deref for Sparse {
    type Target = Runtime;
    fn deref(&self) -> &Runtime {
        static UNSET: std::sync::OnceLock<Runtime> = std::sync::OnceLock::new();
        match &self.0 {
            Some(r) => r,
            None => UNSET.get_or_init(Runtime::default),
        }
    }
}

/// Writing a field allocates the whole, unset but for it.
impl std::ops::DerefMut for Sparse {
    fn deref_mut(&mut self) -> &mut Runtime {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for Sparse {
    fn eq(&self, other: &Sparse) -> bool {
        **self == **other
    }
}

impl Eq for Sparse {}

impl std::fmt::Debug for Sparse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
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

/// One runtime field: how it is checked from what a document holds, how it
/// is an input, and how it is written back. Nothing has a default: a row
/// whose field says not how it is an input does not compile.
pub trait Field {
    /// Its normalised value, a member of [`Runtime`] (`Default`: unset).
    type Value;
    /// Values a document may give it (TOML, one line's right-hand side),
    /// at least two that differ: the property tests write every field
    /// with them. With `mem_limit = "64m"` beside it (and `networks` beside
    /// `aliases`), each is valid.
    const EXAMPLES: &'static [&'static str];
    /// Checked and normalised; `r` holds the fields above it in the table.
    fn check(v: Option<J>, r: &Runtime) -> Result<Self::Value, FieldError>;
    /// What its input's digest is of (the digest's domain is the field's
    /// name), or `None` when unset: then it is no input, so a container
    /// made before the field existed keeps its digest.
    fn input(v: &Self::Value) -> Option<impl Serialize + '_>;
    /// As a document writes it (parsing back to the same value), or `None`
    /// when unset.
    fn json(v: &Self::Value) -> Option<J>;
}

/// The runtime fields, one row each, in the order they are checked (a
/// check sees the fields above it) and written: its doc, its member in
/// [`Runtime`] and type, its name (in a document, and as an input), and
/// the type that is its [`Field`]. `$then` is the macro that makes
/// something of the rows: [`Runtime`], [`RuntimeDoc`], [`FIELDS`], the
/// check, the digests and the JSON here; the intention document's fields
/// in `intention.rs`; the importer's output in `crate::import`.
macro_rules! runtime_fields {
    ($then:ident) => {
        $then! {
            /// Replaces the image's entrypoint (`Some([])` clears it).
            entrypoint: Option<Vec<String>> = "entrypoint" Entrypoint,
            /// The working directory.
            working_dir: Option<AbsPath> = "working_dir" WorkingDir,
            /// `user`, `uid`, `user:group` or `uid:gid`.
            user: Option<String> = "user" User,
            /// The user's own labels (`stead.*` is reserved).
            labels: BTreeMap<String, String> = "labels" Labels,
            /// Host devices, by where the container sees them.
            devices: Vec<Device> = "devices" Devices,
            /// Device cgroup rules (`c 188:* rwm`), sorted.
            device_cgroup_rules: Vec<String> = "device_cgroup_rules" DeviceCgroupRules,
            /// Every capability and device.
            privileged: bool = "privileged" Privileged,
            /// Capabilities added, without `CAP_`, upper case.
            cap_add: BTreeSet<String> = "cap_add" CapAdd,
            /// Capabilities dropped.
            cap_drop: BTreeSet<String> = "cap_drop" CapDrop,
            /// The network mode.
            network_mode: NetworkMode = "network_mode" NetworkModeField,
            /// Extra `/etc/hosts` entries: host name → an IP address (as the
            /// address prints: one spelling each) or [`HOST_GATEWAY`].
            extra_hosts: BTreeMap<String, Addresses> = "extra_hosts" ExtraHosts,
            /// DNS servers, in order.
            dns: Vec<IpAddr> = "dns" Dns,
            /// tmpfs mounts: where → options (empty: none).
            tmpfs: BTreeMap<AbsPath, String> = "tmpfs" Tmpfs,
            /// A read-only root filesystem.
            read_only: bool = "read_only" ReadOnly,
            /// Memory limit, bytes.
            mem_limit: Option<u64> = "mem_limit" MemLimit,
            /// Memory plus swap limit, bytes (`-1`: unlimited swap).
            memswap_limit: Option<i64> = "memswap_limit" MemswapLimit,
            /// CPUs, in billionths.
            nano_cpus: Option<u64> = "cpus" Cpus,
            /// The most processes.
            pids_limit: Option<i64> = "pids_limit" PidsLimit,
            /// Resource limits by name.
            ulimits: BTreeMap<String, Ulimit> = "ulimits" Ulimits,
            /// Namespaced kernel parameters.
            sysctls: BTreeMap<String, String> = "sysctls" Sysctls,
            /// An init process as PID 1 that reaps zombies and forwards signals.
            init: bool = "init" Init,
            /// The signal that stops it (`SIGTERM` unset).
            stop_signal: Option<String> = "stop_signal" StopSignal,
            /// How long a stop waits before killing (10 s unset).
            stop_grace_period: Option<Duration> = "stop_grace_period" StopGracePeriod,
            /// The health check (unset: the image's).
            healthcheck: Option<Healthcheck> = "healthcheck" HealthcheckField,
            /// Where its output goes (unset: the agent's default, not an input).
            logging: Option<Logging> = "logging" LoggingField,
            /// Named volumes, by where they are mounted.
            volumes: Vec<Volume> = "volumes" Volumes,
            /// User-defined networks it joins (made and labelled by the agent,
            /// removed once no container of this node uses them); in each, the
            /// module's name resolves to it.
            networks: BTreeSet<String> = "networks" Networks,
            /// The size of `/dev/shm`, bytes (unset: the engine's 64 MiB).
            shm_size: Option<u64> = "shm_size" ShmSize,
            /// The container's host name (unset: the engine's, its short
            /// ID); on its networks it resolves to the container too.
            hostname: Option<String> = "hostname" Hostname,
            /// Names it answers to on every network it joins, beside its
            /// module's name (Compose's service name, `container_name`,
            /// network `aliases`).
            aliases: BTreeSet<String> = "aliases" Aliases,
            /// Where the module sees its update-lock directory (a directory
            /// of the agent's, mounted read-write): an `updates.lock` file
            /// it makes there holds off its own recreate, a `device.lock`
            /// every recreate of the device, while its container runs on.
            update_lock: Option<AbsPath> = "update_lock" UpdateLock,
        }
    };
}
pub(crate) use runtime_fields;

/// What the rows make here.
macro_rules! runtime_items {
    ($($(#[$doc:meta])* $member:ident: $ty:ty = $name:tt $field:ident,)*) => {
        /// The inputs a runtime field may be: each is the field's name.
        pub const FIELDS: [&str; [$($name),*].len()] = [$($name),*];

        /// Everything else the container is created with, checked and
        /// normalised. `Default` is every field unset: the engine's defaults.
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
        pub struct Runtime {
            $($(#[$doc])* pub $member: $ty,)*
        }

        /// The runtime fields as an intention document holds them: each
        /// read as a JSON value (TOML's too), and taken apart by
        /// [`RuntimeDoc::check`], so that no field adds a deserializer of
        /// its own to the binary.
        #[derive(Clone, Debug, Default)]
        pub struct RuntimeDoc {
            $(pub(crate) $member: Option<J>,)*
        }

        /// Writes each field that is set under its name, in the table's
        /// order: what `stead import` writes is this very type.
        impl Serialize for RuntimeDoc {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(None)?;
                $(if let Some(v) = &self.$member {
                    m.serialize_entry($name, v)?;
                })*
                m.end()
            }
        }

        impl RuntimeDoc {
            /// Sets the field named `name` to `v` (`stead import`, which
            /// names each field as Compose and the intention do); `None`
            /// unsets it. Says whether `name` is a field.
            pub fn set(&mut self, name: &str, v: impl Serialize) -> bool {
                let slot = match name {
                    $($name => &mut self.$member,)*
                    _ => return false,
                };
                *slot = serde_json::to_value(v).ok().filter(|v| !v.is_null());
                true
            }

            /// The field named `name`, when set.
            pub fn get(&self, name: &str) -> Option<&J> {
                match name {
                    $($name => self.$member.as_ref(),)*
                    _ => None,
                }
            }

            /// Checks and normalises every field, in the table's order,
            /// then what one field says of another.
            pub fn check(self) -> Result<Runtime, FieldError> {
                let mut r = Runtime::default();
                $(r.$member = <$field as Field>::check(self.$member, &r)?;)*
                across(&r)?;
                Ok(r)
            }
        }

        impl Runtime {
            /// One input per field that is set, named by the field, with the
            /// digest of its normalised value.
            pub fn digests(&self) -> BTreeMap<InputName, Digest> {
                let mut out = BTreeMap::new();
                $(if let Some(v) = <$field as Field>::input(&self.$member) {
                    out.insert(input_name($name), Digest::canonical($name, &v));
                })*
                out
            }

            /// Writes every set field into an intention document, in a form
            /// that parses back to the same runtime.
            pub fn write_json(&self, doc: &mut serde_json::Map<String, J>) {
                $(if let Some(v) = <$field as Field>::json(&self.$member) {
                    doc.insert($name.to_string(), v);
                })*
            }
        }

        /// Every field's examples, by name (for the property tests).
        pub const EXAMPLES: [(&str, &[&str]); FIELDS.len()] =
            [$(($name, <$field as Field>::EXAMPLES)),*];
    };
}
runtime_fields!(runtime_items);

/// A field's name as an input name.
fn input_name(name: &str) -> InputName {
    InputName::try_from(name).expect("runtime fields are input names")
}

/// A collection: unset when empty.
trait Collection {
    fn empty(&self) -> bool;
}

impl<T> Collection for Vec<T> {
    fn empty(&self) -> bool {
        self.is_empty()
    }
}

impl<T> Collection for BTreeSet<T> {
    fn empty(&self) -> bool {
        self.is_empty()
    }
}

impl<K, V> Collection for BTreeMap<K, V> {
    fn empty(&self) -> bool {
        self.is_empty()
    }
}

/// A collection as an input: when it has something.
fn nonempty<C: Collection>(c: &C) -> Option<&C> {
    (!c.empty()).then_some(c)
}

/// A flag as an input: `true`, when set.
fn flag(b: &bool) -> Option<&'static bool> {
    b.then_some(&true)
}

/// A value as a document writes it, when there is one.
fn json_of<T: Serialize>(v: Option<T>) -> Option<J> {
    v.map(|v| serde_json::json!(v))
}

/// A list of strings given as one string or a list.
fn one_or_list(field: &str, v: Option<J>) -> Result<Vec<String>, FieldError> {
    Ok(match string_or_list(field, v)? {
        None => vec![],
        Some(StringOrList::String(s)) => vec![s],
        Some(StringOrList::List(l)) => l,
    })
}

/// A size in bytes, as its value checks it.
fn bytes_of(field: &str, v: Option<J>) -> Result<Option<i64>, FieldError> {
    bytes_doc(field, v)?
        .as_ref()
        .map(parse_bytes)
        .transpose()
        .map_err(|m| (field.to_string(), m))
}

struct Entrypoint;
impl Field for Entrypoint {
    type Value = Option<Vec<String>>;
    const EXAMPLES: &'static [&'static str] = &["\"x\"", "[\"/init\"]", "[]"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let e = match string_or_list("entrypoint", v)? {
            None => return Ok(None),
            Some(StringOrList::List(l)) => l,
            // A string is run by a shell, as the engine's shell form does.
            Some(StringOrList::String(s)) if s.is_empty() => vec![],
            Some(StringOrList::String(s)) => vec!["/bin/sh".into(), "-c".into(), s],
        };
        for (i, a) in e.iter().enumerate() {
            no_nul(&format!("entrypoint[{i}]"), a)?;
        }
        Ok(Some(e))
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref())
    }
}

struct WorkingDir;
impl Field for WorkingDir {
    type Value = Option<AbsPath>;
    const EXAMPLES: &'static [&'static str] = &["\"/srv\"", "\"/opt/\""];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        string("working_dir", v)?
            .map(|w| {
                // `/srv/` is `/srv`, as the engine takes it.
                let t = if w.len() > 1 {
                    w.trim_end_matches('/')
                } else {
                    &w
                };
                AbsPath::try_from(t).map_err(|e| ("working_dir".to_string(), e.0))
            })
            .transpose()
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref().map(AbsPath::as_str)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref().map(AbsPath::as_str))
    }
}

struct UpdateLock;
impl Field for UpdateLock {
    type Value = Option<AbsPath>;
    const EXAMPLES: &'static [&'static str] = &["\"/run/stead\"", "\"/tmp/locks/\""];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        string("update_lock", v)?
            .map(|w| {
                let t = crate::model::names::trailing_slash_dropped(&w);
                if t == "/" {
                    return Err((
                        "update_lock".to_string(),
                        "cannot be / (a directory is mounted there)".to_string(),
                    ));
                }
                AbsPath::try_from(t).map_err(|e| ("update_lock".to_string(), e.0))
            })
            .transpose()
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref().map(AbsPath::as_str)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref().map(AbsPath::as_str))
    }
}

struct User;
impl Field for User {
    type Value = Option<String>;
    const EXAMPLES: &'static [&'static str] = &["\"1000:1000\"", "\"nobody\""];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        match string("user", v)?.map(|u| u.trim().to_string()) {
            None => Ok(None),
            Some(u) if u.is_empty() => Ok(None),
            Some(u)
                if u.contains(char::is_whitespace)
                    || u.contains('\0')
                    || u.matches(':').count() > 1 =>
            {
                Err((
                    "user".into(),
                    format!("{u:?} is not user, uid, user:group or uid:gid"),
                ))
            }
            Some(u) => Ok(Some(u)),
        }
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref())
    }
}

struct Labels;
impl Field for Labels {
    type Value = BTreeMap<String, String>;
    const EXAMPLES: &'static [&'static str] = &["{a = \"1\"}", "[\"a=2\", \"b=x\"]"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let mut labels = BTreeMap::new();
        let Some(l) = list_or_map("labels", v)? else {
            return Ok(labels);
        };
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
            labels.insert(k, v);
        }
        Ok(labels)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v))
    }
}

struct Devices;
impl Field for Devices {
    type Value = Vec<Device>;
    const EXAMPLES: &'static [&'static str] = &[
        "[\"/dev/ttyUSB0\"]",
        "[\"/dev/ttyUSB0:/dev/ttyS0:r\", \"/dev/i2c-1\"]",
    ];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let mut devices = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, d) in strings("devices", v)?.iter().enumerate() {
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
            devices.push(Device {
                host,
                container,
                permissions,
            });
        }
        super::sort::sort_by(&mut devices, |a, b| a.container.cmp(&b.container));
        Ok(devices)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v).map(|d| {
            d.iter()
                .map(|d| format!("{}:{}:{}", d.host, d.container, d.permissions))
                .collect::<Vec<_>>()
        }))
    }
}

struct DeviceCgroupRules;
impl Field for DeviceCgroupRules {
    type Value = Vec<String>;
    const EXAMPLES: &'static [&'static str] = &["[\"c 188:* rwm\"]", "[\"b 8:0 r\", \"a *:* m\"]"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let mut rules = Vec::new();
        for (i, rule) in strings("device_cgroup_rules", v)?.iter().enumerate() {
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
            rules.push(words.join(" "));
        }
        super::sort::sort(&mut rules);
        rules.dedup();
        Ok(rules)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v))
    }
}

struct Privileged;
impl Field for Privileged {
    type Value = bool;
    const EXAMPLES: &'static [&'static str] = &["true", "false"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        boolean("privileged", v)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        flag(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(flag(v))
    }
}

/// Capabilities, each named as the engine names it.
fn capabilities(field: &str, v: Option<J>) -> Result<BTreeSet<String>, FieldError> {
    strings(field, v)?
        .iter()
        .enumerate()
        .map(|(i, c)| capability(&format!("{field}[{i}]"), c))
        .try_into_set()
}

struct CapAdd;
impl Field for CapAdd {
    type Value = BTreeSet<String>;
    const EXAMPLES: &'static [&'static str] =
        &["[\"NET_ADMIN\"]", "[\"cap_sys_time\", \"NET_RAW\"]"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        capabilities("cap_add", v)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v))
    }
}

struct CapDrop;
impl Field for CapDrop {
    type Value = BTreeSet<String>;
    const EXAMPLES: &'static [&'static str] = &["[\"ALL\"]", "[\"net_raw\"]"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        capabilities("cap_drop", v)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v))
    }
}

struct NetworkModeField;
impl Field for NetworkModeField {
    type Value = NetworkMode;
    const EXAMPLES: &'static [&'static str] = &["\"host\"", "\"none\"", "\"container:db\""];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        Ok(match string("network_mode", v)?.as_deref().map(str::trim) {
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
        })
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        (*v != NetworkMode::Bridge).then(|| v.spelled())
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(Self::input(v))
    }
}

/// One host's addresses in `extra_hosts`, in the order given, each once.
/// One address is written (and digested) as a string, as before a host
/// could have several, so a container made then keeps its digest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Addresses(Vec<String>);

impl Addresses {
    /// Each address (an IP address or [`HOST_GATEWAY`]).
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl FromIterator<String> for Addresses {
    fn from_iter<I: IntoIterator<Item = String>>(i: I) -> Self {
        Addresses(i.into_iter().collect())
    }
}

impl Serialize for Addresses {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => s.serialize_str(one),
            many => many.serialize(s),
        }
    }
}

struct ExtraHosts;
impl Field for ExtraHosts {
    type Value = BTreeMap<String, Addresses>;
    const EXAMPLES: &'static [&'static str] = &[
        "[\"db:10.0.0.2\"]",
        "{gw = \"fe80:0::1\", \"host.docker.internal\" = \"host-gateway\"}",
        "[\"db=10.0.0.2,10.0.0.3\"]",
        "{db = [\"10.0.0.2\", \"fe80::1\"]}",
    ];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let mut hosts: BTreeMap<String, Addresses> = BTreeMap::new();
        let Some(h) = list_or_map("extra_hosts", v)? else {
            return Ok(hosts);
        };
        // Compose writes `host:ip` (an IPv6 address holds colons too) or
        // `host=ip`, several addresses apart by commas; or a mapping of a
        // host to an address or a list of them.
        let mut given: Vec<(String, String, String)> = Vec::new();
        match h {
            ListOrMap::List(l) => {
                for (i, s) in l.into_iter().enumerate() {
                    let (host, ips) =
                        s.split_once('=')
                            .or_else(|| s.split_once(':'))
                            .ok_or_else(|| {
                                (
                                    format!("extra_hosts[{i}]"),
                                    format!("{s:?} is not KEY=VALUE"),
                                )
                            })?;
                    let field = format!("extra_hosts.{}", host.trim());
                    for ip in ips.split(',') {
                        given.push((field.clone(), host.trim().into(), ip.trim().into()));
                    }
                }
            }
            ListOrMap::Map(m) => {
                for (host, v) in m {
                    let field = format!("extra_hosts.{host}");
                    let ips = match v {
                        J::Array(a) => a,
                        one => vec![one],
                    };
                    for ip in ips {
                        let ip = json_scalar(&ip).ok_or_else(|| {
                            (
                                field.clone(),
                                "an address, or a list of addresses".to_string(),
                            )
                        })?;
                        given.push((field.clone(), host.clone(), ip));
                    }
                }
            }
        }
        for (field, host, ip) in given {
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
            let addrs = &mut hosts.entry(host).or_default().0;
            if !addrs.contains(&ip) {
                addrs.push(ip);
            }
        }
        Ok(hosts)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v))
    }
}

struct Dns;
impl Field for Dns {
    type Value = Vec<IpAddr>;
    const EXAMPLES: &'static [&'static str] = &["\"1.1.1.1\"", "[\"9.9.9.9\", \"fe80::1\"]"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        one_or_list("dns", v)?
            .iter()
            .enumerate()
            .map(|(i, d)| {
                d.trim()
                    .parse()
                    .map_err(|_| (format!("dns[{i}]"), format!("{d:?} is not an IP address")))
            })
            .collect()
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v).map(|d| d.iter().map(ToString::to_string).collect::<Vec<_>>()))
    }
}

struct Tmpfs;
impl Field for Tmpfs {
    type Value = BTreeMap<AbsPath, String>;
    const EXAMPLES: &'static [&'static str] =
        &["\"/run:size=64m,mode=1777\"", "[\"/run\", \"/var/cache\"]"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let mut tmpfs = BTreeMap::new();
        for (i, t) in one_or_list("tmpfs", v)?.iter().enumerate() {
            let field = format!("tmpfs[{i}]");
            let (target, opts) = t.split_once(':').unwrap_or((t, ""));
            let target = AbsPath::try_from(crate::model::names::trailing_slash_dropped(target))
                .map_err(|e| (field.clone(), e.0))?;
            let mut opts: Vec<&str> = opts
                .split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .collect();
            super::sort::sort(&mut opts);
            opts.dedup();
            if tmpfs.insert(target.clone(), opts.join(",")).is_some() {
                return Err((field, format!("{target} is given twice")));
            }
        }
        Ok(tmpfs)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v).map(|t| {
            t.iter()
                .map(|(p, o)| {
                    if o.is_empty() {
                        p.to_string()
                    } else {
                        format!("{p}:{o}")
                    }
                })
                .collect::<Vec<_>>()
        }))
    }
}

struct ReadOnly;
impl Field for ReadOnly {
    type Value = bool;
    const EXAMPLES: &'static [&'static str] = &["true", "false"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        boolean("read_only", v)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        flag(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(flag(v))
    }
}

struct MemLimit;
impl Field for MemLimit {
    type Value = Option<u64>;
    const EXAMPLES: &'static [&'static str] = &["\"64m\"", "536870912", "\"256m\""];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        match bytes_of("mem_limit", v)? {
            None | Some(0) => Ok(None),
            Some(n) if n < 0 => Err(("mem_limit".into(), "must not be negative".into())),
            Some(n) if n < 6 << 20 => {
                Err(("mem_limit".into(), "the engine takes at least 6 MiB".into()))
            }
            Some(n) => Ok(Some(n as u64)),
        }
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref())
    }
}

struct MemswapLimit;
impl Field for MemswapLimit {
    type Value = Option<i64>;
    const EXAMPLES: &'static [&'static str] = &["-1", "\"1g\""];
    fn check(v: Option<J>, r: &Runtime) -> Result<Self::Value, FieldError> {
        match bytes_of("memswap_limit", v)? {
            None | Some(0) => Ok(None),
            Some(n) if n < -1 => Err((
                "memswap_limit".into(),
                "must be -1 (unlimited) or a size".into(),
            )),
            Some(n) if n > 0 && r.mem_limit.is_none_or(|m| (n as u64) < m) => Err((
                "memswap_limit".into(),
                "needs mem_limit, and must not be less than it".into(),
            )),
            Some(n) => Ok(Some(n)),
        }
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref())
    }
}

struct Cpus;
impl Field for Cpus {
    type Value = Option<u64>;
    const EXAMPLES: &'static [&'static str] = &["0.5", "\"2\"", "1.25"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let n: f64 = match v {
            None | Some(J::Null) => return Ok(None),
            Some(J::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(J::String(t)) => t
                .trim()
                .parse()
                .map_err(|_| ("cpus".to_string(), format!("{t:?} is not a number")))?,
            Some(_) => return Err(wrong("cpus", "a number")),
        };
        if !(0.0..=1024.0).contains(&n) {
            return Err(("cpus".into(), format!("{n} is not between 0 and 1024")));
        }
        let nanos = (n * 1e9).round() as u64;
        Ok((nanos > 0).then_some(nanos))
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.map(|c| c as f64 / 1e9))
    }
}

struct PidsLimit;
impl Field for PidsLimit {
    type Value = Option<i64>;
    const EXAMPLES: &'static [&'static str] = &["100", "4096"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        Ok(integer("pids_limit", v)?.filter(|n| *n > 0))
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref())
    }
}

/// One resource limit, checked.
fn ulimit(name: &str, u: J) -> Result<Ulimit, FieldError> {
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
    if !ULIMITS.contains(&name) {
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
    Ok(Ulimit { soft, hard })
}

struct Ulimits;
impl Field for Ulimits {
    type Value = BTreeMap<String, Ulimit>;
    const EXAMPLES: &'static [&'static str] = &[
        "{nofile = 1024}",
        "{nofile = {soft = 1024, hard = 4096}, nproc = 64}",
    ];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let ulimits = match v {
            None | Some(J::Null) => serde_json::Map::new(),
            Some(J::Object(m)) => m,
            Some(_) => return Err(wrong("ulimits", "a table")),
        };
        ulimits
            .into_iter()
            .map(|(name, u)| Ok((name.clone(), ulimit(&name, u)?)))
            .try_into_map()
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v).map(|u| {
            u.iter()
                .map(|(k, u)| (k, serde_json::json!({"soft": u.soft, "hard": u.hard})))
                .into_map()
        }))
    }
}

struct Sysctls;
impl Field for Sysctls {
    type Value = BTreeMap<String, String>;
    const EXAMPLES: &'static [&'static str] = &[
        "{\"net.ipv4.ip_forward\" = \"1\"}",
        "[\"net/ipv4/ip_forward=0\", \"net.core.somaxconn=1024\"]",
    ];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let mut sysctls = BTreeMap::new();
        let Some(s) = list_or_map("sysctls", v)? else {
            return Ok(sysctls);
        };
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
            sysctls.insert(k.replace('/', "."), v);
        }
        Ok(sysctls)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v))
    }
}

struct Init;
impl Field for Init {
    type Value = bool;
    const EXAMPLES: &'static [&'static str] = &["true", "false"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        boolean("init", v)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        flag(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(flag(v))
    }
}

struct StopSignal;
impl Field for StopSignal {
    type Value = Option<String>;
    const EXAMPLES: &'static [&'static str] = &["\"SIGINT\"", "\"quit\"", "\"10\""];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        Ok(match string("stop_signal", v)? {
            None => None,
            Some(s) => Some(signal_name(&s).map_err(|m| ("stop_signal".to_string(), m))?)
                .filter(|s| s != "SIGTERM"),
        })
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref())
    }
}

struct StopGracePeriod;
impl Field for StopGracePeriod {
    type Value = Option<Duration>;
    const EXAMPLES: &'static [&'static str] = &["\"30s\"", "\"1m\"", "\"2s\""];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let d = duration("stop_grace_period", &string("stop_grace_period", v)?)?
            .filter(|d| *d != DEFAULT_STOP_GRACE);
        if d.is_some_and(|d| d > MAX_STOP_GRACE || d.subsec_nanos() != 0) {
            return Err((
                "stop_grace_period".into(),
                "whole seconds, at most 5m".into(),
            ));
        }
        Ok(d)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.map(|d| d.as_millis())
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.map(crate::model::time::format_duration))
    }
}

/// A health check as written, its keys taken apart.
fn healthcheck_doc(v: J) -> Result<HealthcheckDoc, FieldError> {
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
    Ok(HealthcheckDoc {
        test: string_or_list("healthcheck.test", t.remove("test"))?,
        interval: string("healthcheck.interval", t.remove("interval"))?,
        timeout: string("healthcheck.timeout", t.remove("timeout"))?,
        retries,
        start_period: string("healthcheck.start_period", t.remove("start_period"))?,
        disable: boolean("healthcheck.disable", t.remove("disable"))?,
    })
}

/// A health check's test: a list, or a string run by a shell.
fn healthcheck_test(test: Option<StringOrList>) -> Result<Vec<String>, FieldError> {
    let test = match test {
        // The image's own test, with other timings (as Compose and the
        // engine take it).
        None => vec![],
        Some(StringOrList::String(s)) => vec!["CMD-SHELL".into(), s],
        Some(StringOrList::List(l)) => match l.first().map(String::as_str) {
            Some("CMD" | "CMD-SHELL") if l.len() > 1 => l,
            Some("NONE") if l.len() == 1 => l,
            _ => {
                return Err((
                    "healthcheck.test".into(),
                    "a list starts with CMD or CMD-SHELL and has a command (or is [\"NONE\"])"
                        .into(),
                ));
            }
        },
    };
    for (i, a) in test.iter().enumerate() {
        no_nul(&format!("healthcheck.test[{i}]"), a)?;
    }
    Ok(test)
}

struct HealthcheckField;
impl Field for HealthcheckField {
    type Value = Option<Healthcheck>;
    const EXAMPLES: &'static [&'static str] = &[
        "{test = \"wget -q -O- localhost\"}",
        "{test = [\"CMD\", \"true\"], interval = \"5s\", retries = 5}",
        "{disable = true}",
        "{interval = \"10s\"}",
    ];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let h = match v {
            None | Some(J::Null) => return Ok(None),
            Some(v) => healthcheck_doc(v)?,
        };
        if h.disable {
            return Ok(Some(Healthcheck {
                test: vec!["NONE".into()],
                interval: None,
                timeout: None,
                retries: None,
                start_period: None,
            }));
        }
        let test = healthcheck_test(h.test)?;
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
        Ok((!image_s_own).then_some(check))
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        use crate::model::time::format_duration;
        let h = v.as_ref()?;
        let mut o = serde_json::Map::new();
        if !h.test.is_empty() {
            o.insert("test".into(), serde_json::json!(h.test));
        }
        for (k, d) in [
            ("interval", h.interval),
            ("timeout", h.timeout),
            ("start_period", h.start_period),
        ] {
            if let Some(d) = d {
                o.insert(k.into(), serde_json::json!(format_duration(d)));
            }
        }
        if let Some(r) = h.retries {
            o.insert("retries".into(), serde_json::json!(r));
        }
        Some(J::Object(o))
    }
}

struct LoggingField;
impl Field for LoggingField {
    type Value = Option<Logging>;
    const EXAMPLES: &'static [&'static str] = &[
        "{driver = \"local\", options = {max-size = \"10m\"}}",
        "{driver = \"journald\"}",
    ];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(None);
        };
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
        Ok(Some(Logging { driver, options }))
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(
            v.as_ref()
                .map(|l| serde_json::json!({"driver": l.driver, "options": l.options})),
        )
    }
}

/// One named volume as written: its name, target and whether read-only.
fn volume_doc(field: &str, v: J) -> Result<(String, String, bool), FieldError> {
    match v {
        J::String(s) => {
            let mut parts = s.split(':');
            let name = parts.next().unwrap_or("").to_string();
            let target = parts.next().unwrap_or("").to_string();
            let ro = match parts.next() {
                None | Some("rw") => false,
                Some("ro") => true,
                Some(o) => {
                    return Err((field.into(), format!("{o:?}: the mode is ro or rw")));
                }
            };
            if parts.next().is_some() {
                return Err((field.into(), format!("{s:?} is not NAME:TARGET[:ro]")));
            }
            Ok((name, target, ro))
        }
        v @ J::Object(_) => {
            let mut t = table(field, v, &["name", "target", "read_only"])?;
            Ok((
                string(&format!("{field}.name"), t.remove("name"))?.unwrap_or_default(),
                string(&format!("{field}.target"), t.remove("target"))?.unwrap_or_default(),
                boolean(&format!("{field}.read_only"), t.remove("read_only"))?,
            ))
        }
        _ => Err(wrong(
            field,
            "NAME:TARGET[:ro] or {name, target, read_only}",
        )),
    }
}

struct Volumes;
impl Field for Volumes {
    type Value = Vec<Volume>;
    const EXAMPLES: &'static [&'static str] = &[
        "[\"data:/var/lib/x\"]",
        "[{name = \"data\", target = \"/var/lib/x\", read_only = true}, \"logs:/var/log/x\"]",
    ];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let volumes = match v {
            None | Some(J::Null) => vec![],
            Some(J::Array(a)) => a,
            Some(_) => return Err(wrong("volumes", "a list")),
        };
        let mut out = Vec::new();
        let mut targets = BTreeSet::new();
        for (i, v) in volumes.into_iter().enumerate() {
            let field = format!("volumes[{i}]");
            let (name, target, read_only) = volume_doc(&field, v)?;
            if name.starts_with(['/', '.', '~']) {
                return Err((
                    field,
                    format!("{name:?} is a host path: a bind mount is a `mounts` entry"),
                ));
            }
            let name = engine_name(&field, &name)?;
            let target = AbsPath::try_from(crate::model::names::trailing_slash_dropped(&target))
                .map_err(|e| (field.clone(), e.0))?;
            if !targets.insert(target.clone()) {
                return Err((field, format!("{target} is given twice")));
            }
            out.push(Volume {
                name,
                target,
                read_only,
            });
        }
        super::sort::sort_by(&mut out, |a, b| a.target.cmp(&b.target));
        Ok(out)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v).map(|v| {
            v.iter()
                .map(|v| serde_json::json!({"name": v.name, "target": v.target.as_str(), "read_only": v.read_only}))
                .collect::<Vec<_>>()
        }))
    }
}

struct Networks;
impl Field for Networks {
    type Value = BTreeSet<String>;
    const EXAMPLES: &'static [&'static str] = &["[\"back\"]", "[\"front\", \"back\"]"];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        let mut networks = BTreeSet::new();
        for (i, n) in strings("networks", v)?.iter().enumerate() {
            let field = format!("networks[{i}]");
            if matches!(n.as_str(), "bridge" | "host" | "none" | "default") {
                return Err((
                    field,
                    format!("{n:?} is the engine's own: use network_mode"),
                ));
            }
            networks.insert(engine_name(&field, n)?);
        }
        Ok(networks)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v))
    }
}

struct ShmSize;
impl Field for ShmSize {
    type Value = Option<u64>;
    const EXAMPLES: &'static [&'static str] = &["\"64m\"", "268435456", "\"1g\""];
    fn check(v: Option<J>, _: &Runtime) -> Result<Self::Value, FieldError> {
        match bytes_of("shm_size", v)? {
            None | Some(0) => Ok(None),
            Some(n) if n < 0 => Err(("shm_size".into(), "must not be negative".into())),
            Some(n) => Ok(Some(n as u64)),
        }
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref())
    }
}

/// A DNS name: labels of letters, digits, `-` (and `_`, which the
/// engines' resolvers take) apart by dots, 63 at most each, 253 in all.
fn dns_name(field: &str, s: &str) -> Result<String, FieldError> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if s.len() <= 253 && s.split('.').all(label_ok) {
        Ok(s.to_string())
    } else {
        Err((
            field.to_string(),
            format!(
                "{:?} is not a DNS name: labels of letters, digits, - and _ apart by dots, at most 63 each and 253 in all",
                crate::model::text::clip(s, 80)
            ),
        ))
    }
}

struct Hostname;
impl Field for Hostname {
    type Value = Option<String>;
    const EXAMPLES: &'static [&'static str] = &["\"sensor\"", "\"edge-1.local\""];
    fn check(v: Option<J>, r: &Runtime) -> Result<Self::Value, FieldError> {
        let Some(h) = string("hostname", v)?.filter(|h| !h.is_empty()) else {
            return Ok(None);
        };
        if matches!(
            r.network_mode,
            NetworkMode::Host | NetworkMode::Container(_)
        ) {
            return Err((
                "hostname".into(),
                format!(
                    "a container with network_mode = {:?} has that one's host name",
                    r.network_mode.spelled()
                ),
            ));
        }
        dns_name("hostname", &h).map(Some)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        v.as_ref()
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(v.as_ref())
    }
}

struct Aliases;
impl Field for Aliases {
    type Value = BTreeSet<String>;
    const EXAMPLES: &'static [&'static str] = &["[\"db\"]", "[\"mysql\", \"db_main\"]"];
    fn check(v: Option<J>, r: &Runtime) -> Result<Self::Value, FieldError> {
        let mut aliases = BTreeSet::new();
        for (i, a) in strings("aliases", v)?.iter().enumerate() {
            aliases.insert(dns_name(&format!("aliases[{i}]"), a)?);
        }
        if !aliases.is_empty() && r.networks.is_empty() {
            return Err((
                "aliases".into(),
                "names on a user network: join one with `networks` (the engine's bridge resolves no names)".into(),
            ));
        }
        Ok(aliases)
    }
    fn input(v: &Self::Value) -> Option<impl Serialize + '_> {
        nonempty(v)
    }
    fn json(v: &Self::Value) -> Option<J> {
        json_of(nonempty(v))
    }
}

/// What one field says of another, once each is checked.
fn across(r: &Runtime) -> Result<(), FieldError> {
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
            "a container in another's network stack takes that one's dns and extra_hosts".into(),
        ));
    }
    Ok(())
}

impl Runtime {
    /// How long a stop of this container waits before it kills.
    pub fn stop_grace(&self) -> Duration {
        self.stop_grace_period.unwrap_or(DEFAULT_STOP_GRACE)
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
        cases.push((
            "shm_size",
            vec![
                "shm_size = \"64m\"",
                "shm_size = 67108864",
                "shm_size = \"64MiB\"",
            ],
            "shm_size = \"128m\"",
        ));
        cases.push((
            "hostname",
            vec!["hostname = \"db.local\""],
            "hostname = \"db\"",
        ));
        cases.push((
            "aliases",
            vec![
                "networks = [\"n\"]\naliases = [\"db\", \"mysql\"]",
                "networks = [\"n\"]\naliases = [\"mysql\", \"db\", \"db\"]",
            ],
            "networks = [\"n\"]\naliases = [\"db\"]",
        ));
        cases.push((
            "update_lock",
            vec![
                "update_lock = \"/run/stead\"",
                "update_lock = \"/run/stead/\"",
            ],
            "update_lock = \"/run/lock\"",
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
    fn one_extra_host_takes_several_addresses_each_once_in_order() {
        let r = |text: &str| {
            Intention::parse(
                &format!("name = \"a\"\nimage = \"x\"\n{text}"),
                DocFormat::Toml,
                "a.toml",
            )
            .map(|i| i.runtime.extra_hosts.clone())
        };
        type Hosts<'a> = &'a [(&'a str, &'a [&'a str])];
        let want = |v: Hosts<'_>| {
            v.iter()
                .map(|(h, ips)| (h.to_string(), ips.iter().map(|s| s.to_string()).collect()))
                .collect::<BTreeMap<String, super::Addresses>>()
        };
        // (the field, the hosts and their addresses)
        let cases: &[(&str, Hosts<'_>)] = &[
            (
                "extra_hosts = [\"db=10.0.0.2,10.0.0.3\"]",
                &[("db", &["10.0.0.2", "10.0.0.3"])],
            ),
            (
                "extra_hosts = [\"db:10.0.0.3\", \"db=10.0.0.2\", \"db:10.0.0.3\"]",
                &[("db", &["10.0.0.3", "10.0.0.2"])],
            ),
            (
                "extra_hosts = {db = [\"fe80:0::1\", \"[::1]\"]}",
                &[("db", &["fe80::1", "::1"])],
            ),
            (
                "extra_hosts = {db = \"10.0.0.2\", gw = [\"host-gateway\"]}",
                &[("db", &["10.0.0.2"]), ("gw", &["host-gateway"])],
            ),
        ];
        for (text, hosts) in cases {
            assert_eq!(r(text).unwrap(), want(hosts), "{text}");
        }
        for (text, field) in [
            ("extra_hosts = [\"db=10.0.0.2,nope\"]", "extra_hosts.db"),
            ("extra_hosts = {db = [\"10.0.0.2\", {}]}", "extra_hosts.db"),
            ("extra_hosts = [\"db=10.0.0.2,\"]", "extra_hosts.db"),
        ] {
            assert_eq!(r(text).unwrap_err().field, field, "{text}");
        }
        // Several addresses are written as a list, and read back the same;
        // one as a string, as before, with the digest it had.
        let many = r("extra_hosts = [\"db=10.0.0.2,10.0.0.3\"]").unwrap();
        assert_eq!(
            serde_json::to_value(&many).unwrap(),
            serde_json::json!({"db": ["10.0.0.2", "10.0.0.3"]})
        );
        let name = InputName::try_from("extra_hosts").unwrap();
        assert_eq!(
            digests("extra_hosts = [\"db:10.0.0.2\"]")[&name],
            Digest::canonical("extra_hosts", &BTreeMap::from([("db", "10.0.0.2")]))
        );
        assert_ne!(
            digests("extra_hosts = [\"db:10.0.0.2\"]")[&name],
            digests("extra_hosts = [\"db=10.0.0.2,10.0.0.3\"]")[&name]
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
            "shm_size = 0",
        ] {
            assert!(digests(d).is_empty(), "{d}: {:?}", digests(d));
        }
    }

    #[test]
    fn bad_fields_are_named() {
        for (extra, field, needle) in [
            ("hostname = \"a b\"", "hostname", "not a DNS name"),
            ("hostname = \"-a\"", "hostname", "not a DNS name"),
            (
                "network_mode = \"host\"\nhostname = \"h\"",
                "hostname",
                "has that one's host name",
            ),
            ("aliases = [\"db\"]", "aliases", "join one with `networks`"),
            (
                "networks = [\"n\"]\naliases = [\"a..b\"]",
                "aliases[0]",
                "not a DNS name",
            ),
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
            ("shm_size = \"64q\"", "shm_size", "unknown unit"),
            ("shm_size = -2", "shm_size", "must not be negative"),
            ("shm_size = true", "shm_size", "a size"),
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
        let i = Intention::parse(
            &format!("name = \"m\"\nimage = \"busybox:1\"\n{extra}"),
            DocFormat::Toml,
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{extra}: {e}"));
        (*i.runtime).clone()
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
        // (document, its inputs' digests, its JSON)
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: [Case; 4] = [
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
