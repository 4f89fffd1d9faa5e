//! Site disruption budgets, pure: how many devices sharing a site may
//! disrupt what they run at once, and the leases that hold them to it.
//!
//! A group document's `budget = {per = "site", max_updating = 1, lease =
//! "10m"}` says: of the group's devices with the same value of the label
//! `per`, at most `max_updating` recreate, restart, land a reload or
//! reboot at once. Each place is an object on the plane's host
//! (`leases/<group>/<per>/<value>/<place>.json`, [`key`]) that a device
//! takes by a conditional PUT (`If-None-Match: *` where there is none,
//! `If-Match` its ETag where one is free: released or expired), renews
//! while it disrupts and waits for what it disrupted to settle, and
//! releases after. A lease lasts `lease` past its last renewal, so a
//! device that died holding one holds its site back that long at most.
//! The times a lease carries are the host's (the device's clock moved by
//! what the host's `Date` says), and are judged by the host's `Date` of
//! the answer that read them, so devices whose clocks disagree still
//! agree on when a lease ended.
//!
//! Owns: the document's [`Budget`], the [`Lease`] as the host keeps it,
//! the device's site ([`Budget::site_of`]) and the places' keys ([`key`]),
//! and the rule that says what a place found taken is ([`judge`]). The
//! agent's `plane/lease.rs` does the writes.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::time::{format_rfc3339, parse_rfc3339};

/// How long a lease lasts past its last renewal when the document does
/// not say.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(600);
/// The shortest lease a document may set: a device renews at a third of
/// it, over a link that may be slow (minutes are the sense of it; seconds
/// are for a lab).
pub const MIN_LEASE: Duration = Duration::from_secs(10);
/// The longest lease a document may set.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);
/// The most devices of one site a budget may let disrupt at once (each is
/// a place a device may try).
pub const MAX_UPDATING: u32 = 16;
/// The most bytes of a lease read from the host.
pub const MAX_LEASE_BYTES: usize = 4096;

/// A group's disruption budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The label whose value is a device's site.
    pub per: String,
    /// How many of a site's devices may disrupt at once.
    pub max_updating: u32,
    /// How long a lease lasts past its last renewal.
    pub lease: Duration,
}

impl Budget {
    /// Reads a document's `budget`; the error names the field at fault.
    pub fn parse_doc(v: &serde_json::Value) -> Result<Budget, (String, String)> {
        let bad = |f: &str, m: &str| Err((format!("budget.{f}"), m.to_string()));
        let o = v
            .as_object()
            .ok_or_else(|| ("budget".to_string(), "not an object".to_string()))?;
        if let Some(k) = o
            .keys()
            .find(|k| !["per", "max_updating", "lease"].contains(&k.as_str()))
        {
            return Err((
                "budget".into(),
                format!("unknown field {k:?} (per, max_updating, lease)"),
            ));
        }
        let per = match o.get("per") {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => return bad("per", "must be the label a site is told by (\"site\")"),
        };
        if let Err(e) = crate::model::facts::check_label(&per, "") {
            return Err(("budget.per".into(), e));
        }
        let max_updating = match o.get("max_updating").and_then(serde_json::Value::as_u64) {
            Some(n) if (1..=u64::from(MAX_UPDATING)).contains(&n) => n as u32,
            _ => return bad("max_updating", &format!("must be 1 to {MAX_UPDATING}")),
        };
        let lease = match o.get("lease") {
            None => DEFAULT_LEASE,
            Some(serde_json::Value::String(s)) => {
                let d = crate::model::time::parse_duration(s)
                    .map_err(|e| ("budget.lease".to_string(), e))?;
                if !(MIN_LEASE..=MAX_LEASE).contains(&d) {
                    return bad("lease", "must be 10s to 24h");
                }
                d
            }
            Some(_) => return bad("lease", "must be a duration (\"10m\")"),
        };
        Ok(Budget {
            per,
            max_updating,
            lease,
        })
    }

    /// As a document writes it.
    pub fn to_doc(&self) -> serde_json::Value {
        serde_json::json!({
            "per": self.per,
            "max_updating": self.max_updating,
            "lease": crate::model::time::format_duration(self.lease),
        })
    }

    /// The device's site under this budget: its label `per`'s value;
    /// `None`, a device without the label, is a site of its own (it has
    /// no one to wait for).
    pub fn site_of<'a>(&self, labels: &'a BTreeMap<String, String>) -> Option<&'a str> {
        labels.get(&self.per).map(String::as_str)
    }
}

/// The key of place `place` (0 to `max_updating - 1`) of `group`'s budget
/// at the site whose label `per` is `value`, under the plane's base:
/// `leases/<group>/<per>/<value>/<place>.json`, each label a path segment
/// of characters no URL or signature encodes. Labels are letters, digits,
/// `-`, `_`, `.` and `/`; `~`, which no label holds, starts an escape: a
/// `/` is `~s`, and the segments a path would resolve (`""`, `.`, `..`)
/// are `~e`, `~d`, `~dd`. Sites that differ are keys that differ.
pub fn key(group: &str, per: &str, value: &str, place: u32) -> String {
    let seg = |s: &str| match s {
        "" => "~e".to_string(),
        "." => "~d".to_string(),
        ".." => "~dd".to_string(),
        s => s.replace('/', "~s"),
    };
    format!("leases/{group}/{}/{}/{place}.json", seg(per), seg(value))
}

