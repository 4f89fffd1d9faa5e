//! The lease keeper: takes, renews and releases this device's places in
//! its sites' disruption budgets ([`crate::model::budget`]) on the plane's
//! host, by conditional PUTs with the host's credentials, as the pass asks
//! (`want`), and says where the device stands (`standing`): held until
//! when, or what it waits for. The pass asks before it disrupts, and
//! stops asking once what it disrupted settled; the keeper never
//! disrupts anything itself.
//!
//! A place is taken with `If-None-Match: *` (none there) or `If-Match` its
//! ETag (one released or ended), renewed with `If-Match` the ETag of the
//! keeper's last write at a third of the lease, released with `If-Match`
//! too: a write that lost a race is refused by the host (412), never
//! merged. A device in several groups with budgets takes their places in
//! the groups' order and lets go of those it took when one is not free,
//! so no two devices each hold half of what the other needs. An agent
//! started again finds its own places by their holder (a lease taken
//! before a crash or a reboot): kept if the pass asks, released if not.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use tokio::sync::{Notify, watch};

use crate::model::budget::{Found, Lease, MAX_LEASE_BYTES, Standing, host_now, judge, key, margin};
use crate::model::maintenance::InForce;
use crate::model::names::NodeId;
use crate::net::http::{Http, Redirects};

/// How long one request to the host may take.
const LIMIT: Duration = Duration::from_secs(30);
/// How soon a device waiting for a place looks again, at most (and at
/// most a quarter of the lease: a place released is taken soon after).
const LOOK_AGAIN: Duration = Duration::from_secs(15);
/// The first wait after the host failed, doubled to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// One place of one budget, as this device would take it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Place {
    /// `group g, site=v`, for people.
    said: String,
    /// The keys of the budget's places.
    urls: Vec<String>,
    /// How long a lease lasts.
    lease: Duration,
}

/// A place held: its URL, the ETag of the keeper's last write, and when
/// the lease ends (the host's time).
#[derive(Clone, Debug)]
struct Held {
    url: String,
    etag: String,
    expires: u64,
    lease: Duration,
}

/// The keeper's parts.
pub struct Keeper {
    pub node: NodeId,
    /// The plane's base URL (the places are under `<base>/leases/`).
    pub base: String,
    /// The plane host's client (its credentials).
    pub http: Http,
    /// The device's labels (its site under each budget).
    pub labels: std::collections::BTreeMap<String, String>,
    /// The documents' budgets.
    pub in_force: watch::Receiver<InForce>,
    /// Whether the pass wants to disrupt (or waits for what it disrupted
    /// to settle).
    pub want: watch::Receiver<bool>,
    /// Where this device stands, for the pass.
    pub standing: watch::Sender<Standing>,
    /// The agent's loop, woken when a lease is taken.
    pub wake: Arc<Notify>,
}

/// What a write or a read of a place came to.
enum Wrote {
    /// Written: its new ETag.
    Ok(String),
    /// Refused: the place is not as asked (412, or a concurrent write's
    /// 409), or gone (404 on `If-Match`).
    Lost,
}

impl Keeper {
    /// The places the budgets in force ask of this device: one of each
    /// budget whose site the device is at, in the groups' order.
    fn places(&self) -> Vec<Place> {
        let Some(said) = self.in_force.borrow().clone() else {
            return Vec::new();
        };
        let base = self.base.trim_end_matches('/');
        let mut places: Vec<Place> = said
            .budgets
            .iter()
            .filter_map(|(group, b)| {
                let site = b.site_of(&self.labels)?;
                Some(Place {
                    said: format!("group {group}, {}={site}", b.per),
                    urls: (0..b.max_updating)
                        .map(|i| format!("{base}/{}", key(group, &b.per, site, i)))
                        .collect(),
                    lease: b.lease,
                })
            })
            .collect();
        crate::model::sort::sort_by(&mut places, |a, b| a.said.cmp(&b.said));
        places
    }

    /// Whether the documents' budgets are known (read): with none that
    /// asks a place of this device (none in force, or it has no label
    /// they count it by: a site of its own), it may disrupt at will.
    fn budgets_known(&self) -> bool {
        self.in_force.borrow().is_some()
    }

