//! One-shot actions a signed node or group document asks of a device:
//! restart a module, recreate it, pull its image again, upload a support
//! bundle or a module's logs, reboot. A fixed list of kinds, never a
//! command. Each action has an id that runs at most once per device, and
//! every step of it is stored before it acts, with what would show it
//! happened (the container's id and start, the image's id), so an agent
//! stopped anywhere, a power cut included, neither skips nor repeats it.
//!
//! ```text
//! (read) → begun → done
//!            └───→ failed   (why; final)
//! (read, past its expiry before it began) → expired
//! ```
//!
//! Owns: an action as a document writes it and its checks
//! ([`Action::parse_doc`], errors naming `actions[i].field`), the record a
//! device keeps of it ([`Record`], its text form, the guarded moves), and
//! when it is due ([`due`]).

use crate::model::names::ModuleName;
use crate::model::time::{format_rfc3339, parse_rfc3339};

/// The most actions one document may carry.
pub const MAX_ACTIONS: usize = 32;

/// The longest an action's id is.
pub const MAX_ID: usize = 64;

/// What an action does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Restarts the module's container (the same container).
    Restart,
    /// Makes the module's container again from what it runs.
    Recreate,
    /// Pulls the module's image again, and recreates it if it moved.
    Repull,
    /// Uploads the device's status, events, the store's summary, the
    /// module's (or every module's) last log lines and the agent's log.
    SupportBundle,
    /// Uploads a module's logs for a time range.
    UploadLogs,
    /// Reboots the device, through systemd, if its config allows.
    Reboot,
}

impl Kind {
    /// Every kind, as a document names it.
    pub const ALL: [Kind; 6] = [
        Kind::Restart,
        Kind::Recreate,
        Kind::Repull,
        Kind::SupportBundle,
        Kind::UploadLogs,
        Kind::Reboot,
    ];

    /// As a document, the store and the API write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Restart => "restart",
            Kind::Recreate => "recreate",
            Kind::Repull => "repull",
            Kind::SupportBundle => "support-bundle",
            Kind::UploadLogs => "upload-logs",
            Kind::Reboot => "reboot",
        }
    }

    /// Reads a kind's name.
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether it acts on one module, and must name it.
    pub fn needs_module(self) -> bool {
        matches!(
            self,
            Kind::Restart | Kind::Recreate | Kind::Repull | Kind::UploadLogs
        )
    }

    /// Whether it uploads something.
    pub fn uploads(self) -> bool {
        matches!(self, Kind::SupportBundle | Kind::UploadLogs)
    }

    /// Whether it disrupts what runs (and so waits for the maintenance
    /// windows and the update locks).
    pub fn disrupts(self) -> bool {
        matches!(
            self,
            Kind::Restart | Kind::Recreate | Kind::Repull | Kind::Reboot
        )
    }
}

/// An action as a document asks it. (Its `Debug` shows an upload's URL
/// only as [`crate::model::url::shown`]: a presigned one is a credential.)
#[derive(Clone, PartialEq, Eq)]
pub struct Action {
    /// Its id: runs at most once per device.
    pub id: String,
    /// What it does.
    pub kind: Kind,
    /// The module it acts on.
    pub module: Option<ModuleName>,
    /// Not before this, seconds since the epoch.
    pub not_before: Option<u64>,
    /// Not after this: an action not begun by then expires.
    pub expires: u64,
    /// Where its upload goes (a presigned URL, a credential never shown
    /// whole); without one, the plane's host.
    pub upload_to: Option<String>,
    /// For `upload-logs`: the range of the logs, seconds since the epoch.
    pub since: Option<u64>,
    /// For `upload-logs`: the range's end (unset: now).
    pub until: Option<u64>,
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Action")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("module", &self.module)
            .field("not_before", &self.not_before)
            .field("expires", &self.expires)
            .field(
                "upload_to",
                &self.upload_to.as_deref().map(crate::model::url::shown),
            )
            .field("since", &self.since)
            .field("until", &self.until)
            .finish()
    }
}

/// An id: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub fn check_id(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= MAX_ID
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err("must be 1 to 64 of A-Z a-z 0-9 . _ -".into())
    }
}

