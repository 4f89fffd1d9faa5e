//! One bad input must never stop the node: hostile inputs (FIFOs, devices),
//! secrets in broken intention files, and an intentions directory that
//! vanishes, each against the real agent and the real Docker Engine.

mod common;

use std::process::Command;

use common::*;

fn mkfifo(p: &std::path::Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

/// Every event's text in the node's store (read from a copy: opening a
/// store writes to it).
fn event_texts(n: &Node) -> String {
    let copy = n.dir.path().join("events-copy.redb");
    std::fs::copy(n.data().join("stead.redb"), &copy).unwrap();
    let s = stead::store::Store::open(&copy).unwrap();
    s.events_since(0, 10_000)
        .unwrap()
        .iter()
        .map(|e| format!("{} {}\n", e.module.as_deref().unwrap_or("-"), e.detail))
        .collect()
}

/// One pass, which must end on its own (a hang is a failure, not a stall).
fn once_within(n: &Node, secs: u32) -> (bool, String) {
    let o = Command::new("timeout")
        .arg(secs.to_string())
        .arg(env!("CARGO_BIN_EXE_stead"))
        .args(["run", "--once", "--config"])
        .arg(n.config())
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(124), "the pass hung");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn fifos_and_devices_as_inputs_hold_only_their_module() {
    let n = Node::new("special");
    let fifo = n.host("pipe");
    mkfifo(&fifo);
    let ok = n.module("ok");
    let idle = idle_after("true");
    let module = |name: &str, extra: &str| {
        format!(
            "name = \"{name}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {idle:?}]\n{extra}\n"
        )
    };
    n.write_intention("ok.toml", &module(&ok, ""));
    let bad = [
        (
            "fifo-env",
            format!("env_files = [{fifo:?}]"),
            "env_file:",
            "a FIFO",
        ),
        (
            "fifo-mount",
            format!("[[mounts]]\nsource = {fifo:?}\ntarget = \"/in\"\nread_only = true"),
            "mount:/in",
            "a FIFO",
        ),
        (
            "zero-mount",
            "[[mounts]]\nsource = \"/dev/zero\"\ntarget = \"/in\"\nread_only = true".into(),
            "mount:/in",
            "a character device",
        ),
        (
            "zero-env",
            "env_files = [\"/dev/zero\"]".into(),
            "env_file:/dev/zero",
            "a character device",
        ),
    ];
    for (short, extra, _, _) in &bad {
        n.write_intention(&format!("{short}.toml"), &module(&n.module(short), extra));
    }
    let (clean, out) = once_within(&n, 60);
    assert!(!clean, "held modules are not a clean pass: {out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&ok) && l.contains("created")),
        "the good module is reconciled: {out}"
    );
    for (short, _, input, why) in &bad {
        let m = n.module(short);
        let line = out
            .lines()
            .find(|l| l.starts_with(&m))
            .unwrap_or_else(|| panic!("{m}: {out}"));
        assert!(
            line.contains("held") && line.contains(input) && line.contains(why),
            "{line}"
        );
        assert!(n.container(&m).is_none(), "{m} has no container");
    }
}

#[test]
fn errors_never_publish_what_a_file_holds() {
    let n = Node::new("secrets");
    let secret = "s3cr3t-hunter2";
    let a = n.module("a");
    n.write_intention(
        "a.toml",
        &format!("name = \"{a}\"\nimage = \"{IMAGE_1}\"\nenv = {{ DB_PASSWORD = \"{secret}\" \n"),
    );
    // A symlink out of the directory, to a file whose first line is secret.
    let outside = n.write_host("shadow", &format!("root:{secret}:19000:0:99999:7:::\n"));
    std::os::unix::fs::symlink(&outside, n.intention_path("b.toml")).unwrap();
    let (_, out) = once_within(&n, 60);
    let events = event_texts(&n);
    for text in [&out, &events] {
        assert!(!text.contains(secret), "leaked: {text}");
    }
    let file = n.intention_path("a.toml").display().to_string();
    assert!(
        out.lines()
            .any(|l| l.contains(&file) && l.contains("line ") && l.contains("column")),
        "the error names the place: {out}"
    );
    assert!(
        out.contains("outside the intentions directory"),
        "the symlink is refused: {out}"
    );
}

#[test]
fn a_vanished_intentions_directory_holds_and_an_empty_one_removes() {
    let n = Node::new("vanish");
    let m = n.module("v");
    n.write_intention(
        "v.toml",
        &format!(
            "name = \"{m}\"\nimage = \"{IMAGE_1}\"\ncommand = [\"sh\", \"-c\", {:?}]\n",
            idle_after("true")
        ),
    );
    n.once_ok();
    let id = n.container_id(&m);
    let dir = n.dir.path().join("intentions");
    let aside = n.dir.path().join("intentions.aside");
    std::fs::rename(&dir, &aside).unwrap();
    let (_, out) = once_within(&n, 60);
    assert_eq!(
        n.container_id(&m),
        id,
        "held while the directory is gone: {out}"
    );
    assert!(
        event_texts(&n).contains("cannot read the intentions directory"),
        "said"
    );
    std::fs::rename(&aside, &dir).unwrap();
    let (clean, out) = once_within(&n, 60);
    assert!(clean && out.contains("unchanged"), "{out}");
    assert_eq!(n.container_id(&m), id);
    // An empty directory is a statement: nothing is to run.
    n.remove_intention("v.toml");
    let (_, out) = once_within(&n, 60);
    assert!(out.contains("removed"), "{out}");
    assert!(n.container(&m).is_none());
}
