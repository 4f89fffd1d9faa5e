//! What a device is, as it reports it ([`Facts`]: its architecture,
//! operating system, engine and engine version, the labels its config
//! gives it, its memory and free disk), and which devices a group is for
//! ([`When`], a group document's `when`): the device decides, from its own
//! facts, whether it is in the group ([`When::judge`]). A device a group
//! is not for is not in it, as a cohort its rollout has not reached is
//! not on its revision: never an error. Pure; every rule is a line of a
//! table test.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::version::Range;

/// The most labels a device carries, or a `when` asks for.
pub const MAX_LABELS: usize = 64;

/// The engines a device may have, as facts and `when` name them.
pub const ENGINES: [&str; 2] = ["docker", "podman"];

/// What a device is: what it reports, and what a group's `when` is
/// judged against. What it does not know yet (the engine before it
/// answered, the disk before a pass measured it) is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// The CPU architecture, as Rust and `uname -m` name it (`x86_64`,
    /// `aarch64`, `arm`, `riscv64`).
    pub arch: String,
    /// The operating system (`linux`).
    pub os: String,
    /// The engine: `docker` or `podman`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The engine's version as it says it (`26.1.5+dfsg1`, `4.3.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    /// The labels the device's config gives it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Its memory, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Free bytes where the engine keeps its images (else the agent's
    /// data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_free: Option<u64>,
}

impl Facts {
    /// The facts in a line of `stead status`: `aarch64 linux, podman
    /// 4.3.1, 2.0 GiB of memory, 5.1 GiB free, labels board=rev-b`.
    pub fn line(&self) -> String {
        let mut parts = vec![format!("{} {}", self.arch, self.os)];
        parts.push(match (&self.engine, &self.engine_version) {
            (Some(e), Some(v)) => format!("{e} {v}"),
            (Some(e), None) => e.clone(),
            (None, _) => "engine not known yet".into(),
        });
        if let Some(m) = self.memory {
            parts.push(format!("{} of memory", size(m)));
        }
        if let Some(d) = self.disk_free {
            parts.push(format!("{} free", size(d)));
        }
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            parts.push(format!("labels {}", labels.join(" ")));
        }
        parts.join(", ")
    }
}

/// The name an architecture is known by on a device: Docker's and
/// Debian's names (`amd64`, `arm64`, `armhf`) are Rust's.
pub fn arch_name(a: &str) -> Option<&'static str> {
    Some(match a {
        "x86_64" | "amd64" => "x86_64",
        "aarch64" | "arm64" => "aarch64",
        "arm" | "armhf" | "armv7" | "armv7l" | "armel" => "arm",
        "x86" | "i386" | "i686" | "386" => "x86",
        "riscv64" => "riscv64",
        "powerpc64" | "ppc64le" | "ppc64el" => "powerpc64",
        "s390x" => "s390x",
        "loongarch64" | "loong64" => "loongarch64",
        _ => return None,
    })
}

/// A label's key or value: 1 to 63 bytes of letters, digits, `-`, `_`,
/// `.` and `/` (a value may be empty).
pub fn check_label(key: &str, value: &str) -> Result<(), String> {
    let ok = |s: &str| {
        s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
    };
    if key.is_empty() || !ok(key) {
        return Err(format!(
            "label {key:?}: a key is 1 to 63 letters, digits, '-', '_', '.' or '/'"
        ));
    }
    if !ok(value) {
        return Err(format!(
            "label {key}: value {value:?} is not up to 63 letters, digits, '-', '_', '.' or '/'"
        ));
    }
    Ok(())
}

/// Which devices a group is for: every condition set must hold; one not
/// set holds for every device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct When {
    /// One of these architectures (Rust's names).
    pub arch: Vec<&'static str>,
    /// One of these operating systems.
    pub os: Vec<String>,
    /// One of these engines.
    pub engine: Vec<&'static str>,
    /// An engine version within this range.
    pub engine_version: Option<Range>,
    /// Each of these labels, with this value.
    pub labels: BTreeMap<String, String>,
    /// At least this many bytes free, to join.
    pub disk_free_min: Option<u64>,
    /// At least this much memory.
    pub memory_min: Option<u64>,
}

/// Whether a device is in a group, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Member {
    In,
    /// Not in it: why, naming the fact (`its arch is aarch64; the group
    /// is for x86_64`).
    Out(String),
}

/// The fields a `when` may set.
const WHEN_FIELDS: &str = "arch, os, engine, engine_version, labels, disk_free_min, memory_min";