    /// Runs until the agent stops.
    pub async fn run(mut self) {
        let http = self.http.with_redirects(Redirects::Never);
        let mut held: Vec<Held> = Vec::new();
        // Host minus device, seconds, as the host's last `Date` said.
        let mut offset: i64 = 0;
        let mut swept = false;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let places = self.places();
            let want = *self.want.borrow_and_update();
            let mut next: Option<Duration> = None;
            // Places held for budgets no longer in force (or moved) go.
            let keep: Vec<&str> = places
                .iter()
                .flat_map(|p| p.urls.iter().map(String::as_str))
                .collect();
            let (stay, gone): (Vec<Held>, Vec<Held>) = held
                .into_iter()
                .partition(|h| keep.contains(&h.url.as_str()));
            held = stay;
            for h in gone {
                let _ = release(&http, &self.node, &h, &mut offset).await;
            }
            let outcome: Result<(), String> = if places.is_empty() {
                if self.budgets_known() {
                    self.stand(Standing::Held { until: u64::MAX });
                }
                Ok(())
            } else if !want {
                // Not wanted: what is held goes, and at the first look
                // what an agent before this one held too.
                let mut r = Ok(());
                if !swept {
                    match sweep(&http, &self.node, &places, &mut offset).await {
                        Ok(found) => {
                            held.extend(found);
                            swept = true;
                        }
                        Err(e) => r = Err(e),
                    }
                }
                for h in std::mem::take(&mut held) {
                    if let Err(e) = release(&http, &self.node, &h, &mut offset).await {
                        r = Err(e);
                        held.push(h);
                    }
                }
                self.stand(Standing::Not(
                    "waits for the site's lease: asked of the plane's host".into(),
                ));
                r
            } else {
                swept = true;
                self.take_or_renew(&http, &places, &mut held, &mut offset, &mut next)
                    .await
            };
            let wait = match outcome {
                Ok(()) => {
                    backoff = FIRST_BACKOFF;
                    next
                }
                Err(e) => {
                    tracing::warn!("site budget: {e}");
                    if want {
                        self.stand(Standing::Not(format!("waits for the site's lease: {e}")));
                    }
                    let b = backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    Some(b)
                }
            };
            let sleep = async {
                match wait {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = self.want.changed() => if r.is_err() { return },
                r = self.in_force.changed() => if r.is_err() { return },
                () = sleep => {}
            }
        }
    }

    /// Says where the device stands; a change wakes the pass, which goes
    /// on once held, or says what it waits for (who holds the site's place
    /// and until when) while not.
    fn stand(&self, s: Standing) {
        let changed = self.standing.send_if_modified(|old| {
            if *old == s {
                false
            } else {
                *old = s;
                true
            }
        });
        if changed {
            self.wake.notify_one();
        }
    }

    /// Takes each place not held, in order, or renews those held at a
    /// third of their lease; sets when to look again (`next`).
    async fn take_or_renew(
        &self,
        http: &Http,
        places: &[Place],
        held: &mut Vec<Held>,
        offset: &mut i64,
        next: &mut Option<Duration>,
    ) -> Result<(), String> {
        for p in places {
            if let Some(h) = held.iter_mut().find(|h| p.urls.contains(&h.url)) {
                let now = host_now(crate::host::clock::now(), *offset);
                let renew_at = h.expires.saturating_sub(2 * p.lease.as_secs() / 3);
                if now < renew_at || renew(http, &self.node, h, offset).await? {
                    continue;
                }
                // Lost (it ended, and another took it): taken again, or
                // waited for, as any place not held.
                let url = h.url.clone();
                held.retain(|h| h.url != url);
                tracing::warn!("site budget ({}): the lease was lost", p.said);
            }
            match take(http, &self.node, p, offset).await? {
                Ok(h) => {
                    tracing::info!("site budget ({}): lease taken", p.said);
                    held.push(h);
                }
                Err(why) => {
                    // Not free: let go of the places taken, so no other
                    // device waits on them while this one waits.
                    for h in std::mem::take(held) {
                        let _ = release(http, &self.node, &h, offset).await;
                    }
                    self.stand(Standing::Not(why.text));
                    let until = why.until.map(|u| {
                        Duration::from_secs(
                            u.saturating_sub(host_now(crate::host::clock::now(), *offset)) + 1,
                        )
                    });
                    let look = LOOK_AGAIN.min(p.lease / 4);
                    *next = Some(until.map_or(look, |u| u.min(look)));
                    return Ok(());
                }
            }
        }
        // All held: until the earliest ends, in the device's time; the
        // next renewal is a third of a lease after the last.
        let now_dev = crate::host::clock::now();
        let until = held
            .iter()
            .map(|h| ((h.expires as i64 - *offset).max(0) as u64).saturating_sub(margin(h.lease)))
            .min()
            .unwrap_or(u64::MAX);
        self.stand(Standing::Held { until });
        let now = host_now(now_dev, *offset);
        let renew_in = held
            .iter()
            .map(|h| {
                h.expires
                    .saturating_sub(2 * h.lease.as_secs() / 3)
                    .saturating_sub(now)
            })
            .min()
            .unwrap_or(60);
        *next = Some(Duration::from_secs(renew_in.max(1)));
        Ok(())
    }
}

