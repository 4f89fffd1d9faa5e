//! A clock that signed time keeps honest, against nginx over TLS
//! (certificates made by openssl with libfaketime's clock, so they begin
//! and end when the test says):
//! - the agent's TLS client checks a certificate at max(clock, floor): one
//!   whose notBefore is after the clock is refused without the floor and
//!   taken with it; one that expired before the floor stays refused;
//! - the agent with its clock in 1970 reaches a plane over HTTPS whose
//!   certificate began before its build, adopts the document, and keeps
//!   the document's `issued_at` as its time floor across a restart;
//!   `[clock] step` without CAP_SYS_TIME says so once and changes nothing
//!   (the agent runs under `setpriv`: its clock is libfaketime's, and
//!   stepping it would step this machine's).

mod common;

use std::path::Path;
use std::process::Command;

use common::agent::Agent;
use common::desired::*;
use common::tls::{Certs, Tls};
use common::*;
use stead::host::clock::Floor;
use stead::model::time::format_rfc3339;
use stead::plane::envelope::SecretKey;

/// What a GET of `url` by a client trusting `ca` with `floor` comes to:
/// the status, or why there was none.
fn get(ca: &Path, floor: u64, url: &str) -> Result<u16, String> {
    let http = stead::net::http::Http::at_floor(Some(ca), None, &Floor::at(floor)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(http.send(
        http::Method::GET,
        url.parse().unwrap(),
        &http::HeaderMap::new(),
        std::time::Duration::from_secs(10),
        1 << 20,
    ))
    .map(|a| a.status.as_u16())
    .map_err(|e| e.to_string())
}

#[test]
fn a_certificate_is_checked_at_the_clock_or_the_floor_whichever_is_later() {
    let now = now();
    // Begins in two days: not yet valid by the clock.
    let ahead = Certs::made_at(now + 2 * DAY, 30, "127.0.0.1");
    let host = Tls::start(&ahead);
    let url = format!("{}/hello", host.base());
    let refused = get(&ahead.ca, 0, &url).unwrap_err();
    assert!(refused.contains("TLS"), "{refused}");
    assert!(
        get(&ahead.ca, now + DAY, &url).is_err(),
        "a floor before notBefore"
    );
    assert_eq!(get(&ahead.ca, now + 3 * DAY, &url), Ok(200));
    drop(host);

    // Valid by the clock, expired by the floor: refused with it.
    let today = Certs::made_at(now - DAY, 2, "127.0.0.1");
    let host = Tls::start(&today);
    let url = format!("{}/hello", host.base());
    assert_eq!(get(&today.ca, 0, &url), Ok(200));
    assert_eq!(get(&today.ca, now - DAY / 2, &url), Ok(200));
    let expired = get(&today.ca, now + 2 * DAY, &url).unwrap_err();
    assert!(expired.contains("TLS"), "{expired}");
}

#[test]
fn an_agent_whose_clock_reads_1970_reaches_its_plane_over_tls_and_keeps_the_floor() {
    let build = stead::BUILD_TIME;
    assert!(build > 1_600_000_000, "this build has a time: {build}");
    // A certificate that began an hour before the build (as a CA's
    // issued before it), valid for a year: a 1970 clock is long before it.
    let certs = Certs::made_at(build - 3600, 365, "127.0.0.1");
    let host = Tls::start(&certs);
    let signing = SecretKey::generate().unwrap();
    let n = Node::new("clock1970").with_config(&format!(
        "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"\nca = {:?}\n[clock]\nstep = true",
        host.base(),
        signing.public().to_base64(),
        certs.ca.display().to_string(),
    ));
    let m = n.module("web");
    // Issued a minute after the build (the device's own time is at most a
    // day past its floor), expiring in 30 days.
    let issued = build + 60;
    let mut p = payload(&n, 1, vec![module(&m, "one")]);
    p["issued_at"] = format_rfc3339(issued).into();
    p["expires"] = format_rfc3339(issued + 30 * DAY).into();
    let doc = host.root.join(format!("nodes/{}/desired.json", n.id));
    std::fs::create_dir_all(doc.parent().unwrap()).unwrap();
    std::fs::write(&doc, sign(&signing, &p)).unwrap();
    // `[clock] step` is on, and the agent runs without CAP_SYS_TIME (its
    // clock is libfaketime's: stepping it would step this machine's to the
    // build, backwards). Checked before the agent runs.
    let wrapper = ["setpriv", "--bounding-set", "-sys_time"];
    let o = Command::new(wrapper[0])
        .args(&wrapper[1..])
        .args(["grep", "CapEff", "/proc/self/status"])
        .output()
        .unwrap();
    let eff = String::from_utf8_lossy(&o.stdout);
    let bits = u64::from_str_radix(eff.trim_start_matches("CapEff:").trim(), 16).unwrap();
    assert_eq!(bits & (1 << 25), 0, "setpriv left CAP_SYS_TIME: {eff}");
    let env = common::plane::faketime_env("1970-01-02 00:00:00");
    let agent = Agent::start_with(&n, &wrapper, &env);
    wait_v(&n, &m, "one");
    let plane = plane_state(&agent);
    assert_eq!(plane["held"]["revision"], 1, "{plane}");
    let log = Agent::log(&n);
    assert!(
        log.contains(&format!("clock: time floor {}", format_rfc3339(build))),
        "{log}"
    );
    // Its report says how far its clock is from the host's `Date`: about
    // 1970-01-02 less now.
    let report = host.root.join(format!("nodes/{}/status.json", n.id));
    n.wait_for(30, "a report with the clock's skew", || {
        std::fs::read(&report).ok().is_some_and(|b| {
            common::plane::open_report(&n.id, &b)["clock"]["skew"]
                .as_i64()
                .is_some()
        })
    });
    let r = common::plane::open_report(&n.id, &std::fs::read(&report).unwrap());
    let skew = r["clock"]["skew"].as_i64().unwrap();
    let want = DAY as i64 - now() as i64;
    assert!((skew - want).abs() < 600, "skew {skew}, about {want}: {r}");
    // Asked to step without the capability: said once, nothing else.
    let said = "[clock] step is on but the system clock cannot be set";
    assert_eq!(log.matches(said).count(), 1, "{log}");
    assert!(!log.contains("stepped the system clock"), "{log}");
    drop(agent);

    // Started again, still in 1970: the floor is the document's issue,
    // read from the store before any network access.
    let agent = Agent::start_with(&n, &wrapper, &env);
    n.wait_for(30, "the floor said at start", || {
        Agent::log(&n).contains(&format!("clock: time floor {}", format_rfc3339(issued)))
    });
    let plane = plane_state(&agent);
    assert_eq!(plane["held"]["revision"], 1, "{plane}");
}
