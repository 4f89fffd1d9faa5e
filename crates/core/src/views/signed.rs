//! The report a device signs, and the verdict on one read back from where
//! it was PUT. Pure.
//!
//! A signed report is a DSSE envelope ([`crate::plane::envelope`]) of
//! payload type [`PAYLOAD_TYPE`] whose payload is the report's JSON exactly
//! as an agent before 0.7.0 PUT it, with one Ed25519 signature by the
//! device's report key (derived from its local key for that one use,
//! [`crate::model::seal::LocalKey::report_seed`]). The report names its
//! node and carries the key's public half (`report_key`), which
//! `stead-plane enroll` takes only from a report that key signed
//! ([`claim`]).
//!
//! A reader counts a report only when it is signed by the report key
//! enrolled for the node whose directory it was read from, and names that
//! node ([`verify`]): the key is chosen by the path, never by what the
//! report says, and the signature is checked before the payload is
//! trusted. Anything else is [`Unverified`], with why: a report of an
//! older agent (plain JSON), one moved to another node's directory, one
//! signed by another key or changed after it was signed, one of a node not
//! enrolled or enrolled without a report key.
//!
//! What a signature cannot tell, a reader that keeps no state cannot
//! either: a genuine older report of the same node put back in its place
//! (a replay) verifies. It says only what that node said then, with the
//! `seq` and `sent_at` it was signed with (a reader lists it as not heard
//! from once it is older than its limit), never speaks for another node,
//! and its group claims are counted only within what the host serves, as
//! every report's are. A second report of a node in one reading is not
//! counted ([`Unverified::Duplicate`]).

use std::fmt;

use super::ReportView;
use crate::model::text::clip;
use crate::plane::envelope::{self, Envelope, PublicKey, SecretKey, VerifyError};

/// The payload type of a stead report.
pub const PAYLOAD_TYPE: &str = "application/vnd.stead.report.v1+json";

/// What [`PAYLOAD_TYPE`] is called in an error.
const WHAT: &str = "stead report";

/// The envelope a device PUTs: `payload` (the report's JSON) signed by
/// `key`, as JSON.
pub fn sign(payload: &[u8], key: &SecretKey) -> Vec<u8> {
    key.sign(PAYLOAD_TYPE, payload).to_json()
}

/// A report as read from where it was PUT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    /// Plain JSON: an agent before 0.7.0, which signs nothing.
    Plain(Box<ReportView>),
    /// A DSSE envelope of [`PAYLOAD_TYPE`], not yet verified nor its
    /// payload parsed.
    Signed(Envelope),
}

/// The first key of a JSON object's text, when it is a plain string.
fn first_key(bytes: &[u8]) -> Option<&[u8]> {
    let skip = |i: usize| {
        bytes[i..]
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .map(|n| i + n)
    };
    let i = skip(0)?;
    if bytes[i] != b'{' {
        return None;
    }
    let i = skip(i + 1)?;
    if bytes[i] != b'"' {
        return None;
    }
    let rest = &bytes[i + 1..];
    let end = rest.iter().position(|b| matches!(b, b'"' | b'\\'))?;
    Some(&rest[..end])
}

impl Read {
    /// Reads a report's bytes: an object whose first key is one of a DSSE
    /// envelope's (`payloadType`, `payload`, `signatures`) is an envelope,
    /// which must be of [`PAYLOAD_TYPE`]; anything else a plain report.
    /// `Err` says why it does not read.
    pub fn parse(bytes: &[u8]) -> Result<Read, String> {
        match first_key(bytes) {
            Some(b"payloadType" | b"payload" | b"signatures") => {
                let env = Envelope::parse(bytes).map_err(|e| e.to_string())?;
                if env.payload_type != PAYLOAD_TYPE {
                    return Err(format!(
                        "an envelope of payload type {:?}, not a {WHAT} ({PAYLOAD_TYPE})",
                        clip(&env.payload_type, 100)
                    ));
                }
                Ok(Read::Signed(env))
            }
            _ => serde_json::from_slice(bytes)
                .map(|r| Read::Plain(Box::new(r)))
                .map_err(|e| e.to_string()),
        }
    }
}

