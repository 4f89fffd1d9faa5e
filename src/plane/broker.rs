//! The nudge's broker (`[plane.nudge]`): a subscription to one topic on the
//! operator's MQTT broker whose messages are hints that the plane has
//! something new. A hint worth it ([`crate::plane::nudge::judge`], the
//! core's) starts the normal signed poll at a random moment within the
//! jitter window, at most one per window ([`Gate`]); it never carries
//! anything the device takes. A broker that is away is tried again with
//! a capped, jittered back-off, and polling goes on as without one.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::model::mqtt::Connect;
use crate::net::mqtt;
use crate::plane::config::NudgeConfig;
use crate::plane::nudge::{Gate, Worth, judge, read};
use crate::plane::sync::{Nudge, Syncer};
use crate::views::NudgeView;

/// The keep-alive asked of the broker.
pub const KEEP_ALIVE: u16 = 60;
/// The longest wait before a broker that is away is tried again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The first wait; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// Subscribes for as long as the agent runs.
pub async fn run(
    config: NudgeConfig,
    client_id: String,
    syncer: Arc<Syncer>,
    nudges: mpsc::Sender<Nudge>,
) {
    // Said in the plane's status (`GET /v1/plane`'s `nudge`).
    let set = |f: &dyn Fn(&mut NudgeView)| {
        if let Ok(mut s) = syncer.status.lock() {
            f(s.nudge.get_or_insert_with(NudgeView::default));
        }
    };
    set(&|s| {
        s.broker = config.broker.to_string();
        s.topic = config.topic.clone();
    });
    // The plane's client: its CA, its client certificate, its time floor.
    let http = syncer.http();
    let mut gate = Gate::default();
    let start = Instant::now();
    // The moment of the poll a hint asked for, while it is to come.
    let mut pending: Option<Instant> = None;
    let mut failures = 0u32;
    let mut said = String::new();
    loop {
        let password = match &config.password_file {
            None => Ok(None),
            // A secret file, read as the plane's token is: the agent's
            // own, its first line.
            Some(p) => crate::net::auth::read_secret(p).and_then(|text| {
                match text.lines().next().filter(|l| !l.is_empty()) {
                    Some(line) => Ok(Some(line.as_bytes().to_vec())),
                    None => Err(format!("{}: no password in it", p.display())),
                }
            }),
        };
        let subscribed = match password {
            Err(e) => Err(e),
            Ok(password) => {
                let connect = Connect {
                    client_id: &client_id,
                    username: config.username.as_deref(),
                    password: password.as_deref(),
                    keep_alive: KEEP_ALIVE,
                };
                mqtt::subscribe(&config.broker, &http, &connect, &config.topic).await
            }
        };
        let error = match subscribed {
            Err(e) => e,
            Ok(mut sub) => {
                failures = 0;
                said.clear();
                tracing::info!(
                    "plane: nudged by {} (topic {:?})",
                    config.broker,
                    config.topic
                );
                set(&|s| {
                    s.connected = true;
                    s.error = None;
                });
                let e = loop {
                    tokio::select! {
                        m = sub.next() => match m {
                            Err(e) => break e,
                            Ok(m) => {
                                set(&|s| s.hints += 1);
                                if let Some(at) = heard(&m.payload, &syncer, &mut gate, &config, start) {
                                    set(&|s| s.polls += 1);
                                    pending = Some(at);
                                }
                            }
                        },
                        () = sleep_until(pending), if pending.is_some() => {
                            pending = None;
                            poll(&nudges);
                        }
                    }
                };
                sub.close().await;
                e
            }
        };
        set(&|s| {
            s.connected = false;
            s.error = Some(error.clone());
        });
        syncer.metrics.nudge("broker_away");
        if error != said {
            tracing::warn!(
                "plane: the nudge's broker is away ({error}); polling goes on every interval"
            );
            said = error;
        }
        failures = failures.saturating_add(1);
        let cap = FIRST_BACKOFF
            .saturating_mul(1 << failures.saturating_sub(1).min(16))
            .min(MAX_BACKOFF);
        let wait = Duration::from_millis(crate::host::random_u64() % (cap.as_millis() as u64 + 1))
            .max(FIRST_BACKOFF);
        let until = Instant::now() + wait;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(until) => break,
                () = sleep_until(pending), if pending.is_some() => {
                    pending = None;
                    poll(&nudges);
                }
            }
        }
    }
}

/// Until `at`, or for ever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Asks the poller for a poll (what it did is the poller's to say).
fn poll(nudges: &mpsc::Sender<Nudge>) {
    let (tx, _rx) = oneshot::channel();
    let _ = nudges.try_send(tx);
}

/// Takes one hint: judged against what the node holds, then through the
/// gate. The moment of the poll it asks for, if it does.
fn heard(
    payload: &[u8],
    syncer: &Arc<Syncer>,
    gate: &mut Gate,
    config: &NudgeConfig,
    start: Instant,
) -> Option<Instant> {
    let hint = match read(payload) {
        Ok(h) => h,
        Err(e) => {
            tracing::debug!("plane: a nudge is not read: {e}");
            syncer.metrics.nudge("unreadable");
            return None;
        }
    };
    let (node, groups) = syncer.revisions();
    match judge(&hint, node, &groups) {
        Worth::Poll => {}
        Worth::Held => {
            syncer.metrics.nudge("held");
            return None;
        }
        Worth::NotMine => {
            syncer.metrics.nudge("not_mine");
            return None;
        }
    }
    let now = start.elapsed().as_millis() as u64;
    let window = config.jitter.as_millis() as u64;
    let Some(at) = gate.admit(now, window, crate::host::random_u64()) else {
        syncer.metrics.nudge("gated");
        return None;
    };
    syncer.metrics.nudge("poll");
    Some(start + Duration::from_millis(at))
}