impl Action {
    /// Reads a document's `actions`: a list of at most [`MAX_ACTIONS`],
    /// no id twice, each checked (`check_url` checks an `upload_to`). The
    /// error names the field (`actions[2].module`).
    pub fn parse_list(
        v: &serde_json::Value,
        check_url: fn(&str) -> Result<(), String>,
    ) -> Result<Vec<Action>, (String, String)> {
        let list = v
            .as_array()
            .ok_or_else(|| ("actions".to_string(), "must be a list".to_string()))?;
        if list.len() > MAX_ACTIONS {
            return Err((
                "actions".into(),
                format!(
                    "{} actions, more than the {MAX_ACTIONS} a document may carry",
                    list.len()
                ),
            ));
        }
        let mut out: Vec<Action> = Vec::with_capacity(list.len());
        for (i, a) in list.iter().enumerate() {
            let action = Action::parse_doc(a, &format!("actions[{i}]"), check_url)?;
            if let Some(j) = out.iter().position(|b| b.id == action.id) {
                return Err((
                    format!("actions[{i}].id"),
                    format!("{:?} is also actions[{j}]'s id", action.id),
                ));
            }
            out.push(action);
        }
        Ok(out)
    }

    /// Reads one action at `at` (`actions[0]`).
    pub fn parse_doc(
        v: &serde_json::Value,
        at: &str,
        check_url: fn(&str) -> Result<(), String>,
    ) -> Result<Action, (String, String)> {
        const FIELDS: [&str; 8] = [
            "id",
            "kind",
            "module",
            "not_before",
            "expires",
            "upload_to",
            "since",
            "until",
        ];
        let bad = |field: &str, m: String| (format!("{at}.{field}"), m);
        let o = v
            .as_object()
            .ok_or_else(|| (at.to_string(), "must be an object".to_string()))?;
        if let Some(k) = o.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err((
                at.to_string(),
                format!(
                    "unknown field {:?} ({})",
                    crate::model::text::clip(k, 64),
                    FIELDS.join(", ")
                ),
            ));
        }
        let text = |field: &str| -> Result<Option<&str>, (String, String)> {
            match o.get(field) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(bad(field, "must be a string".into())),
            }
        };
        let time = |field: &str| -> Result<Option<u64>, (String, String)> {
            text(field)?
                .map(|s| parse_rfc3339(s).map_err(|e| bad(field, e)))
                .transpose()
        };
        let id = text("id")?.ok_or_else(|| bad("id", "must be said".into()))?;
        check_id(id).map_err(|e| bad("id", e))?;
        let kind = text("kind")?.ok_or_else(|| bad("kind", "must be said".into()))?;
        let kind = Kind::parse(kind).ok_or_else(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
            bad(
                "kind",
                format!(
                    "{:?} is not a kind ({})",
                    crate::model::text::clip(kind, 64),
                    names.join(", ")
                ),
            )
        })?;
        let module = text("module")?
            .map(|m| ModuleName::try_from(m).map_err(|e| bad("module", e.0)))
            .transpose()?;
        match (&module, kind.needs_module(), kind) {
            (None, true, _) => {
                return Err(bad(
                    "module",
                    format!("must be said: a {} acts on one module", kind.as_str()),
                ));
            }
            (Some(_), _, Kind::Reboot) => {
                return Err(bad("module", "a reboot acts on no module".into()));
            }
            _ => {}
        }
        let expires = time("expires")?.ok_or_else(|| bad("expires", "must be said".into()))?;
        let not_before = time("not_before")?;
        if not_before.is_some_and(|n| n >= expires) {
            return Err(bad("not_before", "must be before expires".into()));
        }
        let upload_to = text("upload_to")?.map(str::to_string);
        if let Some(u) = &upload_to {
            if !kind.uploads() {
                return Err(bad(
                    "upload_to",
                    format!("a {} uploads nothing", kind.as_str()),
                ));
            }
            // Named without the URL: a presigned one is a credential.
            check_url(u).map_err(|e| bad("upload_to", e))?;
        }
        let (since, until) = (time("since")?, time("until")?);
        if kind != Kind::UploadLogs && (since.is_some() || until.is_some()) {
            let field = if since.is_some() { "since" } else { "until" };
            return Err(bad(field, format!("a {} has no time range", kind.as_str())));
        }
        if let (Some(s), Some(u)) = (since, until)
            && s >= u
        {
            return Err(bad("until", "must be after since".into()));
        }
        Ok(Action {
            id: id.to_string(),
            kind,
            module,
            not_before,
            expires,
            upload_to,
            since,
            until,
        })
    }

    /// What it is, for a status, an event, a report: `restart of web
    /// (restart-web-1)`; an upload's URL never.
    pub fn said(&self) -> String {
        match &self.module {
            Some(m) => format!("{} of {m} ({})", self.kind.as_str(), self.id),
            None => format!("{} ({})", self.kind.as_str(), self.id),
        }
    }
}

