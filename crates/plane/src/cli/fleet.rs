//! `stead-plane publish`, `stead-plane status --reports` and `stead-plane
//! rollout watch`: a fleet's documents signed from its description, its
//! reports rolled up, and its rollouts halted when their devices fail. They
//! run where the signing key lives (an operator's machine, a CI job, cron),
//! read and write plain directories (what the host serves, what a synced
//! bucket or an nginx DAV holds; with `--upload`, put into an S3 bucket
//! by [`super::upload`] once written, under the same lock), read reports
//! from a directory or walk a web server's listings of them, and keep no
//! state of their own. What the host's directory serves is verified before
//! anything is signed on top of it, under the directory's lock (`Served`),
//! by the document keys of the trusted set a device holds once it has
//! walked the site's roots. On a terminal, each shows its progress on
//! stderr ([`super::progress`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Map, Value as J};

use crate::model::fleet::{GroupName, Threshold, halt};
use crate::model::names::Digest;
use crate::model::names::NodeId;
use crate::plane::accept::MAX_DOCUMENT;
use crate::plane::enroll::{self, Keys};
use crate::plane::envelope::{PAYLOAD_TYPE, PublicKey, SecretKey};
use crate::plane::group::{GROUP_PAYLOAD_TYPE, GroupDesired, stamp_group};
use crate::plane::publish::{Published, Times, group_path, plan, read_served};
use crate::plane::rollup::Rollup;
use crate::plane::trusted::TrustedSet;
use crate::views::signed::{self, Enrolled, Read, Unverified};

use super::progress::Progress;

/// The largest fleet file or report read.
const MAX_FILE: u64 = 4 << 20;

/// Signs what changed of a fleet's documents into the host's directory,
/// and, with `upload`, puts what the bucket does not hold of it there.
/// `keys`: the signing keys' files, and the devices' trusted keys
/// (`--trusted`; none: the signing keys').
pub fn publish(
    (keys, trusted): (&[PathBuf], &[String]),
    fleet: &Path,
    (site, upload): (&Path, Option<&super::upload::Upload>),
    dry_run: bool,
    times: (Duration, Duration),
) -> crate::cli::failure::Result<ExitCode> {
    let keys = super::plane::secret_keys(keys)?;
    let (groups, nodes) = match read_fleet(fleet) {
        Ok(f) => f,
        Err(e) => return Ok(super::plane::refused(format_args!("{e}"))),
    };
    // A site disruption budget rests on the host's conditional writes:
    // checked before anything is written, and refused where they are not.
    if let Some(g) = groups
        .iter()
        .find(|(_, g)| g.contains_key("budget"))
        .map(|(n, _)| n)
    {
        match upload {
            None => {
                return Ok(super::plane::refused(format_args!(
                    "group {g} sets a budget, whose leases its devices take by conditional writes on \
                     the plane's host: publish with --upload s3://BUCKET/PREFIX, where the host's are \
                     checked; nothing published"
                )));
            }
            Some(u) if !dry_run => {
                if let Err(e) = u.check_conditional_writes() {
                    return Ok(super::plane::refused(format_args!(
                        "group {g} sets a budget, and {e}; nothing published"
                    )));
                }
            }
            Some(_) => {}
        }
    }
    if !dry_run {
        std::fs::create_dir_all(site).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot make {}: {e}", site.display()))
        })?;
    }
    let mut served = match Served::open(site, &keys, trusted)? {
        Ok(s) => s,
        Err(e) => {
            return Ok(super::plane::refused(format_args!(
                "nothing published: {e}"
            )));
        }
    };
    let t = Times {
        now: crate::host::clock::now(),
        expires_in: times.0.as_secs(),
        refresh_before: times.1.as_secs(),
    };
    let total = groups.len() + nodes.len();
    let checking = Progress::stderr("checking what is served", Some(total as u64));
    let writes = match plan(
        &groups,
        &nodes,
        |p| {
            checking.step();
            served.read(p)
        },
        t,
    ) {
        Ok(w) => w,
        Err(e) => {
            return Ok(super::plane::refused(format_args!(
                "nothing published: {e}"
            )));
        }
    };
    checking.done();
    let (first, more) = keys.split_first().expect("the parser requires a --key");
    let signing = Progress::stderr(
        if dry_run { "planning" } else { "signing" },
        Some(writes.len() as u64),
    );
    for w in &writes {
        let payload_type = if w.group {
            GROUP_PAYLOAD_TYPE
        } else {
            PAYLOAD_TYPE
        };
        let mut envelope = first.sign(payload_type, &w.payload);
        for k in more {
            envelope.countersign(k);
        }
        let json = envelope.to_json();
        if json.len() > MAX_DOCUMENT {
            return Ok(super::plane::refused(format_args!(
                "{}: the signed document would be {} bytes, over the {MAX_DOCUMENT} a node takes",
                w.path,
                json.len()
            )));
        }
        if dry_run {
            signing.say(format_args!(
                "would sign {} revision {} ({})",
                w.path, w.revision, w.why
            ));
        } else {
            if let Err(e) = served.unchanged(&w.path) {
                return Ok(super::plane::refused(format_args!("{e}")));
            }
            write_served(&site.join(&w.path), &json)?;
            signing.say(format_args!(
                "signed {} revision {} ({})",
                w.path, w.revision, w.why
            ));
        }
        signing.step();
    }
    signing.done();
    println!(
        "{} of {total} documents {}; {} unchanged",
        writes.len(),
        if dry_run { "would be signed" } else { "signed" },
        total - writes.len()
    );
    // Under the site's lock still: what goes up is what this run left.
    finish_upload(upload, site, dry_run)
}

