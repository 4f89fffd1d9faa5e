//! Properties of the intention parser and of the spec digest, over
//! generated input: the parser never panics, whatever it is given; equal
//! specs give equal digests whatever the order their maps and lists are
//! written in; and every single-field change changes the digest. Every
//! runtime field is written, with the examples its row of the field table
//! gives (`runtime::EXAMPLES`): a new field is covered as it is added.

use std::path::Path;

use proptest::prelude::*;
use stead::host::digest::FileDigester;
use stead::model::intention::{DocFormat, Intention};
use stead::model::names::{Digest, NodeId};
use stead::model::runtime::{EXAMPLES, FIELDS};
use stead::model::spec;
use stead::reconcile::resolve::resolve_inputs;

/// The spec digest of an intention document (no host inputs are read: the
/// documents here have no env files and no read-only mounts).
fn digest(text: &str) -> Digest {
    let i = Intention::parse(text, DocFormat::Toml, "p.toml").expect("a valid document");
    let inputs = resolve_inputs(&i, &mut FileDigester::new(), None).expect("inputs resolve");
    spec::desired(
        &i,
        inputs,
        &Digest::of(b"image"),
        &NodeId::try_from("n").unwrap(),
        Path::new("/data/files"),
        None,
    )
    .expect("a checked intention makes a spec")
    .digest
}

/// The parts of a module, each kept as a list of lines so a test can write
/// them in any order.
#[derive(Clone, Debug)]
struct Module {
    command: Vec<String>,
    env: Vec<(String, String)>,
    ports: Vec<u16>,
    restart: &'static str,
    defaults: Vec<(String, i64)>,
    settings: Vec<(String, i64)>,
    files: Vec<(String, String)>,
    mounts: Vec<(String, String)>,
    /// Runtime fields: an index into `EXAMPLES`, and one of its examples.
    runtime: Vec<(usize, usize)>,
}

/// A runtime field's line: its name and its example `which` (modulo how
/// many it has).
fn runtime_line(field: usize, which: usize) -> String {
    let (name, examples) = EXAMPLES[field];
    format!("{name} = {}\n", examples[which % examples.len()])
}

/// The index of a runtime field in `EXAMPLES`.
fn field_index(name: &str) -> usize {
    EXAMPLES.iter().position(|(n, _)| *n == name).unwrap()
}

/// Runtime fields (indices into `EXAMPLES`, with an example each) as the
/// check takes them together: `memswap_limit` with a `mem_limit` below it,
/// `aliases` with `networks`, and `network_mode` (never the default in the
/// examples) without `networks`, `dns`, `extra_hosts`, `aliases` and
/// `hostname`. Sorted by field, one each.
fn together(mut runtime: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    runtime.sort();
    runtime.dedup_by_key(|(f, _)| *f);
    let has = |r: &[(usize, usize)], n: &str| r.iter().any(|(f, _)| *f == field_index(n));
    if has(&runtime, "memswap_limit") && !has(&runtime, "mem_limit") {
        runtime.push((field_index("mem_limit"), 0));
    }
    if has(&runtime, "aliases") && !has(&runtime, "networks") {
        runtime.push((field_index("networks"), 0));
    }
    if has(&runtime, "network_mode") {
        let apart = ["networks", "dns", "extra_hosts", "aliases", "hostname"].map(field_index);
        runtime.retain(|(f, _)| !apart.contains(f));
    }
    runtime.sort();
    runtime
}

impl Module {
    /// With these runtime fields, as [`together`] takes them; in the
    /// host's (or another's, or no) network it publishes no ports.
    fn with_runtime(self, runtime: Vec<(usize, usize)>) -> Module {
        let runtime = together(runtime);
        let apart = runtime
            .iter()
            .any(|(f, _)| *f == field_index("network_mode"));
        Module {
            ports: if apart { vec![] } else { self.ports },
            runtime,
            ..self
        }
    }

