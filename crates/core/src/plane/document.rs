//! The desired-state document of the central plane: for one node, at one
//! revision, every module it is to run (each an intention document), how
//! often to look for the next revision and where to report. A document is
//! checked all or nothing: one bad field anywhere refuses the whole of it,
//! named by its place (`modules[3] (web): image`), so a node never runs half
//! of a revision. [`stamp`] turns an operator's payload into a document
//! ready to sign.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

use crate::model::fleet::{GroupName, Override};
use crate::model::image_policy::Rules;
use crate::model::intention::Intention;
use crate::model::names::{ModuleName, NodeId, SettingKey};
use crate::model::time::parse_duration;
use crate::model::time::{format_rfc3339, parse_rfc3339};
use crate::model::value::Value;

/// The most modules a document may name.
pub const MAX_MODULES: usize = 1000;
/// How often a node looks for a new revision when the document does not say.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// The shortest poll interval a document may ask for.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The longest poll interval a document may ask for.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// The most groups a node's document may list.
pub const MAX_GROUPS: usize = 16;
/// The most signed bytes a node's document and its groups' documents may
/// hold together (each is also at most
/// [`crate::plane::accept::MAX_DOCUMENT`]): what is composed fits the
/// unit's `MemoryMax=64M` (docs/performance.md).
pub const MAX_TOTAL_BYTES: usize = 2 << 20;
/// The most modules a node's document and its groups' documents may list
/// together (`modules` and `previous.modules` of each).
pub const MAX_TOTAL_MODULES: usize = 1500;

/// What is left of the limits a node's document and its groups' share
/// ([`MAX_TOTAL_BYTES`], [`MAX_TOTAL_MODULES`]), taken document by document
/// as each is looked at: a document's bytes before it is parsed (the most
/// its fetch may bring, [`Budget::bytes_left`]), its modules as soon as
/// they are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    bytes: usize,
    modules: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            bytes: MAX_TOTAL_BYTES,
            modules: MAX_TOTAL_MODULES,
        }
    }
}

impl Budget {
    /// The most bytes the next document may have: what is left, and never
    /// more than one document's limit.
    pub fn bytes_left(&self) -> usize {
        self.bytes.min(crate::plane::accept::MAX_DOCUMENT)
    }

    /// Takes a document of `bytes` that lists `modules` (`what` names it);
    /// one that does not fit takes nothing and says what it passes.
    pub fn take(&mut self, what: &str, bytes: usize, modules: usize) -> Result<(), String> {
        if bytes > self.bytes {
            return Err(format!(
                "{what} ({bytes} bytes) passes the {MAX_TOTAL_BYTES} bytes a node's document and its groups' may hold together ({} left)",
                self.bytes
            ));
        }
        if modules > self.modules {
            return Err(format!(
                "{what} ({modules} modules) passes the {MAX_TOTAL_MODULES} modules a node's document and its groups' may list together ({} left)",
                self.modules
            ));
        }
        self.bytes -= bytes;
        self.modules -= modules;
        Ok(())
    }
}

/// A checked desired-state document.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The node it is for.
    pub node: NodeId,
    /// Its revision, at least 1; a node takes only a newer one.
    pub revision: u64,
    /// When it was signed, in unix seconds.
    pub issued_at: u64,
    /// When it stops being good, in unix seconds; after `issued_at`.
    pub expires: u64,
    /// How often to look for the next revision.
    pub poll: Poll,
    /// Where to report the node's status (an absolute http or https URL).
    pub report: Option<String>,
    /// Every module the node is to run, by name.
    pub modules: BTreeMap<ModuleName, Intention>,
    /// The version of stead the node is to run, when the document says.
    pub agent: Option<AgentRelease>,
    /// The groups whose modules it runs too, in the order they compose
    /// (`groups/<name>/desired.json` on the host).
    pub groups: Vec<GroupName>,
    /// Group modules it does not run.
    pub remove: BTreeSet<ModuleName>,
    /// Group modules it runs with its own settings or image.
    pub overrides: BTreeMap<ModuleName, Override>,
    /// Which images may run (`images`: signatures required per registry or
    /// repository).
    pub images: Rules,
    /// When the node may disrupt what runs (`maintenance`); without it,
    /// at any time its groups' windows allow.
    pub maintenance: Option<crate::model::maintenance::Windows>,
    /// How long a recreate waits for an update lock, and then what
    /// (`locks`); without it, the groups' say, or no limit.
    pub locks: Option<crate::model::lock::Policy>,
    /// One-shot actions asked of the node (`actions`): each id runs once.
    pub actions: Vec<crate::model::action::Action>,
}

/// The version of stead itself a document asks for: where its signed
/// release statement is, the version the statement must name, and
/// whether going below the running version is meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentRelease {
    pub version: String,
    pub release: String,
    pub downgrade: bool,
}

/// How often a node looks for the next revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Poll {
    /// Between two looks; 1 s to 24 h, 15 min by default.
    pub interval: Duration,
    /// At most this much is added to or taken from each interval, so that
    /// nodes do not all look at once; at most `interval`, a tenth of it by
    /// default.
    pub jitter: Duration,
}

impl Default for Poll {
    fn default() -> Poll {
        Poll {
            interval: DEFAULT_POLL_INTERVAL,
            jitter: DEFAULT_POLL_INTERVAL / 10,
        }
    }
}

