//! `stead-plane root`: the plane's root of trust written, signed and
//! checked as a device walks it, and published beside the documents. Each
//! step of the chain is taken by the device's own holder of trust
//! ([`TrustedSet::next_root`]): the operator's check and the device's walk
//! are one rule; [`walk`] hands the set it ends at to `publish` and
//! `rollout watch`, whose document keys are what the site's documents
//! must be signed by. A root's delegations and allow-list role are
//! written by `root init` (`--delegate`, `--allow-list-key`), the
//! allow-list of image digests by `root allow-list`, signed by `root
//! sign` and checked and published by `root verify --allow-list` as a
//! device takes it ([`TrustedSet::next_allow_list`]).

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use crate::cli::failure::Context as _;
use crate::plane::allowlist::{self, AllowList, Listed};
use crate::plane::envelope::{Envelope, PublicKey};
use crate::plane::root::{self, Delegation, PAYLOAD_TYPE, Role, Root};
use crate::plane::trusted::TrustedSet;

/// Where the host serves the allow-list, beside `root.json`.
pub const ALLOW_LIST: &str = "allow-list.json";

/// What `root init` is given beside the keys: delegations (each a
/// `name=…;keys=…;threshold=…;groups=…;modules=…` spec) and the
/// allow-list role.
#[derive(Debug, Default, PartialEq)]
pub struct Scoped {
    pub delegations: Vec<String>,
    pub allow_list_keys: Vec<String>,
    pub allow_list_threshold: usize,
}

/// Reads a `--delegate` spec: `name=…;keys=PUB,PUB;threshold=N;
/// groups=G,G;modules=PREFIX` (threshold 1 when not given); what the
/// root requires of it is checked when the root is read.
fn delegation(spec: &str) -> Result<Delegation, String> {
    let (mut name, mut keys, mut threshold, mut groups, mut modules) =
        (None, Vec::new(), 1usize, Vec::new(), None);
    for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            return Err(format!("{part:?} is not key=value"));
        };
        let list = || v.split(',').map(str::trim).filter(|s| !s.is_empty());
        match k.trim() {
            "name" => name = Some(v.trim().to_string()),
            "keys" => {
                for k in list() {
                    keys.push(read_public_key(k).map_err(|e| e.to_string())?);
                }
            }
            "threshold" => {
                threshold = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("threshold {v:?} is not a number"))?
            }
            "groups" => {
                for g in list() {
                    groups.push(crate::plane::group::GroupName::try_from(g).map_err(|e| e.0)?);
                }
            }
            "modules" => modules = Some(v.trim().to_string()),
            other => {
                return Err(format!(
                    "{other:?} is not one of name, keys, threshold, groups, modules"
                ));
            }
        }
    }
    let name = name.ok_or("no name=")?;
    Ok(Delegation {
        name,
        role: Role { keys, threshold },
        groups,
        modules,
    })
}

use super::plane::{read_input, read_public_key, refused, secret_keys, write_file};

/// Writes `bytes` to `out`, or stdout.
fn emit(out: Option<&Path>, bytes: &[u8]) -> crate::cli::failure::Result<()> {
    match out {
        Some(p) => write_file(p, bytes, 0o644),
        None => std::io::stdout()
            .write_all(bytes)
            .context("cannot write to stdout"),
    }
}

fn public_keys(args: &[String]) -> crate::cli::failure::Result<Vec<PublicKey>> {
    args.iter().map(|a| read_public_key(a)).collect()
}

/// A root from its signed file, as `root sign` wrote it.
fn read_root(path: &Path) -> Result<Root, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let env = Envelope::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Root::parse(&env.payload).map_err(|e| format!("{}: {e}", path.display()))
}

