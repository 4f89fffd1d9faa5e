use super::*;
use crate::plane::envelope::{Envelope, PublicKey, SecretKey, Signature};
use crate::views::ReportView;
use crate::views::signed::{self, Enrolled, PAYLOAD_TYPE, Read};

fn key(n: u32) -> SecretKey {
    let mut seed = [7u8; 32];
    seed[..4].copy_from_slice(&n.to_le_bytes());
    SecretKey::from_seed(seed)
}

/// The JSON of a report of `node` carrying the report key `carries`.
fn payload(node: &str, carries: &PublicKey) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "agent_version": "0.7.0", "clock": {"plane_date": null, "status": "ok", "system": "x"},
        "device_key": "age1x", "engine": "reachable", "modules": {}, "node": node,
        "passing": true,
        "plane": {"conflicts": [], "error": null, "held": null, "last_contact": null,
                  "refusal": null, "url": "u"},
        "quarantine": null, "sent_at": "2026-12-06T06:00:00Z", "seq": 1, "undelivered": 0,
        "report_key": carries.to_base64()
    }))
    .unwrap()
}

/// Node `n`'s report, signed by its key, read back.
fn report(n: u32) -> Read {
    let k = key(n);
    Read::parse(&signed::sign(&payload(&format!("n{n}"), &k.public()), &k)).unwrap()
}

/// The batch's verdicts and, for each report, the one-at-a-time verdict
/// (ring's), for reports `reads` of the nodes whose keys are `keys`.
type Verdict = Result<ReportView, Unverified>;
fn both(reads: Vec<(String, Read)>, keys: &[PublicKey]) -> (Vec<Verdict>, Vec<Verdict>) {
    let enrolled = |i: usize| keys.get(i).map_or(Enrolled::NotEnrolled, Enrolled::Key);
    let batch = verdicts(
        reads
            .iter()
            .enumerate()
            .map(|(i, (dir, r))| signed::check(r.clone(), Some(dir), enrolled(i)))
            .collect(),
    );
    let single = reads
        .into_iter()
        .enumerate()
        .map(|(i, (dir, r))| signed::verify(r, Some(&dir), enrolled(i)))
        .collect();
    (batch, single)
}

#[test]
fn a_batch_judges_each_report_as_one_check_would() {
    let n = 300;
    let mut reads: Vec<(String, Read)> = (0..n).map(|i| (format!("n{i}"), report(i))).collect();
    let mut keys: Vec<PublicKey> = (0..n).map(|i| key(i).public()).collect();
    // All good: every one counted.
    let (batch, single) = both(reads.clone(), &keys);
    assert!(batch.iter().all(Result::is_ok));
    assert_eq!(batch, single);
    // Changed after it was signed, signed by another key, moved, not
    // enrolled: each said as alone, the others still counted.
    let Read::Signed(mut env) = reads[7].1.clone() else {
        panic!("signed")
    };
    env.payload = payload("n7", &keys[7]).into_iter().chain(*b" ").collect();
    reads[7].1 = Read::Signed(env);
    reads[9].1 = report(1000);
    reads[11].0 = "n12".into();
    keys.truncate(n as usize - 1);
    let (batch, single) = both(reads, &keys);
    assert_eq!(batch, single);
    assert_eq!(batch[7], Err(Unverified::BadSignature));
    assert!(matches!(batch[9], Err(Unverified::Moved { .. })));
    assert!(matches!(batch[11], Err(Unverified::Moved { .. })));
    assert_eq!(batch[n as usize - 1], Err(Unverified::NotEnrolled));
    assert_eq!(batch.iter().filter(|v| v.is_ok()).count(), n as usize - 4);
    // Nothing to check: nothing counted.
    assert_eq!(verdicts::<ReportView>(Vec::new()), Vec::new());
}