/// A lease as the host keeps it (JSON).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The node that holds, or last held, it.
    pub holder: String,
    /// When it was taken, the host's time (seconds since the epoch).
    pub taken: u64,
    /// When it ends unless renewed, the host's time.
    pub expires: u64,
    /// Whether its holder let it go.
    pub released: bool,
}

impl Lease {
    /// As the host keeps it.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::json!({
            "holder": self.holder,
            "taken": format_rfc3339(self.taken),
            "expires": format_rfc3339(self.expires),
            "released": self.released,
        })
        .to_string()
        .into_bytes()
    }

    /// Reads a lease; the error says what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Lease, String> {
        if bytes.len() > MAX_LEASE_BYTES {
            return Err(format!("over {MAX_LEASE_BYTES} bytes"));
        }
        let v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        let text = |f: &str| {
            v.get(f)
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| format!("{f} is not a string"))
        };
        let time = |f: &str| parse_rfc3339(text(f)?).map_err(|e| format!("{f}: {e}"));
        Ok(Lease {
            holder: text("holder")?.to_string(),
            taken: time("taken")?,
            expires: time("expires")?,
            released: v
                .get("released")
                .and_then(serde_json::Value::as_bool)
                .ok_or("released is not true or false")?,
        })
    }
}

/// What a place found taken is, for node `me` at the host's `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Free: released, ended, or unreadable (written by no device); taken
    /// by replacing it (`If-Match` its ETag).
    Free,
    /// This node's own (taken before the agent restarted): renewed, and
    /// held.
    Mine,
    /// Another device's until then.
    Held { holder: String, until: u64 },
}

/// Judges a place found taken: `lease` as read (`Err`: it does not read).
pub fn judge(lease: &Result<Lease, String>, me: &str, now: u64) -> Found {
    match lease {
        Err(_) => Found::Free,
        Ok(l) if l.released || l.expires <= now => Found::Free,
        Ok(l) if l.holder == me => Found::Mine,
        Ok(l) => Found::Held {
            holder: l.holder.clone(),
            until: l.expires,
        },
    }
}

/// Where this device stands with its site's budgets, as the agent's lease
/// keeper says it to the pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Every lease the budgets in force ask is held, and a disruption may
    /// begin until then (the device's clock: [`margin`] before the first
    /// lease ends unless renewed); or none is asked.
    Held { until: u64 },
    /// Not held: why, for people (who holds the site's place and until
    /// when, or what went wrong taking it).
    Not(String),
}

/// How long before a lease ends no disruption begins under it (a renewal
/// not made by then is a lease about to be lost): a third of the lease, at
/// most 30 s.
pub fn margin(lease: Duration) -> u64 {
    (lease.as_secs() / 3).min(30)
}

impl Standing {
    /// Whether a disruption may begin at `now` (the device's clock).
    pub fn lets(&self, now: u64) -> Result<(), String> {
        match self {
            Standing::Held { until } if now < *until => Ok(()),
            Standing::Held { .. } => Err("waits for the site's lease to be renewed".into()),
            Standing::Not(why) => Err(why.clone()),
        }
    }
}