/// Puts what the bucket does not hold of the site, when asked to: a
/// failure exits 1, naming the file and the answer; the site stays as
/// written, and the next run puts what is missing.
fn finish_upload(
    upload: Option<&super::upload::Upload>,
    site: &Path,
    dry_run: bool,
) -> crate::cli::failure::Result<ExitCode> {
    if let Some(up) = upload
        && let Err(e) = up.run(site, dry_run)
    {
        return Ok(super::plane::refused(format_args!("{e}")));
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes a document the host serves, atomically, with a modification
/// time past the one it replaces: hosts whose ETag is the file's mtime and
/// size (nginx) would otherwise give two writes in one second of the same
/// size the same ETag, and devices would be told nothing changed.
fn write_served(path: &Path, bytes: &[u8]) -> crate::cli::failure::Result<()> {
    let before = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    super::plane::write_file(path, bytes, 0o644)?;
    let secs = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    if let Some(before) = before {
        let after = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        if after.is_none_or(|a| secs(a) <= secs(before)) {
            let next = std::time::UNIX_EPOCH + Duration::from_secs(secs(before) + 1);
            std::fs::File::options()
                .write(true)
                .open(path)
                .and_then(|f| f.set_modified(next))
                .map_err(|e| {
                    crate::cli::failure::Failure::from(std::io::Error::new(
                        e.kind(),
                        format!("cannot set the time of {}: {e}", path.display()),
                    ))
                })?;
        }
    }
    Ok(())
}

type Payloads<K> = BTreeMap<K, Map<String, J>>;

/// A fleet description: `groups/<name>.json` (a group's payload),
/// `nodes/<id>.json` (a node's payload), `nodes.csv` (`node,groups` with
/// the groups space-separated, for nodes with nothing of their own) and
/// `node-defaults.json` (laid under every node's payload, key by key).
fn read_fleet(dir: &Path) -> Result<(Payloads<GroupName>, Payloads<NodeId>), String> {
    let mut groups = BTreeMap::new();
    for (stem, path) in json_files(&dir.join("groups"))? {
        let name = GroupName::try_from(stem.as_str())
            .map_err(|e| format!("{}: not a group name: {}", path.display(), e.0))?;
        groups.insert(name, read_object(&path)?);
    }
    let defaults = match dir.join("node-defaults.json") {
        p if p.exists() => read_object(&p)?,
        _ => Map::new(),
    };
    let mut nodes = BTreeMap::new();
    for (stem, path) in json_files(&dir.join("nodes"))? {
        let id = NodeId::try_from(stem.as_str())
            .map_err(|e| format!("{}: not a node id: {}", path.display(), e.0))?;
        nodes.insert(id, read_object(&path)?);
    }
    let csv = dir.join("nodes.csv");
    if csv.exists() {
        let text = read_limited(&csv)?;
        let text = String::from_utf8(text).map_err(|_| format!("{}: not UTF-8", csv.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || (i == 0 && line.starts_with("node,")) {
                continue;
            }
            let place = format!("{} line {}", csv.display(), i + 1);
            let (id, list) = line.split_once(',').unwrap_or((line, ""));
            let id = NodeId::try_from(id.trim())
                .map_err(|e| format!("{place}: not a node id: {}", e.0))?;
            if nodes.contains_key(&id) {
                return Err(format!(
                    "{place}: node {id} is described twice (nodes/{id}.json, or an earlier line)"
                ));
            }
            let groups: Vec<J> = list.split_whitespace().map(J::from).collect();
            let mut m = Map::new();
            m.insert("groups".into(), J::Array(groups));
            nodes.insert(id, m);
        }
    }
    for payload in nodes.values_mut() {
        for (k, v) in &defaults {
            payload.entry(k.clone()).or_insert_with(|| v.clone());
        }
        payload
            .entry("modules")
            .or_insert_with(|| J::Array(Vec::new()));
    }
    Ok((groups, nodes))
}

/// The `.json` files of a directory (none when it does not exist), by
/// their names without `.json`.
fn json_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".json") {
            out.push((stem.to_string(), e.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn read_limited(path: &Path) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    read_limited_into(path, &mut bytes)?;
    Ok(bytes)
}

/// [`read_limited`] into `bytes`, which is cleared first (a reader of many
/// files keeps one buffer).
fn read_limited_into(path: &Path, bytes: &mut Vec<u8>) -> Result<(), String> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    read_file_into(f, path, bytes)
}

/// [`read_limited_into`] of a file that may not be there: false, and
/// nothing read, when `path` is absent, a symbolic link or not a file.
fn read_if_file(path: &Path, bytes: &mut Vec<u8>) -> Result<bool, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = match std::fs::OpenOptions::new()
        .read(true)
        // Not through a link (a walk does not follow them), and never
        // waiting on a FIFO.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ELOOP)
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Ok(false);
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    match f.metadata() {
        Ok(m) if m.is_file() => read_file_into(f, path, bytes).map(|()| true),
        Ok(_) => Ok(false),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The file `f` (at `path`) into `bytes` (cleared first), up to
/// [`MAX_FILE`].
fn read_file_into(f: std::fs::File, path: &Path, bytes: &mut Vec<u8>) -> Result<(), String> {
    use std::io::Read as _;
    bytes.clear();
    f.take(MAX_FILE + 1)
        .read_to_end(bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!("{}: over {MAX_FILE} bytes", path.display()));
    }
    Ok(())
}

fn read_object(path: &Path) -> Result<Map<String, J>, String> {
    let bytes = read_limited(path)?;
    crate::model::json::no_repeated_keys(&bytes)
        .map_err(|r| format!("{}: {}: {}", path.display(), r.path, r.message))?;
    match serde_json::from_slice(&bytes) {
        Ok(J::Object(m)) => Ok(m),
        Ok(_) => Err(format!("{}: must be a JSON object", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// What the host's directory serves, read for a run that signs on top of
/// it (a publish, a watch): under the site's lock, each document verified
/// against the keys the devices take before it is used.
struct Served<'a> {
    site: &'a Path,
    /// What the devices trust once they have walked the site's roots: the
    /// newest root's document keys, or the devices' trusted keys (version
    /// 0).
    trusted: TrustedSet,
    /// The document keys of earlier roots that the newest no longer lists.
    revoked: Vec<PublicKey>,
    /// What each document read was, by its path: it must still be that
    /// when it is replaced.
    read: BTreeMap<String, Option<Digest>>,
    /// The site's lock, held while this lives (none when there is no site).
    _lock: Option<std::fs::File>,
}

impl<'a> Served<'a> {
    /// Takes the site's lock, without waiting (a second publish or watch
    /// at once does not sign; it says so), and the keys what it serves
    /// must be signed by: the document keys of the newest root the site
    /// publishes, walked from `trusted` (or the signing keys, when none is
    /// given), or those keys themselves when it publishes none. A signing
    /// key the devices would not take refuses the run too.
    fn open(
        site: &'a Path,
        signing: &[SecretKey],
        trusted: &[String],
    ) -> crate::cli::failure::Result<Result<Served<'a>, String>> {
        let lock = match crate::host::files::try_lock_dir(site) {
            Ok(l) => l.map(Some),
            // No site yet (a dry run): nothing is read, nothing written.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(None),
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("cannot lock {}: {e}", site.display()),
                )
                .into());
            }
        };
        let Some(lock) = lock else {
            return Ok(Err(format!(
                "another stead-plane command (publish, rollout watch, root verify --publish) is \
                 signing into {} (it holds the directory's lock); run again once it is done",
                site.display()
            )));
        };
        let trusted = if trusted.is_empty() {
            signing.iter().map(SecretKey::public).collect()
        } else {
            trusted
                .iter()
                .map(|k| super::plane::read_public_key(k))
                .collect::<crate::cli::failure::Result<Vec<_>>>()?
        };
        let mut earlier = trusted.clone();
        let walked = match super::trust::walk(&trusted, site, &mut |r| {
            earlier.extend(r.documents.iter().cloned())
        }) {
            Ok(t) => t,
            Err(e) => return Ok(Err(format!("the site's root does not check: {e}"))),
        };
        let root = walked.root();
        earlier.retain(|k| !root.documents.contains(k));
        earlier.dedup();
        if !signing.iter().any(|k| root.documents.contains(&k.public())) {
            return Ok(Err(format!(
                "no --key is a document key of {} (devices would refuse what it signs): {}",
                if root.version == 0 {
                    "the devices' trusted keys (--trusted)".to_string()
                } else {
                    format!("root version {}", root.version)
                },
                root.documents
                    .iter()
                    .map(|k| k.id().as_str().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(Ok(Served {
            site,
            trusted: walked,
            revoked: earlier,
            read: BTreeMap::new(),
            _lock: lock,
        }))
    }

    /// The document the host serves at `path` (relative to the site), its
    /// bytes remembered: `None` when there is none.
    fn bytes(&mut self, path: &str) -> Result<Option<Vec<u8>>, String> {
        let file = self.site.join(path);
        let bytes = match crate::host::files::read_regular(&file, MAX_DOCUMENT as u64) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot read it: {e}")),
        };
        self.read
            .insert(path.to_string(), bytes.as_deref().map(Digest::of));
        Ok(bytes)
    }

    /// What the host serves at `path`, verified ([`read_served`]). One
    /// signed by a key a newer root dropped is not used (devices no longer
    /// take it either): it is signed anew, as if none were there.
    fn read(&mut self, path: &str) -> Result<Option<Published>, String> {
        let Some(b) = self.bytes(path)? else {
            return Ok(None);
        };
        match read_served(path, &b, self.trusted.document_keys()) {
            Ok(p) => Ok(Some(p)),
            Err(_) if read_served(path, &b, &self.revoked).is_ok() => {
                println!(
                    "{path}: signed by a key root version {} dropped: read as not published",
                    self.trusted.root().version
                );
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether `path` still holds what was read of it: a writer that did
    /// not take the lock (a copy by hand, an older stead) stops the run
    /// before anything is signed over it.
    fn unchanged(&self, path: &str) -> Result<(), String> {
        let now = match crate::host::files::read_regular(&self.site.join(path), MAX_DOCUMENT as u64)
        {
            Ok(b) => Some(Digest::of(&b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{path}: cannot read it again: {e}")),
        };
        match self.read.get(path) {
            Some(was) if *was == now => Ok(()),
            _ => Err(format!(
                "{path} changed while this run read the site: nothing more is signed over it; \
                 run again"
            )),
        }
    }
}

/// Where a fleet's reports are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reports {
    /// A directory: every `status.json` under it.
    Dir(PathBuf),
    /// A web server's listing (its path ends in `/`): every `status.json`
    /// in it and in the directories it lists, walked down.
    Index(http::Uri),
}

impl Default for Reports {
    fn default() -> Reports {
        Reports::Dir(PathBuf::new())
    }
}

impl Reports {
    /// `--reports`: an `http://` or `https://` URL is a listing, anything
    /// else a directory. A URL with a user name or password is refused
    /// without being repeated.
    pub fn parse(s: &str) -> Result<Reports, String> {
        let Some(rest) = s
            .strip_prefix("http://")
            .or_else(|| s.strip_prefix("https://"))
        else {
            return Ok(Reports::Dir(PathBuf::from(s)));
        };
        if rest
            .split(['/', '?', '#'])
            .next()
            .unwrap_or("")
            .contains('@')
        {
            return Err("a reports URL must not carry a user name or password".into());
        }
        let uri: http::Uri = s.parse().map_err(|e| format!("not a URL: {e}"))?;
        if uri.host().is_none_or(str::is_empty) {
            return Err(format!("{uri}: no host"));
        }
        if uri.query().is_some() {
            return Err(format!("{uri}: a listing's URL takes no query"));
        }
        if uri.path().ends_with('/') {
            return Ok(Reports::Index(uri));
        }
        let mut parts = uri.into_parts();
        let path = format!(
            "{}/",
            parts.path_and_query.as_ref().map_or("", |p| p.path())
        );
        parts.path_and_query = Some(path.parse().map_err(|e| format!("not a URL: {e}"))?);
        http::Uri::from_parts(parts)
            .map(Reports::Index)
            .map_err(|e| format!("not a URL: {e}"))
    }
}

/// What is done with each report read: where it was, the name of the
/// directory it is in (`nodes/<node>/status.json`: the node it may speak
/// for), and it or why it does not read.
pub(super) type EachReport<'a> = dyn FnMut(&str, Option<&str>, Result<Read, String>) + 'a;

/// Reports judged, a batch at a time: each counted when signed by the
/// report key `keys` enroll for the node whose directory it is in (none
/// given: none is), or why it is not; the signatures checked in one batch
/// ([`crate::plane::verdicts`]). Each is read as `V` (the whole
/// [`crate::views::ReportView`], or a narrower view).
pub(super) fn verdicts<V: signed::Speaks>(
    keys: Option<&enroll::Index>,
    batch: Vec<(Option<&str>, Result<Read, String>)>,
) -> Vec<Result<V, Unverified>> {
    crate::plane::verdicts::verdicts(
        batch
            .into_iter()
            .map(|(dir, read)| match read {
                Err(e) => signed::Checked::Judged(Err(Unverified::Unreadable(e))),
                Ok(read) => signed::check(
                    read,
                    dir,
                    keys.map_or(Enrolled::NoKeys, |k| k.enrolled(dir)),
                ),
            })
            .collect(),
    )
}

/// Rolls up every report, one at a time, counting only those signed by
/// the report key `keys` enroll for the node whose directory each is in
/// (none given: none is counted, all are listed); a group's claims counted
/// within `served` (each group's revision on the host) when it is given.
fn roll_up(
    walk: Reading,
    keys: Option<&Keys>,
    silent_after: u64,
    served: Option<&BTreeMap<String, u64>>,
) -> Result<Rollup, String> {
    let now = crate::host::clock::now();
    let mut r = served.map_or_else(Rollup::default, Rollup::served);
    let reading = Progress::stderr("reports read", None);
    let index = keys.map(enroll::Index::new);
    walk.judged(
        &|batch| verdicts(index.as_ref(), batch),
        &mut |source, v| {
            reading.step();
            r.take(source, v, now, silent_after);
        },
    )?;
    reading.done();
    if let Some(keys) = keys {
        r.missing(keys.keys().map(|n| n.as_str()));
    }
    Ok(r)
}

/// The revision of each of `names`' documents on the host at `site`, for
/// `plane status --site` (those that read). Not verified: status signs
/// nothing and shows the revisions as the site holds them; `rollout
/// watch`, which signs, reads them through [`Served`].
fn served_revisions(site: &Path, names: &[GroupName]) -> BTreeMap<String, u64> {
    names
        .iter()
        .filter_map(|name| {
            let path = group_path(name);
            let bytes =
                crate::host::files::read_regular(&site.join(&path), MAX_DOCUMENT as u64).ok()?;
            Some((
                name.to_string(),
                crate::plane::publish::revision_served(&path, &bytes)?,
            ))
        })
        .collect()
}

/// Reads every report, one at a time, into `each`.
pub(super) fn read_reports(reports: &Reports, each: &mut EachReport) -> Result<(), String> {
    read_reports_judged(
        reports,
        &|batch| {
            batch
                .into_iter()
                .map(|(dir, read)| (dir.map(str::to_string), read))
                .collect()
        },
        &mut |source, (dir, read)| each(source, dir.as_deref(), read),
    )
}

/// What judges reports, a batch at a time: given the directory each is in
/// and it, or why it does not read, a verdict on each, in order.
pub(super) type Judge<'a, T> =
    dyn Fn(Vec<(Option<&str>, Result<Read, String>)>) -> Vec<T> + Sync + 'a;

/// Judges every report with `judge`, [`BATCH`] at a time (given the
/// directory each is in and it, or why it does not read), and gives each
/// verdict to `each`, one at a time, on this thread. A directory's reports
/// are read and judged on as many threads as there are cores (up to
/// [`READERS`]), in no set order; a listing's as they arrive.
pub(super) fn read_reports_judged<T: Send>(
    reports: &Reports,
    judge: &Judge<'_, T>,
    each: &mut dyn FnMut(&str, T),
) -> Result<(), String> {
    Reading::start(reports)?.judged(judge, each)
}

/// A reading of a fleet's reports, begun: a directory's walk runs ahead
/// (up to [`WALKED`] reports) while what judges them is made ready (the
/// enrolled keys read), a listing's is walked as it is read.
pub(super) enum Reading {
    Dir(Walk),
    Index(http::Uri),
}

impl Reading {
    /// Begins reading `reports`: an error when a directory is not one.
    pub(super) fn start(reports: &Reports) -> Result<Reading, String> {
        match reports {
            Reports::Dir(dir) => Walk::start(dir).map(Reading::Dir),
            Reports::Index(uri) => Ok(Reading::Index(uri.clone())),
        }
    }

    /// [`read_reports_judged`], of the reading begun.
    pub(super) fn judged<T: Send>(
        self,
        judge: &Judge<'_, T>,
        each: &mut dyn FnMut(&str, T),
    ) -> Result<(), String> {
        match self {
            Reading::Dir(walk) => read_dir_reports(walk, judge, each),
            Reading::Index(uri) => {
                let mut held = Vec::with_capacity(BATCH);
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start the async runtime: {e}"))?
                    .block_on(read_index_reports(&uri, &mut |source, dir, read| {
                        held.push((source.to_string(), dir.map(str::to_string), read));
                        if held.len() == BATCH {
                            judge_held(&mut held, judge, each);
                        }
                    }))?;
                judge_held(&mut held, judge, each);
                Ok(())
            }
        }
    }
}

/// A directory's walk, on a thread of its own: the path of every
/// `status.json` under it, in batches. Dropped, it stops.
pub(super) struct Walk {
    dir: PathBuf,
    paths: std::sync::mpsc::Receiver<Vec<Found>>,
    walker: std::thread::JoinHandle<Result<(), String>>,
}

impl Walk {
    fn start(dir: &Path) -> Result<Walk, String> {
        if !dir.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        let (tx, paths) = std::sync::mpsc::sync_channel::<Vec<Found>>(WALKED / BATCH);
        let root = dir.to_path_buf();
        let walker = std::thread::Builder::new()
            .name("walk".into())
            .spawn(move || walk_reports(&root, &tx))
            .map_err(|e| format!("cannot start the walk of {}: {e}", dir.display()))?;
        Ok(Walk {
            dir: dir.to_path_buf(),
            paths,
            walker,
        })
    }
}

/// Judges the reports `held` (where each was, the directory it is in, and
/// it or why it does not read) and gives their verdicts to `each`.
fn judge_held<T>(
    held: &mut Vec<(String, Option<String>, Result<Read, String>)>,
    judge: &Judge<'_, T>,
    each: &mut dyn FnMut(&str, T),
) {
    let (mut sources, mut dirs, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    for (source, dir, read) in held.drain(..) {
        sources.push(source);
        dirs.push(dir);
        reads.push(read);
    }
    let judged = judge(dirs.iter().map(Option::as_deref).zip(reads).collect());
    for (source, verdict) in sources.iter().zip(judged) {
        each(source, verdict);
    }
}

/// The most threads reading and judging a directory's reports.
const READERS: usize = 8;
/// Reports passed between the threads at once (a thread woken per batch,
/// not per report).
const BATCH: usize = 256;
/// The most batches waiting between the threads.
const QUEUED: usize = 16;
/// The most reports a walk finds ahead of their reading (their paths
/// held: about 80 MB at most).
const WALKED: usize = 1 << 20;
/// What each reader's buffer holds before it grows: a report of a few
/// modules in one read.
const READ_BUFFER: usize = 64 << 10;

/// Reads every report (`status.json`) under `dir`: one thread walks the
/// directories, the readers read and judge each report, and `each` takes
/// the verdicts here. A directory that cannot be read ends the walk, and
/// the run, with its error (the verdicts already made are given first).
fn read_dir_reports<T: Send>(
    walk: Walk,
    judge: &Judge<'_, T>,
    each: &mut dyn FnMut(&str, T),
) -> Result<(), String> {
    use std::sync::{Mutex, mpsc};
    let Walk {
        dir,
        paths: queued,
        walker,
    } = walk;
    let dir = dir.as_path();
    let readers = std::thread::available_parallelism().map_or(1, |n| n.get().min(READERS));
    let queued = Mutex::new(queued);
    let (verdicts, judged) = mpsc::sync_channel::<Vec<(String, T)>>(QUEUED);
    std::thread::scope(|scope| {
        for _ in 0..readers {
            let (queued, verdicts) = (&queued, verdicts.clone());
            scope.spawn(move || {
                let mut buffer = Vec::with_capacity(READ_BUFFER);
                loop {
                    let next = queued
                        .lock()
                        .map_err(|_| ())
                        .and_then(|q| q.recv().map_err(|_| ()));
                    let Ok(batch) = next else { break };
                    let (sources, read): (Vec<String>, Vec<_>) = batch
                        .iter()
                        .filter_map(|found| {
                            let path = found.path();
                            let read = match found {
                                Found::Listed(_) => read_limited_into(path, &mut buffer),
                                Found::Maybe(_) => match read_if_file(path, &mut buffer) {
                                    Ok(false) => return None,
                                    Ok(true) => Ok(()),
                                    Err(e) => Err(e),
                                },
                            };
                            let source =
                                path.strip_prefix(dir).unwrap_or(path).display().to_string();
                            let node_dir = path
                                .parent()
                                .and_then(Path::file_name)
                                .and_then(|d| d.to_str());
                            let read = read.and_then(|()| Read::parse(&buffer));
                            Some((source, (node_dir, read)))
                        })
                        .unzip();
                    let judged: Vec<(String, T)> = sources.into_iter().zip(judge(read)).collect();
                    if verdicts.send(judged).is_err() {
                        break;
                    }
                }
            });
        }
        drop(verdicts);
        for batch in judged {
            for (source, verdict) in batch {
                each(&source, verdict);
            }
        }
        walker
            .join()
            .unwrap_or_else(|_| Err("the walk of the reports stopped".into()))
    })
}

/// A report the walk found: one its directory lists, or the one a
/// directory without subdirectories may hold (read when it is there and a
/// file: such a directory is not listed).
pub(super) enum Found {
    Listed(PathBuf),
    Maybe(PathBuf),
}

impl Found {
    fn path(&self) -> &Path {
        match self {
            Found::Listed(p) | Found::Maybe(p) => p,
        }
    }
}

/// Walks `dir`, sending every `status.json` under it, in batches.
///
/// A directory without subdirectories (a node's) is not listed: its
/// `status.json` is sent as [`Found::Maybe`], for the reader to open. A
/// directory's link count tells (two, and one per subdirectory) only on a
/// filesystem that counts them, so it is trusted only on a device where a
/// directory already listed had as many as it has subdirectories (ext4,
/// XFS and tmpfs count; btrfs and many network filesystems do not, and
/// every directory on them is listed).
fn walk_reports(dir: &Path, paths: &std::sync::mpsc::SyncSender<Vec<Found>>) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let mut stack = vec![dir.to_path_buf()];
    let mut batch = Vec::with_capacity(BATCH);
    // The devices whose directories' link counts were seen to count.
    let mut counting: Vec<u64> = Vec::new();
    let send = |batch: &mut Vec<Found>, f: Found| {
        batch.push(f);
        batch.len() < BATCH || paths.send(std::mem::take(batch)).is_ok()
    };
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| format!("cannot read {}: {e}", d.display()))?;
        let mut subdirs = 0u64;
        for e in entries {
            let Ok(e) = e else { continue };
            match e.file_type() {
                Ok(t) if t.is_dir() => {
                    subdirs += 1;
                    let path = e.path();
                    let leaf = !counting.is_empty()
                        && e.metadata()
                            .is_ok_and(|m| m.nlink() == 2 && counting.contains(&m.dev()));
                    if !leaf {
                        stack.push(path);
                    } else if !send(&mut batch, Found::Maybe(path.join("status.json"))) {
                        return Ok(());
                    }
                }
                Ok(t)
                    if t.is_file()
                        && e.file_name() == "status.json"
                        && !send(&mut batch, Found::Listed(e.path())) =>
                {
                    return Ok(());
                }
                _ => {}
            }
        }
        if subdirs > 0
            && let Ok(m) = std::fs::metadata(&d)
            && m.nlink() == subdirs + 2
            && !counting.contains(&m.dev())
        {
            counting.push(m.dev());
        }
    }
    if !batch.is_empty() {
        let _ = paths.send(batch);
    }
    Ok(())
}

/// Listings and reports fetched at once.
const AT_ONCE: usize = 16;
/// The largest listing read (as it arrives, never held whole): nginx lists
/// 100,000 directories in about 15 MB.
const MAX_LISTING: usize = 32 << 20;
/// How far below the URL given a walk goes.
const MAX_DEPTH: usize = 16;
/// The most directories and reports one level of a walk holds (as many
/// as one listing may name).
const MAX_LEVEL: usize = crate::plane::index::MAX_ENTRIES;

/// One GET, its body when it answered 200.
async fn get(
    http: &crate::net::http::Http,
    uri: &http::Uri,
    max: usize,
) -> Result<bytes::Bytes, String> {
    let a = http
        .send(
            http::Method::GET,
            uri.clone(),
            &http::HeaderMap::new(),
            Duration::from_secs(60),
            max,
        )
        .await
        .map_err(|e| format!("cannot get {uri}: {e}"))?;
    if a.status != http::StatusCode::OK {
        return Err(format!("{uri} answered {}", a.status));
    }
    Ok(a.body)
}

/// One listing's entries, read as it arrives: an error when it does not
/// answer 200, is over [`MAX_LISTING`] bytes, is not HTML, or is not a
/// listing ([`crate::plane::index::Listing::finish`]).
async fn list(
    http: &crate::net::http::Http,
    uri: &http::Uri,
) -> Result<Vec<crate::plane::index::Entry>, String> {
    use crate::plane::index::{Listing, READ};
    let mut listing = Listing::new(uri.clone());
    let a = http
        .send_streamed(
            http::Method::GET,
            uri.clone(),
            &http::HeaderMap::new(),
            Duration::from_secs(60),
            MAX_LISTING,
            &mut |bytes| listing.feed(bytes),
        )
        .await
        .map_err(|e| match e {
            crate::net::http::Transport::TooLarge(n) => {
                format!("{uri}: a listing over {n} bytes, the most read")
            }
            e => format!("cannot get {uri}: {e}"),
        })?;
    if a.status != http::StatusCode::OK {
        return Err(format!("{uri} answered {}", a.status));
    }
    let kind = a
        .headers
        .get(http::header::CONTENT_TYPE)
        .map(|t| String::from_utf8_lossy(t.as_bytes()).to_ascii_lowercase());
    if let Some(kind) = kind.filter(|k| !k.starts_with("text/html")) {
        return Err(format!(
            "{uri} answered {}, not a listing stead reads (expected {READ})",
            crate::model::text::escape(&crate::model::text::clip(&kind, 64))
        ));
    }
    listing.finish().map_err(|e| format!("{uri}: {e}"))
}

/// Reads every report a web server lists under `base`, walking its
/// listings a level at a time, [`AT_ONCE`] requests at a time, each report
/// given to `each` as it comes. Redirects are followed only on the same
/// host.
async fn read_index_reports(base: &http::Uri, each: &mut EachReport<'_>) -> Result<(), String> {
    use crate::plane::index::Entry;
    use futures_util::StreamExt as _;
    let http = crate::net::http::Http::keeping(None, AT_ONCE)?
        .with_redirects(crate::net::http::Redirects::SameOrigin);
    let source = |u: &http::Uri| {
        let p = u.path();
        p.strip_prefix(base.path()).unwrap_or(p).to_string()
    };
    let mut level = vec![base.clone()];
    for depth in 0..=MAX_DEPTH {
        if level.is_empty() {
            break;
        }
        let (mut next, mut reports) = (Vec::new(), Vec::new());
        let mut listings = futures_util::stream::iter(level)
            .map(|d| {
                let http = &http;
                async move {
                    let listing = list(http, &d).await;
                    (d, listing)
                }
            })
            .buffer_unordered(AT_ONCE);
        while let Some((d, listing)) = listings.next().await {
            match listing {
                Ok(found) => {
                    if next.len() + reports.len() + found.len() > MAX_LEVEL {
                        return Err(format!(
                            "the listings under {base} name more than {MAX_LEVEL} entries at depth {depth}"
                        ));
                    }
                    for e in found {
                        match e {
                            Entry::Dir(u) if depth < MAX_DEPTH => next.push(u),
                            Entry::Dir(_) => {}
                            Entry::Report(u) => reports.push(u),
                        }
                    }
                }
                // Nothing listed at all is an error; a directory under it
                // that cannot be listed is one unreadable entry.
                Err(e) if depth == 0 => return Err(e),
                Err(e) => each(&source(&d), None, Err(e)),
            }
        }
        drop(listings);
        let mut fetched = futures_util::stream::iter(reports)
            .map(|u| {
                let http = &http;
                async move {
                    let report = get(http, &u, MAX_FILE as usize).await;
                    (u, report)
                }
            })
            .buffer_unordered(AT_ONCE);
        while let Some((u, report)) = fetched.next().await {
            // The directory the report is in: `…/<node>/status.json`.
            let dir = u.path().rsplit('/').nth(1).filter(|d| !d.is_empty());
            each(&source(&u), dir, report.and_then(|b| Read::parse(&b)));
        }
        level = next;
    }
    Ok(())
}

/// The enrolled keys a roll-up checks reports with: the fleet's
/// `device-keys.csv`, which must be there.
pub(super) fn enrolled_keys(fleet: &Path) -> Result<Keys, String> {
    let file = fleet.join(enroll::FILE);
    if !file.is_file() {
        return Err(format!(
            "{} is not there: no device is enrolled, so no report can be checked \
             (stead-plane enroll --fleet {} takes the devices' keys from their reports)",
            file.display(),
            fleet.display()
        ));
    }
    super::devices::read_keys(fleet)
}

/// `stead-plane status --reports DIR|URL [--fleet DIR] [--site DIR]`: the
/// fleet as the reports signed by their nodes' enrolled keys tell it, the
/// others listed (without `--fleet`, all); with the host's directory, each
/// group's claims counted within the revision it serves.
pub fn status(
    reports: &Reports,
    fleet: Option<&Path>,
    site: Option<&Path>,
    silent_after: Duration,
    json: bool,
) -> crate::cli::failure::Result<ExitCode> {
    // The walk of a directory's reports runs ahead while the keys are read.
    let reading = match Reading::start(reports) {
        Ok(r) => r,
        Err(e) => return Ok(super::plane::refused(format_args!("{e}"))),
    };
    let keys = match fleet.map(enrolled_keys).transpose() {
        Ok(k) => k,
        Err(e) => return Ok(super::plane::refused(format_args!("{e}"))),
    };
    if keys.is_none() {
        eprintln!(
            "stead-plane: no --fleet: no report can be checked against the devices' enrolled \
             keys, and none is counted (each is listed, with why)"
        );
    }
    let served = match site.map(|s| json_dirs(&s.join("groups")).map(|n| served_revisions(s, &n))) {
        Some(Err(e)) => return Ok(super::plane::refused(format_args!("{e}"))),
        Some(Ok(served)) => Some(served),
        None => None,
    };
    let r = match roll_up(
        reading,
        keys.as_ref(),
        silent_after.as_secs(),
        served.as_ref(),
    ) {
        Ok(r) => r,
        Err(e) => return Ok(super::plane::refused(format_args!("{e}"))),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).expect("a roll-up serialises")
        );
    } else {
        print!("{}", r.text(silent_after.as_secs()));
    }
    Ok(ExitCode::SUCCESS)
}

/// `stead-plane rollout watch`: each group's rollout (those of `only`, or
/// every group the host serves) whose devices on the new revision fail at
/// or over the threshold is halted: its document signed again, one
/// revision on, with `halt` and the reason, and written where the host
/// serves it (and, with `upload`, put into the bucket). Stateless: the
/// reports, the devices' enrolled keys (`fleet`'s `device-keys.csv`) and
/// the documents are all it reads, and only a report signed by its node's
/// enrolled report key is counted.
pub fn watch(
    (keys, trusted): (&[PathBuf], &[String]),
    (reports, fleet): (&Reports, &Path),
    (site, upload): (&Path, Option<&super::upload::Upload>),
    only: &[GroupName],
    threshold: Threshold,
    dry_run: bool,
) -> crate::cli::failure::Result<ExitCode> {
    let keys = super::plane::secret_keys(keys)?;
    let enrolled = match enrolled_keys(fleet) {
        Ok(k) => k,
        Err(e) => return Ok(super::plane::refused(format_args!("{e}; nothing halted"))),
    };
    let names: Vec<GroupName> = if only.is_empty() {
        match json_dirs(&site.join("groups")) {
            Ok(n) => n,
            Err(e) => return Ok(super::plane::refused(format_args!("{e}"))),
        }
    } else {
        only.to_vec()
    };
    let mut served = match Served::open(site, &keys, trusted)? {
        Ok(s) => s,
        Err(e) => return Ok(super::plane::refused(format_args!("nothing halted: {e}"))),
    };
    // A report's claim is counted only within what the host serves (each
    // document verified): one claiming a revision never published cannot
    // hide the devices on the one that was.
    let mut revisions = BTreeMap::new();
    for name in &names {
        match served.read(&group_path(name)) {
            Ok(Some(p)) => {
                revisions.insert(name.to_string(), p.revision);
            }
            Ok(None) => {}
            Err(e) => {
                return Ok(super::plane::refused(format_args!(
                    "{}: {e}; nothing halted",
                    site.join(group_path(name)).display()
                )));
            }
        }
    }
    let rollup = match Reading::start(reports)
        .and_then(|r| roll_up(r, Some(&enrolled), u64::MAX / 2, Some(&revisions)))
    {
        Ok(r) => r,
        Err(e) => return Ok(super::plane::refused(format_args!("{e}"))),
    };
    if rollup.unreadable > 0 || rollup.unverified > 0 || rollup.not_counted > 0 {
        println!(
            "{} report(s) unreadable, {} unverified and not counted, {} group claim(s) not \
             counted (stead-plane status --fleet --site names them)",
            rollup.unreadable, rollup.unverified, rollup.not_counted
        );
    }
    let now = crate::host::clock::now();
    for name in names {
        let at = group_path(&name);
        let path = site.join(&at);
        let old = match served.read(&at) {
            Ok(Some(old)) => old,
            Ok(None) => {
                println!("group {name}: not published");
                continue;
            }
            Err(e) => {
                return Ok(super::plane::refused(format_args!(
                    "{}: {e}; nothing more halted",
                    path.display()
                )));
            }
        };
        let bytes = serde_json::to_vec(&old.payload).expect("a JSON object serialises");
        let desired = match GroupDesired::parse(&bytes) {
            Ok(d) => d,
            Err(e) => {
                println!("group {name}: its document is refused: {e}");
                continue;
            }
        };
        let Some(rollout) = &desired.rollout else {
            println!("group {name} revision {}: no rollout", desired.revision);
            continue;
        };
        if rollout.halt {
            println!("group {name} revision {}: halted", desired.revision);
            continue;
        }
        let tally = rollup
            .groups
            .get(name.as_str())
            .map(|g| g.tally(desired.revision))
            .unwrap_or_default();
        let Some(reason) = halt(tally, threshold) else {
            println!(
                "group {name} revision {}: {} devices on it, {} failing: below the threshold",
                desired.revision, tally.on_new, tally.failing
            );
            continue;
        };
        let mut payload = old.payload.clone();
        if let Some(J::Object(r)) = payload.get_mut("rollout") {
            r.insert("halt".into(), true.into());
            r.insert("reason".into(), reason.clone().into());
        }
        let revision = now.max(old.revision.saturating_add(1));
        let bytes = serde_json::to_vec(&payload).expect("a JSON object serialises");
        let stamped = match stamp_group(&bytes, &name, revision, now, old.expires) {
            Ok(s) => s,
            Err(e) => {
                return Ok(super::plane::refused(format_args!(
                    "group {name}: the halting document is refused: {e}"
                )));
            }
        };
        if dry_run {
            println!("would halt group {name} at revision {revision}: {reason}");
            continue;
        }
        let (first, more) = keys.split_first().expect("the parser requires a --key");
        let mut envelope = first.sign(GROUP_PAYLOAD_TYPE, &stamped);
        for k in more {
            envelope.countersign(k);
        }
        if let Err(e) = served.unchanged(&at) {
            return Ok(super::plane::refused(format_args!("{e}")));
        }
        write_served(&path, &envelope.to_json())?;
        println!("halted group {name} at revision {revision}: {reason}");
    }
    finish_upload(upload, site, dry_run)
}

/// The groups a host serves: the directories under `groups/` that hold a
/// `desired.json`.
fn json_dirs(dir: &Path) -> Result<Vec<GroupName>, String> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    for e in entries.flatten() {
        if e.path().join("desired.json").is_file()
            && let Ok(name) = GroupName::try_from(e.file_name().to_string_lossy().as_ref())
        {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_reports_are_read_from() {
        let index = |u: &str| Ok(Reports::Index(u.parse().unwrap()));
        // (--reports, read as)
        #[rustfmt::skip]
        let cases: [(&str, Result<Reports, String>); 7] = [
            ("/srv/plane", Ok(Reports::Dir("/srv/plane".into()))),
            ("reports", Ok(Reports::Dir("reports".into()))),
            ("http://plane.example/nodes/", index("http://plane.example/nodes/")),
            ("https://plane.example:8443/nodes", index("https://plane.example:8443/nodes/")),
            ("http://plane.example", index("http://plane.example/")),
            ("http://plane.example/nodes/?sort=name", Err("http://plane.example/nodes/?sort=name: a listing's URL takes no query".into())),
            ("https://ops:hunter2@plane.example/nodes/", Err("a reports URL must not carry a user name or password".into())),
        ];
        for (text, want) in cases {
            assert_eq!(Reports::parse(text), want, "{text}");
        }
    }

    /// A directory's reports, read with and without listing the
    /// directories that have no subdirectories: the same found, and only
    /// files named `status.json` (not a link to one, a FIFO, nor a
    /// directory), a leaf without one adding nothing.
    #[test]
    fn a_walk_reads_every_status_json_and_nothing_else() {
        use std::os::unix::fs::{MetadataExt as _, symlink};
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mk = |p: &str| std::fs::create_dir_all(root.join(p)).unwrap();
        let put = |p: &str| std::fs::write(root.join(p), "{}").unwrap();
        for d in [
            "nodes/a",
            "nodes/b",
            "nodes/c",
            "nodes/d",
            "nodes/e/status.json",
            "nodes/f/deeper",
            "site",
        ] {
            mk(d);
        }
        put("nodes/a/status.json");
        put("nodes/a/other.json");
        symlink(
            root.join("nodes/a/status.json"),
            root.join("nodes/c/status.json"),
        )
        .unwrap();
        let fifo = std::ffi::CString::new(
            root.join("nodes/d/status.json")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: a valid, NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        put("nodes/f/deeper/status.json");
        put("site/status.json");

        let (tx, rx) = std::sync::mpsc::sync_channel(1024);
        walk_reports(root, &tx).unwrap();
        drop(tx);
        let found: Vec<Found> = rx.into_iter().flatten().collect();
        // Where the filesystem counts subdirectories (ext4, tmpfs), the
        // leaves are not listed.
        let counts = std::fs::metadata(root.join("nodes")).unwrap().nlink() == 2 + 6;
        let maybe = found
            .iter()
            .any(|f| matches!(f, Found::Maybe(p) if p == &root.join("nodes/a/status.json")));
        assert_eq!(
            maybe, counts,
            "a leaf's report is opened without listing it where links count"
        );

        let mut read = Vec::new();
        let walk = Reading::start(&Reports::Dir(root.to_path_buf())).unwrap();
        walk.judged(
            &|batch: Vec<(Option<&str>, Result<Read, String>)>| {
                // Read (what it says is not this test's): true.
                let read = |r: Result<Read, String>| {
                    r.map_or_else(|e| !e.starts_with("cannot read"), |_| true)
                };
                batch
                    .into_iter()
                    .map(|(dir, r)| (dir.map(str::to_string), read(r)))
                    .collect()
            },
            &mut |source, v| read.push((source.to_string(), v)),
        )
        .unwrap();
        read.sort();
        let want = |s: &str, d: &str| (s.to_string(), (Some(d.to_string()), true));
        assert_eq!(
            read,
            vec![
                want("nodes/a/status.json", "a"),
                want("nodes/f/deeper/status.json", "deeper"),
                want("site/status.json", "site"),
            ]
        );
    }
}
