//! An upgrade of stead over a store it wrote: `tests/fixtures/store-0.1.0.redb`
//! was written by release 0.1.0 (schema 1) and `store-0.1.0.json` is every
//! record in it as the 0.1.0 code read it back (`tests/fixtures/store-0.1.0/make.sh`
//! made both). This binary must migrate the store on open and read every
//! record back intact, and then refuse a store newer than itself without
//! writing to it. `store-0.4.0.redb` was written by release 0.4.0 (schema 6:
//! runtime fields, a live record) running the intentions beside it
//! (`tests/fixtures/store-0.4.0/make.sh`); it too must read back as this version
//! parses the same files, and `stead check` must print what 0.4.0 printed
//! for them (an upgrade recreates nothing). `store-0.5.0.redb` was written by
//! release 0.5.0 (schema 7) against the engine, a registry and a plane
//! (`tests/fixtures/store-0.5.0/make.sh`), with a record of every kind: file, API
//! and plane intentions, an overlay, applied, observed, events, a live
//! record, a done reload and its update state, the held plane document.
//! `store-0.6.0.redb` was written by release 0.6.0 (schema 9) the same way
//! (`tests/fixtures/store-0.6.0/make.sh`), adding a module with a value
//! sealed to the node, one with `depends_on`, a node document that lists a
//! group and the group's document, root version 1, the crash guard, the
//! images pulled and each module's image history: every kind reads back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value as J, json};
use stead::model::intention::Protocol;
use stead::store::{AppliedRecord, ApplyState, ObservedRecord, SCHEMA_VERSION, Source, Store};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A copy of the 0.1.0 store: opening it writes (the migration, and redb's
/// repair after the crash the fixture ends with), so the fixture itself is
/// never opened.
fn copy_of_fixture(dir: &Path) -> PathBuf {
    let p = dir.join("stead.redb");
    std::fs::copy(fixture("store-0.1.0.redb"), &p).unwrap();
    p
}

/// An applied record in the shape 0.1.0 serialised it.
fn applied_json(a: &AppliedRecord) -> J {
    let ports: Vec<J> = a
        .spec
        .ports
        .iter()
        .map(|p| {
            json!({
                "container_port": p.container_port,
                "host": p.host.as_ref().map(|(ip, port)| json!([ip, port])),
                "protocol": match p.protocol {
                    Protocol::Tcp => "tcp",
                    Protocol::Udp => "udp",
                    Protocol::Sctp => "sctp",
                },
            })
        })
        .collect();
    let mounts: Vec<J> = a
        .spec
        .mounts
        .iter()
        .map(|m| json!({ "read_only": m.read_only, "source": m.source, "target": m.target }))
        .collect();
    json!({
        "at": a.at,
        "container_id": a.container_id,
        "digest": a.digest.as_str(),
        "inputs": a.inputs.iter().map(|(k, v)| (k.to_string(), J::from(v.as_str()))).collect::<serde_json::Map<_, _>>(),
        "spec": {
            "command": a.spec.command,
            "env": a.spec.env.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
            "image_id": a.spec.image_id,
            "labels": a.spec.labels,
            "mounts": mounts,
            "name": a.spec.name,
            "ports": ports,
            "restart": a.spec.restart.as_str(),
        },
        "state": match a.state { ApplyState::Pending => "Pending", ApplyState::Applied => "Applied" },
    })
}

fn observed_json(o: &ObservedRecord) -> J {
    json!({
        "container_id": o.container_id,
        "created": o.created,
        "digest": o.digest.as_ref().map(|d| d.as_str()),
        "image_id": o.image_id,
        "state": o.state,
    })
}

#[test]
fn a_store_written_by_0_1_0_is_migrated_and_every_record_reads_back_intact() {
    let want: J =
        serde_json::from_str(&std::fs::read_to_string(fixture("store-0.1.0.json")).unwrap())
            .unwrap();
    assert_eq!(want["schema"], 1, "the fixture is a schema 1 store");
    let d = tempfile::tempdir().unwrap();
    let p = copy_of_fixture(d.path());
    let store = Store::open(&p).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);

    // Intentions, with their source, revision and overlay; the field added
    // in schema 2 reads as absent.
    let entries = store.entries().unwrap();
    let want_intentions = want["intentions"].as_object().unwrap();
    assert_eq!(entries.len(), want_intentions.len());
    assert!(entries.len() >= 4, "the fixture holds modules: {entries:?}");
    let mut overlays = serde_json::Map::new();
    for (name, e) in &entries {
        let r = e.record.as_ref().unwrap();
        let source = match &r.source {
            Source::File(p) => json!({ "kind": "file", "path": p }),
            Source::Api => json!({ "kind": "api" }),
            Source::Plane => json!({ "kind": "plane" }),
        };
        let got =
            json!({ "source": source, "revision": r.revision, "intention": r.intention.to_json() });
        assert_eq!(got, want_intentions[name.as_str()], "intention {name}");
        assert_eq!(r.plane_revision, None, "{name}");
        if !e.overlay.is_empty() {
            let o: serde_json::Map<String, J> = e
                .overlay
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_json()))
                .collect();
            overlays.insert(name.to_string(), J::Object(o));
        }
    }
    assert_eq!(J::Object(overlays), want["overlays"]);
    assert!(
        !want["overlays"].as_object().unwrap().is_empty(),
        "the fixture holds an overlay"
    );

    let applied: BTreeMap<String, J> = store
        .all_applied()
        .unwrap()
        .iter()
        .map(|(k, a)| (k.clone(), applied_json(a)))
        .collect();
    assert_eq!(serde_json::to_value(&applied).unwrap(), want["applied"]);
    assert!(
        store
            .all_applied()
            .unwrap()
            .values()
            .any(|a| a.state == ApplyState::Pending),
        "the fixture holds a pending target"
    );

    let observed: BTreeMap<String, J> = store
        .all_observed()
        .unwrap()
        .iter()
        .map(|(k, o)| (k.clone(), observed_json(o)))
        .collect();
    assert_eq!(serde_json::to_value(&observed).unwrap(), want["observed"]);
    assert!(!observed.is_empty());

    let events = store.events_since(0, 10_000).unwrap();
    assert_eq!(serde_json::to_value(&events).unwrap(), want["events"]);
    assert!(events.len() > 10, "{}", events.len());

    // The store goes on working: a write, then a reopen, reads back.
    store
        .append_event(None, stead::store::EventKind::Engine, "after the upgrade")
        .unwrap();
    drop(store);
    let store = Store::open(&p).unwrap();
    let last = store.events_since(0, 10_000).unwrap().pop().unwrap();
    assert_eq!(last.detail, "after the upgrade");
    assert_eq!(last.seq, events.last().unwrap().seq + 1);
}

