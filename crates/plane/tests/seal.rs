//! `stead-plane seal` through its binary, written by the reference age
//! implementation: every kind of value, for every kind of field, opens on
//! the device's reader (the core's `sealed::open`, as the agent opens it)
//! where it was sealed for; a value its field cannot take is refused
//! before anything is sealed.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use stead_core::model::age::Identity;
use stead_core::model::sealed::{Binding, open};

/// A case: the field, what is given on stdin, and what opens (none: the
/// command refuses it).
type Case<'a> = (&'a str, &'a [u8], Option<&'a [u8]>);

/// Runs `stead-plane seal` for `field` of module `db` on node `edge-1`,
/// to `to`, with `value` on its standard input.
fn seal(to: &str, field: &str, value: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stead-plane"))
        .args([
            "seal", "--node", "edge-1", "--module", "db", "--field", field, "--to", to,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(value).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn every_value_stead_plane_seals_opens_on_the_device() {
    let device = Identity::from_bytes([31; 32]);
    let to = device.recipient().encode();
    let binary: Vec<u8> = (0..=255u8).collect();
    let text_64k: Vec<u8> = (0..64 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let binary_64k: Vec<u8> = (0..64 * 1024).map(|i| (i * 13 % 256) as u8).collect();
    // (field, stdin, what opens: None when the command refuses it)
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("env.DB_PASSWORD", b"", Some(b"")),
        ("env.DB_PASSWORD", b"x", Some(b"x")),
        ("env.DB_PASSWORD", b"hunter2\n", Some(b"hunter2")), // echo's newline dropped
        ("env.DB_PASSWORD", &text_64k, Some(&text_64k)),
        ("env.DB_PASSWORD", &binary, None),                  // not UTF-8 text
        ("settings.db.password", b"", Some(b"")),
        ("settings.db.password", b"y", Some(b"y")),
        ("settings.db.password", &text_64k, Some(&text_64k)),
        ("settings.db.password", b"a\0b", None),              // a NUL
        ("files./etc/app/key.pem", b"", Some(b"")),
        ("files./etc/app/key.pem", b"\xff", Some(b"\xff")),
        ("files./etc/app/key.pem", b"key\n", Some(b"key\n")), // a file's newline kept
        ("files./etc/app/key.pem", &binary, Some(&binary)),
        ("files./etc/app/key.pem", &binary_64k, Some(&binary_64k)),
    ];
    for (field, stdin, want) in cases {
        let what = format!("{field}, {} bytes", stdin.len());
        let out = seal(&to, field, stdin);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let Some(want) = want else {
            assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
            assert!(out.stdout.is_empty(), "{what}");
            assert!(
                stderr.contains("the value cannot be sealed for it"),
                "{what}: {stderr}"
            );
            continue;
        };
        assert!(out.status.success(), "{what}: {stderr}");
        let text = String::from_utf8(out.stdout).unwrap();
        let b = Binding {
            node: "edge-1",
            module: "db",
            field,
        };
        assert_eq!(
            open(&device, &b, text.trim_end()).as_deref(),
            Ok(want),
            "{what}"
        );
        // Another device's key, or another module: refused.
        let other = Identity::from_bytes([32; 32]);
        assert!(open(&other, &b, text.trim_end()).is_err(), "{what}");
        let web = Binding { module: "web", ..b };
        assert!(open(&device, &web, text.trim_end()).is_err(), "{what}");
    }
}