/// Where an action is on this device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Stored before it acts: it may have acted (its evidence says).
    Begun,
    /// It acted.
    Done,
    /// It could not act (final: an id runs once).
    Failed,
    /// Not begun before it expired.
    Expired,
}

impl Status {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Begun => "begun",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Expired => "expired",
        }
    }

    fn parse(s: &str) -> Option<Status> {
        [Status::Begun, Status::Done, Status::Failed, Status::Expired]
            .into_iter()
            .find(|x| x.as_str() == s)
    }

    /// Whether it is over: the id never runs again.
    pub fn is_final(self) -> bool {
        self != Status::Begun
    }
}

/// What a device keeps of an action it has begun (or found expired).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The action's id.
    pub id: String,
    /// Its kind.
    pub kind: Kind,
    /// Its module.
    pub module: Option<ModuleName>,
    /// Where it is.
    pub status: Status,
    /// When it got there, seconds since the epoch.
    pub at: u64,
    /// What showed, before it acted, that it had not yet: the container's
    /// id and start, the image's id (one line; empty for none).
    pub before: String,
    /// Its result: why it failed, where its upload went (shown, never a
    /// presigned URL's query), what it did.
    pub result: Option<String>,
}

/// A move an action's record cannot make.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("action {id} is {from}: it cannot become {to}")]
pub struct TransitionError {
    /// The action.
    pub id: String,
    /// Where it is.
    pub from: &'static str,
    /// Where it was to go.
    pub to: &'static str,
}

impl Record {
    /// An action begun at `at`, with what shows it has not acted yet.
    pub fn begin(a: &Action, before: String, at: u64) -> Record {
        Record {
            id: a.id.clone(),
            kind: a.kind,
            module: a.module.clone(),
            status: Status::Begun,
            at,
            before: before.replace('\n', " "),
            result: None,
        }
    }

    /// An action found past its expiry before it began.
    pub fn expired(a: &Action, at: u64) -> Record {
        Record {
            status: Status::Expired,
            result: Some(format!("not begun before {}", format_rfc3339(a.expires))),
            ..Record::begin(a, String::new(), at)
        }
    }

    fn become_(&mut self, to: Status, at: u64, result: String) -> Result<(), TransitionError> {
        if self.status != Status::Begun {
            return Err(TransitionError {
                id: self.id.clone(),
                from: self.status.as_str(),
                to: to.as_str(),
            });
        }
        self.status = to;
        self.at = at;
        self.result = Some(result.replace('\n', " "));
        Ok(())
    }

    /// It acted (`result`: what it did).
    pub fn finish(&mut self, result: String, at: u64) -> Result<(), TransitionError> {
        self.become_(Status::Done, at, result)
    }

    /// It could not act (`why`).
    pub fn fail(&mut self, why: String, at: u64) -> Result<(), TransitionError> {
        self.become_(Status::Failed, at, why)
    }

    /// As the store keeps it: `key=value` lines.
    pub fn to_text(&self) -> String {
        let mut t = format!(
            "id={}\nkind={}\nstatus={}\nat={}\nbefore={}\n",
            self.id,
            self.kind.as_str(),
            self.status.as_str(),
            self.at,
            self.before
        );
        if let Some(m) = &self.module {
            t.push_str(&format!("module={m}\n"));
        }
        if let Some(r) = &self.result {
            t.push_str(&format!("result={r}\n"));
        }
        t
    }

    /// Reads [`Record::to_text`]; `None` when a line it needs is missing or
    /// wrong.
    pub fn from_text(text: &str) -> Option<Record> {
        let (mut id, mut kind, mut status, mut at, mut before) = (None, None, None, None, None);
        let (mut module, mut result) = (None, None);
        for line in text.lines() {
            match line.split_once('=')? {
                ("id", v) => id = check_id(v).ok().map(|()| v.to_string()),
                ("kind", v) => kind = Kind::parse(v),
                ("status", v) => status = Status::parse(v),
                ("at", v) => at = v.parse().ok(),
                ("before", v) => before = Some(v.to_string()),
                ("module", v) => module = Some(ModuleName::try_from(v).ok()?),
                ("result", v) => result = Some(v.to_string()),
                _ => {}
            }
        }
        Some(Record {
            id: id?,
            kind: kind?,
            module,
            status: status?,
            at: at?,
            before: before?,
            result,
        })
    }
}

