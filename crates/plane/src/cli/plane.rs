//! `stead-plane`: the publisher's side of the central plane, offline and
//! without an agent: make a signing key pair (`keygen`), sign a desired-state
//! payload for one node (`sign`), and check a signed document as a node
//! would (`verify`).

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::cli::failure::Context as _;

use super::EXIT_REFUSED;
use crate::model::names::NodeId;
use crate::model::time::{DurationPolicy, format_rfc3339, parse_duration_with};
use crate::plane::accept::MAX_DOCUMENT;
use crate::plane::document::{Desired, stamp};
use crate::plane::envelope::{Envelope, PAYLOAD_TYPE, PublicKey, SecretKey, verify};

/// The `stead-plane` fleet verbs, read by [`crate::args::Cli`] (the
/// options' help is in its table).
#[derive(Debug, PartialEq)]
pub enum PlaneCommand {
    /// `keygen --out PATH [--force]`: PATH and PATH.pub.
    Keygen { out: PathBuf, force: bool },
    /// `sign --key PATH... --node NODE [--revision N] [--expires-in D]
    /// [--in FILE] [--out FILE]`: at least one key.
    Sign {
        keys: Vec<PathBuf>,
        node: NodeId,
        revision: Option<u64>,
        expires_in: Duration,
        input: Option<PathBuf>,
        out: Option<PathBuf>,
    },
    /// `sign-group --key PATH... --group NAME [--revision N] [--expires-in
    /// DURATION] [--in FILE] [--out FILE]`: a group's document, as a
    /// delegated key signs its own group's.
    SignGroup {
        keys: Vec<PathBuf>,
        group: NodeId,
        revision: Option<u64>,
        expires_in: Duration,
        input: Option<PathBuf>,
        out: Option<PathBuf>,
    },
    /// `release --key PATH... --version V --binary TARGET=FILE...
    /// [--url-base URL] [--schema N] [--reads-from N] [--out FILE]`.
    Release {
        keys: Vec<PathBuf>,
        version: String,
        binaries: Vec<(String, PathBuf)>,
        url_base: Option<String>,
        schema: u64,
        reads_from: u64,
        out: Option<PathBuf>,
    },
    /// `chunks --site DIR [--registry-auth FILE] [--registry-ca FILE]
    /// IMAGE...`.
    Chunks {
        site: PathBuf,
        registry_auth: Option<PathBuf>,
        registry_ca: Option<PathBuf>,
        images: Vec<String>,
    },
    /// `verify --key PUB... [--node NODE] [--in FILE]`: at least one key.
    Verify {
        keys: Vec<String>,
        node: Option<NodeId>,
        input: Option<PathBuf>,
    },
    /// `publish --key PATH... [--trusted PUB...] --fleet DIR --site DIR
    /// [--dry-run] [--expires-in D] [--refresh-before D]`.
    Publish {
        keys: Vec<PathBuf>,
        trusted: Vec<String>,
        fleet: PathBuf,
        site: PathBuf,
        dry_run: bool,
        expires_in: Duration,
        refresh_before: Duration,
        upload: Option<Box<super::upload::Upload>>,
    },
    /// `status --reports DIR|URL [--fleet DIR] [--site DIR] [--silent-after D] [--json]`.
    /// `exposure --reports DIR|URL --fleet DIR [--digest D]...
    /// [--package P]... [--vulnerable FILE] [--sbom DIR]... [--site DIR]`.
    Exposure(super::exposure::Ask),
    Status {
        reports: super::fleet::Reports,
        fleet: Option<PathBuf>,
        site: Option<PathBuf>,
        silent_after: Duration,
        json: bool,
    },
    /// `root init --root-key PUB... [--threshold N] --documents-key PUB...
    /// [--after FILE] [--expires-in D] [--out FILE]`.
    RootInit {
        root_keys: Vec<String>,
        threshold: usize,
        document_keys: Vec<String>,
        scoped: super::trust::Scoped,
        after: Option<PathBuf>,
        expires_in: Duration,
        out: Option<PathBuf>,
    },
    /// `root allow-list [--image IMAGE...] [--images-from FILE] [--after FILE]
    /// [--expires-in DURATION] [--out FILE]`.
    AllowList {
        images: Vec<String>,
        images_from: Option<PathBuf>,
        after: Option<PathBuf>,
        expires_in: Duration,
        out: Option<PathBuf>,
    },
    /// `root sign --key PATH... [--in FILE] [--out FILE]`.
    RootSign {
        keys: Vec<PathBuf>,
        input: Option<PathBuf>,
        out: Option<PathBuf>,
    },
    /// `root verify --trusted PUB... --site DIR [--in FILE [--publish]]`.
    RootVerify {
        trusted: Vec<String>,
        site: PathBuf,
        input: Option<PathBuf>,
        allow_list: Option<PathBuf>,
        publish: bool,
        upload: Option<Box<super::upload::Upload>>,
    },
    /// `enroll --fleet DIR --reports DIR|URL [--replace]`.
    Enroll {
        fleet: PathBuf,
        reports: super::fleet::Reports,
        replace: bool,
    },
    /// `seal --node NODE --module MODULE --field FIELD (--fleet DIR | --to AGE1)`.
    Seal {
        node: NodeId,
        module: crate::model::names::ModuleName,
        field: String,
        to: super::devices::SealTo,
    },
    /// `rollout watch --key PATH... [--trusted PUB...] --reports DIR|URL
    /// --fleet DIR --site DIR [--group G...] [--rate P%] [--min-reports N]
    /// [--dry-run]`.
    Watch {
        keys: Vec<PathBuf>,
        trusted: Vec<String>,
        reports: super::fleet::Reports,
        fleet: PathBuf,
        site: PathBuf,
        groups: Vec<crate::model::fleet::GroupName>,
        threshold: crate::model::fleet::Threshold,
        dry_run: bool,
        upload: Option<Box<super::upload::Upload>>,
    },
}

