//! The command line without an engine: `stead check`, the documented
//! example, and `run --once` when no engine answers.

use std::process::Command;

fn stead() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stead"))
}

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_documented_example_is_the_shipped_example_and_is_valid() {
    let doc = std::fs::read_to_string(root().join("docs/intentions.md")).unwrap();
    let block = doc
        .split("```toml\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let example =
        std::fs::read_to_string(root().join("examples/intentions.d/sensor.toml")).unwrap();
    assert_eq!(
        block, example,
        "docs/intentions.md and the shipped example differ"
    );
    let i = stead::model::intention::Intention::parse(
        block,
        stead::model::intention::DocFormat::Toml,
        "doc",
    )
    .unwrap();
    assert_eq!(i.name.as_str(), "sensor");
}

fn check_dir(files: &[(&str, &str)]) -> (tempfile::TempDir, std::process::Output) {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("i")).unwrap();
    std::fs::write(d.path().join("host.env"), "A=1\n").unwrap();
    for (name, text) in files {
        std::fs::write(
            d.path().join("i").join(name),
            text.replace("HOST", &d.path().display().to_string()),
        )
        .unwrap();
    }
    std::fs::write(d.path().join("c.toml"), "node_id = \"chk\"\nintentions_dir = \"i\"\ndata_dir = \"data\"\ndocker_socket = \"/nonexistent.sock\"\n").unwrap();
    let out = stead()
        .args(["check", "--config"])
        .arg(d.path().join("c.toml"))
        .output()
        .unwrap();
    (d, out)
}

#[test]
fn check_prints_digests_without_an_engine_and_refuses_bad_files() {
    let good = "name = \"a\"\nimage = \"x:1\"\nenv_files = [\"HOST/host.env\"]\n[config]\npath = \"/c.json\"\nformat = \"json\"\ndefaults = { k = 1 }\n";
    let (d0, out) = check_dir(&[("a.toml", good)]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(text.starts_with("a "), "{text}");
    assert!(
        text.contains("config:/c.json") && text.contains("env_file:"),
        "{text}"
    );
    // Deterministic; a setting moves the digest.
    let rerun = || {
        let o = stead()
            .args(["check", "--config"])
            .arg(d0.path().join("c.toml"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap()
            .to_string()
    };
    let first = text.lines().next().unwrap();
    assert_eq!(rerun(), first);
    std::fs::write(
        d0.path().join("i/a.toml"),
        format!("{good}[settings]\nk = 2\n").replace("HOST", &d0.path().display().to_string()),
    )
    .unwrap();
    assert_ne!(rerun(), first);

    let (d, out) = check_dir(&[
        ("a.toml", good),
        (
            "b.json",
            r#"{"name":"b","image":"x","mounts":[{"source":"/a","target":"rel"}]}"#,
        ),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success());
    let file = d.path().join("i/b.json").display().to_string();
    assert!(
        text.contains(&format!(
            "{file}: mounts[0].target: invalid path \"rel\": must be absolute"
        )),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("a ")),
        "the good module is still checked: {text}"
    );

    // A live file directly under / (0.5.0 accepted it and aborted on it).
    let live = "name = \"l\"\nimage = \"x:1\"\n[config]\npath = \"/app.json\"\nformat = \"json\"\nreload = \"signal:SIGHUP\"\n";
    let (d, out) = check_dir(&[("l.toml", live)]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{text}");
    let file = d.path().join("i/l.toml").display().to_string();
    assert!(
        text.contains(&format!(
            "{file}: config.path: /app.json is directly under /"
        )),
        "{text}"
    );
}

#[test]
fn run_once_without_an_engine_says_so_and_fails() {
    let (d, _) = check_dir(&[("a.toml", "name = \"a\"\nimage = \"x\"\n")]);
    let out = stead()
        .args(["run", "--once", "--config"])
        .arg(d.path().join("c.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("engine at /nonexistent.sock not reachable"),
        "{err}"
    );
}

#[test]
fn check_accepts_sealed_values_without_opening_them() {
    let sealed = "name = \"s\"\nimage = \"x:1\"\nenv_files = [\"HOST/host.env\"]\nenv = { MODE = \"prod\", PW = { sealed = \"YWdl\" } }\n";
    let (_d, out) = check_dir(&[("s.toml", sealed)]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("s ")
            && text.contains("sealed (env.PW): opened and digested by the agent on its device"),
        "{text}"
    );
    // What the host gives is still read and digested.
    assert!(text.contains("env_file:"), "{text}");
    // A sealed value that is not base64 of an age file is still refused.
    let (_d, out) = check_dir(&[("s.toml", &sealed.replace("YWdl", "not base64!"))]);
    assert!(!out.status.success());
}

#[test]
fn a_bad_config_names_the_field() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("c.toml"), "heartbeat = \"often\"\n").unwrap();
    let out = stead()
        .args(["check", "--config"])
        .arg(d.path().join("c.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("heartbeat: invalid duration \"often\""),
        "{err}"
    );
}

#[test]
fn version_names_commit_and_target() {
    let out = stead().arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(
        v.starts_with(&format!("stead {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    assert!(v.contains("commit ") && v.contains("target "), "{v}");
}

#[test]
fn a_usage_error_names_the_argument_and_exits_2_and_help_exits_0() {
    let out = stead().args(["run", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unexpected argument '--bogus'") && err.contains("Usage: stead run"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // A group without its command prints its help on stderr, as clap did.
    let out = stead().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Commands:"));
    for args in [
        &["--help"][..],
        &["-h"],
        &["help", "reload"],
        &["reload", "-h"],
    ] {
        let out = stead().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Usage: stead"), "{args:?}: {help}");
    }
}

/// The device's binary carries no operator verb: each says where it went
/// (exit 2, nothing done), and the help lists none.
#[test]
fn the_operators_verbs_say_where_they_went() {
    for (args, to) in [
        (
            &[
                "plane", "publish", "--key", "k", "--fleet", "f", "--site", "s",
            ][..],
            "stead-plane publish --key k --fleet f --site s",
        ),
        (&["plane", "rollout", "watch"], "stead-plane rollout watch"),
        (&["plane"], "stead-plane "),
        (&["import", "compose.yml"], "stead-plane import compose.yml"),
    ] {
        let out = stead().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("run `{to}`")), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    let help = stead().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("\n  run "), "{help}");
    assert!(
        !help.contains("\n  plane ") && !help.contains("\n  import "),
        "{help}"
    );
}