/// What is enrolled for the node whose directory a report was read from.
#[derive(Clone, Copy, Debug)]
pub enum Enrolled<'k> {
    /// No enrolled keys were given: nothing can be checked.
    NoKeys,
    /// The node is not enrolled.
    NotEnrolled,
    /// Enrolled from an unsigned report (an agent before 0.7.0): no
    /// report key.
    NoReportKey,
    /// Its report key.
    Key(&'k PublicKey),
}

/// Why a report read is not counted (or not enrolled from).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unverified {
    /// It does not read: its payload is not a report.
    Unreadable(String),
    /// It names a node other than the one whose directory it is in (`dir`:
    /// none when it is in no directory named for a node).
    Moved { node: String, dir: Option<String> },
    /// Plain JSON, or an envelope without a signature: an agent before
    /// 0.7.0.
    Unsigned,
    /// No enrolled keys were given to check it with.
    NoKeys,
    /// Its node is not enrolled.
    NotEnrolled,
    /// Its node is enrolled without a report key (from an unsigned
    /// report).
    NoReportKey,
    /// Signed by keys other than the one enrolled for its node (their ids
    /// as the envelope names them, cut).
    OtherKey(Vec<String>),
    /// The enrolled key's signature does not verify: changed after it was
    /// signed.
    BadSignature,
    /// The report key it carries is not the key that signed it (or it
    /// carries none, or one that does not read).
    NotItsKey(String),
    /// A second report of a node already counted in this reading (its
    /// `seq`, and the counted one's).
    Duplicate { seq: u64, counted: u64 },
}

impl Unverified {
    /// Its class, a word: what a roll-up counts them by.
    pub fn class(&self) -> &'static str {
        match self {
            Unverified::Unreadable(_) => "unreadable",
            Unverified::Moved { .. } => "moved",
            Unverified::Unsigned => "unsigned",
            Unverified::NoKeys => "not-checked",
            Unverified::NotEnrolled => "not-enrolled",
            Unverified::NoReportKey => "no-report-key",
            Unverified::OtherKey(_) => "other-key",
            Unverified::BadSignature => "bad-signature",
            Unverified::NotItsKey(_) => "not-its-key",
            Unverified::Duplicate { .. } => "duplicate",
        }
    }
}

impl fmt::Display for Unverified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unverified::Unreadable(e) => write!(f, "its payload does not read: {e}"),
            Unverified::Moved { node, dir: Some(d) } => write!(
                f,
                "it names node {} but is in the directory of node {}: refused",
                clip(node, 100),
                clip(d, 100)
            ),
            Unverified::Moved { node, dir: None } => write!(
                f,
                "it names node {} but is in no directory named for a node: refused",
                clip(node, 100)
            ),
            Unverified::Unsigned => f.write_str("not signed (an agent before 0.7.0)"),
            Unverified::NoKeys => f.write_str("not checked: no enrolled device keys were given"),
            Unverified::NotEnrolled => f.write_str("its node is not enrolled"),
            Unverified::NoReportKey => f.write_str(
                "its node is enrolled without a report key (from an unsigned report): \
                 enroll it again from this report",
            ),
            Unverified::OtherKey(ids) => write!(
                f,
                "signed by a key other than the one enrolled for its node ({}): a report \
                 not its own, or its data directory replaced",
                ids.join(", ")
            ),
            Unverified::BadSignature => f.write_str(
                "its signature by the enrolled key does not verify: changed after it was signed",
            ),
            Unverified::NotItsKey(why) => write!(f, "{why}: refused"),
            Unverified::Duplicate { seq, counted } => write!(
                f,
                "a second report of its node in this reading (seq {seq}; the one counted has \
                 seq {counted}): a node counts once"
            ),
        }
    }
}

/// Why a report naming `node` read from the directory `dir` (the name of
/// the one it is in, if any) is not its node's: a report is read only
/// from the directory named for its node (`nodes/<node>/status.json`).
pub fn moved(node: &str, dir: Option<&str>) -> Option<Unverified> {
    match dir {
        Some(d) if d == node => None,
        dir => Some(Unverified::Moved {
            node: clip(node, 100).into_owned(),
            dir: dir.map(|d| clip(d, 100).into_owned()),
        }),
    }
}