/// Why a place could not be taken, for people, and when it may be free
/// (the host's time).
struct Busy {
    text: String,
    until: Option<u64>,
}

/// Takes one of a budget's places: the first free one, or this node's own.
/// `Ok(Err(busy))`: all are another's.
async fn take(
    http: &Http,
    node: &NodeId,
    p: &Place,
    offset: &mut i64,
) -> Result<Result<Held, Busy>, String> {
    let me = node.as_str();
    let mut holders: Vec<(String, u64)> = Vec::new();
    for url in &p.urls {
        let lease = |offset: i64| {
            let now = host_now(crate::host::clock::now(), offset);
            Lease {
                holder: me.to_string(),
                taken: now,
                expires: now + p.lease.as_secs(),
                released: false,
            }
        };
        let l = lease(*offset);
        let held = |etag: String, l: &Lease| Held {
            url: url.clone(),
            etag,
            expires: l.expires,
            lease: p.lease,
        };
        if let Wrote::Ok(etag) = put(http, url, None, &l, offset).await? {
            return Ok(Ok(held(etag, &l)));
        }
        // There is one: whose, and until when.
        let Some((found, etag, now)) = get(http, url, offset).await? else {
            // Gone since: tried again at the next look.
            continue;
        };
        match judge(&found, me, now) {
            Found::Held { holder, until } => holders.push((holder, until)),
            Found::Free | Found::Mine => {
                // Mine keeps when it was taken.
                let mut l = lease(*offset);
                if let (Found::Mine, Ok(f)) = (judge(&found, me, now), &found) {
                    l.taken = f.taken;
                }
                if let Wrote::Ok(etag) = put(http, url, Some(&etag), &l, offset).await? {
                    return Ok(Ok(held(etag, &l)));
                }
            }
        }
    }
    let until = holders.iter().map(|(_, u)| *u).min();
    let who: Vec<String> = holders
        .iter()
        .map(|(h, u)| format!("{h} until {}", crate::model::time::format_rfc3339(*u)))
        .collect();
    Ok(Err(Busy {
        text: if who.is_empty() {
            format!(
                "waits for the site's budget ({}): its places changed hands as it looked",
                p.said
            )
        } else {
            format!(
                "waits for the site's budget ({}: {} updating at once): {}",
                p.said,
                p.urls.len(),
                who.join(", ")
            )
        },
        until,
    }))
}

/// Renews a place held: `false`, it was lost (another took it once it
/// ended).
async fn renew(http: &Http, node: &NodeId, h: &mut Held, offset: &mut i64) -> Result<bool, String> {
    let now = host_now(crate::host::clock::now(), *offset);
    let l = Lease {
        holder: node.as_str().to_string(),
        taken: now,
        expires: now + h.lease.as_secs(),
        released: false,
    };
    match put(http, &h.url, Some(&h.etag), &l, offset).await? {
        Wrote::Ok(etag) => {
            h.etag = etag;
            h.expires = l.expires;
            Ok(true)
        }
        Wrote::Lost => Ok(false),
    }
}