/// When an action is to be acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due {
    /// Not yet: at this time (seconds since the epoch).
    Later(u64),
    /// Now: it was never begun.
    Now,
    /// It was begun and may have acted: its evidence decides.
    Resume,
    /// Past its expiry, never begun: it expires.
    Expires,
    /// Over: nothing to do.
    Over,
}

/// What is to be done of action `a` at `now`, with the record kept of it.
pub fn due(a: &Action, record: Option<&Record>, now: u64) -> Due {
    match record {
        Some(r) if r.status.is_final() => Due::Over,
        // Begun: finished whatever the time, or it would be lost.
        Some(_) => Due::Resume,
        None if now >= a.expires => Due::Expires,
        None => match a.not_before {
            Some(t) if now < t => Due::Later(t),
            _ => Due::Now,
        },
    }
}

/// An upload a pass collected, for the device's uploader to send.
/// (Its `Debug` shows the URL only as [`crate::model::url::shown`].)
#[derive(Clone)]
pub struct Upload {
    /// The action's record, stored begun.
    pub record: Record,
    /// Where it goes: the action's `upload_to`, or the plane's host (a
    /// credential: shown only as [`crate::model::url::shown`]).
    pub url: String,
    /// What it carries, by name: a module's log (`upload-logs`: the one
    /// file, sent as text), or each module's (`support-bundle`: `logs/<m>.log`,
    /// to which the uploader adds the device's own part, sent as a tar).
    pub files: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<(&str, usize)> = self
            .files
            .iter()
            .map(|(n, b)| (n.as_str(), b.len()))
            .collect();
        f.debug_struct("Upload")
            .field("record", &self.record)
            .field("url", &crate::model::url::shown(&self.url))
            .field("files", &files)
            .finish()
    }
}

impl Upload {
    /// Its content type and bytes.
    pub fn body(&self) -> (&'static str, Vec<u8>) {
        match self.record.kind {
            Kind::UploadLogs => (
                "text/plain; charset=utf-8",
                self.files.first().map(|f| f.1.clone()).unwrap_or_default(),
            ),
            _ => ("application/x-tar", bundle(&self.files)),
        }
    }
}

