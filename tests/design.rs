//! docs/design.md's code map held to the code. Its crates: every crate of
//! the workspace is a row, in an order where each uses only rows above
//! it, and the workspace crates its Cargo.toml names are those its row
//! lists. Its folders: every folder (and top-level file) of each crate's
//! `src/` is a row, each uses only folders above it in its crate or of
//! the crates its crate may use, and every `crate::<folder>` its code
//! names is listed in its row. And `cargo tree`: the core and the
//! launcher link no async runtime, HTTP, TLS or store, and the device's
//! binary no command-line crate. No engine, no network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The rows of the table under `heading`, each its cells without the
/// first and last (empty) ones.
fn table(heading: &str) -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("design.md has {heading}"));
    let rest = &doc[start + heading.len()..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    rest[..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<String> = l.split('|').map(|c| c.trim().to_string()).collect();
            cells[1..cells.len() - 1].to_vec()
        })
        .collect()
}

/// "`a`, `b`" or "nothing".
fn names(cell: &str) -> BTreeSet<String> {
    if cell == "nothing" {
        return BTreeSet::new();
    }
    cell.split(',')
        .map(|u| u.trim().trim_matches('`').to_string())
        .collect()
}

fn unquote(cell: &str) -> String {
    cell.trim_matches('`')
        .trim_end_matches('/')
        .trim_end_matches(".rs")
        .to_string()
}

/// The crates table: (name, directory, may use), in order.
fn crates() -> Vec<(String, PathBuf, BTreeSet<String>)> {
    table("### Crates")
        .iter()
        .map(|c| {
            assert_eq!(c.len(), 4, "{c:?}");
            (unquote(&c[0]), root().join(unquote(&c[1])), names(&c[3]))
        })
        .collect()
}

/// The folders table: (crate, entry, may use), in order.
fn folders() -> Vec<(String, String, BTreeSet<String>)> {
    table("### Folders")
        .iter()
        .map(|c| {
            assert_eq!(c.len(), 4, "{c:?}");
            (unquote(&c[0]), unquote(&c[1]), names(&c[3]))
        })
        .collect()
}

/// The workspace crates a Cargo.toml's `[dependencies]` names.
fn dependencies(dir: &Path, all: &BTreeSet<String>) -> BTreeSet<String> {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let value: toml::Table = text.parse().unwrap();
    value
        .get("dependencies")
        .and_then(|d| d.as_table())
        .map(|d| d.keys().filter(|k| all.contains(*k)).cloned().collect())
        .unwrap_or_default()
}

/// A crate's `src/` folders, and its top-level files other than lib.rs
/// and main.rs.
fn entries(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(dir.join("src")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            out.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "lib" && stem != "main" {
                out.insert(stem.to_string());
            }
        }
    }
    out
}

fn rust_files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            rust_files(&e.unwrap().path(), out);
        }
    } else if p.extension().is_some_and(|e| e == "rs") {
        out.push(p.to_path_buf());
    }
}

/// The names an entry's code gives as `crate::<name>` or in
/// `use crate::{<name>, …}` (comments left out), among `known`.
fn named_by(src: &Path, entry: &str, known: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut files = Vec::new();
    let dir = src.join(entry);
    if dir.is_dir() {
        rust_files(&dir, &mut files);
    } else {
        files.push(src.join(format!("{entry}.rs")));
    }
    let mut out = BTreeMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split(['}', ','])
                        .map(|s| s.trim().split("::").next().unwrap_or(""))
                        .collect(),
                    None => vec![
                        rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or(""),
                    ],
                };
                for name in names {
                    if name != entry && known.contains(name) {
                        out.entry(name.to_string())
                            .or_insert_with(|| format!("{}:{}", f.display(), n + 1));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_crate_is_a_row_and_names_only_the_crates_above_it() {
    let crates = crates();
    let all: BTreeSet<String> = crates.iter().map(|(n, _, _)| n.clone()).collect();
    assert!(all.len() >= 6, "{all:?}");
    let metadata: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let members: BTreeSet<PathBuf> = metadata["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| root().join(m.as_str().unwrap()).canonicalize().unwrap())
        .collect();
    let rows: BTreeSet<PathBuf> = crates
        .iter()
        .map(|(_, d, _)| d.canonicalize().unwrap())
        .collect();
    assert_eq!(
        rows, members,
        "the crates table against the workspace's members"
    );
    let mut above = BTreeSet::new();
    for (name, dir, uses) in &crates {
        for u in uses {
            assert!(
                above.contains(u),
                "{name} may use {u}, which is not above it"
            );
        }
        assert_eq!(
            &dependencies(dir, &all),
            uses,
            "{name}: the workspace crates its Cargo.toml names against its row"
        );
        above.insert(name.clone());
    }
}

#[test]
fn every_folder_is_a_row_and_uses_only_what_its_row_lists() {
    let crates = crates();
    let folders = folders();
    let mut of_crate: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (c, entry, _) in &folders {
        of_crate.entry(c.clone()).or_default().push(entry.clone());
    }
    for (name, dir, uses) in &crates {
        let rows: BTreeSet<String> = of_crate.get(name).into_iter().flatten().cloned().collect();
        if name == "stead-launch" {
            // One file and its binary: the crate is its row.
            continue;
        }
        assert_eq!(
            rows,
            entries(dir),
            "the folders table's rows of {name} against its src/"
        );
        // What a folder may name: the folders of the crates below, then
        // those above it in its own crate.
        let lower: BTreeSet<String> = uses
            .iter()
            .flat_map(|u| of_crate.get(u).into_iter().flatten().cloned())
            .collect();
        let mut above = lower.clone();
        let known: BTreeSet<String> = lower.union(&rows).cloned().collect();
        for (c, entry, may) in folders.iter().filter(|(c, _, _)| c == name) {
            for u in may {
                assert!(
                    above.contains(u),
                    "{c} {entry} may use {u}, which is neither above it nor of a crate below"
                );
            }
            for (n, at) in named_by(&dir.join("src"), entry, &known) {
                assert!(
                    may.contains(&n),
                    "{c} {entry} uses crate::{n} ({at}), which its row in docs/design.md does not list"
                );
            }
            above.insert(entry.clone());
        }
    }
}

/// `cargo tree`'s packages of a crate's normal dependencies.
fn tree(package: &str, target: Option<&str>) -> BTreeSet<String> {
    let mut c = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()));
    c.current_dir(root()).args([
        "tree",
        "--offline",
        "--locked",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
        "-p",
        package,
    ]);
    if let Some(t) = target {
        c.args(["--target", t]);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn the_core_and_the_launcher_link_no_runtime_and_the_device_no_command_line_crate() {
    let core = tree("stead-core", None);
    for no in ["tokio", "hyper", "rustls", "redb", "notify", "mio", "clap"] {
        assert!(!core.contains(no), "stead-core links {no}: {core:?}");
    }
    let launch = tree("stead-launch", None);
    assert_eq!(launch, BTreeSet::from(["stead-launch".to_string()]));
    let device = tree("stead", None);
    for no in [
        "clap",
        "clap_complete",
        "clap_mangen",
        "stead-plane",
        "saphyr-parser",
    ] {
        assert!(!device.contains(no), "the device's stead links {no}");
    }
    assert!(device.contains("redb") && device.contains("stead-core"));
    let operator = tree("stead-plane", None);
    assert!(
        operator.contains("clap") && !operator.contains("redb"),
        "{operator:?}"
    );
}
