//! The retry policy and a quiet pass against the fake engine, on a paused
//! clock.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::engine::fake::Fake;
use crate::status::ModuleState;

fn node(files: &[(&str, &str)]) -> (tempfile::TempDir, Arc<Store>, Reconciler) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("i");
    std::fs::create_dir(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let store = Arc::new(Store::open(&d.path().join("s.redb")).unwrap());
    let r = Reconciler::new(
        NodeId::try_from("n").unwrap(),
        dir,
        d.path().join("files"),
        Tuning::default(),
    );
    (d, store, r)
}

#[tokio::test(start_paused = true)]
async fn a_target_that_keeps_failing_is_retried_with_doubling_capped_waits() {
    let (d, store, mut r) = node(&[(
        "m.toml",
        "name = \"m\"\nimage = \"img:1\"\nrestart = \"always\"\n",
    )]);
    let dir = d.path().join("i");
    let engine = Fake::default();
    let t0 = tokio::time::Instant::now();
    // Twenty minutes of one-second heartbeats.
    for _ in 0..1200 {
        r.pass(&engine, &store).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    let at = engine.times("start", t0);
    // Created and started at 0; then started again after 10, 20, 40,
    // 80, 160 s, then every 300 s (the cap), never giving up.
    assert_eq!(at, [0, 10, 30, 70, 150, 310, 610, 910], "{at:?}");
    assert_eq!(
        r.board.lock().unwrap()["m"].state,
        ModuleState::CrashLooping
    );

    // A new target (the intention changed) is acted on at once.
    std::fs::write(
        dir.join("m.toml"),
        "name = \"m\"\nimage = \"img:1\"\nrestart = \"always\"\ncommand = [\"x\"]\n",
    )
    .unwrap();
    let before = engine.actions.lock().unwrap().len();
    r.pass(&engine, &store).await.unwrap();
    let acts = engine.actions.lock().unwrap();
    assert_eq!(
        acts[before..]
            .iter()
            .map(|(a, _)| a.as_str())
            .collect::<Vec<_>>(),
        ["create", "stop", "start", "rename", "rename"],
        "the successor is made beside the old container, which stops only then; \
         the old one is moved aside and the successor takes the module's name"
    );
}

#[tokio::test]
async fn a_quiet_pass_writes_nothing_to_the_store() {
    let files: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .map(|m| (format!("{m}.toml"), format!("name = \"{m}\"\nimage = \"img:1\"\n[config]\npath = \"/c\"\nformat = \"json\"\n")))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (d, store, mut r) = node(&refs);
    let db = d.path().join("s.redb");
    let engine = Fake {
        healthy: true,
        ..Fake::default()
    };
    r.pass(&engine, &store).await.unwrap();
    r.pass(&engine, &store).await.unwrap();
    // redb may write back a page of the last commit when a later read
    // evicts it from its small cache (seen under strace: one pwrite, no
    // sync, during the next pass's reads); that is the commit's write, not
    // the quiet pass's, so the clock starts after one more pass.
    r.pass(&engine, &store).await.unwrap();
    let before = std::fs::metadata(&db).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    for _ in 0..3 {
        let report = r.pass(&engine, &store).await.unwrap();
        assert!(
            report.modules.iter().all(|m| m.action == Action::Unchanged),
            "{:?}",
            report.modules
        );
    }
    assert_eq!(
        std::fs::metadata(&db).unwrap().modified().unwrap(),
        before,
        "a quiet pass committed to the store"
    );
    assert_eq!(
        engine.actions.lock().unwrap().len(),
        6,
        "three creates and three starts, then nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn refused_creates_and_failed_pulls_are_retried_with_backoff() {
    let (_d, store, mut r) = node(&[
        ("a.toml", "name = \"a\"\nimage = \"img:1\"\n"),
        ("b.toml", "name = \"b\"\nimage = \"missing:1\"\n"),
    ]);
    let engine = Fake {
        refuse_create: true,
        ..Fake::default()
    };
    let t0 = tokio::time::Instant::now();
    for _ in 0..200 {
        r.pass(&engine, &store).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(engine.times("refused", t0), [0, 10, 30, 70, 150], "creates");
    assert_eq!(engine.times("pull", t0), [0, 10, 30, 70, 150], "pulls");
    // Said once each, not once a pass with a new countdown.
    let events = store.events_since(0, 1000).unwrap();
    let errors = |m: &str| {
        events
            .iter()
            .filter(|e| e.module.as_deref() == Some(m) && e.kind == EventKind::Error)
            .count()
    };
    assert_eq!(errors("a"), 1, "{events:?}");
    assert_eq!(errors("b"), 1, "{events:?}");
    let board = r.board.lock().unwrap();
    assert_eq!(board["a"].state, ModuleState::Failed, "{:?}", board["a"]);
    assert_eq!(
        board["a"].last_error.as_deref(),
        Some("create failed: engine refused (400): port is already allocated")
    );
    assert_eq!(board["b"].state, ModuleState::Failed);
    let why = board["b"].last_error.as_deref().unwrap();
    assert!(
        why.contains("missing:1") && why.contains("the pull failed"),
        "{why}"
    );
    // When the next attempt is due is a field of its own, not text.
    let at = crate::host::clock::now();
    for m in ["a", "b"] {
        let next = board[m].next_attempt_at.expect("a retry time");
        assert!(next > at && next <= at + 300, "{m}: {next} vs {at}");
    }
}

#[tokio::test]
async fn a_stored_intention_that_does_not_read_holds_its_module_only() {
    let (d, store, mut r) = node(&[("a.toml", "name = \"a\"\nimage = \"img:1\"\n")]);
    let b = crate::model::intention::Intention::parse(
        "name = \"b\"\nimage = \"img:1\"\n",
        crate::model::intention::DocFormat::Toml,
        "b",
    )
    .unwrap();
    store
        .put_intention(&crate::store::IntentionRecord::new(
            crate::store::Source::Api,
            1,
            b,
        ))
        .unwrap();
    let engine = Fake::default();
    r.pass(&engine, &store).await.unwrap();
    let made = engine.containers.lock().unwrap().len();
    assert_eq!(made, 2);
    // b's record no longer reads (a check a newer agent added, a damaged
    // page): the pass goes on for a, and b's container is left alone.
    drop(store);
    {
        let db = redb::Database::create(d.path().join("s.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(crate::store::INTENTIONS)
            .unwrap()
            .insert("b", [9u8, 9, 9].as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let store = Arc::new(Store::open(&d.path().join("s.redb")).unwrap());
    std::fs::write(
        d.path().join("i/a.toml"),
        "name = \"a\"\nimage = \"img:1\"\ncommand = [\"x\"]\n",
    )
    .unwrap();
    let report = r.pass(&engine, &store).await.unwrap();
    let action = |m: &str| {
        report
            .modules
            .iter()
            .find(|r| r.module == m)
            .map(|r| r.action)
    };
    assert_eq!(action("a"), Some(Action::Recreated), "{:?}", report.modules);
    assert_eq!(action("b"), Some(Action::Held), "{:?}", report.modules);
    let b_report = report.modules.iter().find(|r| r.module == "b").unwrap();
    assert!(
        b_report
            .error
            .as_deref()
            .unwrap_or("")
            .contains("does not read"),
        "{b_report:?}"
    );
    assert_eq!(
        engine.containers.lock().unwrap().len(),
        2,
        "b's container stays"
    );
}

#[tokio::test]
async fn a_quiet_pass_makes_no_target_and_a_moved_input_makes_only_its_own() {
    let host = tempfile::tempdir().unwrap();
    let env = host.path().join("a.env");
    std::fs::write(&env, "A=1\n").unwrap();
    let model = host.path().join("model");
    std::fs::create_dir(&model).unwrap();
    std::fs::write(model.join("w.bin"), "w1").unwrap();
    let a = format!("name = \"a\"\nimage = \"img:1\"\nenv_files = [{env:?}]\n");
    let b = format!(
        "name = \"b\"\nimage = \"img:1\"\n[[mounts]]\nsource = {model:?}\ntarget = \"/model\"\nread_only = true\n"
    );
    let c = "name = \"c\"\nimage = \"img:1\"\n[config]\npath = \"/c\"\nformat = \"json\"\ndefaults = { x = 1 }\n";
    let (d, store, mut r) = node(&[("a.toml", &a), ("b.toml", &b), ("c.toml", c)]);
    let engine = Fake {
        healthy: true,
        ..Fake::default()
    };
    r.pass(&engine, &store).await.unwrap();
    assert_eq!(r.made.makes(), 3);
    for _ in 0..3 {
        r.pass(&engine, &store).await.unwrap();
    }
    assert_eq!(r.made.makes(), 3, "a quiet pass made a target again");

    // Each input moved makes its own module's target again, and only it;
    // the module is recreated on it.
    let dir = d.path().join("i");
    type Move<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let moves: Vec<Move> = vec![
        ("a", Box::new(|| std::fs::write(&env, "A=2\n").unwrap())),
        (
            "b",
            Box::new(|| std::fs::write(model.join("w.bin"), "w2").unwrap()),
        ),
        (
            "c",
            Box::new(|| std::fs::write(dir.join("c.toml"), c.replace("x = 1", "x = 2")).unwrap()),
        ),
    ];
    for (module, moved) in moves {
        // Past the racy-clean window of the stat that reads the move.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        moved();
        let before = r.made.makes();
        let report = r.pass(&engine, &store).await.unwrap();
        assert_eq!(r.made.makes(), before + 1, "{module}");
        for m in &report.modules {
            let want = if m.module == module {
                Action::Recreated
            } else {
                Action::Unchanged
            };
            assert_eq!(m.action, want, "{module} moved: {:?}", report.modules);
        }
    }
}

#[tokio::test]
async fn a_dependency_gates_creation_and_a_cycle_or_another_source_holds_naming_the_modules() {
    let (_d, store, mut r) = node(&[
        ("db.toml", "name = \"db\"\nimage = \"img:1\"\n"),
        (
            "app.toml",
            "name = \"app\"\nimage = \"img:1\"\ndepends_on = [\"db\"]\n",
        ),
        (
            "ghost.toml",
            "name = \"ghost\"\nimage = \"img:1\"\ndepends_on = [\"nobody\"]\n",
        ),
        (
            "a.toml",
            "name = \"a\"\nimage = \"img:1\"\ndepends_on = [\"b\"]\n",
        ),
        (
            "b.toml",
            "name = \"b\"\nimage = \"img:1\"\ndepends_on = [\"a\"]\n",
        ),
        (
            "mixed.toml",
            "name = \"mixed\"\nimage = \"img:1\"\ndepends_on = [\"api-mod\"]\n",
        ),
    ]);
    let api = crate::model::intention::Intention::parse(
        "name = \"api-mod\"\nimage = \"img:1\"\n",
        crate::model::intention::DocFormat::Toml,
        "api-mod",
    )
    .unwrap();
    store
        .put_intention(&crate::store::IntentionRecord::new(
            crate::store::Source::Api,
            1,
            api,
        ))
        .unwrap();
    let engine = Fake {
        healthy: true,
        ..Fake::default()
    };
    let said = |report: &PassReport, m: &str| {
        let r = report.modules.iter().find(|r| r.module == m).unwrap();
        (r.action, r.error.clone().unwrap_or_default())
    };
    // The first pass: db has no container yet, so app waits for it.
    let report = r.pass(&engine, &store).await.unwrap();
    let (action, why) = said(&report, "app");
    assert_eq!(action, Action::Depending, "{why}");
    assert!(why.contains("waits for module db"), "{why}");
    assert_eq!(r.board.lock().unwrap()["app"].state, ModuleState::Waiting);
    let (action, why) = said(&report, "ghost");
    assert_eq!(action, Action::Depending);
    assert!(
        why.contains("module nobody, which no intention states"),
        "{why}"
    );
    for m in ["a", "b"] {
        let (action, why) = said(&report, m);
        assert_eq!(action, Action::Held, "{m}");
        assert!(
            why.contains("makes a cycle: a → b → a") || why.contains("makes a cycle: b → a → b"),
            "{why}"
        );
    }
    let (action, why) = said(&report, "mixed");
    assert_eq!(action, Action::Held);
    assert!(
        why.contains("module api-mod, which the API states"),
        "{why}"
    );
    // db runs now: app is made on the next pass, and only then.
    assert_eq!(said(&report, "db").0, Action::Created);
    let report = r.pass(&engine, &store).await.unwrap();
    assert_eq!(
        said(&report, "app").0,
        Action::Created,
        "{:?}",
        said(&report, "app")
    );
    let names: Vec<String> = engine
        .containers
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.labels.module.clone().unwrap_or_default())
        .collect();
    for m in ["ghost", "a", "b", "mixed"] {
        assert!(!names.iter().any(|n| n == m), "{m} was made: {names:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn what_the_engine_says_of_a_module_is_masked_of_the_values_opened_for_it() {
    use crate::model::sealed::{Binding, seal};
    let key = crate::model::seal::LocalKey::from_bytes([7; 32]);
    let at = Binding {
        node: "n",
        module: "m",
        field: "env.PW",
    };
    let value = b"hunter2 \"quoted\"\nnext line";
    let sealed = seal(
        &key.identity().recipient(),
        &at,
        value,
        &[1; crate::model::age::RANDOM_LEN],
    )
    .unwrap();
    let (_d, store, mut r) = node(&[(
        "m.toml",
        &format!(
            "name = \"m\"\nimage = \"img:1\"\nenv = {{ PW = {{ sealed = \"{sealed}\" }}, MODE = \"prod\" }}\n"
        ),
    )]);
    r.seal_stated_with(key);
    let engine = Fake {
        refuse_create: true,
        quote_env: true,
        ..Fake::default()
    };
    r.pass(&engine, &store).await.unwrap();
    let error = r.board.lock().unwrap()["m"].last_error.clone();
    assert_eq!(
        error.as_deref(),
        Some("create failed: engine refused (400): invalid env: MODE=prod PW=(sealed)")
    );
    let events = format!("{:?}", store.events_since(0, 1000).unwrap());
    assert!(
        events.contains("PW=(sealed)") && !events.contains("hunter2"),
        "{events}"
    );
}