    /// The TOML document, with every list and map in the order given by
    /// `order` (a permutation seed).
    fn text(&self, order: u64) -> String {
        fn shuffled<T: Clone>(v: &[T], seed: u64) -> Vec<T> {
            let mut out = v.to_vec();
            if !out.is_empty() {
                let k = (seed as usize) % out.len();
                out.rotate_left(k);
                if seed % 2 == 1 {
                    out.reverse();
                }
            }
            out
        }
        let mut t = String::from("name = \"m\"\nimage = \"x:1\"\n");
        t.push_str(&format!("command = {:?}\n", self.command));
        t.push_str(&format!("restart = \"{}\"\n", self.restart));
        let ports: Vec<String> = shuffled(&self.ports, order)
            .iter()
            .map(|p| format!("\"{p}\""))
            .collect();
        t.push_str(&format!("ports = [{}]\n", ports.join(", ")));
        for (f, which) in shuffled(&self.runtime, order / 17) {
            t.push_str(&runtime_line(f, which));
        }
        t.push_str("[env]\n");
        for (k, v) in shuffled(&self.env, order / 3) {
            t.push_str(&format!("{k} = {v:?}\n"));
        }
        t.push_str("[config]\npath = \"/c.json\"\nformat = \"json\"\n[config.defaults]\n");
        for (k, v) in shuffled(&self.defaults, order / 5) {
            t.push_str(&format!("{k} = {v}\n"));
        }
        t.push_str("[settings]\n");
        for (k, v) in shuffled(&self.settings, order / 7) {
            t.push_str(&format!("{k:?} = {v}\n"));
        }
        for (p, c) in shuffled(&self.files, order / 11) {
            t.push_str(&format!("[[files]]\npath = {p:?}\ncontent = {c:?}\n"));
        }
        for (s, target) in shuffled(&self.mounts, order / 13) {
            t.push_str(&format!(
                "[[mounts]]\nsource = {s:?}\ntarget = {target:?}\n"
            ));
        }
        t
    }
}

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,7}"
}