/// A typed view of a signed report's payload: [`ReportView`] whole, or
/// one that reads only some of its fields ([`super::ReportRuns`]). What
/// [`check`] needs of any: the node it names and the key it carries.
pub trait Speaks: serde::de::DeserializeOwned {
    /// The node it names.
    fn node(&self) -> &str;
    /// The report key it carries, as written.
    fn report_key(&self) -> Option<&str>;
}

impl Speaks for ReportView {
    fn node(&self) -> &str {
        &self.node
    }
    fn report_key(&self) -> Option<&str> {
        self.report_key.as_deref()
    }
}

impl Speaks for super::ReportRuns {
    fn node(&self) -> &str {
        &self.node
    }
    fn report_key(&self) -> Option<&str> {
        self.report_key.as_deref()
    }
}

/// The payload of a signed report, parsed.
fn payload<V: Speaks>(env: &Envelope) -> Result<V, Unverified> {
    serde_json::from_slice(&env.payload).map_err(|e| Unverified::Unreadable(e.to_string()))
}

/// The report key a report carries, when it reads.
fn carried<V: Speaks>(report: &V) -> Result<PublicKey, Unverified> {
    let text = report
        .report_key()
        .ok_or_else(|| Unverified::NotItsKey("it is signed but carries no report key".into()))?;
    PublicKey::parse(text)
        .map_err(|e| Unverified::NotItsKey(format!("the report key it carries does not read: {e}")))
}

/// The report read from the directory `dir`, counted only when the key
/// `enrolled` for that directory's node signed it and it names that node;
/// otherwise why not. The signature is checked with the key the path
/// names before the payload is trusted; a report that does not verify is
/// still read to say why (moved to another node's directory first).
pub fn verify(read: Read, dir: Option<&str>, enrolled: Enrolled) -> Result<ReportView, Unverified> {
    match check::<ReportView>(read, dir, enrolled) {
        Checked::Judged(v) => v,
        Checked::Signature(p) => {
            let good = p.key.verifies(&p.message(), &p.signature);
            p.verdict(good)
        }
    }
}

/// A report judged in all but its one signature's check (what
/// [`check`] leaves to its caller, which may check many at once), read
/// as `V`.
#[derive(Debug)]
pub enum Checked<'k, V = ReportView> {
    /// Its verdict.
    Judged(Result<V, Unverified>),
    /// Counted when `signature` is `key`'s of `message`.
    Signature(Pending<'k, V>),
}

/// A report whose verdict waits only on its one signature.
#[derive(Debug)]
pub struct Pending<'k, V = ReportView> {
    /// The enrolled key that must have signed it.
    pub key: &'k PublicKey,
    /// The signature.
    pub signature: [u8; 64],
    /// The envelope's payload (what it signed with [`PAYLOAD_TYPE`]).
    payload: Vec<u8>,
    report: V,
}

impl<V: Speaks> Pending<'_, V> {
    /// What it signed: the envelope's pre-authentication encoding.
    pub fn message(&self) -> Vec<u8> {
        envelope::pae(PAYLOAD_TYPE, &self.payload)
    }

    /// [`Pending::message`] into `out` (cleared first).
    pub fn message_into(&self, out: &mut Vec<u8>) {
        crate::model::dsse::pae_into(PAYLOAD_TYPE, &self.payload, out);
    }

    /// Its verdict, given whether [`Pending::signature`] is
    /// [`Pending::key`]'s of [`Pending::message`].
    pub fn verdict(self, good: bool) -> Result<V, Unverified> {
        if good {
            counted(self.report, self.key)
        } else {
            Err(Unverified::BadSignature)
        }
    }
}

/// `report`, signed by the enrolled key `k`: counted when it carries `k`.
fn counted<V: Speaks>(report: V, k: &PublicKey) -> Result<V, Unverified> {
    if carried(&report)? == *k {
        Ok(report)
    } else {
        Err(Unverified::NotItsKey(
            "it carries a report key other than the enrolled one that signed it".into(),
        ))
    }
}