/// A document that was refused: the field at fault and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DocumentError {
    /// `revision`, `poll.jitter`, `modules[3] (web): image`, …, or
    /// `(document)` when the document is not JSON of the right shape.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl DocumentError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> DocumentError {
        DocumentError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The field at fault.
    pub fn field(&self) -> &str {
        &self.field
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DesiredDoc {
    node: String,
    revision: u64,
    issued_at: String,
    expires: String,
    #[serde(default)]
    poll: Option<PollDoc>,
    #[serde(default)]
    report: Option<String>,
    modules: Vec<serde_json::Value>,
    #[serde(default)]
    agent: Option<AgentDoc>,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
    #[serde(default)]
    overrides: BTreeMap<String, OverrideDoc>,
    #[serde(default)]
    images: Option<serde_json::Value>,
    #[serde(default)]
    maintenance: Option<serde_json::Value>,
    #[serde(default)]
    locks: Option<serde_json::Value>,
    #[serde(default)]
    actions: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideDoc {
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    settings: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentDoc {
    version: String,
    release: String,
    #[serde(default)]
    downgrade: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PollDoc {
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    jitter: Option<String>,
}

impl Desired {
    /// Parses and checks a document's payload (JSON). Any error refuses the
    /// whole document.
    pub fn parse(payload: &[u8]) -> Result<Desired, DocumentError> {
        let doc: DesiredDoc = read(payload)?;
        let node = NodeId::try_from(doc.node).map_err(|e| DocumentError::new("node", e.0))?;
        check_revision("revision", doc.revision)?;
        let (issued_at, expires) = check_times(&doc.issued_at, &doc.expires)?;
        let poll = doc.poll.map_or(Ok(Poll::default()), check_poll)?;
        if let Some(r) = &doc.report {
            check_report_url(r).map_err(|m| DocumentError::new("report", m))?;
        }
        let agent = match doc.agent {
            None => None,
            Some(a) => {
                semver::Version::parse(&a.version)
                    .map_err(|e| format!("{e}"))
                    .and_then(|_| crate::model::launch::AgentVersion::parse(&a.version))
                    .map_err(|m| {
                        DocumentError::new("agent.version", format!("not a SemVer version: {m}"))
                    })?;
                check_report_url(&a.release).map_err(|m| DocumentError::new("agent.release", m))?;
                Some(AgentRelease {
                    version: a.version,
                    release: a.release,
                    downgrade: a.downgrade,
                })
            }
        };
        let modules = check_modules("modules", doc.modules)?;
        let (groups, remove, overrides) = check_fleet(doc.groups, doc.remove, doc.overrides)?;
        let images = check_images(doc.images)?;
        let maintenance = check_maintenance(doc.maintenance.as_ref())?;
        let locks = check_locks(doc.locks.as_ref())?;
        let actions = check_actions(doc.actions.as_ref())?;
        Ok(Desired {
            node,
            revision: doc.revision,
            issued_at,
            expires,
            poll,
            report: doc.report,
            modules,
            agent,
            groups,
            remove,
            overrides,
            images,
            maintenance,
            locks,
            actions,
        })
    }
}

/// A document's one-shot actions (`actions`), a fault named by its field
/// (`actions[1].kind`); an upload's URL is checked as a report's (an
/// absolute http or https URL, no user in it) and never shown.
pub(crate) fn check_actions(
    v: Option<&serde_json::Value>,
) -> Result<Vec<crate::model::action::Action>, DocumentError> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(v) => crate::model::action::Action::parse_list(v, check_report_url)
            .map_err(|(field, e)| DocumentError::new(field, e)),
    }
}

/// A document's update locks' policy (`locks`), a fault named by its field.
pub(crate) fn check_locks(
    v: Option<&serde_json::Value>,
) -> Result<Option<crate::model::lock::Policy>, DocumentError> {
    v.map(crate::model::lock::Policy::parse_doc)
        .transpose()
        .map_err(|(field, e)| DocumentError::new(field, e))
}

/// A document's maintenance windows (`maintenance`), a fault named by its
/// field.
pub(crate) fn check_maintenance(
    v: Option<&serde_json::Value>,
) -> Result<Option<crate::model::maintenance::Windows>, DocumentError> {
    v.map(crate::model::maintenance::Windows::parse_doc)
        .transpose()
        .map_err(|(field, e)| DocumentError::new(field, e))
}

/// A document's image policy (`images`), each fault named by its rule.
pub(crate) fn check_images(v: Option<serde_json::Value>) -> Result<Rules, DocumentError> {
    match v {
        None => Ok(Rules::default()),
        Some(v) => Rules::parse(v).map_err(|(at, m)| DocumentError::new(format!("images{at}"), m)),
    }
}

/// What a node's document says of its groups: the groups (at most
/// [`MAX_GROUPS`], each once), the group modules it removes and those it
/// overrides (only with groups; an override says something). Whether a
/// removed or overridden module is a group's is known only once the groups
/// are read (`plane::group::compose`).
type Fleet = (
    Vec<GroupName>,
    BTreeSet<ModuleName>,
    BTreeMap<ModuleName, Override>,
);

fn check_fleet(
    groups: Vec<String>,
    remove: Vec<String>,
    overrides: BTreeMap<String, OverrideDoc>,
) -> Result<Fleet, DocumentError> {
    if groups.len() > MAX_GROUPS {
        return Err(DocumentError::new(
            "groups",
            format!(
                "{} groups, more than the {MAX_GROUPS} a node may be in",
                groups.len()
            ),
        ));
    }
    let mut names = Vec::with_capacity(groups.len());
    for (i, g) in groups.into_iter().enumerate() {
        let name =
            GroupName::try_from(g).map_err(|e| DocumentError::new(format!("groups[{i}]"), e.0))?;
        if names.contains(&name) {
            return Err(DocumentError::new(
                format!("groups[{i}]"),
                format!("group {name} is listed twice"),
            ));
        }
        names.push(name);
    }
    if names.is_empty() && !(remove.is_empty() && overrides.is_empty()) {
        let field = if remove.is_empty() {
            "overrides"
        } else {
            "remove"
        };
        return Err(DocumentError::new(
            field,
            "names group modules, but the document lists no groups",
        ));
    }
    let mut removed = BTreeSet::new();
    for (i, m) in remove.into_iter().enumerate() {
        let field = format!("remove[{i}]");
        let name =
            ModuleName::try_from(m).map_err(|e| DocumentError::new(&field, e.to_string()))?;
        if !removed.insert(name.clone()) {
            return Err(DocumentError::new(
                field,
                format!("module {name} is removed twice"),
            ));
        }
    }
    let mut out = BTreeMap::new();
    for (m, o) in overrides {
        let name = ModuleName::try_from(m.as_str())
            .map_err(|e| DocumentError::new("overrides", e.to_string()))?;
        let field = format!("overrides.{name}");
        if o.image.is_none() && o.settings.is_empty() {
            return Err(DocumentError::new(
                field,
                "overrides nothing: give an image or settings",
            ));
        }
        if let Some(image) = &o.image {
            crate::model::reference::Reference::parse(image)
                .map_err(|e| DocumentError::new(format!("{field}.image"), e.to_string()))?;
        }
        let mut settings = BTreeMap::new();
        for (k, v) in o.settings {
            let at = format!("{field}.{}", crate::model::names::setting_field(&k));
            let key = SettingKey::try_from(k.as_str())
                .map_err(|e| DocumentError::new(&at, e.to_string()))?;
            let v = Value::from_json(v, &at).map_err(|m| DocumentError::new(&at, m))?;
            settings.insert(key, v);
        }
        out.insert(
            name,
            Override {
                settings,
                image: o.image,
            },
        );
    }
    Ok((names, removed, out))
}

/// A document's payload read as `T`: a JSON object, no key twice, and
/// nothing after it; an error names the field, never a value.
pub(crate) fn read<T: serde::de::DeserializeOwned>(payload: &[u8]) -> Result<T, DocumentError> {
    // serde would also read a struct from a JSON array of its fields.
    if !starts_an_object(payload) {
        return Err(DocumentError::new("(document)", "must be a JSON object"));
    }
    // A module is read as a JSON value first, which would keep the last
    // of a repeated key: the whole payload is checked before.
    no_repeated_keys(payload)?;
    crate::model::json::read(payload).map_err(|e| {
        let said = crate::model::intention::without_values(&e.error.to_string());
        DocumentError::new(json_field(&e.path), said)
    })
}

/// A revision: at least 1, at most [`crate::plane::accept::MAX_REVISION`].
pub(crate) fn check_revision(field: &str, revision: u64) -> Result<(), DocumentError> {
    if revision == 0 {
        return Err(DocumentError::new(field, "must be at least 1"));
    }
    if revision > crate::plane::accept::MAX_REVISION {
        return Err(DocumentError::new(
            field,
            format!(
                "{revision} is over the largest a document may carry, 2^53 = {}",
                crate::plane::accept::MAX_REVISION
            ),
        ));
    }
    Ok(())
}

/// `issued_at` and `expires` (RFC 3339), the second after the first.
pub(crate) fn check_times(issued_at: &str, expires: &str) -> Result<(u64, u64), DocumentError> {
    let issued_at = parse_rfc3339(issued_at).map_err(|e| DocumentError::new("issued_at", e))?;
    let expires = parse_rfc3339(expires).map_err(|e| DocumentError::new("expires", e))?;
    if expires <= issued_at {
        return Err(DocumentError::new(
            "expires",
            format!(
                "{} is not after issued_at {}",
                format_rfc3339(expires),
                format_rfc3339(issued_at)
            ),
        ));
    }
    Ok((issued_at, expires))
}

/// The modules of a document's list `field` (`modules`,
/// `previous.modules`): at most [`MAX_MODULES`], each an intention, no
/// name twice.
pub(crate) fn check_modules(
    field: &str,
    list: Vec<serde_json::Value>,
) -> Result<BTreeMap<ModuleName, Intention>, DocumentError> {
    if list.len() > MAX_MODULES {
        return Err(DocumentError::new(
            field,
            format!(
                "{} modules, more than the {MAX_MODULES} a document may name",
                list.len()
            ),
        ));
    }
    let mut modules = BTreeMap::new();
    let mut seen: BTreeMap<ModuleName, usize> = BTreeMap::new();
    // Consumed as checked: a module's JSON value goes as its intention
    // is made, so the two are not both held for the whole document.
    for (i, m) in list.into_iter().enumerate() {
        let intention = check_module(field, i, &m)?;
        drop(m);
        if let Some(first) = seen.insert(intention.name.clone(), i) {
            return Err(DocumentError::new(
                format!("{field}[{i}] ({})", intention.name),
                format!(
                    "a second module named {} (the first is {field}[{first}])",
                    intention.name
                ),
            ));
        }
        modules.insert(intention.name.clone(), intention);
    }
    Ok(modules)
}

/// The field a JSON error is at, `(document)` for the whole or where it
/// cannot be said.
pub(crate) fn json_field(path: &str) -> String {
    if path == "." {
        "(document)".into()
    } else {
        path.to_string()
    }
}

/// [`crate::model::json::no_repeated_keys`], its error named as a
/// document's.
fn no_repeated_keys(payload: &[u8]) -> Result<(), DocumentError> {
    crate::model::json::no_repeated_keys(payload).map_err(|r| {
        let field = if r.path == "." {
            "(document)".into()
        } else {
            r.path
        };
        DocumentError::new(field, r.message)
    })
}

/// Whether JSON text starts with `{` (after white space).
pub(crate) fn starts_an_object(json: &[u8]) -> bool {
    json.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

fn check_poll(p: PollDoc) -> Result<Poll, DocumentError> {
    let interval = match &p.interval {
        None => DEFAULT_POLL_INTERVAL,
        Some(s) => parse_duration(s).map_err(|e| DocumentError::new("poll.interval", e))?,
    };
    if !(MIN_POLL_INTERVAL..=MAX_POLL_INTERVAL).contains(&interval) {
        return Err(DocumentError::new(
            "poll.interval",
            "must be between 1s and 24h",
        ));
    }
    let jitter = match &p.jitter {
        None => interval / 10,
        Some(s) => parse_duration(s).map_err(|e| DocumentError::new("poll.jitter", e))?,
    };
    if jitter > interval {
        return Err(DocumentError::new(
            "poll.jitter",
            "must be at most poll.interval",
        ));
    }
    Ok(Poll { interval, jitter })
}

/// An absolute `http://` or `https://` URL with a host, and no user name
/// or password.
fn check_report_url(s: &str) -> Result<(), String> {
    crate::model::url::check_no_userinfo(s)?;
    let uri: http::Uri = s
        .parse()
        .map_err(|e| format!("not a URL ({e}): must be an absolute http:// or https:// URL"))?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let host_ok = uri.host().is_some_and(|h| !h.is_empty());
    if scheme_ok && host_ok {
        Ok(())
    } else {
        Err("must be an absolute http:// or https:// URL with a host".into())
    }
}

/// Checks `<field>[i]`; its errors name it by index, and by name when it
/// has a valid one.
fn check_module(field: &str, i: usize, m: &serde_json::Value) -> Result<Intention, DocumentError> {
    let place = match m
        .get("name")
        .and_then(|n| n.as_str())
        .and_then(|n| ModuleName::try_from(n).ok())
    {
        Some(name) => format!("{field}[{i}] ({name})"),
        None => format!("{field}[{i}]"),
    };
    if !m.is_object() {
        return Err(DocumentError::new(
            place,
            "must be an object (an intention document)",
        ));
    }
    // Checked as the value it is, not written out again: its errors carry
    // no position, which would be in the copy and not in the document.
    Intention::from_value(m, &format!("module {i}")).map_err(|e| {
        if e.field == "(file)" {
            DocumentError::new(place, e.message)
        } else {
            DocumentError::new(format!("{place}: {}", e.field), e.message)
        }
    })
}

/// Makes an operator's payload (a JSON object) into a document for `node`:
/// sets `node`, `revision` and `issued_at`, and `expires` (to
/// `expires_default`) only when the payload has none; keeps everything
/// else. The result is checked as [`Desired::parse`] checks it, and
/// returned as compact JSON, ready to sign. A payload that names another
/// node is refused.
pub fn stamp(
    payload: &[u8],
    node: &NodeId,
    revision: u64,
    issued_at: u64,
    expires_default: u64,
) -> Result<Vec<u8>, DocumentError> {
    stamp_as(
        payload,
        ("node", node.as_str()),
        (revision, issued_at, expires_default),
        |b| Desired::parse(b).map(drop),
    )
}

/// [`stamp`] for a document named at `field` (`node`, `group`) by `name`,
/// checked by `check`.
pub(crate) fn stamp_as(
    payload: &[u8],
    (field, name): (&str, &str),
    (revision, issued_at, expires_default): (u64, u64, u64),
    check: impl Fn(&[u8]) -> Result<(), DocumentError>,
) -> Result<Vec<u8>, DocumentError> {
    no_repeated_keys(payload)?;
    let mut doc: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(payload)
        .map_err(|e| {
            DocumentError::new(
                "(document)",
                format!("the payload must be a JSON object: {e}"),
            )
        })?;
    match doc.get(field) {
        None => {}
        Some(n) if n.as_str() == Some(name) => {}
        Some(n) => {
            let shown: String = n.to_string().chars().take(80).collect();
            return Err(DocumentError::new(
                field,
                format!("the payload is for {field} {shown}, not {name}"),
            ));
        }
    }
    doc.insert(field.into(), name.into());
    doc.insert("revision".into(), revision.into());
    doc.insert("issued_at".into(), format_rfc3339(issued_at).into());
    doc.entry("expires")
        .or_insert_with(|| format_rfc3339(expires_default).into());
    let bytes = serde_json::to_vec(&doc).expect("a JSON object serialises");
    check(&bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value as J, json};

    fn doc() -> J {
        json!({
            "node": "edge-0042",
            "revision": 17,
            "issued_at": "2026-11-30T10:00:00Z",
            "expires": "2026-12-30T10:00:00Z",
            "poll": {"interval": "15m", "jitter": "1m"},
            "report": "https://plane.example/nodes/edge-0042/status.json",
            "modules": [
                {"name": "web", "image": "nginx:1.27", "ports": ["8080:80"]},
                {"name": "sensor", "image": "stead-test/busybox:1", "env": {"MODE": "prod"}},
            ]
        })
    }

    fn parse(v: &J) -> Result<Desired, DocumentError> {
        Desired::parse(v.to_string().as_bytes())
    }

    fn with(f: impl FnOnce(&mut J)) -> J {
        let mut v = doc();
        f(&mut v);
        v
    }

    fn without(field: &str) -> J {
        with(|v| {
            v.as_object_mut().unwrap().remove(field);
        })
    }

    #[test]
    fn a_document_parses_whole() {
        let d = parse(&doc()).unwrap();
        assert_eq!(d.node.as_str(), "edge-0042");
        assert_eq!(d.revision, 17);
        assert_eq!(d.issued_at, parse_rfc3339("2026-11-30T10:00:00Z").unwrap());
        assert_eq!(d.expires - d.issued_at, 30 * 86_400);
        assert_eq!(
            d.poll,
            Poll {
                interval: Duration::from_secs(900),
                jitter: Duration::from_secs(60)
            }
        );
        assert_eq!(
            d.report.as_deref(),
            Some("https://plane.example/nodes/edge-0042/status.json")
        );
        let names: Vec<&str> = d.modules.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["sensor", "web"]);
        assert_eq!(
            d.modules[&ModuleName::try_from("web").unwrap()].image,
            "nginx:1.27"
        );
        // An intention reads back from its own JSON form inside a document.
        let web = &d.modules[&ModuleName::try_from("web").unwrap()];
        let again = parse(&with(|v| v["modules"] = json!([web.to_json()]))).unwrap();
        assert_eq!(&again.modules[&web.name], web);
    }

    #[test]
    fn the_agent_field_names_a_version_and_where_its_statement_is() {
        let d = parse(&with(|v| {
            v["agent"] = json!({"version": "0.7.0", "release": "https://p.example/releases/0.7.0/release.json", "downgrade": true})
        }))
        .unwrap();
        assert_eq!(
            d.agent,
            Some(AgentRelease {
                version: "0.7.0".into(),
                release: "https://p.example/releases/0.7.0/release.json".into(),
                downgrade: true
            })
        );
        assert_eq!(parse(&doc()).unwrap().agent, None);
    }

    #[test]
    fn a_node_documents_actions_are_read_or_refused_naming_their_field() {
        let act = json!({"id": "r1", "kind": "restart", "module": "web", "expires": "2030-01-01T00:00:00Z"});
        let d = parse(&with(|v| v["actions"] = json!([act.clone()]))).unwrap();
        assert_eq!(d.actions.len(), 1);
        assert_eq!(d.actions[0].id, "r1");
        assert_eq!(parse(&doc()).unwrap().actions, vec![]);
        // (the actions, the field the refusal names)
        let secret = "https://bucket.example/b?X-Amz-Signature=0123456789";
        #[rustfmt::skip]
        let cases = [
            (json!({"a": 1}), "actions"),
            (json!([act.clone(), act.clone()]), "actions[1].id"),
            (json!([{"id": "x", "kind": "shell", "expires": "2030-01-01T00:00:00Z"}]), "actions[0].kind"),
            (json!([{"id": "x", "kind": "support-bundle", "expires": "2030-01-01T00:00:00Z", "upload_to": "ftp://h/x?sig=1"}]), "actions[0].upload_to"),
            (json!([{"id": "x", "kind": "restart", "expires": "2030-01-01T00:00:00Z"}]), "actions[0].module"),
        ];
        for (actions, field) in cases {
            let e = parse(&with(|v| v["actions"] = actions.clone())).unwrap_err();
            assert_eq!(e.field, field, "{actions}: {e}");
            assert!(!e.to_string().contains("sig=1"), "{e}");
        }
        let ok = json!([{"id": "b", "kind": "support-bundle", "expires": "2030-01-01T00:00:00Z", "upload_to": secret}]);
        let d = parse(&with(|v| v["actions"] = ok.clone())).unwrap();
        assert_eq!(d.actions[0].upload_to.as_deref(), Some(secret));
    }

    #[test]
    fn a_node_documents_locks_policy_is_read_or_refused_naming_its_field() {
        let d = parse(&with(|v| v["locks"] = json!({"max": "2h", "then": "take"}))).unwrap();
        assert_eq!(
            d.locks,
            Some(crate::model::lock::Policy {
                max: Duration::from_secs(7200),
                then: crate::model::lock::Then::Take
            })
        );
        assert_eq!(parse(&doc()).unwrap().locks, None);
        let e = parse(&with(|v| v["locks"] = json!({"max": "2h"}))).unwrap_err();
        assert_eq!(e.field, "locks.then");
    }

    #[test]
    fn a_node_document_names_its_groups_removals_and_overrides() {
        let d = parse(&with(|v| {
            v["groups"] = json!(["eu", "cameras"]);
            v["remove"] = json!(["metrics"]);
            v["overrides"] =
                json!({"web": {"image": "web:2.1", "settings": {"log.level": "debug"}}});
        }))
        .unwrap();
        let names: Vec<&str> = d.groups.iter().map(|g| g.as_str()).collect();
        assert_eq!(names, ["eu", "cameras"]);
        assert!(d.remove.contains(&ModuleName::try_from("metrics").unwrap()));
        let o = &d.overrides[&ModuleName::try_from("web").unwrap()];
        assert_eq!(o.image.as_deref(), Some("web:2.1"));
        assert_eq!(o.settings.len(), 1);
        // Today's form lists none.
        let d = parse(&doc()).unwrap();
        assert!(d.groups.is_empty() && d.remove.is_empty() && d.overrides.is_empty());
    }

    #[test]
    fn absent_fields_take_their_defaults() {
        let d = parse(&without("poll")).unwrap();
        assert_eq!(d.poll, Poll::default());
        assert_eq!(d.poll.interval, Duration::from_secs(15 * 60));
        assert_eq!(d.poll.jitter, Duration::from_secs(90));
        let d = parse(&with(|v| v["poll"] = json!({"interval": "10m"}))).unwrap();
        assert_eq!(
            d.poll.jitter,
            Duration::from_secs(60),
            "a tenth of the interval"
        );
        let d = parse(&with(|v| v["poll"] = json!({"jitter": "5s"}))).unwrap();
        assert_eq!(d.poll.interval, DEFAULT_POLL_INTERVAL);
        assert_eq!(d.poll.jitter, Duration::from_secs(5));
        let d = parse(&with(|v| v["poll"] = json!({}))).unwrap();
        assert_eq!(d.poll, Poll::default());
        assert_eq!(parse(&without("report")).unwrap().report, None);
        assert_eq!(
            parse(&with(|v| v["report"] = J::Null)).unwrap().report,
            None
        );
        let d = parse(&with(|v| v["modules"] = json!([]))).unwrap();
        assert!(d.modules.is_empty());
        let d = parse(&with(|v| {
            v["poll"] = json!({"interval": "24h", "jitter": "24h"})
        }))
        .unwrap();
        assert_eq!(d.poll.jitter, d.poll.interval);
        assert!(parse(&with(|v| v["poll"] = json!({"interval": "1s"}))).is_ok());
        assert!(parse(&with(|v| v["report"] = "http://10.0.0.1:8080/s".into())).is_ok());
    }

    #[test]
    fn every_refusal_names_its_field() {
        let many: Vec<J> = (0..=MAX_MODULES)
            .map(|i| json!({"name": format!("m{i}"), "image": "x:1"}))
            .collect();
        for (what, v, field, message) in [
            (
                "not JSON",
                J::String("{".into()),
                "(document)",
                "must be a JSON object",
            ),
            ("an array", json!([]), "(document)", "must be a JSON object"),
            (
                "an array of the fields",
                json!([
                    "edge-0042",
                    17,
                    "2026-11-30T10:00:00Z",
                    "2026-12-30T10:00:00Z",
                    null,
                    null,
                    []
                ]),
                "(document)",
                "must be a JSON object",
            ),
            (
                "an unknown field",
                with(|v| v["extra"] = 1.into()),
                "extra",
                "unknown field `extra`",
            ),
            (
                "an agent version that is not SemVer",
                with(|v| v["agent"] = json!({"version": "seven", "release": "https://p/r.json"})),
                "agent.version",
                "not a SemVer version",
            ),
            (
                "an agent release that is no URL",
                with(|v| v["agent"] = json!({"version": "0.7.0", "release": "r.json"})),
                "agent.release",
                "absolute http:// or https:// URL",
            ),
            (
                "an agent release with a password",
                with(|v| {
                    v["agent"] = json!({"version": "0.7.0", "release": "https://u:p@h/r.json"})
                }),
                "agent.release",
                "must not carry a user name or password",
            ),
            (
                "an agent without its release",
                with(|v| v["agent"] = json!({"version": "0.7.0"})),
                "agent",
                "missing field `release`",
            ),
            (
                "a group name that is no name",
                with(|v| v["groups"] = json!(["Edge EU"])),
                "groups[0]",
                "invalid",
            ),
            (
                "a group twice",
                with(|v| v["groups"] = json!(["eu", "eu"])),
                "groups[1]",
                "listed twice",
            ),
            (
                "too many groups",
                with(|v| {
                    v["groups"] = json!(
                        (0..=MAX_GROUPS)
                            .map(|i| format!("g{i}"))
                            .collect::<Vec<_>>()
                    )
                }),
                "groups",
                "more than the 16",
            ),
            (
                "a removal without groups",
                with(|v| v["remove"] = json!(["web"])),
                "remove",
                "lists no groups",
            ),
            (
                "an override without groups",
                with(|v| v["overrides"] = json!({"web": {"image": "web:2"}})),
                "overrides",
                "lists no groups",
            ),
            (
                "a removal twice",
                with(|v| {
                    v["groups"] = json!(["eu"]);
                    v["remove"] = json!(["a", "a"])
                }),
                "remove[1]",
                "removed twice",
            ),
            (
                "a removal that is no module name",
                with(|v| {
                    v["groups"] = json!(["eu"]);
                    v["remove"] = json!(["A"])
                }),
                "remove[0]",
                "",
            ),
            (
                "an override of nothing",
                with(|v| {
                    v["groups"] = json!(["eu"]);
                    v["overrides"] = json!({"web": {}})
                }),
                "overrides.web",
                "overrides nothing",
            ),
            (
                "an override's bad image",
                with(|v| {
                    v["groups"] = json!(["eu"]);
                    v["overrides"] = json!({"web": {"image": "UPPER CASE"}})
                }),
                "overrides.web.image",
                "",
            ),
            (
                "an override's bad setting",
                with(|v| {
                    v["groups"] = json!(["eu"]);
                    v["overrides"] = json!({"web": {"settings": {"": 1}}})
                }),
                "overrides.web.settings.\"\"",
                "invalid setting key",
            ),
            (
                "an override's unknown field",
                with(|v| {
                    v["groups"] = json!(["eu"]);
                    v["overrides"] = json!({"web": {"env": {}}})
                }),
                "overrides.web.env",
                "unknown field",
            ),
            (
                "no node",
                without("node"),
                "(document)",
                "missing field `node`",
            ),
            (
                "no revision",
                without("revision"),
                "(document)",
                "missing field `revision`",
            ),
            (
                "no issued_at",
                without("issued_at"),
                "(document)",
                "missing field `issued_at`",
            ),
            (
                "no expires",
                without("expires"),
                "(document)",
                "missing field `expires`",
            ),
            (
                "no modules",
                without("modules"),
                "(document)",
                "missing field `modules`",
            ),
            (
                "a bad node",
                with(|v| v["node"] = "-x".into()),
                "node",
                "invalid node id",
            ),
            (
                "revision 0",
                with(|v| v["revision"] = 0.into()),
                "revision",
                "at least 1",
            ),
            (
                "a negative revision",
                with(|v| v["revision"] = (-1).into()),
                "revision",
                "invalid value",
            ),
            (
                "a revision over 2^53",
                with(|v| v["revision"] = 9_007_199_254_740_993u64.into()),
                "revision",
                "over the largest a document may carry, 2^53 = 9007199254740992",
            ),
            (
                "a revision of 2^64 - 1",
                with(|v| v["revision"] = u64::MAX.into()),
                "revision",
                "over the largest",
            ),
            (
                "a string revision",
                with(|v| v["revision"] = "1".into()),
                "revision",
                "invalid type",
            ),
            (
                "a value in the wrong place is not quoted back",
                with(|v| v["node"] = json!({"pw": 1})),
                "node",
                "invalid type: map, expected a string",
            ),
            (
                "a string where a number goes is not quoted back",
                with(|v| v["revision"] = "hunter2".into()),
                "revision",
                "invalid type: string, expected u64",
            ),
            (
                "a bad issued_at",
                with(|v| v["issued_at"] = "yesterday".into()),
                "issued_at",
                "invalid timestamp",
            ),
            (
                "a bad expires",
                with(|v| v["expires"] = "2026-02-30T00:00:00Z".into()),
                "expires",
                "has no day 30",
            ),
            (
                "expires at issue",
                with(|v| v["expires"] = v["issued_at"].clone()),
                "expires",
                "is not after issued_at",
            ),
            (
                "expires before issue",
                with(|v| v["expires"] = "2026-11-30T09:59:59Z".into()),
                "expires",
                "is not after issued_at",
            ),
            (
                "a bad interval",
                with(|v| v["poll"]["interval"] = "soon".into()),
                "poll.interval",
                "invalid duration",
            ),
            (
                "an interval under 1s",
                with(|v| v["poll"]["interval"] = "999ms".into()),
                "poll.interval",
                "between 1s and 24h",
            ),
            (
                "an interval over 24h",
                with(|v| v["poll"]["interval"] = "25h".into()),
                "poll.interval",
                "between 1s and 24h",
            ),
            (
                "a jitter over the interval",
                with(|v| v["poll"]["jitter"] = "16m".into()),
                "poll.jitter",
                "at most poll.interval",
            ),
            (
                "a zero jitter",
                with(|v| v["poll"]["jitter"] = "0s".into()),
                "poll.jitter",
                "more than zero",
            ),
            (
                "an unknown poll field",
                with(|v| v["poll"]["every"] = "1m".into()),
                "poll.every",
                "unknown field `every`",
            ),
            (
                "a relative report URL",
                with(|v| v["report"] = "/status".into()),
                "report",
                "absolute",
            ),
            (
                "a report URL of another scheme",
                with(|v| v["report"] = "ftp://plane.example/s".into()),
                "report",
                "absolute http",
            ),
            (
                "a report URL that is not one",
                with(|v| v["report"] = "http://a b".into()),
                "report",
                "not a URL",
            ),
            (
                "a report URL with a password",
                with(|v| v["report"] = "https://node:s3cret@plane.example/s".into()),
                "report",
                "must not carry a user name or password",
            ),
            (
                "a report that is not a string",
                with(|v| v["report"] = 1.into()),
                "report",
                "invalid type",
            ),
            (
                "modules not a list",
                with(|v| v["modules"] = json!({})),
                "modules",
                "invalid type",
            ),
            (
                "too many modules",
                with(|v| v["modules"] = J::Array(many.clone())),
                "modules",
                "1001 modules",
            ),
            (
                "a module that is not an object",
                with(|v| v["modules"][1] = "web".into()),
                "modules[1]",
                "must be an object",
            ),
            (
                "a module without a name",
                with(|v| {
                    v["modules"][1].as_object_mut().unwrap().remove("name");
                }),
                "modules[1]",
                "missing field `name`",
            ),
            (
                "a module with a bad name",
                with(|v| v["modules"][1]["name"] = "Web".into()),
                "modules[1]: name",
                "invalid module name",
            ),
            (
                "a module without an image",
                with(|v| {
                    v["modules"][0].as_object_mut().unwrap().remove("image");
                }),
                "modules[0] (web)",
                "missing field `image`",
            ),
            (
                "a module with a bad port",
                with(|v| v["modules"][0]["ports"] = json!(["x"])),
                "modules[0] (web): ports[0]",
                "invalid port",
            ),
            (
                "a module with an unknown field",
                with(|v| v["modules"][1]["colour"] = "red".into()),
                "modules[1] (sensor): colour",
                "unknown field",
            ),
            (
                "two modules of one name",
                with(|v| v["modules"][1]["name"] = "web".into()),
                "modules[1] (web)",
                "a second module named web (the first is modules[0])",
            ),
        ] {
            let e = parse(&v).unwrap_err();
            assert_eq!(e.field(), field, "{what}: {e}");
            assert!(e.message.contains(message), "{what}: {e}");
            assert!(
                e.to_string().starts_with(&format!("{field}: ")),
                "{what}: {e}"
            );
        }
        assert!(
            parse(&with(
                |v| v["modules"] = J::Array(many[..MAX_MODULES].to_vec())
            ))
            .is_ok()
        );
        let e = Desired::parse(format!("{} {{}}", doc()).as_bytes()).unwrap_err();
        assert_eq!(e.field(), "(document)", "{e}");
    }

    #[test]
    fn a_key_given_twice_anywhere_refuses_the_document_and_its_stamping() {
        let node = NodeId::try_from("edge-0042").unwrap();
        let head = r#""node": "edge-0042", "revision": 1, "issued_at": "2026-11-30T10:00:00Z", "expires": "2026-12-30T10:00:00Z""#;
        for (what, rest, field) in [
            (
                "an image twice in a module",
                r#""modules": [{"name": "web", "image": "a:1", "image": "b:1"}]"#,
                "modules[0]",
            ),
            (
                "an env key twice",
                r#""modules": [{"name": "web", "image": "a:1", "env": {"A": "1", "A": "2"}}]"#,
                "modules[0].env",
            ),
            (
                "a setting twice",
                r#""modules": [{"name": "web", "image": "a:1", "settings": {"k": 1, "k": 2}}]"#,
                "modules[0].settings",
            ),
            (
                "a label twice",
                r#""modules": [{"name": "web", "image": "a:1", "labels": {"l": "1", "l": "2"}}]"#,
                "modules[0].labels",
            ),
            (
                "the modules twice",
                r#""modules": [], "modules": [{"name": "web", "image": "a:1"}]"#,
                "(document)",
            ),
        ] {
            let text = format!("{{{head}, {rest}}}");
            let e = Desired::parse(text.as_bytes()).unwrap_err();
            assert_eq!(e.field(), field, "{what}: {e}");
            assert!(e.message.contains("is given twice"), "{what}: {e}");
            let e = stamp(text.as_bytes(), &node, 2, 0, 1).unwrap_err();
            assert_eq!(e.field(), field, "{what} (stamp): {e}");
        }
    }

    #[test]
    fn module_errors_carry_no_position() {
        let e = parse(&with(|v| {
            v["modules"][0].as_object_mut().unwrap().remove("image");
        }))
        .unwrap_err();
        assert_eq!(e.to_string(), "modules[0] (web): missing field `image`");
        let e = parse(&with(|v| v["modules"][0]["ports"] = "8080".into())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "modules[0] (web): ports: invalid type: string, expected a sequence"
        );
    }

    #[test]
    fn stamping_sets_what_the_signer_knows_and_keeps_the_rest() {
        let node = NodeId::try_from("edge-0042").unwrap();
        let at = parse_rfc3339("2026-12-01T00:00:00Z").unwrap();
        let payload = with(|v| {
            let o = v.as_object_mut().unwrap();
            for f in ["node", "revision", "issued_at", "expires"] {
                o.remove(f);
            }
        });
        let out = stamp(payload.to_string().as_bytes(), &node, 42, at, at + 3600).unwrap();
        let d = Desired::parse(&out).unwrap();
        assert_eq!(
            (d.node.as_str(), d.revision, d.issued_at, d.expires),
            ("edge-0042", 42, at, at + 3600)
        );
        assert_eq!(d.poll.jitter, Duration::from_secs(60));
        assert_eq!(d.modules.len(), 2);
        let v: J = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["issued_at"], "2026-12-01T00:00:00Z");
        assert!(!out.contains(&b'\n'), "compact");
        // An expires of the payload's own is kept; the same node is fine;
        // revision and issued_at are the signer's.
        let payload = with(|v| v["expires"] = "2027-01-01T00:00:00Z".into());
        let out = stamp(payload.to_string().as_bytes(), &node, 43, at, at + 3600).unwrap();
        let d = Desired::parse(&out).unwrap();
        assert_eq!(d.expires, parse_rfc3339("2027-01-01T00:00:00Z").unwrap());
        assert_eq!((d.revision, d.issued_at), (43, at));
        for (what, payload, field, message) in [
            (
                "another node",
                with(|v| v["node"] = "edge-0043".into()),
                "node",
                "for node \"edge-0043\", not edge-0042",
            ),
            (
                "a node that is not a string",
                with(|v| v["node"] = 7.into()),
                "node",
                "for node 7",
            ),
            (
                "not an object",
                json!([1]),
                "(document)",
                "must be a JSON object",
            ),
            (
                "an expires before now",
                with(|v| v["expires"] = "2026-11-30T00:00:00Z".into()),
                "expires",
                "not after issued_at",
            ),
            (
                "a bad module",
                with(|v| v["modules"][0]["image"] = 1.into()),
                "modules[0] (web): image",
                "invalid type",
            ),
            (
                "an unknown field",
                with(|v| v["extra"] = true.into()),
                "extra",
                "unknown field",
            ),
        ] {
            let e = stamp(payload.to_string().as_bytes(), &node, 1, at, at + 3600).unwrap_err();
            assert_eq!(e.field(), field, "{what}: {e}");
            assert!(e.message.contains(message), "{what}: {e}");
        }
        let e = stamp(b"not json", &node, 1, at, at + 1).unwrap_err();
        assert_eq!(e.field(), "(document)");
        let e = stamp(b"{}", &node, 0, at, at + 1).unwrap_err();
        assert_eq!(e.field(), "(document)", "modules is still required: {e}");
    }

    #[test]
    fn a_node_and_its_groups_share_one_budget_taken_document_by_document() {
        const MIB: usize = 1 << 20;
        // (documents taken in order as (bytes, modules); the limit the next
        // fetch is given after them, or the words of the refusal)
        type Case = (
            &'static str,
            Vec<(usize, usize)>,
            Result<usize, &'static str>,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("nothing yet: one document's limit", vec![], Ok(MIB)),
            ("a node document of 1 MiB", vec![(MIB, 10)], Ok(MIB)),
            ("1.5 MiB taken: half a MiB left", vec![(MIB, 10), (MIB / 2, 10)], Ok(MIB / 2)),
            ("every byte taken", vec![(MIB, 0), (MIB, 0)], Ok(0)),
            ("one byte over", vec![(MIB, 0), (MIB, 0), (1, 0)], Err("1 bytes) passes the 2097152 bytes")),
            ("16 groups of 1,000 modules", vec![(1000, 1); 1].into_iter().chain(vec![(60_000, 1000); 2]).collect(), Err("1000 modules) passes the 1500 modules")),
            ("every module taken", vec![(10, 1000), (10, 500)], Ok(MIB)),
            ("one module over", vec![(10, 1000), (10, 500), (10, 1)], Err("(1 modules) passes")),
        ];
        for (what, docs, want) in cases {
            let mut b = Budget::default();
            let mut got = Ok(());
            for (i, (bytes, modules)) in docs.iter().enumerate() {
                let before = b;
                got = b.take(&format!("document {i}"), *bytes, *modules);
                if got.is_err() {
                    assert_eq!(b, before, "{what}: a refused document takes nothing");
                    break;
                }
            }
            match (got, want) {
                (Ok(()), Ok(limit)) => assert_eq!(b.bytes_left(), limit, "{what}"),
                (Err(e), Err(words)) => assert!(e.contains(words), "{what}: {e}"),
                (got, want) => panic!("{what}: {got:?}, expected {want:?}"),
            }
        }
    }
}