/// A node id as `--node` takes it.
pub fn parse_node(s: &str) -> Result<NodeId, String> {
    NodeId::try_from(s).map_err(|e| e.0)
}

/// A failure rate as `--rate` takes it: `5%`, `2.5%`, in tenths of a
/// percent, above 0 and at most 100 %.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let n = s
        .strip_suffix('%')
        .ok_or_else(|| format!("{s:?}: give a percentage, such as 5%"))?;
    let (whole, tenth) = match n.split_once('.') {
        Some((w, t)) if t.len() == 1 => (w, t),
        Some(_) => return Err(format!("{s:?}: at most one decimal")),
        None => (n, "0"),
    };
    let digits = |t: &str| !t.is_empty() && t.len() <= 3 && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(tenth) {
        return Err(format!("{s:?}: give a percentage, such as 5%"));
    }
    let permille =
        whole.parse::<u64>().unwrap_or(u64::MAX) * 10 + tenth.parse::<u64>().unwrap_or(0);
    if permille == 0 || permille > 1000 {
        return Err(format!("{s:?}: must be above 0 % and at most 100 %"));
    }
    Ok(permille)
}

/// How long a signed document is good for ([`DurationPolicy::LIFETIME`]).
pub fn parse_lifetime(s: &str) -> Result<Duration, String> {
    parse_duration_with(s, &DurationPolicy::LIFETIME)
}

/// Runs a `stead-plane` subcommand.
pub fn run(command: PlaneCommand) -> crate::cli::failure::Result<ExitCode> {
    match command {
        PlaneCommand::Keygen { out, force } => keygen(&out, force),
        PlaneCommand::Sign {
            keys,
            node,
            revision,
            expires_in,
            input,
            out,
        } => sign(
            &keys,
            For::Node(&node),
            revision,
            expires_in,
            input.as_deref(),
            out.as_deref(),
        ),
        PlaneCommand::SignGroup {
            keys,
            group,
            revision,
            expires_in,
            input,
            out,
        } => sign(
            &keys,
            For::Group(&group),
            revision,
            expires_in,
            input.as_deref(),
            out.as_deref(),
        ),
        PlaneCommand::Release {
            keys,
            version,
            binaries,
            url_base,
            schema,
            reads_from,
            out,
        } => release(
            &keys,
            &version,
            &binaries,
            url_base.as_deref(),
            (schema, reads_from),
            out.as_deref(),
        ),
        PlaneCommand::Verify { keys, node, input } => {
            verify_document(&keys, node.as_ref(), input.as_deref())
        }
        PlaneCommand::Publish {
            keys,
            trusted,
            fleet,
            site,
            dry_run,
            expires_in,
            refresh_before,
            upload,
        } => super::fleet::publish(
            (&keys, &trusted),
            &fleet,
            (&site, upload.as_deref()),
            dry_run,
            (expires_in, refresh_before),
        ),
        PlaneCommand::Exposure(ask) => super::exposure::exposure(&ask),
        PlaneCommand::Chunks {
            site,
            registry_auth,
            registry_ca,
            images,
        } => Ok(super::chunks::chunks(
            &site,
            registry_auth.as_deref(),
            registry_ca.as_deref(),
            &images,
        )),
        PlaneCommand::Status {
            reports,
            fleet,
            site,
            silent_after,
            json,
        } => super::fleet::status(
            &reports,
            fleet.as_deref(),
            site.as_deref(),
            silent_after,
            json,
        ),
        PlaneCommand::RootInit {
            root_keys,
            threshold,
            document_keys,
            scoped,
            after,
            expires_in,
            out,
        } => super::trust::init(
            &root_keys,
            threshold,
            &document_keys,
            &scoped,
            after.as_deref(),
            expires_in,
            out.as_deref(),
        ),
        PlaneCommand::RootSign { keys, input, out } => {
            super::trust::sign(&keys, input.as_deref(), out.as_deref())
        }
        PlaneCommand::AllowList {
            images,
            images_from,
            after,
            expires_in,
            out,
        } => super::trust::allow_list(
            &images,
            images_from.as_deref(),
            after.as_deref(),
            expires_in,
            out.as_deref(),
        ),
        PlaneCommand::RootVerify {
            trusted,
            site,
            input,
            allow_list,
            publish,
            upload,
        } => super::trust::verify(
            &trusted,
            (&site, upload.as_deref()),
            (input.as_deref(), allow_list.as_deref()),
            publish,
        ),
        PlaneCommand::Enroll {
            fleet,
            reports,
            replace,
        } => super::devices::enroll(&fleet, &reports, replace),
        PlaneCommand::Seal {
            node,
            module,
            field,
            to,
        } => super::devices::seal(&node, &module, &field, &to),
        PlaneCommand::Watch {
            keys,
            trusted,
            reports,
            fleet,
            site,
            groups,
            threshold,
            dry_run,
            upload,
        } => super::fleet::watch(
            (&keys, &trusted),
            (&reports, &fleet),
            (&site, upload.as_deref()),
            &groups,
            threshold,
            dry_run,
        ),
    }
}