/// [`verify`], all but the check of a report's signature when it has one
/// naming the enrolled key: that check is left to the caller
/// ([`Checked::Signature`]), who may check many in one batch. An envelope
/// with more signatures, or none naming the key, is judged here whole.
pub fn check<'k, V: Speaks>(
    read: Read,
    dir: Option<&str>,
    enrolled: Enrolled<'k>,
) -> Checked<'k, V> {
    let env = match read {
        Read::Plain(r) => {
            return Checked::Judged(Err(moved(&r.node, dir).unwrap_or(Unverified::Unsigned)));
        }
        Read::Signed(env) => env,
    };
    let report: V = match payload(&env) {
        Ok(r) => r,
        Err(e) => return Checked::Judged(Err(e)),
    };
    if let Some(m) = moved(report.node(), dir) {
        return Checked::Judged(Err(m));
    }
    let k = match enrolled {
        Enrolled::Key(k) => k,
        Enrolled::NoKeys => return Checked::Judged(Err(Unverified::NoKeys)),
        Enrolled::NotEnrolled => return Checked::Judged(Err(Unverified::NotEnrolled)),
        Enrolled::NoReportKey => return Checked::Judged(Err(Unverified::NoReportKey)),
    };
    if let [s] = env.signatures.as_slice()
        && env.payload_type == PAYLOAD_TYPE
        && let Ok(signature) = <[u8; 64]>::try_from(s.sig.as_slice())
        && s.keyid == k.id().as_str()
    {
        return Checked::Signature(Pending {
            key: k,
            signature,
            payload: env.payload,
            report,
        });
    }
    Checked::Judged(
        match envelope::verify_as(&env, std::slice::from_ref(k), PAYLOAD_TYPE, WHAT) {
            Ok(_) => counted(report, k),
            Err(VerifyError::Unsigned) => Err(Unverified::Unsigned),
            Err(VerifyError::BadSignature { .. }) => Err(Unverified::BadSignature),
            Err(VerifyError::UnknownKey { keyids }) => Err(Unverified::OtherKey(keyids)),
            Err(e @ VerifyError::PayloadType(..)) => Err(Unverified::Unreadable(e.to_string())),
        },
    )
}

/// What a report says of its device's keys, for enrolment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The node it names (its directory's).
    pub node: String,
    /// Its age key (`age1…`), as it says it (absent before 0.6.0).
    pub device_key: Option<String>,
    /// Its report key: only of a signed report, and only when that key
    /// signed it (absent from a plain report).
    pub report_key: Option<PublicKey>,
}