#[test]
fn a_store_of_a_newer_schema_is_refused_naming_both_versions_and_left_untouched() {
    let d = tempfile::tempdir().unwrap();
    let p = copy_of_fixture(d.path());
    drop(Store::open(&p).unwrap());
    // A future stead's schema, written as it would write it.
    {
        let db = redb::Database::create(&p).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(redb::TableDefinition::<&str, u64>::new("meta"))
            .unwrap()
            .insert("schema", SCHEMA_VERSION + 1)
            .unwrap();
        tx.commit().unwrap();
    }
    let before = std::fs::read(&p).unwrap();
    let err = Store::open(&p).err().expect("refused").to_string();
    assert!(
        err.contains(&format!("schema version {}", SCHEMA_VERSION + 1))
            && err.contains(&format!("this agent's {SCHEMA_VERSION}")),
        "{err}"
    );
    assert!(std::fs::read(&p).unwrap() == before, "nothing was written");

    // The agent says so and exits, rather than running over it.
    let cfg = d.path().join("stead.toml");
    std::fs::write(
        &cfg,
        format!(
            "node_id = \"upgrade\"\ndata_dir = {:?}\nintentions_dir = \"i\"\napi_listen = \"127.0.0.1:0\"\n",
            d.path()
        ),
    )
    .unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_stead"))
        .args(["run", "--once", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("newer than this agent's"), "{stderr}");
    assert!(std::fs::read(&p).unwrap() == before, "nothing was written");
}

/// An intention 0.3.0 could state digests the same here: a container made
/// by 0.3.0 is not recreated by an upgrade (fields added since are inputs
/// only when set). `check-0.3.0.txt` is what 0.3.0's `stead check` printed
/// for `web.toml`.
#[test]
fn an_intention_of_0_3_0_digests_the_same_so_an_upgrade_recreates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("digest-0.3.0/web.toml"),
        dir.path().join("web.toml"),
    )
    .unwrap();
    let want = std::fs::read_to_string(fixture("digest-0.3.0/check-0.3.0.txt")).unwrap();
    assert_eq!(check_intentions(dir.path()), want.trim_end());
}