prop_compose! {
    fn module()(
        command in prop::collection::vec("[ -~]{0,12}", 0..4),
        env in prop::collection::btree_map("[A-Z][A-Z0-9_]{0,6}", "[ -~]{0,12}", 0..4),
        ports in prop::collection::btree_set(1u16..65535, 0..4),
        restart in prop::sample::select(vec!["no", "on-failure", "always", "unless-stopped"]),
        defaults in prop::collection::btree_map(word(), any::<i64>(), 0..4),
        settings in prop::collection::btree_map(word(), any::<i64>(), 0..4),
        files in prop::collection::btree_map(word(), "[ -~]{0,20}", 0..3),
        mounts in prop::collection::btree_set(word(), 0..3),
        runtime in prop::collection::vec((0..FIELDS.len(), 0usize..8), 0..FIELDS.len()),
    ) -> Module {
        Module {
            command,
            env: env.into_iter().collect(),
            ports: ports.into_iter().collect(),
            restart,
            // A setting replaces the default of the same key: kept apart,
            // so a change of either one shows.
            defaults: defaults.into_iter().map(|(k, v)| (format!("d_{k}"), v)).collect(),
            settings: settings.into_iter().map(|(k, v)| (format!("s_{k}"), v)).collect(),
            files: files.into_iter().map(|(k, v)| (format!("/files/{k}"), v)).collect(),
            mounts: mounts
                .into_iter()
                .map(|w| (format!("/srv/{w}"), format!("/mnt/{w}")))
                .collect(),
            runtime: vec![],
        }
        .with_runtime(runtime)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_parser_never_panics_on_any_text(text in "\\PC{0,400}") {
        let _ = Intention::parse(&text, DocFormat::Toml, "p.toml");
        let _ = Intention::parse(&text, DocFormat::Json, "p.json");
    }

    #[test]
    fn the_parser_never_panics_on_a_damaged_document(
        m in module(),
        cut in 0usize..2000,
        junk in "[\\[\\]{}\"=,.\\n a-z0-9]{0,8}",
    ) {
        let text = m.text(0);
        let at = cut.min(text.len());
        let at = (0..=at).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        let damaged = format!("{}{junk}{}", &text[..at], &text[at..]);
        let _ = Intention::parse(&damaged, DocFormat::Toml, "p.toml");
    }

    #[test]
    fn the_order_things_are_written_in_never_changes_the_digest(m in module(), order in any::<u64>()) {
        prop_assert_eq!(digest(&m.text(0)), digest(&m.text(order)));
    }

    #[test]
    fn every_single_field_change_changes_the_digest(m in module(), which in 0usize..8, salt in 1i64..1000) {
        let mut changed = m.clone();
        let what = match which {
            0 => { changed.command.push(format!("arg{salt}")); "command" }
            // Names the generators never make, so nothing collides.
            1 => { changed.env.push((format!("zz_{salt}"), "v".into())); "env" }
            2 => {
                prop_assume!(!m.runtime.iter().any(|(f, _)| *f == field_index("network_mode")));
                let p = (1000 + salt) as u16;
                if changed.ports.contains(&p) { changed.ports.retain(|x| *x != p) } else { changed.ports.push(p) }
                "ports"
            }
            3 => {
                changed.restart = if m.restart == "always" { "no" } else { "always" };
                "restart"
            }
            4 => { changed.defaults.push((format!("zz{salt}"), salt)); "config defaults" }
            5 => { changed.settings.push((format!("zz{salt}"), salt)); "settings" }
            6 => { changed.files.push((format!("/extra/zz{salt}"), "x".into())); "files" }
            _ => { changed.mounts.push((format!("/srv/zz{salt}"), format!("/extra-mnt/zz{salt}"))); "mounts" }
        };
        prop_assert_ne!(digest(&m.text(0)), digest(&changed.text(0)), "{} changed", what);
    }

    /// Each runtime field, set to one of its examples or to another: the
    /// spec digest moves, and of the inputs only the field's own.
    #[test]
    fn every_runtime_field_change_changes_the_digest_and_its_input_alone(
        m in module(),
        field in 0..FIELDS.len(),
        which in 0usize..8,
        step in 1usize..8,
    ) {
        let n = EXAMPLES[field].1.len();
        let other = which % n + 1 + (step - 1) % (n - 1);
        let set = |which: usize| {
            let mut r = m.runtime.clone();
            r.retain(|(f, _)| *f != field);
            r.push((field, which));
            m.clone().with_runtime(r)
        };
        let (a, b) = (set(which % n), set(other % n));
        // `together` may have dropped the field, for `network_mode`'s sake.
        prop_assume!(a.runtime.iter().any(|(f, _)| *f == field));
        prop_assert_ne!(digest(&a.text(0)), digest(&b.text(0)), "{}", FIELDS[field]);
        let inputs = |m: &Module| {
            let i = Intention::parse(&m.text(0), DocFormat::Toml, "p.toml").expect("a valid document");
            i.runtime.digests()
        };
        let (mut ia, mut ib) = (inputs(&a), inputs(&b));
        let name = stead::model::names::InputName::try_from(FIELDS[field]).unwrap();
        prop_assert_ne!(ia.remove(&name), ib.remove(&name), "{}", FIELDS[field]);
        prop_assert_eq!(ia, ib, "{} moved another input", FIELDS[field]);
    }
}

/// Every runtime field has examples for the tests above: at least two, each
/// valid (beside a `mem_limit`), each a value of its own.
#[test]
fn every_runtime_field_has_examples_of_different_values() {
    assert_eq!(EXAMPLES.map(|(n, _)| n), FIELDS);
    for (f, (name, examples)) in EXAMPLES.iter().enumerate() {
        assert!(
            examples.len() >= 2,
            "{name}: a row needs two examples at least"
        );
        let mut seen = std::collections::BTreeSet::new();
        for w in 0..examples.len() {
            let beside = match *name {
                "mem_limit" => "",
                // Names on a network need one.
                "aliases" => "mem_limit = \"64m\"\nnetworks = [\"n\"]\n",
                _ => "mem_limit = \"64m\"\n",
            };
            let text = format!(
                "name = \"m\"\nimage = \"x:1\"\n{beside}{}",
                runtime_line(f, w)
            );
            let i = Intention::parse(&text, DocFormat::Toml, "p.toml")
                .unwrap_or_else(|e| panic!("{name}: example {}: {e}", examples[w]));
            let input = stead::model::names::InputName::try_from(*name).unwrap();
            let d = i.runtime.digests().get(&input).cloned();
            assert!(
                seen.insert(d),
                "{name}: example {} is another's value",
                examples[w]
            );
        }
    }
}