/// What a report read from the directory `dir` claims of its device's
/// keys: a signed report's report key only when it verifies under that
/// same key (the key that signs the report is the one enrolled). A report
/// in another node's directory, or signed and not by the key it carries,
/// claims nothing.
pub fn claim(read: Read, dir: Option<&str>) -> Result<Claim, Unverified> {
    let (report, report_key) = match read {
        Read::Plain(r) => (*r, None),
        Read::Signed(env) => {
            let report: ReportView = payload(&env)?;
            if let Some(m) = moved(&report.node, dir) {
                return Err(m);
            }
            let key = carried(&report)?;
            match envelope::verify_as(&env, std::slice::from_ref(&key), PAYLOAD_TYPE, WHAT) {
                Ok(_) => {}
                Err(VerifyError::Unsigned) => return Err(Unverified::Unsigned),
                Err(_) => {
                    return Err(Unverified::NotItsKey(format!(
                        "it is not signed by the report key it carries ({})",
                        key.id()
                    )));
                }
            }
            (report, Some(key))
        }
    };
    if let Some(m) = moved(&report.node, dir) {
        return Err(m);
    }
    Ok(Claim {
        node: report.node,
        device_key: report.device_key,
        report_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SecretKey {
        SecretKey::from_seed([seed; 32])
    }

    /// A report of `node` carrying `carries`' public key (none: no key).
    fn report(node: &str, carries: Option<&SecretKey>, seq: u64) -> ReportView {
        let v = serde_json::json!({
            "agent_version": "0.7.0", "clock": {"plane_date": null, "status": "ok", "system": "x"},
            "device_key": "age1x", "engine": "reachable", "modules": {}, "node": node,
            "passing": true,
            "plane": {"conflicts": [], "error": null, "held": null, "last_contact": null,
                      "refusal": null, "url": "u"},
            "quarantine": null, "sent_at": "2026-12-06T06:00:00Z", "seq": seq, "undelivered": 0
        });
        let mut r: ReportView = serde_json::from_value(v).unwrap();
        r.report_key = carries.map(|k| k.public().to_base64());
        r
    }

    type Verdict = Result<ReportView, Unverified>;

    fn json(r: &ReportView) -> Vec<u8> {
        serde_json::to_vec(r).unwrap()
    }

    /// `r` signed by `by`, as the device PUTs it, read back.
    fn signed(r: &ReportView, by: &SecretKey) -> Read {
        Read::parse(&sign(&json(r), by)).unwrap()
    }

    fn tampered(read: Read, f: impl Fn(&mut Envelope)) -> Read {
        let Read::Signed(mut e) = read else {
            panic!("signed")
        };
        f(&mut e);
        Read::parse(&e.to_json()).unwrap()
    }

    #[test]
    fn a_report_counts_only_signed_by_the_key_enrolled_for_its_path_s_node() {
        let (a, b, c) = (key(1), key(2), key(3));
        let (ka, kb) = (a.public(), b.public());
        let good = || signed(&report("edge-a", Some(&a), 7), &a);
        let old = || Read::parse(&json(&report("edge-a", None, 7))).unwrap();
        let moved_to_b = || {
            Err(Unverified::Moved {
                node: "edge-a".into(),
                dir: Some("edge-b".into()),
            })
        };
        let ids = |k: &SecretKey| vec![k.public().id().to_string()];
        let ok = Ok(report("edge-a", Some(&a), 7));
        let not_its = |w: &str| Err(Unverified::NotItsKey(w.into()));
        // (what, the report read, its directory, what is enrolled there, the verdict)
        #[rustfmt::skip]
        type Case<'k> = (&'k str, Read, Option<&'k str>, Enrolled<'k>, Verdict);
        let cases: Vec<Case> = vec![
            (
                "a good one",
                good(),
                Some("edge-a"),
                Enrolled::Key(&ka),
                ok.clone(),
            ),
            (
                "a replay: an older genuine report in its place verifies (a reader keeps no state)",
                signed(&report("edge-a", Some(&a), 3), &a),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Ok(report("edge-a", Some(&a), 3)),
            ),
            (
                "moved to another node's path",
                good(),
                Some("edge-b"),
                Enrolled::Key(&kb),
                moved_to_b(),
            ),
            (
                "moved, the other node not enrolled",
                good(),
                Some("edge-b"),
                Enrolled::NotEnrolled,
                moved_to_b(),
            ),
            (
                "moved, no keys given",
                good(),
                Some("edge-b"),
                Enrolled::NoKeys,
                moved_to_b(),
            ),
            (
                "in no node's directory",
                good(),
                None,
                Enrolled::Key(&ka),
                Err(Unverified::Moved {
                    node: "edge-a".into(),
                    dir: None,
                }),
            ),
            (
                "signed by another key, naming the node",
                signed(&report("edge-a", Some(&c), 7), &c),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Err(Unverified::OtherKey(ids(&c))),
            ),
            (
                "signed by another node's key, moved in and renamed",
                signed(&report("edge-a", Some(&b), 7), &b),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Err(Unverified::OtherKey(ids(&b))),
            ),
            (
                "another key claiming the enrolled key's id",
                tampered(signed(&report("edge-a", Some(&c), 7), &c), |e| {
                    e.signatures[0].keyid = ka.id().to_string()
                }),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Err(Unverified::BadSignature),
            ),
            (
                "changed after it was signed",
                tampered(good(), |e| {
                    let n = e.payload.len() - 2;
                    e.payload[n] ^= 1
                }),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Err(Unverified::BadSignature),
            ),
            (
                "a signature cut",
                tampered(good(), |e| e.signatures[0].sig.truncate(63)),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Err(Unverified::BadSignature),
            ),
            (
                "an envelope without a signature",
                tampered(good(), |e| e.signatures.clear()),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Err(Unverified::Unsigned),
            ),
            (
                "unsigned: an older agent's plain report",
                old(),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Err(Unverified::Unsigned),
            ),
            (
                "unsigned, no keys given",
                old(),
                Some("edge-a"),
                Enrolled::NoKeys,
                Err(Unverified::Unsigned),
            ),
            (
                "unsigned and moved",
                old(),
                Some("edge-b"),
                Enrolled::Key(&kb),
                moved_to_b(),
            ),
            (
                "no keys given",
                good(),
                Some("edge-a"),
                Enrolled::NoKeys,
                Err(Unverified::NoKeys),
            ),
            (
                "not enrolled",
                good(),
                Some("edge-a"),
                Enrolled::NotEnrolled,
                Err(Unverified::NotEnrolled),
            ),
            (
                "enrolled without a report key",
                good(),
                Some("edge-a"),
                Enrolled::NoReportKey,
                Err(Unverified::NoReportKey),
            ),
            (
                "signed by the enrolled key, carrying another",
                signed(&report("edge-a", Some(&c), 7), &a),
                Some("edge-a"),
                Enrolled::Key(&ka),
                not_its("it carries a report key other than the enrolled one that signed it"),
            ),
            (
                "signed by the enrolled key, carrying none",
                signed(&report("edge-a", None, 7), &a),
                Some("edge-a"),
                Enrolled::Key(&ka),
                not_its("it is signed but carries no report key"),
            ),
            (
                "signed, its payload no report",
                Read::parse(&a.sign(PAYLOAD_TYPE, b"{}").to_json()).unwrap(),
                Some("edge-a"),
                Enrolled::Key(&ka),
                Err(Unverified::Unreadable(
                    "missing field `agent_version` at line 1 column 2".into(),
                )),
            ),
        ];
        for (what, read, dir, enrolled, want) in cases {
            assert_eq!(verify(read, dir, enrolled), want, "{what}");
        }
    }

    #[test]
    fn enrolment_takes_a_report_key_only_from_a_report_it_signed() {
        let (a, c) = (key(1), key(3));
        let claim_of = |node: &str, k: Option<&SecretKey>| Claim {
            node: node.into(),
            device_key: Some("age1x".into()),
            report_key: k.map(SecretKey::public),
        };
        // (what, the report read, its directory, what it claims)
        #[rustfmt::skip]
        type Case<'k> = (&'k str, Read, Option<&'k str>, Result<Claim, Unverified>);
        let cases: Vec<Case> = vec![
            (
                "signed by the key it carries",
                signed(&report("edge-a", Some(&a), 7), &a),
                Some("edge-a"),
                Ok(claim_of("edge-a", Some(&a))),
            ),
            (
                "an older agent's plain report: its age key alone",
                Read::parse(&json(&report("edge-a", None, 7))).unwrap(),
                Some("edge-a"),
                Ok(claim_of("edge-a", None)),
            ),
            (
                "signed by another key than it carries",
                signed(&report("edge-a", Some(&a), 7), &c),
                Some("edge-a"),
                Err(Unverified::NotItsKey(format!(
                    "it is not signed by the report key it carries ({})",
                    a.public().id()
                ))),
            ),
            (
                "changed after it was signed",
                tampered(signed(&report("edge-a", Some(&a), 7), &a), |e| {
                    let n = e.payload.len() - 2;
                    e.payload[n] ^= 1
                }),
                Some("edge-a"),
                Err(Unverified::NotItsKey(format!(
                    "it is not signed by the report key it carries ({})",
                    a.public().id()
                ))),
            ),
            (
                "signed, carrying no key",
                signed(&report("edge-a", None, 7), &a),
                Some("edge-a"),
                Err(Unverified::NotItsKey(
                    "it is signed but carries no report key".into(),
                )),
            ),
            (
                "an envelope without a signature",
                tampered(signed(&report("edge-a", Some(&a), 7), &a), |e| {
                    e.signatures.clear()
                }),
                Some("edge-a"),
                Err(Unverified::Unsigned),
            ),
            (
                "moved to another node's path",
                signed(&report("edge-a", Some(&a), 7), &a),
                Some("edge-b"),
                Err(Unverified::Moved {
                    node: "edge-a".into(),
                    dir: Some("edge-b".into()),
                }),
            ),
            (
                "plain, moved",
                Read::parse(&json(&report("edge-a", None, 7))).unwrap(),
                Some("edge-b"),
                Err(Unverified::Moved {
                    node: "edge-a".into(),
                    dir: Some("edge-b".into()),
                }),
            ),
        ];
        for (what, read, dir, want) in cases {
            assert_eq!(claim(read, dir), want, "{what}");
        }
        let mut bad = report("edge-a", None, 7);
        bad.report_key = Some("AAAA".into());
        let e = claim(signed(&bad, &a), Some("edge-a")).unwrap_err();
        assert!(
            e.to_string()
                .contains("the report key it carries does not read"),
            "{e}"
        );
    }

    #[test]
    fn a_report_reads_as_an_envelope_or_plain_and_nothing_else() {
        let a = key(1);
        let r = report("edge-a", Some(&a), 7);
        let signed_bytes = sign(&json(&r), &a);
        let env = Envelope::parse(&signed_bytes).unwrap();
        assert_eq!(
            env.payload,
            json(&r),
            "the payload is the report as it was PUT"
        );
        assert_eq!(env.signatures[0].keyid, a.public().id().as_str());
        // (bytes, reads as: Some(signed?) or the error's words)
        let other_order = format!(
            "{{\"payload\": {:?}, \"payloadType\": {PAYLOAD_TYPE:?}, \"signatures\": []}}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, json(&r))
        );
        #[rustfmt::skip]
        let cases: Vec<(Vec<u8>, Result<bool, &str>)> = vec![
            (signed_bytes.clone(), Ok(true)),
            (json(&r), Ok(false)),
            (format!("  \n{}", String::from_utf8(json(&r)).unwrap()).into_bytes(), Ok(false)),
            (other_order.into_bytes(), Ok(true)),
            (a.sign(envelope::PAYLOAD_TYPE, &json(&r)).to_json(), Err("not a stead report")),
            (b"{\"payloadType\": 1}".to_vec(), Err("envelope: payloadType")),
            (b"{}".to_vec(), Err("missing field")),
            (b"[]".to_vec(), Err("invalid length")),
            (b"".to_vec(), Err("EOF")),
            (b"{\"pay\\\"load\": 1}".to_vec(), Err("missing field")),
        ];
        for (bytes, want) in cases {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            match (Read::parse(&bytes), want) {
                (Ok(read), Ok(is_signed)) => {
                    assert_eq!(matches!(read, Read::Signed(_)), is_signed, "{text}")
                }
                (Err(e), Err(says)) => assert!(e.contains(says), "{text}: {e}"),
                (got, want) => panic!("{text}: {got:?}, not {want:?}"),
            }
        }
    }

    #[test]
    fn every_refusal_says_why_and_has_a_class() {
        #[rustfmt::skip]
        let cases = [
            (Unverified::Unreadable("x".into()), "unreadable", "does not read"),
            (Unverified::Moved { node: "a".into(), dir: Some("b".into()) }, "moved", "it names node a but is in the directory of node b: refused"),
            (Unverified::Moved { node: "a".into(), dir: None }, "moved", "in no directory named for a node"),
            (Unverified::Unsigned, "unsigned", "before 0.7.0"),
            (Unverified::NoKeys, "not-checked", "no enrolled device keys"),
            (Unverified::NotEnrolled, "not-enrolled", "not enrolled"),
            (Unverified::NoReportKey, "no-report-key", "enroll it again"),
            (Unverified::OtherKey(vec!["0123456789abcdef".into()]), "other-key", "(0123456789abcdef)"),
            (Unverified::BadSignature, "bad-signature", "changed after it was signed"),
            (Unverified::NotItsKey("x".into()), "not-its-key", "x: refused"),
            (Unverified::Duplicate { seq: 3, counted: 9 }, "duplicate", "seq 3; the one counted has seq 9"),
        ];
        for (u, class, says) in cases {
            assert_eq!(u.class(), class);
            assert!(u.to_string().contains(says), "{u}");
        }
    }
}