/// `stead-plane root init`.
pub fn init(
    root_keys: &[String],
    threshold: usize,
    document_keys: &[String],
    scoped: &Scoped,
    after: Option<&Path>,
    expires_in: Duration,
    out: Option<&Path>,
) -> crate::cli::failure::Result<ExitCode> {
    let version = match after.map(read_root) {
        None => 1,
        Some(Ok(r)) => r.version + 1,
        Some(Err(e)) => return Ok(refused(format_args!("--after: {e}"))),
    };
    let r = Root {
        version,
        expires: crate::host::clock::now().saturating_add(expires_in.as_secs()),
        root: Role {
            keys: public_keys(root_keys)?,
            threshold,
        },
        documents: public_keys(document_keys)?,
        delegations: Vec::new(),
        allow_list: None,
    };
    let mut r = r;
    for spec in &scoped.delegations {
        match delegation(spec) {
            Ok(d) => r.delegations.push(d),
            Err(e) => return Ok(refused(format_args!("--delegate {spec:?}: {e}"))),
        }
    }
    if !scoped.allow_list_keys.is_empty() {
        r.allow_list = Some(Role {
            keys: public_keys(&scoped.allow_list_keys)?,
            threshold: scoped.allow_list_threshold,
        });
    }
    // Checked as a device reads it: a root it would refuse is not written.
    let payload = r.to_payload();
    if let Err(e) = Root::parse(&payload) {
        return Ok(refused(format_args!("{e}")));
    }
    emit(out, &payload)?;
    eprintln!(
        "root version {version}: {} of {} root key(s) sign the next, {} document key(s); sign it \
         with a threshold of the previous root's keys and of its own",
        r.root.threshold,
        r.root.keys.len(),
        r.documents.len()
    );
    for d in &r.delegations {
        eprintln!("delegation {}", delegated(d));
    }
    if let Some(a) = &r.allow_list {
        eprintln!(
            "allow-list: {} of {} key(s) sign it; every image a document names must be pinned and listed",
            a.threshold,
            a.keys.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A delegation, said in a line.
fn delegated(d: &Delegation) -> String {
    let ids = |ks: &[PublicKey]| {
        ks.iter()
            .map(|k| k.id().as_str().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let groups: Vec<&str> = d.groups.iter().map(|g| g.as_str()).collect();
    format!(
        "{}: keys {} ({} must sign), groups {}, modules {}",
        d.name,
        ids(&d.role.keys),
        d.role.threshold,
        if groups.is_empty() {
            "any".to_string()
        } else {
            groups.join(", ")
        },
        d.modules
            .as_deref()
            .map_or_else(|| "any".to_string(), |p| format!("{p}*"))
    )
}

/// An allow-list from its signed file, unverified (`--after`).
fn read_allow_list(path: &Path) -> Result<AllowList, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let env = Envelope::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    AllowList::parse(&env.payload).map_err(|e| format!("{}: {e}", path.display()))
}

/// `stead-plane root allow-list`.
pub fn allow_list(
    images: &[String],
    images_from: Option<&Path>,
    after: Option<&Path>,
    expires_in: Duration,
    out: Option<&Path>,
) -> crate::cli::failure::Result<ExitCode> {
    let version = match after.map(read_allow_list) {
        None => 1,
        Some(Ok(l)) => l.version + 1,
        Some(Err(e)) => return Ok(refused(format_args!("--after: {e}"))),
    };
    let mut texts: Vec<String> = images.to_vec();
    if let Some(p) = images_from {
        let file =
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
        texts.extend(
            file.lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    let mut listed = Vec::with_capacity(texts.len());
    for t in &texts {
        match Listed::parse(t) {
            Ok(l) if !listed.contains(&l) => listed.push(l),
            Ok(_) => {}
            Err(e) => return Ok(refused(format_args!("image {t:?}: {e}"))),
        }
    }
    let payload = AllowList::payload(
        version,
        crate::host::clock::now().saturating_add(expires_in.as_secs()),
        &listed,
    );
    // Checked as a device reads it.
    if let Err(e) = AllowList::parse(&payload) {
        return Ok(refused(format_args!("{e}")));
    }
    emit(out, &payload)?;
    eprintln!(
        "allow-list version {version}: {} image(s); sign it with a threshold of the root's allow-list keys",
        listed.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `stead-plane root sign`.
pub fn sign(
    keys: &[std::path::PathBuf],
    input: Option<&Path>,
    out: Option<&Path>,
) -> crate::cli::failure::Result<ExitCode> {
    let keys = secret_keys(keys)?;
    let bytes = read_input(input)?;
    let mut env = match Envelope::parse(&bytes) {
        Ok(env) => env,
        Err(_) => {
            // A payload: a root's, or an allow-list's (one with `images`).
            let list = serde_json::from_slice::<serde_json::Value>(&bytes)
                .is_ok_and(|v| v.get("images").is_some());
            let payload_type = if list {
                if let Err(e) = AllowList::parse(&bytes) {
                    return Ok(refused(format_args!("an allow-list's payload: {e}")));
                }
                allowlist::PAYLOAD_TYPE
            } else {
                if let Err(e) = Root::parse(&bytes) {
                    return Ok(refused(format_args!(
                        "neither a root's payload nor a signed root: {e}"
                    )));
                }
                PAYLOAD_TYPE
            };
            let (first, rest) = keys.split_first().expect("the parser requires a --key");
            let mut env = first.sign(payload_type, &bytes);
            for k in rest {
                env.countersign(k);
            }
            return finish(&env, out);
        }
    };
    let checked = match env.payload_type.as_str() {
        PAYLOAD_TYPE => Root::parse(&env.payload)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        allowlist::PAYLOAD_TYPE => AllowList::parse(&env.payload)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        other => {
            return Ok(refused(format_args!(
                "a signed {other:?}, not a root or an allow-list"
            )));
        }
    };
    if let Err(e) = checked {
        return Ok(refused(format_args!("{e}")));
    }
    for k in &keys {
        env.countersign(k);
    }
    finish(&env, out)
}

fn finish(env: &Envelope, out: Option<&Path>) -> crate::cli::failure::Result<ExitCode> {
    emit(out, &env.to_json())?;
    let ids: Vec<&str> = env.signatures.iter().map(|s| s.keyid.as_str()).collect();
    eprintln!("signed by {}", ids.join(", "));
    Ok(ExitCode::SUCCESS)
}

/// `stead-plane root verify`; with `upload`, what the bucket does not
/// hold of the site is put there once the chain checks (and the root
/// given is published, with `--publish`).
pub fn verify(
    trusted: &[String],
    (site, upload): (&Path, Option<&super::upload::Upload>),
    (input, allow_list): (Option<&Path>, Option<&Path>),
    publish: bool,
) -> crate::cli::failure::Result<ExitCode> {
    // Publishing (and uploading) holds the site's lock, as publish and
    // rollout watch do: none of them reads the root while it is replaced.
    let _lock = if publish || upload.is_some() {
        std::fs::create_dir_all(site).with_context(|| format!("cannot make {}", site.display()))?;
        match crate::host::files::try_lock_dir(site)
            .with_context(|| format!("cannot lock {}", site.display()))?
        {
            Some(l) => Some(l),
            None => {
                return Ok(refused(format_args!(
                    "another stead-plane command is signing into {} (it holds the directory's \
                     lock); run again once it is done",
                    site.display()
                )));
            }
        }
    } else {
        None
    };
    println!("version 0: the devices' trusted_keys");
    let held = match walk(&public_keys(trusted)?, site, &mut |r| {
        println!("{}", describe(r))
    }) {
        Ok(r) => r,
        Err(e) => return Ok(refused(format_args!("{e}"))),
    };
    let Some(input) = input else {
        if let Some(list) = allow_list
            && let Some(code) = verify_allow_list(&held, site, list, publish)?
        {
            return Ok(code);
        }
        return Ok(upload_site(upload, site));
    };
    let bytes = read_input(Some(input))?;
    let next_set = match held.next_root(&bytes) {
        Ok(t) => t,
        Err(e) => return Ok(refused(format_args!("{}: {e}", input.display()))),
    };
    let next = next_set.root().clone();
    println!("{} (checks as the next root)", describe(&next));
    if next.expired(crate::host::clock::now()) {
        return Ok(refused(format_args!(
            "root version {} has already expired",
            next.version
        )));
    }
    if publish {
        let versioned = site.join(format!("roots/{}.json", next.version));
        write_file(&versioned, &bytes, 0o644)?;
        // The newest last: a device that sees it finds every step.
        write_file(&site.join("root.json"), &bytes, 0o644)?;
        println!(
            "published {} and {}",
            versioned.display(),
            site.join("root.json").display()
        );
    }
    if let Some(list) = allow_list
        && let Some(code) = verify_allow_list(&next_set, site, list, publish)?
    {
        return Ok(code);
    }
    Ok(upload_site(upload, site))
}

/// Checks `list` (a signed allow-list) as a device holding `held` and the
/// allow-list the site publishes takes it, and publishes it as
/// `SITE/allow-list.json` with `publish`; `Some` is the refusal's exit.
fn verify_allow_list(
    held: &TrustedSet,
    site: &Path,
    list: &Path,
    publish: bool,
) -> crate::cli::failure::Result<Option<ExitCode>> {
    let now = crate::host::clock::now();
    let mut held = held.clone();
    let published = site.join(ALLOW_LIST);
    match std::fs::read(&published).with_context(|| format!("cannot read {}", published.display()))
    {
        Ok(b) => {
            // The one published is the floor a device holds (when it is
            // still signed under this root's role).
            if let Err(e) = held.resume_allow_list(&b) {
                println!("{}: not taken as the floor: {e}", published.display());
            }
        }
        Err(_) if !published.exists() => {}
        Err(e) => return Err(e),
    }
    let bytes = read_input(Some(list))?;
    let taken = match held.next_allow_list(&bytes, now) {
        Ok(Some(t)) => t,
        Ok(None) => {
            println!("{}: the allow-list published already", list.display());
            return Ok(None);
        }
        Err(e) => return Ok(Some(refused(format_args!("{}: {e}", list.display())))),
    };
    if let Some(l) = taken.allow_list() {
        println!(
            "allow-list version {}: {} image(s), expires {} (checks under root version {})",
            l.version,
            l.images.len(),
            crate::model::time::format_rfc3339(l.expires),
            held.root().version
        );
    }
    if publish {
        write_file(&published, &bytes, 0o644)?;
        println!("published {}", published.display());
    }
    Ok(None)
}

/// Puts what the bucket does not hold of the site, when asked to.
fn upload_site(upload: Option<&super::upload::Upload>, site: &Path) -> ExitCode {
    match upload.map(|up| up.run(site, false)) {
        Some(Err(e)) => refused(format_args!("{e}")),
        _ => ExitCode::SUCCESS,
    }
}

/// The trusted set a device holds once it has walked the roots a site
/// publishes: from `trusted` (the devices' trusted_keys, version 0)
/// through `site/roots/1.json`, `2.json`, … (each root taken given to
/// `each`), every step taken by [`TrustedSet::next_root`]; the
/// `site/root.json` the devices poll must say the version the chain ends
/// at. Version 0 when the site publishes no root.
pub(super) fn walk(
    trusted: &[PublicKey],
    site: &Path,
    each: &mut dyn FnMut(&Root),
) -> Result<TrustedSet, String> {
    let mut held = TrustedSet::new(trusted);
    loop {
        let path = site.join(format!("roots/{}.json", held.root().version + 1));
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        held = held
            .next_root(&bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        each(held.root());
    }
    let newest = site.join("root.json");
    let published = match std::fs::read(&newest) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", newest.display())),
    };
    if let Some(bytes) = published {
        let said = root::version_said(&bytes);
        if said != Some(held.root().version) {
            return Err(format!(
                "{} says version {}, but the chain in {} ends at {}",
                newest.display(),
                said.map_or_else(
                    || "none (it is not a signed root)".into(),
                    |v| v.to_string()
                ),
                site.join("roots").display(),
                held.root().version
            ));
        }
    }
    Ok(held)
}

fn describe(r: &Root) -> String {
    let ids = |ks: &[PublicKey]| {
        ks.iter()
            .map(|k| k.id().as_str().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = format!(
        "version {}: root keys {} ({} must sign the next), document keys {}, expires {}",
        r.version,
        ids(&r.root.keys),
        r.root.threshold,
        ids(&r.documents),
        crate::model::time::format_rfc3339(r.expires)
    );
    for d in &r.delegations {
        line.push_str(&format!("; delegation {}", delegated(d)));
    }
    if let Some(a) = &r.allow_list {
        line.push_str(&format!(
            "; allow-list keys {} ({} must sign)",
            ids(&a.keys),
            a.threshold
        ));
    }
    line
}