/// Releases a place held (a place lost meanwhile is left as it is).
async fn release(http: &Http, node: &NodeId, h: &Held, offset: &mut i64) -> Result<(), String> {
    let now = host_now(crate::host::clock::now(), *offset);
    let l = Lease {
        holder: node.as_str().to_string(),
        taken: now,
        expires: now,
        released: true,
    };
    put(http, &h.url, Some(&h.etag), &l, offset).await?;
    tracing::info!(
        "site budget: lease released ({})",
        crate::net::shown(&h.url)
    );
    Ok(())
}

/// The places of `places` this node holds (an agent before this one took
/// them).
async fn sweep(
    http: &Http,
    node: &NodeId,
    places: &[Place],
    offset: &mut i64,
) -> Result<Vec<Held>, String> {
    let mut mine = Vec::new();
    for p in places {
        for url in &p.urls {
            if let Some((Ok(l), etag, now)) = get(http, url, offset).await?
                && judge(&Ok(l.clone()), node.as_str(), now) == Found::Mine
            {
                mine.push(Held {
                    url: url.clone(),
                    etag,
                    expires: l.expires,
                    lease: p.lease,
                });
            }
        }
    }
    Ok(mine)
}

/// Notes the host's clock from an answer's `Date`.
fn note_date(headers: &HeaderMap, offset: &mut i64) -> Option<u64> {
    let date = headers
        .get(http::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::model::time::parse_http_date)?;
    *offset = date as i64 - crate::host::clock::now() as i64;
    Some(date)
}

/// One conditional PUT of a lease: `If-Match` the ETag given, else
/// `If-None-Match: *`.
async fn put(
    http: &Http,
    url: &str,
    if_match: Option<&str>,
    l: &Lease,
    offset: &mut i64,
) -> Result<Wrote, String> {
    let shown = crate::net::shown(url);
    let uri: http::Uri = url.parse().map_err(|_| format!("{shown}: not a URL"))?;
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    match if_match {
        Some(e) => {
            let v =
                HeaderValue::from_str(e).map_err(|_| format!("{shown}: an ETag unfit to send"))?;
            headers.insert(http::header::IF_MATCH, v);
        }
        None => {
            headers.insert(http::header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        }
    }
    let a = http
        .send_body(
            Method::PUT,
            uri,
            &headers,
            Bytes::from(l.to_json()),
            LIMIT,
            64 * 1024,
        )
        .await
        .map_err(|t| format!("PUT {shown}: {t}"))?;
    note_date(&a.headers, offset);
    match a.status {
        s if s.is_success() => a
            .headers
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(|e| Wrote::Ok(e.to_string()))
            .ok_or_else(|| format!("PUT {shown}: the host gave no ETag: it cannot keep a budget")),
        StatusCode::PRECONDITION_FAILED | StatusCode::CONFLICT => Ok(Wrote::Lost),
        StatusCode::NOT_FOUND if if_match.is_some() => Ok(Wrote::Lost),
        s => Err(format!("PUT {shown}: HTTP {s}")),
    }
}

/// Reads a place: its lease (or why it does not read), its ETag, and the
/// host's time of the answer; `None`, there is none.
async fn get(
    http: &Http,
    url: &str,
    offset: &mut i64,
) -> Result<Option<(Result<Lease, String>, String, u64)>, String> {
    let shown = crate::net::shown(url);
    let uri: http::Uri = url.parse().map_err(|_| format!("{shown}: not a URL"))?;
    let a = http
        .send(Method::GET, uri, &HeaderMap::new(), LIMIT, MAX_LEASE_BYTES)
        .await;
    let a = a.map_err(|t| format!("GET {shown}: {t}"))?;
    let now = note_date(&a.headers, offset)
        .unwrap_or_else(|| host_now(crate::host::clock::now(), *offset));
    match a.status {
        StatusCode::NOT_FOUND => Ok(None),
        s if s.is_success() => {
            let etag = a
                .headers
                .get(http::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    format!("GET {shown}: the host gave no ETag: it cannot keep a budget")
                })?
                .to_string();
            Ok(Some((Lease::parse(&a.body), etag, now)))
        }
        s => Err(format!("GET {shown}: HTTP {s}")),
    }
}