/// A report signed for the key `A + T` (T of order 8) by the holder of
/// `A`'s secret: the cofactored equation accepts it, the cofactorless one
/// (ring's) refuses it.
fn cofactored_only(n: u32) -> (Read, PublicKey) {
    use curve25519_dalek::constants::{ED25519_BASEPOINT_TABLE, EIGHT_TORSION};
    use curve25519_dalek::scalar::Scalar;
    use sha2::{Digest, Sha512};
    let seed = {
        let mut s = [9u8; 32];
        s[..4].copy_from_slice(&n.to_le_bytes());
        s
    };
    let h = Sha512::digest(seed);
    let mut a = [0u8; 32];
    a.copy_from_slice(&h[..32]);
    a[0] &= 248;
    a[31] &= 127;
    a[31] |= 64;
    let a = Scalar::from_bytes_mod_order(a);
    let point = &a * ED25519_BASEPOINT_TABLE + EIGHT_TORSION[1];
    let public = PublicKey::parse(&base64_of(point.compress().as_bytes())).unwrap();
    let body = payload(&format!("n{n}"), &public);
    let message = signed_message(&body);
    for nonce in 0u64.. {
        let r = Scalar::hash_from_bytes::<Sha512>(&nonce.to_le_bytes());
        let big_r = (&r * ED25519_BASEPOINT_TABLE).compress();
        let k = Scalar::from_hash(
            Sha512::new()
                .chain_update(big_r.as_bytes())
                .chain_update(public.as_bytes())
                .chain_update(&message),
        );
        let s = r + k * a;
        let mut sig = [0u8; 64];
        sig[..32].copy_from_slice(big_r.as_bytes());
        sig[32..].copy_from_slice(s.as_bytes());
        if public.verifies(&message, &sig) {
            continue; // k a multiple of 8: both accept; another nonce
        }
        let env = Envelope {
            payload_type: PAYLOAD_TYPE.into(),
            payload: body,
            signatures: vec![Signature {
                keyid: public.id().as_str().into(),
                sig: sig.to_vec(),
            }],
        };
        return (Read::parse(&env.to_json()).unwrap(), public);
    }
    unreachable!()
}

fn base64_of(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn signed_message(payload: &[u8]) -> Vec<u8> {
    crate::plane::envelope::pae(PAYLOAD_TYPE, payload)
}

#[test]
fn a_signature_only_the_cofactored_equation_accepts_is_judged_the_same_alone_or_in_any_batch() {
    let (odd, odd_key) = cofactored_only(1);
    let alone = verdicts(vec![signed::check::<ReportView>(
        odd.clone(),
        Some("n1"),
        Enrolled::Key(&odd_key),
    )]);
    assert!(alone[0].is_ok(), "{alone:?}");
    // ring's check (the single-report paths') refuses it: the one place
    // the two rules differ, said in the module's documentation.
    assert_eq!(
        signed::verify(odd.clone(), Some("n1"), Enrolled::Key(&odd_key)),
        Err(Unverified::BadSignature)
    );
    // Beside good reports, and beside a bad one (the batch fails and each
    // is checked again): the same verdict.
    let keys: Vec<PublicKey> = (100..140).map(|i| key(i).public()).collect();
    for bad in [false, true] {
        let mut checked: Vec<_> = (100..140)
            .map(|i| {
                let mut r = report(i);
                if bad && i == 120 {
                    let Read::Signed(env) = &mut r else {
                        panic!("signed")
                    };
                    env.payload.push(b' ');
                }
                signed::check::<ReportView>(
                    r,
                    Some(&format!("n{i}")),
                    Enrolled::Key(&keys[(i - 100) as usize]),
                )
            })
            .collect();
        checked.insert(
            17,
            signed::check(odd.clone(), Some("n1"), Enrolled::Key(&odd_key)),
        );
        let v = verdicts(checked);
        assert!(v[17].is_ok(), "bad {bad}: {:?}", v[17]);
        assert_eq!(v.iter().filter(|v| v.is_err()).count(), usize::from(bad));
    }
}