/// `stead check` over `dir`'s intentions, offline.
fn check_intentions(dir: &Path) -> String {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("stead.toml");
    std::fs::write(
        &config,
        format!(
            "node_id = \"golden\"\nintentions_dir = {:?}\ndata_dir = {:?}\n",
            dir,
            d.path().join("d")
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stead"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// What 0.4.0 printed for intentions of every runtime field, a live
/// config and a plain module (`tests/fixtures/store-0.4.0/make.sh`): the same
/// digests now, so an upgrade from 0.4.0 recreates nothing.
#[test]
fn intentions_of_0_4_0_digest_the_same_so_an_upgrade_recreates_nothing() {
    let want = std::fs::read_to_string(fixture("store-0.4.0/check-0.4.0.txt")).unwrap();
    assert!(
        want.contains("extra_hosts") && want.contains("healthcheck"),
        "{want}"
    );
    assert_eq!(
        check_intentions(&fixture("store-0.4.0/intentions")),
        want.trim_end()
    );
}

/// The store 0.4.0 wrote running those intentions against the engine
/// (schema 6, with runtime fields and a live record): migrated on open,
/// every intention reads back as this version parses the same file, the
/// applied and live records stand.
#[test]
fn a_store_written_by_0_4_0_is_migrated_and_reads_back_intact() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("stead.redb");
    std::fs::copy(fixture("store-0.4.0.redb"), &p).unwrap();
    let store = Store::open(&p).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let stored = store.intentions().unwrap();
    let dir = fixture("store-0.4.0/intentions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 3);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let want = stead::model::intention::Intention::parse(
            &text,
            stead::model::intention::DocFormat::Toml,
            &f.display().to_string(),
        )
        .unwrap();
        let got = &stored[&want.name];
        assert!(matches!(got.source, Source::File(_)), "{:?}", got.source);
        assert_eq!(*got.intention, want, "{}", f.display());
    }
    let applied = store.all_applied().unwrap();
    for m in ["rt", "live", "web"] {
        let a = &applied[m];
        assert_eq!(a.state, ApplyState::Applied, "{m}");
        assert!(a.container_id.is_some(), "{m}");
    }
    let live = stead::model::names::ModuleName::try_from("live").unwrap();
    let (container, _) = store.live(&live).unwrap().expect("a live record");
    assert_eq!(Some(&container), applied["live"].container_id.as_ref());
}

/// What 0.5.0 printed for its fixture's intentions (every runtime field, a
/// live config, a module reloaded from a registry, a plain one): the same
/// digests now.
#[test]
fn intentions_of_0_5_0_digest_the_same_so_an_upgrade_recreates_nothing() {
    let want = std::fs::read_to_string(fixture("store-0.5.0/check-0.5.0.txt")).unwrap();
    assert!(
        want.contains("networks") && want.contains("volumes"),
        "{want}"
    );
    assert_eq!(
        check_intentions(&fixture("store-0.5.0/intentions")),
        want.trim_end()
    );
}

/// The store 0.5.0 wrote (schema 7): every kind of record reads back.
#[test]
fn a_store_written_by_0_5_0_reads_back_every_kind_of_record() {
    let d = tempfile::tempdir().unwrap();
    let store = open_copy(d.path(), "store-0.5.0.redb");
    let entries = store.entries().unwrap();
    let files: Vec<_> = ["rt", "live", "web", "app"]
        .map(|m| (m, format!("store-0.5.0/intentions/{m}.toml")))
        .to_vec();
    file_intentions_read_back(&entries, &files);
    api_module_reads_back(&entries, "store-0.5.0/api/api-mod.put.json");

    // The plane's module and the document it came in.
    let planed = entries[&module("planed")].record.as_ref().unwrap();
    assert_eq!(planed.source, Source::Plane);
    let (held, contact) = store.plane().unwrap();
    let held = held.expect("a held document");
    assert_eq!(held.revision, 5);
    assert!(held.etag.is_some() && held.expires > held.issued_at);
    assert!(
        contact.at.is_some() && contact.refusal.is_none(),
        "{contact:?}"
    );
    let envelope = store.plane_envelope().unwrap().expect("the envelope");
    assert_eq!(
        envelope,
        std::fs::read(fixture("store-0.5.0/desired.json")).unwrap()
    );

    containers_read_back(&store, &["rt", "live", "web", "app", "api-mod", "planed"]);
    app_reload_reads_back(&store);
    events_read_back(&store);
}

/// A copy of a store fixture in `dir`, opened with this version's code:
/// brought to this version's schema.
fn open_copy(dir: &Path, name: &str) -> Store {
    let p = dir.join("stead.redb");
    std::fs::copy(fixture(name), &p).unwrap();
    let store = Store::open(&p).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    store
}

fn module(s: &str) -> stead::model::names::ModuleName {
    stead::model::names::ModuleName::try_from(s).unwrap()
}

/// Each (module, fixture file) was stated from a file, as this version
/// parses that file.
fn file_intentions_read_back(
    entries: &BTreeMap<stead::model::names::ModuleName, stead::store::Entry>,
    files: &[(&str, String)],
) {
    use stead::model::intention::{DocFormat, Intention};
    for (m, f) in files {
        let f = fixture(f);
        let text = std::fs::read_to_string(&f).unwrap();
        let want = Intention::parse(&text, DocFormat::Toml, &f.display().to_string()).unwrap();
        let got = entries[&module(m)].record.as_ref().expect(m);
        assert!(
            matches!(got.source, Source::File(_)),
            "{m}: {:?}",
            got.source
        );
        assert_eq!(*got.intention, want, "{m}");
    }
}

/// The API's module: its PUT (the fixture file `put`) with the settings
/// its PATCH changed.
fn api_module_reads_back(
    entries: &BTreeMap<stead::model::names::ModuleName, stead::store::Entry>,
    put: &str,
) {
    let api = &entries[&module("api-mod")];
    let mut body: J = serde_json::from_slice(&std::fs::read(fixture(put)).unwrap()).unwrap();
    body["settings"] = json!({ "log.level": "warn", "peer.url": "http://10.0.0.2:8080" });
    let want =
        stead::model::intention::Intention::parse_json(body.to_string().as_bytes(), put).unwrap();
    let rec = api.record.as_ref().unwrap();
    assert_eq!(rec.source, Source::Api);
    assert_eq!(rec.revision, 2, "a PUT and a PATCH");
    assert_eq!(api.effective().as_deref(), Some(&want));
}

/// Applied and observed for every module; `live`'s live record.
fn containers_read_back(store: &Store, modules: &[&str]) {
    let applied = store.all_applied().unwrap();
    let observed = store.all_observed().unwrap();
    for m in modules {
        assert_eq!(applied[*m].state, ApplyState::Applied, "{m}");
        assert!(applied[*m].container_id.is_some(), "{m}");
        assert!(observed.contains_key(*m), "{m}");
    }
    let (container, _) = store.live(&module("live")).unwrap().expect("a live record");
    assert_eq!(Some(&container), applied["live"].container_id.as_ref());
}

/// The reload: app 1.0.0 -> 1.1.0, done; what it landed stands, returned.
fn app_reload_reads_back(store: &Store) -> stead::model::reload::Landed {
    let reloads = store.reloads().unwrap();
    assert_eq!(reloads.len(), 1, "{reloads:?}");
    let r = &reloads[0];
    assert_eq!(
        (r.id, r.status(), r.module.as_deref()),
        (1, stead::model::reload::Status::Done, Some("app"))
    );
    assert_eq!(r.items[0].running_version.as_deref(), Some("1.0.0"));
    assert_eq!(r.items[0].found_version.as_deref(), Some("1.1.0"));
    let updates = store.updates().unwrap();
    let landed = updates[&module("app")].landed.clone().expect("landed");
    assert_eq!(landed.version, "1.1.0");
    assert_eq!(landed.request, 1);
    landed
}

/// The event log, whole.
fn events_read_back(store: &Store) {
    let events = store.events_since(0, usize::MAX).unwrap();
    assert!(events.len() > 10, "{events:?}");
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
}

/// What 0.6.0 printed for its fixture's intentions (every runtime field, a
/// live config, a module reloaded from a registry, one that depends on
/// another, a plain one): the same digests now. The module with a sealed
/// value (`vault.toml`) is not among them: its digest is keyed by the
/// node's `local.key`, which went with the node; the store test reads it
/// back instead.
#[test]
fn intentions_of_0_6_0_digest_the_same_so_an_upgrade_recreates_nothing() {
    let want = std::fs::read_to_string(fixture("store-0.6.0/check-0.6.0.txt")).unwrap();
    assert!(
        want.contains("networks") && want.contains("volumes") && want.contains("dep sha256:"),
        "{want}"
    );
    assert_eq!(
        check_intentions(&fixture("store-0.6.0/intentions")),
        want.trim_end()
    );
}

/// The store 0.6.0 wrote (schema 9): every kind of record reads back.
#[test]
fn a_store_written_by_0_6_0_reads_back_every_kind_of_record() {
    use stead::model::fleet::GroupName;

    let d = tempfile::tempdir().unwrap();
    // Every table this version writes is in it but agent_updates (an
    // update of stead itself needs the launcher).
    {
        use redb::{ReadableDatabase, TableHandle};
        let p = d.path().join("tables.redb");
        std::fs::copy(fixture("store-0.6.0.redb"), &p).unwrap();
        let db = redb::Database::open(&p).unwrap();
        let tx = db.begin_read().unwrap();
        let tables: Vec<String> = tx
            .list_tables()
            .unwrap()
            .map(|t| t.name().to_string())
            .collect();
        for t in [
            "meta",
            "intentions",
            "overlays",
            "applied",
            "observed",
            "events",
            "live",
            "reloads",
            "updates",
            "plane",
            "groups",
            "guard",
            "images",
            "previous",
        ] {
            assert!(tables.iter().any(|n| n == t), "{t}: {tables:?}");
        }
    }
    let store = open_copy(d.path(), "store-0.6.0.redb");
    let fix = |f: &str| std::fs::read(fixture(&format!("store-0.6.0/{f}"))).unwrap();

    // Intentions from files, as this version parses the same files; the
    // sealed value still sealed.
    let entries = store.entries().unwrap();
    let mut files: Vec<_> = ["rt", "live", "web", "app", "dep"]
        .map(|m| (m, format!("store-0.6.0/intentions/{m}.toml")))
        .to_vec();
    files.push(("vault", "store-0.6.0/vault.toml".into()));
    file_intentions_read_back(&entries, &files);
    let vault = &entries[&module("vault")].record.as_ref().unwrap().intention;
    let sealed: Vec<String> = vault.sealed_fields().into_iter().map(|(f, _)| f).collect();
    assert_eq!(sealed, ["env.DB_PASSWORD"]);
    api_module_reads_back(&entries, "store-0.6.0/api/api-mod.put.json");

    // The plane's: the node's own module and its group's, the node's
    // document, the group's and the root, each as fetched.
    let (held, contact) = store.plane().unwrap();
    let held = held.expect("a held document");
    assert!(held.etag.is_some() && held.expires > held.issued_at);
    assert!(
        contact.at.is_some() && contact.refusal.is_none(),
        "{contact:?}"
    );
    for m in ["planed", "grouped"] {
        let r = entries[&module(m)].record.as_ref().expect(m);
        assert_eq!(r.source, Source::Plane, "{m}");
        assert!(r.plane_revision.is_some(), "{m}");
    }
    assert_eq!(store.plane_envelope().unwrap(), Some(fix("desired.json")));
    let groups = store.plane_groups().unwrap();
    let g = &groups[&GroupName::try_from("fixture-g").unwrap()];
    assert_eq!(g.envelope, fix("group-fixture-g.json"));
    assert!(
        g.took.is_some() && g.held.expires > g.held.issued_at,
        "{g:?}"
    );
    assert_eq!(groups.len(), 1);
    assert_eq!(store.plane_root().unwrap(), Some(fix("root.json")));

    containers_read_back(
        &store,
        &[
            "rt", "live", "web", "dep", "app", "vault", "api-mod", "planed", "grouped",
        ],
    );
    let landed = app_reload_reads_back(&store);

    // The images pulled: app's 1.0.0 by a pass, 1.1.0 by the reload, by
    // the digest it landed; app runs 1.1.0 and ran 1.0.0 before.
    let pulled = store.pulled_images().unwrap();
    let first = pulled
        .iter()
        .find(|(_, p)| p.reference.ends_with("/fixture/app:1.0.0"))
        .map(|(id, _)| id.clone())
        .expect("1.0.0 pulled");
    let by_reload = pulled.get(&landed.image_id).expect("1.1.0 pulled");
    assert!(
        by_reload
            .reference
            .ends_with(&format!("/fixture/app@{}", landed.digest)),
        "{by_reload:?} {landed:?}"
    );
    assert!(!by_reload.layers.is_empty(), "{by_reload:?}");
    let history = store.image_history().unwrap();
    let app = &history["app"];
    assert_eq!(
        (app.current.as_str(), app.previous.as_deref()),
        (landed.image_id.as_str(), Some(first.as_str()))
    );
    assert_eq!(store.all_observed().unwrap()["app"].image_id, app.current);
    assert!(history.contains_key("rt"), "{history:?}");

    // The crash guard a clean stop leaves: no start under way, nothing held.
    let guard = store.guard().unwrap();
    assert!(guard.open.is_none() && guard.crashes == 0, "{guard:?}");

    events_read_back(&store);
}

/// An env file 0.5.0 read (it read every env file raw: values verbatim,
/// quotes, blanks and `#` kept) digests the same when its intention names
/// no format, so an upgrade recreates nothing; read by Compose's rules it
/// is a moved input. `check-0.5.0.txt` is what 0.5.0's `stead check`
/// printed for `app.toml` with `app.env` at the path it names.
#[test]
fn an_env_file_of_0_5_0_digests_the_same_and_compose_s_reading_moves_it() {
    let at = Path::new("/tmp/stead-golden-0.5.0-env");
    std::fs::create_dir_all(at).unwrap();
    std::fs::copy(fixture("env-0.5.0/app.env"), at.join("app.env")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("env-0.5.0/app.toml")).unwrap();
    std::fs::write(dir.path().join("app.toml"), &text).unwrap();
    let want = std::fs::read_to_string(fixture("env-0.5.0/check-0.5.0.txt")).unwrap();
    assert_eq!(check_intentions(dir.path()), want.trim_end());

    std::fs::write(
        dir.path().join("app.toml"),
        format!("{text}env_file_format = \"compose\"\n"),
    )
    .unwrap();
    let compose = check_intentions(dir.path());
    let line = |s: &str| {
        s.lines()
            .find(|l| l.contains("env_file:"))
            .map(str::to_string)
            .unwrap()
    };
    assert_ne!(line(&compose), line(&want), "{compose}");
    // Only the env file moved.
    let others = |s: &str| {
        s.lines()
            .skip(1)
            .filter(|l| !l.contains("env_file:"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(others(&compose), others(&want));
}