/// Whose document `sign` signs: a node's, or a group's.
#[derive(Clone, Copy)]
enum For<'a> {
    Node(&'a NodeId),
    Group(&'a NodeId),
}

fn sign(
    keys: &[PathBuf],
    whose: For,
    revision: Option<u64>,
    expires_in: Duration,
    input: Option<&Path>,
    out: Option<&Path>,
) -> crate::cli::failure::Result<ExitCode> {
    let keys = secret_keys(keys)?;
    let payload = read_input(input)?;
    let now = crate::host::clock::now();
    let revision = revision.unwrap_or(now);
    let expires = now.saturating_add(expires_in.as_secs());
    let (stamped, payload_type) = match whose {
        For::Node(node) => (stamp(&payload, node, revision, now, expires), PAYLOAD_TYPE),
        For::Group(group) => (
            crate::plane::group::stamp_group(&payload, group, revision, now, expires),
            crate::plane::group::GROUP_PAYLOAD_TYPE,
        ),
    };
    let stamped = match stamped {
        Ok(s) => s,
        Err(e) => return Ok(refused(format_args!("the payload is refused: {e}"))),
    };
    let (first, more) = keys.split_first().expect("the parser requires a --key");
    let mut envelope = first.sign(payload_type, &stamped);
    for k in more {
        envelope.countersign(k);
    }
    let json = envelope.to_json();
    if json.len() > MAX_DOCUMENT {
        return Ok(refused(format_args!(
            "the signed document would be {} bytes, over the {MAX_DOCUMENT} bytes (1 MiB) a node takes; \
             the payload is {} bytes once stamped, and with {} signature(s) it can be at most {} \
             (the envelope carries it in base64, a third larger)",
            json.len(),
            stamped.len(),
            envelope.signatures.len(),
            largest_payload(json.len().saturating_sub(base64_len(stamped.len())))
        )));
    }
    match out {
        Some(path) => write_file(path, &json, 0o644)?,
        None => std::io::stdout()
            .write_all(&json)
            .context("cannot write the signed document to stdout")?,
    }
    let said = match whose {
        For::Node(_) => summary(&Desired::parse(&stamped).expect("stamp checked it")),
        For::Group(group) => format!("group {group} revision {revision}"),
    };
    let ids: Vec<&str> = envelope
        .signatures
        .iter()
        .map(|s| s.keyid.as_str())
        .collect();
    eprintln!("signed {said} with key {}", ids.join(", "));
    Ok(ExitCode::SUCCESS)
}

/// Signs a release statement: each binary's SHA-256 and size read from
/// its file, the statement checked as a node checks it.
fn release(
    keys: &[PathBuf],
    version: &str,
    binaries: &[(String, PathBuf)],
    url_base: Option<&str>,
    (schema, reads_from): (u64, u64),
    out: Option<&Path>,
) -> crate::cli::failure::Result<ExitCode> {
    use crate::model::release::{Binary, PAYLOAD_TYPE as RELEASE, Release};
    let keys = secret_keys(keys)?;
    let mut r = Release {
        version: version.to_string(),
        schema,
        reads_from,
        binaries: Default::default(),
    };
    for (target, file) in binaries {
        let bytes =
            std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let url = match url_base {
            Some(b) => format!("{}/{name}", b.trim_end_matches('/')),
            None => name,
        };
        let b = Binary {
            url,
            sha256: crate::model::names::Digest::of(&bytes).hex().to_string(),
            size: bytes.len() as u64,
        };
        if r.binaries.insert(target.clone(), b).is_some() {
            return Ok(refused(format_args!("--binary names {target} twice")));
        }
    }
    let payload = serde_json::to_vec_pretty(&r).expect("a release serialises");
    if let Err(e) = Release::parse(&payload) {
        return Ok(refused(format_args!("the statement is refused: {e}")));
    }
    let (first, more) = keys.split_first().expect("the parser requires a --key");
    let mut envelope = first.sign(RELEASE, &payload);
    for k in more {
        envelope.countersign(k);
    }
    let json = envelope.to_json();
    match out {
        Some(path) => write_file(path, &json, 0o644)?,
        None => std::io::stdout()
            .write_all(&json)
            .context("cannot write the statement to stdout")?,
    }
    eprintln!(
        "signed release {version} ({}) with key {}",
        r.binaries.keys().cloned().collect::<Vec<_>>().join(", "),
        envelope
            .signatures
            .iter()
            .map(|s| s.keyid.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn secret_keys(paths: &[PathBuf]) -> crate::cli::failure::Result<Vec<SecretKey>> {
    Ok(paths
        .iter()
        .map(|k| crate::host::keyfile::read(k))
        .collect::<Result<Vec<_>, _>>()?)
}

fn verify_document(
    keys: &[String],
    node: Option<&NodeId>,
    input: Option<&Path>,
) -> crate::cli::failure::Result<ExitCode> {
    let trusted = keys
        .iter()
        .map(|k| read_public_key(k))
        .collect::<crate::cli::failure::Result<Vec<_>>>()?;
    let bytes = read_input(input)?;
    let envelope = match Envelope::parse(&bytes) {
        Ok(e) => e,
        Err(e) => return Ok(refused(format_args!("{e}"))),
    };
    let signer = match verify(&envelope, &trusted) {
        Ok(k) => k,
        Err(e) => return Ok(refused(format_args!("refused ({}): {e}", e.class()))),
    };
    // Read only once its signature verified.
    let d = match Desired::parse(&envelope.payload) {
        Ok(d) => d,
        Err(e) => {
            return Ok(refused(format_args!(
                "signed by key {}, but the document is refused: {e}",
                signer.id()
            )));
        }
    };
    println!("{}", summary(&d));
    println!("signed by key {}", signer.id());
    if let Some(node) = node.filter(|n| **n != d.node) {
        return Ok(refused(format_args!(
            "the document is for node {}, not {node}",
            d.node
        )));
    }
    if d.expires <= crate::host::clock::now() {
        return Ok(refused(format_args!(
            "the document expired at {}",
            format_rfc3339(d.expires)
        )));
    }
    Ok(ExitCode::SUCCESS)
}

fn keygen(out: &Path, force: bool) -> crate::cli::failure::Result<ExitCode> {
    let mut public_path = out.as_os_str().to_owned();
    public_path.push(".pub");
    let public_path = PathBuf::from(public_path);
    if !force {
        for p in [out, &public_path] {
            if p.symlink_metadata().is_ok() {
                return Ok(refused(format_args!(
                    "{} already exists; give --force to replace it",
                    p.display()
                )));
            }
        }
    }
    let key = SecretKey::generate().context("cannot make a key")?;
    let public = key.public();
    crate::host::keyfile::write(out, &key)
        .with_context(|| format!("cannot write {}", out.display()))?;
    write_file(
        &public_path,
        format!("{}\n", public.to_base64()).as_bytes(),
        0o644,
    )?;
    println!("key id {}", public.id());
    println!(
        "secret key: {} (mode 0600; keep it where documents are signed, never on a device)",
        out.display()
    );
    println!("public key: {}", public_path.display());
    println!("every device that takes documents signed by this key needs, in its stead.toml:");
    println!("[plane]");
    println!("trusted_keys = [\"{}\"]", public.to_base64());
    Ok(ExitCode::SUCCESS)
}

/// The length of the standard, padded base64 of `n` bytes.
fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// The largest payload whose envelope fits [`MAX_DOCUMENT`], given the
/// envelope's bytes besides the payload's base64.
fn largest_payload(overhead: usize) -> usize {
    MAX_DOCUMENT.saturating_sub(overhead) / 4 * 3
}

/// `node N revision R issued_at … expires … modules: a, b`.
fn summary(d: &Desired) -> String {
    let modules: Vec<&str> = d.modules.keys().map(|m| m.as_str()).collect();
    format!(
        "node {} revision {} issued_at {} expires {} modules: {}",
        d.node,
        d.revision,
        format_rfc3339(d.issued_at),
        format_rfc3339(d.expires),
        if modules.is_empty() {
            "(none)".to_string()
        } else {
            modules.join(", ")
        }
    )
}

/// A public key from a `.pub` file, or from its base64 given directly.
pub(super) fn read_public_key(arg: &str) -> crate::cli::failure::Result<PublicKey> {
    let path = Path::new(arg);
    if path.symlink_metadata().is_ok() {
        let bytes = crate::host::files::read_regular(path, 4096)
            .with_context(|| format!("cannot read public key file {arg}"))?;
        let text = String::from_utf8_lossy(&bytes);
        return PublicKey::parse(&text).with_context(|| format!("public key file {arg}"));
    }
    PublicKey::parse(arg)
        .with_context(|| format!("--key {arg:?} is neither a file nor a public key"))
}

pub(super) fn read_input(file: Option<&Path>) -> crate::cli::failure::Result<Vec<u8>> {
    match file {
        Some(path) => {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
        }
        None => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("cannot read stdin")?;
            Ok(bytes)
        }
    }
}

/// Writes a file atomically; a bare file name is in the current directory.
pub(super) fn write_file(path: &Path, bytes: &[u8], mode: u32) -> crate::cli::failure::Result<()> {
    crate::host::files::replace_atomic(&std::path::absolute(path)?, bytes, mode)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Says why an input was refused; the exit code for it.
pub(super) fn refused(why: std::fmt::Arguments) -> ExitCode {
    eprintln!("stead-plane: {why}");
    ExitCode::from(EXIT_REFUSED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_payload_fills_the_envelope_to_the_byte() {
        for (n, b64) in [(0, 0), (1, 4), (2, 4), (3, 4), (4, 8), (786_432, 1_048_576)] {
            assert_eq!(base64_len(n), b64, "{n}");
        }
        let key = SecretKey::generate().unwrap();
        for signers in 1..=2 {
            let mut e = key.sign(PAYLOAD_TYPE, b"");
            for _ in 1..signers {
                e.signatures.push(e.signatures[0].clone());
            }
            let overhead = e.to_json().len();
            let max = largest_payload(overhead);
            e.payload = vec![b'x'; max];
            assert!(e.to_json().len() <= MAX_DOCUMENT, "{signers}");
            e.payload.extend_from_slice(b"xxx");
            assert!(e.to_json().len() > MAX_DOCUMENT, "{signers}");
        }
    }

    #[test]
    fn the_summary_names_the_node_revision_times_and_modules() {
        let payload = serde_json::json!({
            "node": "edge-0042", "revision": 17,
            "issued_at": "2026-11-30T10:00:00Z", "expires": "2026-12-30T10:00:00Z",
            "modules": [{"name": "web", "image": "nginx:1"}, {"name": "db", "image": "pg:16"}]
        });
        let d = Desired::parse(payload.to_string().as_bytes()).unwrap();
        assert_eq!(
            summary(&d),
            "node edge-0042 revision 17 issued_at 2026-11-30T10:00:00Z \
             expires 2026-12-30T10:00:00Z modules: db, web"
        );
        let mut d = d;
        d.modules.clear();
        assert!(summary(&d).ends_with("modules: (none)"));
    }

    #[test]
    fn a_public_key_is_a_file_or_its_base64() {
        let d = tempfile::tempdir().unwrap();
        let key = SecretKey::generate().unwrap().public();
        let file = d.path().join("k.pub");
        std::fs::write(&file, format!("{}\n", key.to_base64())).unwrap();
        assert_eq!(read_public_key(file.to_str().unwrap()).unwrap(), key);
        assert_eq!(read_public_key(&key.to_base64()).unwrap(), key);
        let e = read_public_key("/no/such/key.pub").unwrap_err();
        assert!(
            format!("{e:#}").contains("neither a file nor a public key"),
            "{e:#}"
        );
        std::fs::write(&file, "garbage\n").unwrap();
        let e = read_public_key(file.to_str().unwrap()).unwrap_err();
        assert!(format!("{e:#}").contains("public key file"), "{e:#}");
    }
}
