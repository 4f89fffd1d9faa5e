//! `stead-plane enroll` and `stead-plane seal`: the devices' public keys
//! taken from their reports into a fleet's description
//! (`device-keys.csv`, [`crate::plane::enroll`]; a report key only from a
//! report it signed, [`crate::views::signed::claim`]), and a value sealed to
//! one of them for one field of one module ([`crate::model::sealed`]),
//! written by the reference age implementation ([`crate::plane::seal`]).

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::ExitCode;

use crate::cli::failure::Context as _;
use crate::model::age::Recipient;
use crate::model::names::{ModuleName, NodeId};
use crate::model::sealed::{self, Binding, MAX_VALUE};
use crate::model::text::{clip, escape};
use crate::plane::enroll::{self, Keys, Seen};

use super::fleet::Reports;
use super::plane::{refused, write_file};
use crate::views::signed::{self, Unverified};

/// The enrolled keys of a fleet's description (none yet: empty).
pub(super) fn read_keys(fleet: &Path) -> Result<Keys, String> {
    let path = fleet.join(enroll::FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => enroll::parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Keys::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// `stead-plane enroll --fleet DIR --reports DIR|URL [--replace]`.
pub fn enroll(
    fleet: &Path,
    reports: &Reports,
    replace: bool,
) -> crate::cli::failure::Result<ExitCode> {
    if !fleet.is_dir() {
        return Ok(refused(format_args!(
            "{} is not a directory (the fleet's description)",
            fleet.display()
        )));
    }
    let mut keys = match read_keys(fleet) {
        Ok(k) => k,
        Err(e) => return Ok(refused(format_args!("{e}"))),
    };
    let (mut reported, mut without, mut unsigned, mut kept) = (Vec::new(), 0u64, 0u64, 0);
    let read = super::fleet::read_reports(reports, &mut |source, dir, read| {
        let unreadable = |e: &str| {
            eprintln!(
                "stead-plane: a report that does not read: {}: {}",
                escape(source),
                escape(e)
            )
        };
        // A report key only from a report it signed, in its node's
        // directory.
        match read.map(|r| signed::claim(r, dir)) {
            Ok(Ok(c)) if c.device_key.is_none() => without += 1,
            Ok(Ok(c)) => {
                unsigned += u64::from(c.report_key.is_none());
                reported.push(c);
            }
            Err(e) | Ok(Err(Unverified::Unreadable(e))) => unreadable(&e),
            Ok(Err(why)) => {
                kept += 1;
                eprintln!(
                    "stead-plane: {}: {}",
                    escape(source),
                    escape(&why.to_string())
                );
            }
        }
    });
    if let Err(e) = read {
        return Ok(refused(format_args!("{e}")));
    }
    let seen = enroll::take(&mut keys, &reported, replace);
    for s in &seen {
        match s {
            Seen::New(node) => println!("enrolled {node}"),
            Seen::Changed {
                node,
                replaced: true,
            } => println!(
                "replaced the key of {node}: every value sealed for {node} must be sealed again"
            ),
            Seen::Changed {
                node,
                replaced: false,
            } => {
                kept += 1;
                eprintln!(
                    "stead-plane: {node} reports a key other than the one enrolled (its data directory \
                     lost or replaced, or a report not its own): the enrolled key is kept; \
                     check it on the device (stead status) and give --replace to take the new one"
                );
            }
            Seen::Unreadable { node, why } => eprintln!(
                "stead-plane: the report of {} names a key that does not read: {}",
                escape(&clip(node, 100)),
                escape(why)
            ),
            Seen::ReportKey(node) => println!(
                "took the report key of {node} (enrolled before from an unsigned report: taken \
                 on trust, as its first key was; check it on the device: stead status --json, \
                 node.report_key)"
            ),
            Seen::Unsigned(node) => {
                kept += 1;
                eprintln!(
                    "stead-plane: {node} sends an unsigned report but is enrolled with a report key: \
                     nothing taken (an older agent put back on it, or a report not its own); \
                     check it on the device (stead status)"
                );
            }
            Seen::Shared { node, with } => {
                kept += 1;
                eprintln!(
                    "stead-plane: {node} reports the key enrolled for {with}: not taken (one key is \
                     one device's: a data directory copied to another device, or a report not \
                     its own); check both devices (stead status)"
                );
            }
        }
    }
    let moved = seen.iter().any(|s| {
        matches!(
            s,
            Seen::New(_) | Seen::ReportKey(_) | Seen::Changed { replaced: true, .. }
        )
    });
    if moved {
        write_file(
            &fleet.join(enroll::FILE),
            enroll::render(&keys).as_bytes(),
            0o644,
        )?;
    }
    println!(
        "{} device(s) enrolled in {}; {} report(s) without a key (agents before 0.6.0)",
        keys.len(),
        fleet.join(enroll::FILE).display(),
        without
    );
    if unsigned > 0 {
        println!(
            "{unsigned} report(s) unsigned (agents before 0.7.0): their nodes have no report key, \
             and stead-plane status and rollout watch count none of their reports until they \
             are enrolled again from a signed one"
        );
    }
    if kept > 0 {
        return Ok(ExitCode::from(super::EXIT_REFUSED));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whom `stead-plane seal` seals to.
#[derive(Debug, PartialEq)]
pub enum SealTo {
    /// The node's key enrolled in this fleet's description.
    Fleet(std::path::PathBuf),
    /// This key (`age1…`).
    Key(String),
}

/// `stead-plane seal --node N --module M --field F (--fleet DIR | --to
/// age1…)`: the value from stdin, the sealed text to stdout.
pub fn seal(
    node: &NodeId,
    module: &ModuleName,
    field: &str,
    to: &SealTo,
) -> crate::cli::failure::Result<ExitCode> {
    if let Err(e) = sealed::check_field(field) {
        return Ok(refused(format_args!("{e}")));
    }
    let recipient = match to {
        SealTo::Key(k) => match Recipient::parse(k) {
            Ok(r) => r,
            Err(e) => return Ok(refused(format_args!("--to: {e}"))),
        },
        SealTo::Fleet(dir) => match read_keys(dir).map(|mut k| k.remove(node)) {
            Ok(Some(e)) => e.age,
            Ok(None) => {
                return Ok(refused(format_args!(
                    "{node} is not enrolled in {}: run stead-plane enroll (or give --to age1…)",
                    dir.join(enroll::FILE).display()
                )));
            }
            Err(e) => return Ok(refused(format_args!("{e}"))),
        },
    };
    let mut value = Vec::new();
    std::io::stdin()
        .take(MAX_VALUE as u64 + 1)
        .read_to_end(&mut value)
        .context("cannot read the value from stdin")?;
    if value.len() > MAX_VALUE {
        return Ok(refused(format_args!(
            "the value is over {MAX_VALUE} bytes, the most a sealed value holds"
        )));
    }
    // `echo` ends what it prints with a newline, which an env value or a
    // setting never means; a file's content is sealed as given.
    if !field.starts_with("files.") && value.ends_with(b"\n") {
        value.pop();
    }
    if let Err(why) = sealed::fits(field, &value) {
        return Ok(refused(format_args!(
            "{field}: the value cannot be sealed for it: {why}"
        )));
    }
    let b = Binding {
        node: node.as_str(),
        module: module.as_str(),
        field,
    };
    // Written by the reference age implementation (crate::plane::seal).
    let text = match crate::plane::seal::seal(&recipient, &b, &value) {
        Ok(t) => t,
        Err(e) => return Ok(refused(format_args!("{e}"))),
    };
    let mut out = std::io::stdout();
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .context("cannot write the sealed value to stdout")?;
    eprintln!(
        "sealed {} bytes for node {node}, module {module}, field {field} (to {})",
        value.len(),
        recipient.encode()
    );
    Ok(ExitCode::SUCCESS)
}