/// A string or a list of 1 to 16 strings.
fn one_or_many(v: serde_json::Value, field: &str) -> Result<Vec<String>, (String, String)> {
    use serde_json::Value as J;
    let bad = || {
        (
            field.to_string(),
            "must be a string or a list of 1 to 16 strings".to_string(),
        )
    };
    let v = match v {
        J::String(s) => vec![s],
        J::Array(a) => a
            .into_iter()
            .map(|v| match v {
                J::String(s) => Ok(s),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(bad()),
    };
    if v.is_empty() || v.len() > 16 {
        return Err(bad());
    }
    Ok(v)
}

/// Bytes as a number or a string with a unit.
fn bytes(v: serde_json::Value, field: &str) -> Result<u64, (String, String)> {
    use crate::model::runtime::{Bytes, parse_bytes};
    let b = match v {
        serde_json::Value::String(s) => Bytes::Text(s),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(n) => Bytes::Number(n),
            None => return Err((field.into(), format!("{n} is not a number of bytes"))),
        },
        _ => {
            return Err((
                field.into(),
                "must be a number of bytes or a string such as \"2GiB\"".into(),
            ));
        }
    };
    match parse_bytes(&b) {
        Ok(n) if n >= 0 => Ok(n as u64),
        Ok(_) => Err((field.into(), "must not be negative".into())),
        Err(e) => Err((field.into(), e)),
    }
}

impl When {
    /// Reads a group document's `when`; the error names the field
    /// (`when.arch`) and what is wrong with it.
    pub fn parse(v: serde_json::Value) -> Result<When, (String, String)> {
        let serde_json::Value::Object(map) = v else {
            return Err(("when".into(), format!("must be an object of {WHEN_FIELDS}")));
        };
        let mut w = When::default();
        for (key, v) in map {
            let field = format!("when.{key}");
            match key.as_str() {
                "arch" => {
                    for (i, a) in one_or_many(v, &field)?.into_iter().enumerate() {
                        let name = arch_name(&a).ok_or_else(|| {
                            (
                                format!("{field}[{i}]"),
                                format!("{a:?} is not an architecture (x86_64, aarch64, arm, riscv64, …; amd64, arm64 and armhf are taken too)"),
                            )
                        })?;
                        if !w.arch.contains(&name) {
                            w.arch.push(name);
                        }
                    }
                }
                "os" => {
                    for (i, o) in one_or_many(v, &field)?.into_iter().enumerate() {
                        if o.is_empty()
                            || o.len() > 32
                            || !o
                                .bytes()
                                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                        {
                            return Err((
                                format!("{field}[{i}]"),
                                format!("{o:?} is not an operating system (linux)"),
                            ));
                        }
                        w.os.push(o);
                    }
                }
                "engine" => {
                    for (i, e) in one_or_many(v, &field)?.into_iter().enumerate() {
                        let name = ENGINES.iter().find(|n| **n == e).ok_or_else(|| {
                            (
                                format!("{field}[{i}]"),
                                format!("{e:?} is not an engine (docker, podman)"),
                            )
                        })?;
                        w.engine.push(name);
                    }
                }
                "engine_version" => {
                    let serde_json::Value::String(r) = v else {
                        return Err((field, "must be a range such as \">=24, <30\"".into()));
                    };
                    w.engine_version = Some(Range::parse(&r).map_err(|e| (field, e))?);
                }
                "labels" => {
                    let serde_json::Value::Object(labels) = v else {
                        return Err((field, "must be an object of labels and their values".into()));
                    };
                    if labels.len() > MAX_LABELS {
                        return Err((field, format!("more than {MAX_LABELS} labels")));
                    }
                    for (k, v) in labels {
                        let serde_json::Value::String(v) = v else {
                            return Err((field, format!("label {k}: its value must be a string")));
                        };
                        check_label(&k, &v).map_err(|e| (field.clone(), e))?;
                        w.labels.insert(k, v);
                    }
                }
                "disk_free_min" => w.disk_free_min = Some(bytes(v, &field)?),
                "memory_min" => w.memory_min = Some(bytes(v, &field)?),
                _ => {
                    return Err((
                        "when".into(),
                        format!("unknown field {key:?}: a when sets {WHEN_FIELDS}"),
                    ));
                }
            }
        }
        Ok(w)
    }

    /// Whether a device with `facts` is in the group. `was_in`: it ran the
    /// group's modules when last composed. A fact the device does not know
    /// yet (its engine, before it answered) keeps a device that was in,
    /// and lets none join; the free disk decides only joining: a device
    /// in the group stays when its disk fills (what runs is never taken
    /// away by a fact that moves by itself).
    pub fn judge(&self, facts: &Facts, was_in: bool) -> Member {
        let out = Member::Out;
        if !self.arch.is_empty() {
            let arch = arch_name(&facts.arch).unwrap_or("");
            if !self.arch.contains(&arch) {
                return out(format!(
                    "its arch is {}; the group is for {}",
                    facts.arch,
                    self.arch.join(", ")
                ));
            }
        }
        if !self.os.is_empty() && !self.os.contains(&facts.os) {
            return out(format!(
                "its os is {}; the group is for {}",
                facts.os,
                self.os.join(", ")
            ));
        }
        for (k, v) in &self.labels {
            match facts.labels.get(k) {
                Some(have) if have == v => {}
                Some(have) => {
                    return out(format!("its label {k} is {have}; the group is for {k}={v}"));
                }
                None => return out(format!("it has no label {k}; the group is for {k}={v}")),
            }
        }
        let unknown = |what: &str| {
            if was_in {
                Member::In
            } else {
                out(format!("{what} is not known yet"))
            }
        };
        if let Some(min) = self.memory_min {
            match facts.memory {
                None => return unknown("its memory"),
                Some(m) if m < min => {
                    return out(format!(
                        "it has {} of memory; the group needs {}",
                        size(m),
                        size(min)
                    ));
                }
                Some(_) => {}
            }
        }
        if !self.engine.is_empty() || self.engine_version.is_some() {
            let Some(engine) = facts.engine.as_deref() else {
                return unknown("its engine");
            };
            if !self.engine.is_empty() && !self.engine.contains(&engine) {
                return out(format!(
                    "its engine is {engine}; the group is for {}",
                    self.engine.join(", ")
                ));
            }
            if let Some(range) = &self.engine_version {
                let said = facts.engine_version.as_deref().unwrap_or("");
                match engine_version(said) {
                    Some(v) if range.req().matches(&v) => {}
                    Some(_) => {
                        return out(format!(
                            "its engine's version is {said}; the group is for {range}"
                        ));
                    }
                    None => {
                        return out(format!(
                            "its engine's version {said:?} is not a version; the group is for {range}"
                        ));
                    }
                }
            }
        }
        if let Some(min) = self.disk_free_min
            && !was_in
        {
            match facts.disk_free {
                None => return unknown("its free disk"),
                Some(f) if f < min => {
                    return out(format!(
                        "it has {} free; the group needs {} to join",
                        size(f),
                        size(min)
                    ));
                }
                Some(_) => {}
            }
        }
        Member::In
    }

    /// Whether the free disk is one of the facts it looks at.
    pub fn looks_at_disk(&self) -> bool {
        self.disk_free_min.is_some()
    }
}

/// An engine's version as a version: its leading `MAJOR[.MINOR[.PATCH]]`
/// (`26.1.5+dfsg1` is 26.1.5, `29.0.0-rc.1` is 29.0.0, `5.4` is 5.4.0).
pub fn engine_version(said: &str) -> Option<semver::Version> {
    let lead: &str = &said[..said
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(said.len())];
    let mut parts = lead.split('.').filter(|p| !p.is_empty());
    let mut next = || -> Option<Option<u64>> {
        match parts.next() {
            None => Some(None),
            Some(p) if p.len() <= 9 => p.parse().ok().map(Some),
            Some(_) => None,
        }
    };
    let major = next()??;
    let minor = next()?.unwrap_or(0);
    let patch = next()?.unwrap_or(0);
    Some(semver::Version::new(major, minor, patch))
}

use crate::model::disk::human as size;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts() -> Facts {
        Facts {
            arch: "aarch64".into(),
            os: "linux".into(),
            engine: Some("podman".into()),
            engine_version: Some("4.3.1".into()),
            labels: [("board".to_string(), "rev-b".to_string())].into(),
            memory: Some(2 << 30),
            disk_free: Some(5 << 30),
        }
    }

    fn when(v: serde_json::Value) -> When {
        When::parse(v).unwrap()
    }

    #[test]
    fn a_group_is_for_the_devices_its_when_names() {
        let f = facts();
        let unknown_engine = Facts {
            engine: None,
            engine_version: None,
            ..facts()
        };
        let low_disk = Facts {
            disk_free: Some(1 << 30),
            ..facts()
        };
        let no_disk = Facts {
            disk_free: None,
            ..facts()
        };
        let debian = Facts {
            engine: Some("docker".into()),
            engine_version: Some("26.1.5+dfsg1".into()),
            ..facts()
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, serde_json::Value, &Facts, bool, Option<&str>)> = vec![
            ("nothing asked: every device", json!({}), &f, false, None),
            ("its arch", json!({"arch": "aarch64"}), &f, false, None),
            ("Docker's name for it", json!({"arch": "arm64"}), &f, false, None),
            ("one of a list", json!({"arch": ["x86_64", "arm64"]}), &f, false, None),
            ("another arch", json!({"arch": "amd64"}), &f, false, Some("its arch is aarch64; the group is for x86_64")),
            ("another arch, even when it was in", json!({"arch": "x86_64"}), &f, true, Some("its arch is aarch64; the group is for x86_64")),
            ("its os", json!({"os": "linux"}), &f, false, None),
            ("another os", json!({"os": "freebsd"}), &f, false, Some("its os is linux; the group is for freebsd")),
            ("its label", json!({"labels": {"board": "rev-b"}}), &f, false, None),
            ("another value", json!({"labels": {"board": "rev-a"}}), &f, false, Some("its label board is rev-b; the group is for board=rev-a")),
            ("a label it lacks", json!({"labels": {"site": "x"}}), &f, false, Some("it has no label site; the group is for site=x")),
            ("its engine", json!({"engine": "podman"}), &f, false, None),
            ("another engine", json!({"engine": "docker"}), &f, false, Some("its engine is podman; the group is for docker")),
            ("an engine not known yet, not in", json!({"engine": "podman"}), &unknown_engine, false, Some("its engine is not known yet")),
            ("an engine not known yet, was in: stays", json!({"engine": "podman"}), &unknown_engine, true, None),
            ("a version within", json!({"engine_version": ">=4.3"}), &f, false, None),
            ("a version below", json!({"engine_version": ">=5"}), &f, false, Some("its engine's version is 4.3.1; the group is for >=5")),
            ("Debian's version", json!({"engine": "docker", "engine_version": ">=26.1, <27"}), &debian, false, None),
            ("a version with no engine known", json!({"engine_version": ">=4"}), &unknown_engine, false, Some("its engine is not known yet")),
            ("enough memory", json!({"memory_min": "2GiB"}), &f, false, None),
            ("too little memory", json!({"memory_min": "3GiB"}), &f, false, Some("it has 2.0 GiB of memory; the group needs 3.0 GiB")),
            ("enough disk", json!({"disk_free_min": "5g"}), &f, false, None),
            ("too little disk to join", json!({"disk_free_min": "2GiB"}), &low_disk, false, Some("it has 1.0 GiB free; the group needs 2.0 GiB to join")),
            ("too little disk, was in: stays", json!({"disk_free_min": "2GiB"}), &low_disk, true, None),
            ("disk not measured yet", json!({"disk_free_min": 1024}), &no_disk, false, Some("its free disk is not known yet")),
            ("every condition", json!({"arch": "arm64", "os": "linux", "engine": ["docker", "podman"], "engine_version": "^4", "labels": {"board": "rev-b"}, "memory_min": "1g", "disk_free_min": "1g"}), &f, false, None),
        ];
        for (what, w, facts, was_in, out) in cases {
            let got = when(w).judge(facts, was_in);
            let want = out.map_or(Member::In, |o| Member::Out(o.to_string()));
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn a_bad_when_is_refused_naming_its_field() {
        #[rustfmt::skip]
        let cases: Vec<(serde_json::Value, &str, &str)> = vec![
            (json!({"arch": "sparc"}), "when.arch[0]", "is not an architecture"),
            (json!({"arch": []}), "when.arch", "1 to 16"),
            (json!({"engine": "containerd"}), "when.engine[0]", "is not an engine"),
            (json!({"engine_version": "newest"}), "when.engine_version", "invalid range"),
            (json!({"os": "Linux!"}), "when.os[0]", "is not an operating system"),
            (json!({"labels": {"": "x"}}), "when.labels", "a key is 1 to 63"),
            (json!({"labels": {"k": "a b"}}), "when.labels", "is not up to 63"),
            (json!({"disk_free_min": "2 parsecs"}), "when.disk_free_min", "unknown unit"),
            (json!({"memory_min": -5}), "when.memory_min", "negative"),
            (json!({"cpu": "fast"}), "when", "unknown field"),
        ];
        for (v, field, says) in cases {
            let (f, e) = When::parse(v.clone()).unwrap_err();
            assert_eq!(f, field, "{v}");
            assert!(e.contains(says), "{v}: {e}");
        }
    }

    #[test]
    fn an_engine_version_is_its_leading_numbers() {
        for (said, want) in [
            ("28.5.1", Some((28, 5, 1))),
            ("26.1.5+dfsg1", Some((26, 1, 5))),
            ("29.0.0-rc.1", Some((29, 0, 0))),
            ("5.4", Some((5, 4, 0))),
            ("20", Some((20, 0, 0))),
            ("", None),
            ("dev", None),
        ] {
            let got = engine_version(said).map(|v| (v.major, v.minor, v.patch));
            assert_eq!(got, want, "{said}");
        }
    }
}
