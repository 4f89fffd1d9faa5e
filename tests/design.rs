//! docs/design.md's code map held to the code: every folder of `src/` (and
//! `agent.rs`, `config.rs`) is a row, in an order where each uses only
//! rows above it, and every `crate::<folder>` its code names is listed in
//! its row. No engine, no network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The code map's rows, in order: (entry without `/` or `.rs`, may use).
fn code_map() -> Vec<(String, BTreeSet<String>)> {
    let doc = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let start = doc.find("## Code map").expect("design.md has a code map");
    let end = doc[start..]
        .find("## Architecture invariants")
        .map(|e| start + e)
        .expect("the code map is followed by the invariants");
    let mut rows = Vec::new();
    for line in doc[start..end].lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "| `x/` | owns | may use |" splits into 5 cells.
        if cells.len() != 5 || !cells[1].starts_with('`') {
            continue;
        }
        let entry = cells[1]
            .trim_matches('`')
            .trim_end_matches('/')
            .trim_end_matches(".rs")
            .to_string();
        let uses: BTreeSet<String> = if cells[3] == "nothing" {
            BTreeSet::new()
        } else {
            cells[3]
                .split(',')
                .map(|u| u.trim().trim_matches('`').to_string())
                .collect()
        };
        rows.push((entry, uses));
    }
    rows
}

/// `src/`'s folders, and its top-level files other than lib.rs and main.rs.
fn entries() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(root().join("src")).unwrap() {
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

/// The entries of `src/` an entry's code names as `crate::<entry>` or in
/// `use crate::{<entry>, …}` (comments left out).
fn named_by(entry: &str, all: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut files = Vec::new();
    let dir = root().join("src").join(entry);
    if dir.is_dir() {
        rust_files(&dir, &mut files);
    } else {
        files.push(root().join("src").join(format!("{entry}.rs")));
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
                    if name != entry && all.contains(name) {
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
fn every_folder_of_src_is_a_row_of_the_code_map_and_no_row_is_gone() {
    let rows: BTreeSet<String> = code_map().into_iter().map(|(e, _)| e).collect();
    assert!(rows.len() >= 10, "{rows:?}");
    assert_eq!(rows, entries(), "docs/design.md's code map against src/");
}

#[test]
fn each_row_uses_only_rows_above_it_and_its_code_only_what_it_lists() {
    let map = code_map();
    let all = entries();
    let mut above: BTreeSet<String> = BTreeSet::new();
    for (entry, uses) in &map {
        for u in uses {
            assert!(
                above.contains(u),
                "{entry} may use {u}, which is not above it in the code map"
            );
        }
        for (name, at) in named_by(entry, &all) {
            assert!(
                uses.contains(&name),
                "{entry} uses crate::{name} ({at}), which its row in docs/design.md does not list"
            );
        }
        above.insert(entry.clone());
    }
}