/// The host's time now, from the device's clock and the offset the host's
/// last `Date` showed (host minus device, seconds).
pub fn host_now(device_now: u64, offset: i64) -> u64 {
    (device_now as i64).saturating_add(offset).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_budget_is_read_or_refused_naming_its_field() {
        let ok = |v: serde_json::Value| Budget::parse_doc(&v).unwrap();
        let b = ok(json!({"per": "site", "max_updating": 1}));
        assert_eq!(
            (b.per.as_str(), b.max_updating, b.lease),
            ("site", 1, DEFAULT_LEASE)
        );
        let b = ok(json!({"per": "shop/floor", "max_updating": 3, "lease": "2m"}));
        assert_eq!((b.max_updating, b.lease), (3, Duration::from_secs(120)));
        assert_eq!(Budget::parse_doc(&b.to_doc()).unwrap(), b);
        #[rustfmt::skip]
        let cases = [
            (json!("site"),                                        "budget"),
            (json!({"per": "site"}),                               "budget.max_updating"),
            (json!({"per": "site", "max_updating": 0}),            "budget.max_updating"),
            (json!({"per": "site", "max_updating": 17}),           "budget.max_updating"),
            (json!({"per": "site", "max_updating": -1}),           "budget.max_updating"),
            (json!({"per": "site", "max_updating": "1"}),          "budget.max_updating"),
            (json!({"max_updating": 1}),                           "budget.per"),
            (json!({"per": "", "max_updating": 1}),                "budget.per"),
            (json!({"per": "si te", "max_updating": 1}),           "budget.per"),
            (json!({"per": 3, "max_updating": 1}),                 "budget.per"),
            (json!({"per": "site", "max_updating": 1, "lease": "9s"}), "budget.lease"),
            (json!({"per": "site", "max_updating": 1, "lease": "25h"}), "budget.lease"),
            (json!({"per": "site", "max_updating": 1, "lease": "soon"}), "budget.lease"),
            (json!({"per": "site", "max_updating": 1, "lease": 600}), "budget.lease"),
            (json!({"per": "site", "max_updating": 1, "by": "x"}), "budget"),
        ];
        for (v, field) in cases {
            let (f, why) = Budget::parse_doc(&v).unwrap_err();
            assert_eq!(f, field, "{v}: {why}");
            assert!(!why.is_empty());
        }
    }

    #[test]
    fn a_site_is_its_labels_value_and_each_place_a_key_of_its_own() {
        let b = Budget::parse_doc(&json!({"per": "site", "max_updating": 2})).unwrap();
        let labels = |l: &[(&str, &str)]| {
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            b.site_of(&labels(&[("site", "shop-12"), ("board", "b")])),
            Some("shop-12")
        );
        assert_eq!(b.site_of(&labels(&[("board", "b")])), None);
        #[rustfmt::skip]
        let cases = [
            ("tills", "site", "shop-12",     0, "leases/tills/site/shop-12/0.json"),
            ("tills", "site", "shop-12",     1, "leases/tills/site/shop-12/1.json"),
            ("tills", "site", "eu/berlin/3", 0, "leases/tills/site/eu~sberlin~s3/0.json"),
            ("tills", "a/b",  "",            0, "leases/tills/a~sb/~e/0.json"),
            ("tills", "site", ".",           0, "leases/tills/site/~d/0.json"),
            ("tills", "site", "..",          0, "leases/tills/site/~dd/0.json"),
            ("tills", "site", "/..",         0, "leases/tills/site/~s../0.json"),
            ("tills", "site", "...",         0, "leases/tills/site/.../0.json"),
        ];
        for (group, per, value, place, want) in cases {
            assert_eq!(key(group, per, value, place), want);
        }
        // Values a label may hold, each its own key.
        let values = [
            "", ".", "..", "...", "/", "/.", "/..", "a/b", "a.b", "~", "s", "e", "d", "dd",
        ];
        let keys: std::collections::BTreeSet<String> =
            values.iter().map(|v| key("g", "site", v, 0)).collect();
        assert_eq!(keys.len(), values.len());
    }

    #[test]
    fn a_lease_reads_back_as_written_and_bad_ones_say_why() {
        let l = Lease {
            holder: "till-2".into(),
            taken: 1_800_000_000,
            expires: 1_800_000_600,
            released: false,
        };
        assert_eq!(Lease::parse(&l.to_json()).unwrap(), l);
        #[rustfmt::skip]
        let cases: [(&[u8], &str); 5] = [
            (b"nope",                                                     "not JSON"),
            (br#"{"taken":"2027-01-15T08:00:00Z","expires":"2027-01-15T08:00:00Z","released":false}"#, "holder"),
            (br#"{"holder":"a","taken":"x","expires":"2027-01-15T08:00:00Z","released":false}"#, "taken"),
            (br#"{"holder":"a","taken":"2027-01-15T08:00:00Z","expires":"2027-01-15T08:00:00Z"}"#, "released"),
            (&[b' '; MAX_LEASE_BYTES + 1],                                "over"),
        ];
        for (bytes, says) in cases {
            let e = Lease::parse(bytes).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_place_found_taken_is_free_mine_or_anothers_until_it_ends() {
        let lease = |holder: &str, expires: u64, released: bool| {
            Ok(Lease {
                holder: holder.into(),
                taken: 100,
                expires,
                released,
            })
        };
        let held = |h: &str, until| Found::Held {
            holder: h.into(),
            until,
        };
        #[rustfmt::skip]
        let cases = [
            (lease("b", 700, false), 500, held("b", 700)),
            (lease("b", 700, false), 699, held("b", 700)),
            (lease("b", 700, false), 700, Found::Free),
            (lease("b", 700, false), 9_000, Found::Free),
            (lease("b", 700, true),  500, Found::Free),
            (lease("a", 700, false), 500, Found::Mine),
            (lease("a", 700, false), 800, Found::Free),
            (lease("a", 700, true),  500, Found::Free),
            (Err("not JSON".into()), 500, Found::Free),
        ];
        for (l, now, want) in cases {
            assert_eq!(judge(&l, "a", now), want, "{l:?} at {now}");
        }
        assert_eq!(host_now(1000, -30), 970);
        assert!(Standing::Held { until: 1000 }.lets(999).is_ok());
        assert!(Standing::Held { until: 1000 }.lets(1000).is_err());
        assert_eq!(margin(Duration::from_secs(10)), 3);
        assert_eq!(margin(Duration::from_secs(600)), 30);
        assert_eq!(Standing::Not("x".into()).lets(0), Err("x".into()));
        assert_eq!(host_now(1000, 45), 1045);
        assert_eq!(host_now(10, -30), 0);
    }
}
