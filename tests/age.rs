//! stead's age reader against C2SP's test vectors (tests/data/age): each
//! vector's file is opened with its identities and must give what the
//! vector expects: the payload (its SHA-256), or the kind of failure.

use stead::model::age::{AgeError, Identity, decrypt};

struct Vector {
    expect: String,
    payload: Option<String>,
    identities: Vec<Identity>,
    file: Vec<u8>,
}

fn read(bytes: &[u8]) -> Vector {
    let split = bytes
        .windows(2)
        .position(|w| w == b"\n\n")
        .expect("a vector has a header, a blank line and a file");
    let head = std::str::from_utf8(&bytes[..split]).expect("a textual header");
    let mut file = bytes[split + 2..].to_vec();
    let (mut expect, mut payload, mut identities) = (String::new(), None, Vec::new());
    for line in head.lines() {
        let (k, v) = line.split_once(": ").expect("key: value");
        match k {
            "expect" => expect = v.to_string(),
            "payload" => payload = Some(v.to_string()),
            "identity" => identities.push(Identity::parse(v).expect("the vector's identity")),
            "compressed" => {
                assert_eq!(v, "zlib");
                file = miniz_oxide::inflate::decompress_to_vec_zlib(&file).expect("zlib");
            }
            _ => {}
        }
    }
    Vector {
        expect,
        payload,
        identities,
        file,
    }
}

fn sha256_hex(b: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, b)
        .as_ref()
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// What opening the file gives: with each identity in turn, the first
/// answer that is not "not for this identity".
fn open(v: &Vector) -> Result<Vec<u8>, AgeError> {
    // A vector without an identity is one whose header must not read: any
    // identity says so.
    let none = [Identity::from_bytes([0; 32])];
    let ids = if v.identities.is_empty() {
        &none[..]
    } else {
        &v.identities[..]
    };
    let mut last = Err(AgeError::NoMatch);
    for id in ids {
        last = decrypt(id, &v.file);
        if last != Err(AgeError::NoMatch) {
            break;
        }
    }
    last
}

#[test]
fn every_vector_opens_as_it_expects() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/age");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "README.md")
        .collect();
    names.sort();
    assert!(names.len() >= 60, "the vectors are there: {}", names.len());
    let mut wrong = Vec::new();
    for name in &names {
        let v = read(&std::fs::read(dir.join(name)).unwrap());
        let got = open(&v);
        let ok = match (v.expect.as_str(), &got) {
            ("success", Ok(plain)) => v.payload.as_deref() == Some(sha256_hex(plain).as_str()),
            ("no match", Err(AgeError::NoMatch)) => true,
            ("HMAC failure", Err(AgeError::Mac)) => true,
            ("header failure", Err(AgeError::Header(_))) => true,
            ("payload failure", Err(AgeError::Payload(_))) => true,
            _ => false,
        };
        if !ok {
            wrong.push(format!(
                "{name}: expected {}, got {:?}",
                v.expect,
                got.map(|p| p.len())
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} vectors:\n{}",
        wrong.len(),
        names.len(),
        wrong.join("\n")
    );
}
