//! `stead-plane root`: the plane's root of trust written, signed and
//! checked as a device walks it, and published beside the documents. Each
//! step of the chain is taken by the device's own holder of trust
//! ([`TrustedSet::next_root`]): the operator's check and the device's walk
//! are one rule; [`walk`] hands the set it ends at to `publish` and
//! `rollout watch`, whose document keys are what the site's documents
//! must be signed by.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use crate::cli::failure::Context as _;
use crate::plane::envelope::{Envelope, PublicKey};
use crate::plane::root::{self, PAYLOAD_TYPE, Role, Root};
use crate::plane::trusted::TrustedSet;

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
    };
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
            if let Err(e) = Root::parse(&bytes) {
                return Ok(refused(format_args!(
                    "neither a root's payload nor a signed root: {e}"
                )));
            }
            let (first, rest) = keys.split_first().expect("the parser requires a --key");
            let mut env = first.sign(PAYLOAD_TYPE, &bytes);
            for k in rest {
                env.countersign(k);
            }
            return finish(&env, out);
        }
    };
    if env.payload_type != PAYLOAD_TYPE {
        return Ok(refused(format_args!(
            "a signed {:?}, not a root",
            env.payload_type
        )));
    }
    if let Err(e) = Root::parse(&env.payload) {
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
    input: Option<&Path>,
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
        return Ok(upload_site(upload, site));
    };
    let bytes = read_input(Some(input))?;
    let next = match held.next_root(&bytes) {
        Ok(t) => t.root().clone(),
        Err(e) => return Ok(refused(format_args!("{}: {e}", input.display()))),
    };
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
    Ok(upload_site(upload, site))
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
    format!(
        "version {}: root keys {} ({} must sign the next), document keys {}, expires {}",
        r.version,
        ids(&r.root.keys),
        r.root.threshold,
        ids(&r.documents),
        crate::model::time::format_rfc3339(r.expires)
    )
}