/// A support bundle: the files named, as a tar archive (ustar, each
/// file's mode 0644, time 0).
pub fn bundle(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    use crate::model::archive::{header, padding};
    let mut out = Vec::new();
    for (name, body) in files {
        out.extend_from_slice(&header(name, body.len() as u64));
        out.extend_from_slice(body);
        out.resize(out.len() + padding(body.len() as u64), 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

/// What shows whether an action acted, as its record keeps it (`before`)
/// and as the device reads it now: a restart's container and when it last
/// started, a recreate's container, a reboot's boot. Empty for the kinds
/// the evidence does not judge (an upload is sent again).
pub fn evidence(kind: Kind, container: Option<(&str, i64)>, boot: &str) -> String {
    match (kind, container) {
        (Kind::Restart, Some((c, started))) => format!("container={c} started={started}"),
        (Kind::Recreate, Some((c, _))) => format!("container={c}"),
        (Kind::Reboot, _) => format!("boot={boot}"),
        _ => String::new(),
    }
}

/// What the device does next of an action it acts on itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing: it is over.
    Nothing,
    /// Not yet: at this time.
    Later(u64),
    /// It expires, never begun.
    Expire,
    /// It cannot act now (why): its module has no container that runs as
    /// it should, or this pass changes it anyway.
    Wait(String),
    /// It acts (again, when begun: its evidence shows it had not).
    Act,
    /// Begun, and its evidence shows it acted: it is done (what it did).
    Finish(String),
}

/// What is next of action `a` at `now`, with its record, and what shows
/// now (`here`: [`evidence`] of what runs; `None` when the module has no
/// container to act on as the pass found it).
pub fn next(a: &Action, record: Option<&Record>, now: u64, here: Option<&str>) -> Next {
    match due(a, record, now) {
        Due::Over => Next::Nothing,
        Due::Expires => Next::Expire,
        Due::Later(t) => Next::Later(t),
        Due::Resume => match (record, here) {
            (Some(r), Some(h)) if !r.before.is_empty() && r.before != h => {
                Next::Finish(format!("{} (found done: {})", a.kind.as_str(), h))
            }
            (_, Some(_)) => Next::Act,
            // Begun, and its container is being changed or gone: that
            // change is what it asked, or more.
            (_, None) if a.kind == Kind::Recreate => {
                Next::Finish("recreate (found done: its container was replaced)".into())
            }
            (_, None) => Next::Wait(waits(a)),
        },
        Due::Now => match here {
            Some(_) => Next::Act,
            None => Next::Wait(waits(a)),
        },
    }
}

fn waits(a: &Action) -> String {
    match &a.module {
        Some(m) => format!("waits for {m} to run as it should, with nothing else to do"),
        None => "waits".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn url_ok(s: &str) -> Result<(), String> {
        if s.starts_with("https://") {
            Ok(())
        } else {
            Err("must be an absolute http:// or https:// URL with a host".into())
        }
    }

    fn parse(v: serde_json::Value) -> Result<Vec<Action>, (String, String)> {
        Action::parse_list(&v, url_ok)
    }

    #[test]
    fn an_action_is_read_whole() {
        let got = parse(json!([
            {"id": "restart-web-1", "kind": "restart", "module": "web", "expires": "2026-12-08T00:00:00Z"},
            {"id": "logs.1", "kind": "upload-logs", "module": "web", "expires": "2026-12-08T00:00:00Z",
             "not_before": "2026-12-07T12:00:00Z", "since": "2026-12-07T00:00:00Z",
             "upload_to": "https://bucket.example/l?X-Amz-Signature=abc"},
            {"id": "reboot_1", "kind": "reboot", "expires": "2026-12-08T00:00:00Z"},
            {"id": "bundle", "kind": "support-bundle", "expires": "2026-12-08T00:00:00Z"},
        ]))
        .unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].kind, Kind::Restart);
        assert_eq!(got[0].module.as_ref().unwrap().as_str(), "web");
        assert_eq!(got[0].said(), "restart of web (restart-web-1)");
        assert_eq!(
            got[1].since,
            Some(parse_rfc3339("2026-12-07T00:00:00Z").unwrap())
        );
        assert_eq!(got[1].until, None);
        assert_eq!(got[2].said(), "reboot (reboot_1)");
        assert!(!got[1].said().contains("Signature"));
    }

    #[test]
    fn a_bad_action_is_refused_naming_its_field() {
        let e = "2026-12-08T00:00:00Z";
        let cases = [
            (json!({}), "actions"),
            (json!([1]), "actions[0]"),
            (
                json!([{"id": "a", "kind": "restart", "module": "web", "expires": e, "command": "rm"}]),
                "actions[0]",
            ),
            (
                json!([{"kind": "restart", "module": "web", "expires": e}]),
                "actions[0].id",
            ),
            (
                json!([{"id": "a b", "kind": "restart", "module": "web", "expires": e}]),
                "actions[0].id",
            ),
            (
                json!([{"id": "a", "kind": "shell", "module": "web", "expires": e}]),
                "actions[0].kind",
            ),
            (
                json!([{"id": "a", "kind": "restart", "expires": e}]),
                "actions[0].module",
            ),
            (
                json!([{"id": "a", "kind": "restart", "module": "Web", "expires": e}]),
                "actions[0].module",
            ),
            (
                json!([{"id": "a", "kind": "reboot", "module": "web", "expires": e}]),
                "actions[0].module",
            ),
            (
                json!([{"id": "a", "kind": "restart", "module": "web"}]),
                "actions[0].expires",
            ),
            (
                json!([{"id": "a", "kind": "restart", "module": "web", "expires": "tomorrow"}]),
                "actions[0].expires",
            ),
            (
                json!([{"id": "a", "kind": "restart", "module": "web", "expires": e, "not_before": e}]),
                "actions[0].not_before",
            ),
            (
                json!([{"id": "a", "kind": "restart", "module": "web", "expires": e, "upload_to": "https://x/"}]),
                "actions[0].upload_to",
            ),
            (
                json!([{"id": "a", "kind": "support-bundle", "expires": e, "upload_to": "ftp://x/"}]),
                "actions[0].upload_to",
            ),
            (
                json!([{"id": "a", "kind": "restart", "module": "web", "expires": e, "since": e}]),
                "actions[0].since",
            ),
            (
                json!([{"id": "a", "kind": "upload-logs", "module": "web", "expires": e, "since": e, "until": e}]),
                "actions[0].until",
            ),
            (
                json!([{"id": "a", "kind": "restart", "module": "web", "expires": e},
                    {"id": "a", "kind": "reboot", "expires": e}]),
                "actions[1].id",
            ),
        ];
        for (doc, field) in cases {
            let got = parse(doc.clone()).unwrap_err();
            assert_eq!(got.0, field, "{doc}: {}", got.1);
            assert!(!got.1.contains("x/"), "{doc}: a URL in {}", got.1);
        }
        let many: Vec<_> = (0..33)
            .map(|i| json!({"id": format!("a{i}"), "kind": "reboot", "expires": e}))
            .collect();
        assert_eq!(parse(json!(many)).unwrap_err().0, "actions");
    }

    #[test]
    fn an_action_is_due_once_in_its_time_and_resumed_if_begun() {
        let a = Action {
            id: "a".into(),
            kind: Kind::Restart,
            module: Some(ModuleName::try_from("web").unwrap()),
            not_before: Some(100),
            expires: 200,
            upload_to: None,
            since: None,
            until: None,
        };
        let begun = Record::begin(&a, "container c1 started 5".into(), 150);
        let mut done = begun.clone();
        done.finish("restarted".into(), 151).unwrap();
        let mut failed = begun.clone();
        failed.fail("no container".into(), 151).unwrap();
        let expired = Record::expired(&a, 250);
        for (record, now, want) in [
            (None, 50, Due::Later(100)),
            (None, 100, Due::Now),
            (None, 199, Due::Now),
            (None, 200, Due::Expires),
            (Some(&begun), 150, Due::Resume),
            // Begun before its expiry: finished after it too.
            (Some(&begun), 300, Due::Resume),
            (Some(&done), 150, Due::Over),
            (Some(&failed), 150, Due::Over),
            (Some(&expired), 150, Due::Over),
        ] {
            assert_eq!(due(&a, record, now), want, "{record:?} at {now}");
        }
    }

    #[test]
    fn a_record_moves_once_from_begun_and_reads_back() {
        let a = Action {
            id: "b".into(),
            kind: Kind::SupportBundle,
            module: None,
            not_before: None,
            expires: 200,
            upload_to: None,
            since: None,
            until: None,
        };
        let mut r = Record::begin(&a, "nothing\nelse".into(), 10);
        assert_eq!(r.before, "nothing else");
        assert_eq!(Record::from_text(&r.to_text()), Some(r.clone()));
        r.finish("uploaded to https://h/b.tar.gz".into(), 11)
            .unwrap();
        assert_eq!(Record::from_text(&r.to_text()), Some(r.clone()));
        let e = r.fail("late".into(), 12).unwrap_err();
        assert_eq!(e.to_string(), "action b is done: it cannot become failed");
        assert_eq!(r.status, Status::Done);
        let mut x = Record::expired(&a, 300);
        assert!(x.finish("x".into(), 301).is_err());
        assert_eq!(Record::from_text(&x.to_text()), Some(x));
        for bad in [
            "",
            "id=b\n",
            "no equals",
            "id=b\nkind=shell\nstatus=done\nat=1\nbefore=\n",
        ] {
            assert_eq!(Record::from_text(bad), None, "{bad}");
        }
    }

    #[test]
    fn what_is_next_of_an_action_the_device_acts_on() {
        let a = |kind: Kind| Action {
            id: "a1".into(),
            kind,
            module: Some(ModuleName::try_from("web").unwrap()),
            not_before: Some(100),
            expires: 1_000,
            upload_to: None,
            since: None,
            until: None,
        };
        let restart = a(Kind::Restart);
        let recreate = a(Kind::Recreate);
        let reboot = Action {
            module: None,
            ..a(Kind::Reboot)
        };
        let begun = |x: &Action, before: &str| Record::begin(x, before.into(), 150);
        let mut done = begun(&restart, "container=c started=1");
        done.finish("restarted".into(), 160).unwrap();
        let r1 = evidence(Kind::Restart, Some(("c", 1)), "b");
        let r2 = evidence(Kind::Restart, Some(("c", 2)), "b");
        let c1 = evidence(Kind::Recreate, Some(("c", 1)), "b");
        let c2 = evidence(Kind::Recreate, Some(("d", 1)), "b");
        let b1 = evidence(Kind::Reboot, None, "boot-1");
        let b2 = evidence(Kind::Reboot, None, "boot-2");
        let waits = Next::Wait("waits for web to run as it should, with nothing else to do".into());
        // (the action, its record, now, what shows now, what is next)
        #[rustfmt::skip]
        type Case<'a> = (&'a Action, Option<Record>, u64, Option<&'a str>, Next);
        let cases: Vec<Case> = vec![
            (&restart, None, 50, Some(&r1), Next::Later(100)),
            (&restart, None, 100, Some(&r1), Next::Act),
            (&restart, None, 100, None, waits.clone()),
            (&restart, None, 1_000, Some(&r1), Next::Expire),
            (&restart, Some(done.clone()), 200, Some(&r2), Next::Nothing),
            // Begun and not acted (a cut before the engine was asked): again.
            (
                &restart,
                Some(begun(&restart, &r1)),
                200,
                Some(&r1),
                Next::Act,
            ),
            // Begun and acted (a cut before it was stored done): done, once.
            (
                &restart,
                Some(begun(&restart, &r1)),
                200,
                Some(&r2),
                Next::Finish("restart (found done: container=c started=2)".into()),
            ),
            // Begun is finished whatever the time: past its expiry too.
            (
                &restart,
                Some(begun(&restart, &r1)),
                5_000,
                Some(&r1),
                Next::Act,
            ),
            (&restart, Some(begun(&restart, &r1)), 200, None, waits),
            (
                &recreate,
                Some(begun(&recreate, &c1)),
                200,
                Some(&c1),
                Next::Act,
            ),
            (
                &recreate,
                Some(begun(&recreate, &c1)),
                200,
                Some(&c2),
                Next::Finish("recreate (found done: container=d)".into()),
            ),
            (
                &recreate,
                Some(begun(&recreate, &c1)),
                200,
                None,
                Next::Finish("recreate (found done: its container was replaced)".into()),
            ),
            (&reboot, None, 200, Some(&b1), Next::Act),
            (
                &reboot,
                Some(begun(&reboot, &b1)),
                200,
                Some(&b1),
                Next::Act,
            ),
            (
                &reboot,
                Some(begun(&reboot, &b1)),
                200,
                Some(&b2),
                Next::Finish("reboot (found done: boot=boot-2)".into()),
            ),
        ];
        for (i, (action, record, now, here, want)) in cases.into_iter().enumerate() {
            assert_eq!(next(action, record.as_ref(), now, here), want, "case {i}");
        }
        assert_eq!(evidence(Kind::UploadLogs, Some(("c", 1)), "b"), "");
    }

    #[test]
    fn a_bundle_is_a_tar_of_its_files_in_order() {
        use crate::model::tar::{Piece, TarStream};
        let files = vec![
            ("report.json".to_string(), b"{}".to_vec()),
            ("logs/web.log".to_string(), vec![b'x'; 513]),
            ("empty".to_string(), Vec::new()),
        ];
        let tar = bundle(&files);
        assert_eq!(tar.len() % 512, 0);
        let mut read = TarStream::default();
        let mut got: Vec<Vec<u8>> = Vec::new();
        read.feed(&tar, |p| match p {
            Piece::Begin(_) => got.push(Vec::new()),
            Piece::Data(d) => got.last_mut().unwrap().extend_from_slice(d),
            Piece::End => {}
        })
        .unwrap();
        let want: Vec<Vec<u8>> = files.iter().map(|f| f.1.clone()).collect();
        assert_eq!(got, want);
        // Its names, as the headers say them.
        assert_eq!(&tar[..11], b"report.json");
        assert_eq!(&tar[1024..1036], b"logs/web.log");
    }

    #[test]
    fn a_presigned_url_is_not_in_what_debug_shows() {
        let a = Action {
            id: "b".into(),
            kind: Kind::SupportBundle,
            module: None,
            not_before: None,
            expires: 10,
            upload_to: Some("https://h.example/b.tar?X-Amz-Signature=5ecret".into()),
            since: None,
            until: None,
        };
        let shown = format!("{a:?}");
        assert!(
            shown.contains("https://h.example/b.tar?…") && !shown.contains("5ecret"),
            "{shown}"
        );
        let u = Upload {
            record: Record::begin(&a, String::new(), 1),
            url: a.upload_to.clone().unwrap(),
            files: vec![("x".into(), vec![1, 2])],
        };
        let shown = format!("{u:?}");
        assert!(!shown.contains("5ecret"), "{shown}");
    }
}
