//! One Compose field at a time, taken apart with an error naming the
//! key: scalars as Compose reads them (a number or boolean where a string
//! is meant, `yes` and `no`), lists and mappings, commands, ports (short
//! and long syntax, ranges), volumes (short and long syntax), restart
//! policies and durations. Pure.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::Value as J;

use super::text;
use crate::model::names::trailing_slash_dropped;
use crate::model::time::format_duration;

/// A failure: the key (with its place) and why.
pub(super) type Fail = (String, String);

/// A failure of `key`, as a `Result`.
pub(super) fn fail<T>(key: &str, why: impl Into<String>) -> Result<T, Fail> {
    Err((key.to_string(), why.into()))
}

/// The lexical normal form of an absolute path: `.` dropped, `..` taken
/// back (never above `/`).
pub(super) fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A scalar as a string (a number or boolean as written).
pub(super) fn scalar(key: &str, v: &J) -> Result<String, Fail> {
    match v {
        J::String(s) => Ok(s.clone()),
        J::Number(n) => Ok(n.to_string()),
        J::Bool(b) => Ok(b.to_string()),
        _ => fail(key, "must be a string"),
    }
}

/// `network_mode`: bridge, host or none (stead's); another container's
/// namespace or a network by name is refused with the reason.
pub(super) fn network_mode(key: &str, v: &J) -> Result<String, Fail> {
    let mode = scalar(key, v)?;
    match mode.as_str() {
        "host" | "none" | "bridge" | "default" => Ok(mode),
        m if m.starts_with("service:") || m.starts_with("container:") => fail(
            key,
            format!(
                "{m:?}: stead does not run a container in another's network namespace (network_mode is bridge, host or none)"
            ),
        ),
        m => fail(
            key,
            format!(
                "{m:?}: stead's network_mode is bridge, host or none; join a user-defined network with `networks`"
            ),
        ),
    }
}

/// A boolean, also as Compose's strings (`yes`, `no`, `on`, `off`, …).
pub(super) fn bool_of(key: &str, v: &J) -> Result<bool, Fail> {
    match v {
        J::Bool(b) => Ok(*b),
        J::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "yes" | "y" | "on" => Ok(true),
            "false" | "no" | "n" | "off" => Ok(false),
            _ => fail(key, "must be true or false"),
        },
        _ => fail(key, "must be true or false"),
    }
}

/// A whole number, also as a string (after interpolation).
pub(super) fn int_of(key: &str, v: &J) -> Result<i64, Fail> {
    match v {
        J::Number(n) => n.as_i64().ok_or(()),
        J::String(s) => s.trim().parse().map_err(|_| ()),
        _ => Err(()),
    }
    .or_else(|()| fail(key, "must be a whole number"))
}

/// A list.
pub(super) fn list<'v>(key: &str, v: &'v J) -> Result<&'v Vec<J>, Fail> {
    match v {
        J::Array(a) => Ok(a),
        _ => fail(key, "must be a list"),
    }
}

/// A list, or one item where Compose takes one.
pub(super) fn list_or_one(key: &str, v: &J) -> Result<Vec<J>, Fail> {
    match v {
        J::Array(a) => Ok(a.clone()),
        J::String(_) => Ok(vec![v.clone()]),
        _ => fail(key, "must be a list or a string"),
    }
}

/// A list of scalars, as strings.
pub(super) fn strings(key: &str, v: &J) -> Result<Vec<String>, Fail> {
    list(key, v)?
        .iter()
        .enumerate()
        .map(|(i, x)| scalar(&format!("{key}[{i}]"), x))
        .collect()
}

/// A list of scalars, or one, as strings.
pub(super) fn strings_or_one(key: &str, v: &J) -> Result<Vec<String>, Fail> {
    list_or_one(key, v)?
        .iter()
        .enumerate()
        .map(|(i, x)| scalar(&format!("{key}[{i}]"), x))
        .collect()
}

/// `KEY=VALUE` items of a list, or a mapping; a key without a value
/// (`KEY` in a list, `KEY:` in a mapping) is `None`.
pub(super) fn pairs(key: &str, v: &J, sep: char) -> Result<Vec<(String, Option<String>)>, Fail> {
    match v {
        J::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let s = scalar(&format!("{key}[{i}]"), x)?;
                Ok(match s.split_once(sep) {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (s, None),
                })
            })
            .collect(),
        J::Object(m) => m
            .iter()
            .map(|(k, x)| {
                Ok(match x {
                    J::Null => (k.clone(), None),
                    x => (k.clone(), Some(scalar(&format!("{key}.{k}"), x)?)),
                })
            })
            .collect(),
        _ => fail(key, "must be a list or a mapping"),
    }
}

/// A command or entrypoint: a list is kept; a string is split into words
/// as Compose splits it (shlex, not `sh -c`).
pub(super) fn command(key: &str, v: &J) -> Result<Vec<String>, Fail> {
    match v {
        J::String(s) => text::split_words(s).map_err(|m| (key.to_string(), m)),
        J::Array(_) => strings(key, v),
        _ => fail(key, "must be a string or a list"),
    }
}

/// The policy, and why something of it is not carried.
pub(super) fn restart(key: &str, v: &J) -> Result<(&'static str, Option<String>), Fail> {
    let s = match v {
        // `restart: no` unquoted is a boolean in YAML 1.1.
        J::Bool(false) => "no".to_string(),
        v => scalar(key, v)?,
    };
    Ok(match s.as_str() {
        "no" | "" => ("no", None),
        "always" => ("always", None),
        "unless-stopped" => ("unless-stopped", None),
        "on-failure" => ("on-failure", None),
        s => match s.strip_prefix("on-failure:") {
            Some(n) if n.parse::<u32>().is_ok() => (
                "on-failure",
                Some(format!(
                    "the retry count {n} is dropped: on-failure restarts without a limit"
                )),
            ),
            _ => {
                return fail(
                    key,
                    format!("{s:?} is not no, always, on-failure[:N] or unless-stopped"),
                );
            }
        },
    })
}

/// A device: `HOST[:CONTAINER[:PERMISSIONS]]`, or `{source, target,
/// permissions}`.
pub(super) fn device(key: &str, v: &J) -> Result<String, Fail> {
    match v {
        J::String(s) => Ok(s.clone()),
        J::Object(m) => {
            let get = |f: &str| {
                m.get(f)
                    .map(|x| scalar(&format!("{key}.{f}"), x))
                    .transpose()
            };
            let source =
                get("source")?.ok_or_else(|| (key.to_string(), "needs a source".into()))?;
            let target = get("target")?.unwrap_or_else(|| source.clone());
            Ok(match get("permissions")? {
                Some(p) => format!("{source}:{target}:{p}"),
                None => format!("{source}:{target}"),
            })
        }
        _ => fail(key, "must be a string or {source, target, permissions}"),
    }
}

/// `/etc/hosts` entries: a list kept as written (`host=ip1,ip2` is
/// several addresses), a mapping as `host=ip`, with a list of addresses as
/// `host=ip1,ip2` (`host-gateway` as Compose has it).
pub(super) fn extra_hosts(key: &str, v: &J) -> Result<Vec<String>, Fail> {
    match v {
        J::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| scalar(&format!("{key}[{i}]"), x))
            .collect(),
        J::Object(m) => m
            .iter()
            .map(|(h, ips)| {
                let at = format!("{key}.{h}");
                let ips = match ips {
                    J::Array(a) => a
                        .iter()
                        .enumerate()
                        .map(|(i, ip)| scalar(&format!("{at}[{i}]"), ip))
                        .collect::<Result<Vec<_>, _>>()?
                        .join(","),
                    ip => scalar(&at, ip)?,
                };
                Ok(format!("{h}={ips}"))
            })
            .collect(),
        _ => fail(key, "must be a list or a mapping"),
    }
}

/// `ulimits`: a number (soft and hard) or `{soft, hard}` by resource.
pub(super) fn ulimits(key: &str, v: &J) -> Result<BTreeMap<String, J>, Fail> {
    let J::Object(m) = v else {
        return fail(key, "must be a mapping");
    };
    let mut out = BTreeMap::new();
    for (name, u) in m {
        let at = format!("{key}.{name}");
        let value = match u {
            J::Object(o) => {
                let get = |f: &str| match o.get(f) {
                    Some(x) => int_of(&format!("{at}.{f}"), x),
                    None => fail(&format!("{at}.{f}"), "is missing"),
                };
                serde_json::json!({"soft": get("soft")?, "hard": get("hard")?})
            }
            u => J::from(int_of(&at, u)?),
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

/// A Compose duration (`1m30s`, `1.5s`, `500ms`, `100us`; a bare number
/// is seconds) as the intention writes it (`90s`); `None` for zero (the
/// engine's default wherever Compose takes one). stead counts whole
/// milliseconds.
pub(super) fn compose_duration(key: &str, v: &J) -> Result<Option<String>, Fail> {
    let text = scalar(key, v)?;
    let bad = |why: &str| fail(key, format!("{text:?} {why}"));
    let s = text.trim();
    let mut nanos: u128 = 0;
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        nanos = s.parse::<u128>().unwrap_or(u128::MAX / 2) * 1_000_000_000;
    } else {
        let mut rest = s;
        if rest.is_empty() {
            return bad("is not a duration");
        }
        while !rest.is_empty() {
            let n = rest
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(rest.len());
            let (num, tail) = rest.split_at(n);
            let u = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(u);
            let per: u128 = match unit {
                "ns" => 1,
                "us" | "µs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => return bad("is not a duration (units ns, us, ms, s, m, h)"),
            };
            let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
            if whole.is_empty() && frac.is_empty() || frac.len() > 9 {
                return bad("is not a duration");
            }
            let whole: u128 = if whole.is_empty() {
                0
            } else {
                whole
                    .parse()
                    .map_err(|_| (key.to_string(), "is not a duration".to_string()))?
            };
            let frac_n: u128 = if frac.is_empty() {
                0
            } else {
                frac.parse()
                    .map_err(|_| (key.to_string(), "is not a duration".to_string()))?
            };
            nanos = nanos
                .saturating_add(whole.saturating_mul(per))
                .saturating_add(frac_n * per / 10u128.pow(frac.len() as u32));
            rest = tail;
        }
    }
    if nanos == 0 {
        return Ok(None);
    }
    if nanos % 1_000_000 != 0 {
        return bad("is not a whole number of milliseconds, as stead counts");
    }
    let ms = u64::try_from(nanos / 1_000_000).unwrap_or(u64::MAX);
    Ok(Some(format_duration(Duration::from_millis(ms))))
}

/// One side of a port mapping: a port or a range `a-b`.
pub(super) fn port_range(key: &str, s: &str) -> Result<(u16, u16), Fail> {
    let port = |p: &str| match p.trim().parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => fail(key, format!("{p:?} is not a port number 1-65535")),
    };
    match s.split_once('-') {
        None => {
            let p = port(s)?;
            Ok((p, p))
        }
        Some((a, b)) => {
            let (a, b) = (port(a)?, port(b)?);
            if b < a || b - a >= 1000 {
                return fail(key, format!("{s:?} is not a range of at most 1000 ports"));
            }
            Ok((a, b))
        }
    }
}

/// A port protocol: tcp (the default), udp or sctp.
pub(super) fn protocol(key: &str, p: &str) -> Result<&'static str, Fail> {
    match p {
        "tcp" | "" => Ok("tcp"),
        "udp" => Ok("udp"),
        "sctp" => Ok("sctp"),
        _ => fail(key, format!("{p:?}: the protocol is tcp, udp or sctp")),
    }
}

/// A port published: host address (or none), host ports (`None`: one the
/// engine picks), container ports, protocol, expanded to the intention's
/// entries. A port published on a port the engine picks is only exposed,
/// and said so.
#[allow(clippy::type_complexity)]
pub(super) fn publish(
    key: &str,
    ip: Option<&str>,
    host: Option<(u16, u16)>,
    container: (u16, u16),
    proto: &str,
) -> Result<(Vec<String>, Vec<(String, String)>), Fail> {
    let ip = match ip.map(|i| i.trim_start_matches('[').trim_end_matches(']')) {
        None | Some("") => None,
        Some(i) => {
            if i.parse::<std::net::IpAddr>().is_err() {
                return fail(key, format!("{i:?} is not an IP address"));
            }
            Some(if i.contains(':') {
                format!("[{i}]")
            } else {
                i.to_string()
            })
        }
    };
    let count = container.1 - container.0;
    let mut out = Vec::new();
    let mut reports = Vec::new();
    match host {
        None => {
            for c in container.0..=container.1 {
                out.push(format!("{c}/{proto}"));
            }
            reports.push((
                key.to_string(),
                "published on a host port the engine picks: stead publishes named host ports only, so it is only exposed".to_string(),
            ));
        }
        Some((h0, h1)) if h1 - h0 == count => {
            for i in 0..=count {
                let (h, c) = (h0 + i, container.0 + i);
                out.push(match &ip {
                    Some(ip) => format!("{ip}:{h}:{c}/{proto}"),
                    None => format!("{h}:{c}/{proto}"),
                });
            }
        }
        Some(_) => {
            return fail(
                key,
                "the host and container port ranges differ in length (a host port picked from a range is not supported: name the host port)",
            );
        }
    }
    Ok((out, reports))
}

/// One `ports` entry: short syntax (`"8080:80"`, `"127.0.0.1:8080:80/udp"`,
/// `"80"`, ranges) or long syntax (`{target, published, host_ip,
/// protocol}`).
#[allow(clippy::type_complexity)]
pub(super) fn port_entry(key: &str, v: &J) -> Result<(Vec<String>, Vec<(String, String)>), Fail> {
    match v {
        J::Number(_) | J::String(_) => {
            let s = scalar(key, v)?;
            let (rest, proto) = match s.rsplit_once('/') {
                Some((r, p)) => (r, protocol(key, p)?),
                None => (s.as_str(), "tcp"),
            };
            // `[v6]:host:container`, `ip:host:container`, `host:container`,
            // `container`.
            let (ip, host, container) = if let Some(r) = rest.strip_prefix('[') {
                let Some((ip, r)) = r.split_once("]:") else {
                    return fail(key, format!("{s:?} is not [IP]:HOST:CONTAINER"));
                };
                let Some((h, c)) = r.split_once(':') else {
                    return fail(key, format!("{s:?} is not [IP]:HOST:CONTAINER"));
                };
                (Some(ip), Some(h), c)
            } else {
                let parts: Vec<&str> = rest.split(':').collect();
                match parts[..] {
                    [c] => (None, None, c),
                    [h, c] => (None, Some(h), c),
                    [ip, h, c] => (Some(ip), Some(h), c),
                    _ => {
                        return fail(
                            key,
                            format!(
                                "{s:?} is not [IP:][HOST:]CONTAINER[/PROTOCOL] (an IPv6 address goes in brackets)"
                            ),
                        );
                    }
                }
            };
            let container = port_range(key, container)?;
            let host = match host {
                None | Some("") => None,
                Some(h) => Some(port_range(key, h)?),
            };
            publish(key, ip, host, container, proto)
        }
        J::Object(m) => {
            let get = |f: &str| {
                m.get(f)
                    .map(|x| scalar(&format!("{key}.{f}"), x))
                    .transpose()
            };
            let Some(target) = get("target")? else {
                return fail(key, "needs a target");
            };
            let container = port_range(&format!("{key}.target"), &target)?;
            let host = match get("published")? {
                None => None,
                Some(p) if p.is_empty() => None,
                Some(p) => Some(port_range(&format!("{key}.published"), &p)?),
            };
            let proto = protocol(key, get("protocol")?.as_deref().unwrap_or("tcp"))?;
            let ip = get("host_ip")?;
            let (out, mut reports) = publish(key, ip.as_deref(), host, container, proto)?;
            for f in m.keys() {
                match f.as_str() {
                    "target" | "published" | "protocol" | "host_ip" => {}
                    "mode" if matches!(get("mode")?.as_deref(), Some("host" | "ingress")) => {}
                    f => reports.push((format!("{key}.{f}"), "not carried".to_string())),
                }
            }
            Ok((out, reports))
        }
        _ => fail(
            key,
            "must be a port string or {target, published, host_ip, protocol}",
        ),
    }
}

/// One `expose` entry: `"80"`, `"80/udp"`, `"8000-8010"`.
pub(super) fn expose_entry(key: &str, v: &J) -> Result<Vec<String>, Fail> {
    let s = scalar(key, v)?;
    let (rest, proto) = match s.rsplit_once('/') {
        Some((r, p)) => (r, protocol(key, p)?),
        None => (s.as_str(), "tcp"),
    };
    let (a, b) = port_range(key, rest)?;
    Ok((a..=b).map(|p| format!("{p}/{proto}")).collect())
}

/// The container side of an intention port entry, `80/tcp`.
pub(super) fn container_side(p: &str) -> String {
    p.rsplit(':').next().unwrap_or(p).to_string()
}

/// What one `volumes` entry is.
pub(super) enum VolumeSpec {
    Bind {
        source: String,
        target: String,
        read_only: bool,
    },
    Named {
        key: String,
        target: String,
        read_only: bool,
    },
    Anonymous {
        target: String,
        read_only: bool,
    },
    Tmpfs(String),
}

/// Compose's rule: a source starting with `/`, `.` or `~` is a host path.
pub(super) fn is_host_path(s: &str) -> bool {
    s.starts_with(['/', '.', '~'])
}

/// Whether a path is a Windows one (`C:\data`, `C:/data`, `\\server\share`),
/// which a Linux device has no use for.
pub(super) fn is_windows_path(s: &str) -> bool {
    let b = s.as_bytes();
    (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/'))
        || s.starts_with("\\\\")
}

/// The refusal of a Windows path, kept as written.
pub(super) fn windows_path_refused<T>(key: &str, s: &str) -> Result<T, Fail> {
    fail(
        key,
        format!("{s:?} is a Windows path: stead runs on Linux; write the path the device has"),
    )
}

/// One `volumes` entry, short (`SRC:DST[:MODE]`, `DST`) or long syntax,
/// with what is said about it: (key, why, carried).
#[allow(clippy::type_complexity)]
pub(super) fn volume_entry(
    key: &str,
    v: &J,
) -> Result<(VolumeSpec, Vec<(String, String, bool)>), Fail> {
    let mut reports = Vec::new();
    let spec = match v {
        J::String(s) if is_windows_path(s) => return windows_path_refused(key, s),
        J::String(s) => {
            let parts: Vec<&str> = s.split(':').collect();
            let (source, target, mode) = match parts[..] {
                [t] => (None, t, ""),
                [s, t] => (Some(s), t, ""),
                [s, t, m] => (Some(s), t, m),
                _ => return fail(key, format!("{s:?} is not SOURCE:TARGET[:MODE]")),
            };
            let mut read_only = false;
            for m in mode.split(',').filter(|m| !m.is_empty()) {
                match m {
                    "ro" => read_only = true,
                    "rw" => read_only = false,
                    "cached" | "delegated" | "consistent" => reports.push((
                        key.to_string(),
                        format!("{m}: a macOS option without effect on Linux"),
                        true,
                    )),
                    "z" | "Z" | "nocopy" | "shared" | "rshared" | "slave" | "rslave"
                    | "private" | "rprivate" => reports.push((
                        key.to_string(),
                        format!("the mode {m} is not carried (ro or rw only)"),
                        false,
                    )),
                    m => return fail(key, format!("{m:?} is not a volume mode")),
                }
            }
            // The engine and Compose take `/etc/x/` as `/etc/x`.
            let target = trailing_slash_dropped(target).to_string();
            match source {
                None => VolumeSpec::Anonymous { target, read_only },
                Some(s) if is_host_path(s) => VolumeSpec::Bind {
                    source: s.to_string(),
                    target,
                    read_only,
                },
                Some(s) => VolumeSpec::Named {
                    key: s.to_string(),
                    target,
                    read_only,
                },
            }
        }
        J::Object(m) => {
            let get = |f: &str| {
                m.get(f)
                    .map(|x| scalar(&format!("{key}.{f}"), x))
                    .transpose()
            };
            let typ = get("type")?.unwrap_or_else(|| "volume".to_string());
            let Some(target) = get("target")? else {
                return fail(key, "needs a target");
            };
            let target = trailing_slash_dropped(&target).to_string();
            let read_only = match m.get("read_only") {
                Some(r) => bool_of(&format!("{key}.read_only"), r)?,
                None => false,
            };
            let source = get("source")?.filter(|s| !s.is_empty());
            for (f, fv) in m {
                let at = format!("{key}.{f}");
                match (f.as_str(), typ.as_str()) {
                    ("type" | "source" | "target" | "read_only", _) => {}
                    ("consistency", _) => {
                        reports.push((at, "a macOS option without effect on Linux".into(), true))
                    }
                    ("tmpfs", "tmpfs") => {}
                    ("bind" | "volume" | "tmpfs", _) => {
                        let J::Object(o) = fv else {
                            return fail(&at, "must be a mapping");
                        };
                        for sub in o.keys() {
                            reports.push((format!("{at}.{sub}"), "not carried".to_string(), false));
                        }
                    }
                    _ => reports.push((at, "not carried".into(), false)),
                }
            }
            match typ.as_str() {
                "bind" => VolumeSpec::Bind {
                    source: source
                        .ok_or_else(|| (key.to_string(), "a bind needs a source".into()))?,
                    target,
                    read_only,
                },
                "volume" => match source {
                    Some(s) => VolumeSpec::Named {
                        key: s,
                        target,
                        read_only,
                    },
                    None => VolumeSpec::Anonymous { target, read_only },
                },
                "tmpfs" => {
                    let mut opts = Vec::new();
                    if let Some(J::Object(t)) = m.get("tmpfs") {
                        for (f, fv) in t {
                            let at = format!("{key}.tmpfs.{f}");
                            match f.as_str() {
                                "size" => opts.push(format!("size={}", scalar(&at, fv)?)),
                                "mode" => opts.push(format!("mode={}", scalar(&at, fv)?)),
                                _ => reports.push((at, "not carried".into(), false)),
                            }
                        }
                    }
                    if read_only {
                        opts.push("ro".into());
                    }
                    VolumeSpec::Tmpfs(if opts.is_empty() {
                        target
                    } else {
                        format!("{target}:{}", opts.join(","))
                    })
                }
                t => {
                    return fail(
                        &format!("{key}.type"),
                        format!("{t:?}: stead mounts bind, volume and tmpfs only"),
                    );
                }
            }
        }
        _ => {
            return fail(
                key,
                "must be SOURCE:TARGET[:MODE] or {type, source, target}",
            );
        }
    };
    let target = match &spec {
        VolumeSpec::Bind { target, .. }
        | VolumeSpec::Named { target, .. }
        | VolumeSpec::Anonymous { target, .. } => target,
        VolumeSpec::Tmpfs(t) => t.split(':').next().unwrap_or(t),
    };
    if !target.starts_with('/') {
        return fail(
            key,
            format!("the target {target:?} must be an absolute path"),
        );
    }
    Ok((spec, reports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_expand_to_the_intention_s_entries() {
        // (entry, entries, whether a host port the engine picks was said)
        let cases: &[(J, &[&str], bool)] = &[
            (J::from("8080:80"), &["8080:80/tcp"], false),
            (J::from("80"), &["80/tcp"], true),
            (J::from(80), &["80/tcp"], true),
            (J::from("127.0.0.1::80/udp"), &["80/udp"], true),
            (
                J::from("0.0.0.0:53:53/sctp"),
                &["0.0.0.0:53:53/sctp"],
                false,
            ),
            (J::from("[::1]:53:53/udp"), &["[::1]:53:53/udp"], false),
            (
                J::from("127.0.0.1:9000-9001:90-91"),
                &["127.0.0.1:9000:90/tcp", "127.0.0.1:9001:91/tcp"],
                false,
            ),
            (J::from("7000-7001"), &["7000/tcp", "7001/tcp"], true),
            (
                serde_json::json!({"target": 80, "published": "8080-8081", "host_ip": "::1"}),
                &[],
                false,
            ),
            (
                serde_json::json!({"target": 80, "published": 8080, "host_ip": "::1"}),
                &["[::1]:8080:80/tcp"],
                false,
            ),
            (
                serde_json::json!({"target": "53", "protocol": "udp"}),
                &["53/udp"],
                true,
            ),
        ];
        for (entry, want, random) in cases {
            match port_entry("ports[0]", entry) {
                Ok((got, reports)) => {
                    assert_eq!(&got, want, "{entry}");
                    assert_eq!(!reports.is_empty(), *random, "{entry}: {reports:?}");
                }
                Err((k, why)) => {
                    assert!(want.is_empty(), "{entry}: {k}: {why}");
                    assert!(why.contains("differ in length"), "{entry}: {why}");
                }
            }
        }
    }

    #[test]
    fn volumes_are_told_apart_as_compose_tells_them() {
        let kind = |v: &J| match volume_entry("v", v).unwrap().0 {
            VolumeSpec::Bind {
                source,
                target,
                read_only,
            } => format!("bind {source} {target} {read_only}"),
            VolumeSpec::Named {
                key,
                target,
                read_only,
            } => format!("volume {key} {target} {read_only}"),
            VolumeSpec::Anonymous { target, read_only } => {
                format!("anonymous {target} {read_only}")
            }
            VolumeSpec::Tmpfs(t) => format!("tmpfs {t}"),
        };
        for (entry, want) in [
            (J::from("/srv:/srv"), "bind /srv /srv false"),
            (J::from("./a:/a:ro"), "bind ./a /a true"),
            (J::from("../a:/a:rw"), "bind ../a /a false"),
            (J::from("~/a:/a"), "bind ~/a /a false"),
            (J::from(".:/a"), "bind . /a false"),
            (J::from("data:/a:ro"), "volume data /a true"),
            // A trailing slash, as 7 of 59 public Compose files write it
            // (ChirpStack, Watchtower, Loki, the TICK sandbox, Pi-hole…).
            (
                J::from("./prometheus/:/etc/prometheus/"),
                "bind ./prometheus/ /etc/prometheus false",
            ),
            (J::from("data:/data/:ro"), "volume data /data true"),
            (J::from("/cache/"), "anonymous /cache false"),
            (
                serde_json::json!({"type": "bind", "source": "./conf/", "target": "/etc/conf/"}),
                "bind ./conf/ /etc/conf false",
            ),
            (J::from("/a"), "anonymous /a false"),
            (
                serde_json::json!({"type": "volume", "source": "", "target": "/a", "read_only": true}),
                "anonymous /a true",
            ),
            (
                serde_json::json!({"type": "tmpfs", "target": "/t", "read_only": true}),
                "tmpfs /t:ro",
            ),
            (
                serde_json::json!({"source": "d", "target": "/a"}),
                "volume d /a false",
            ),
        ] {
            assert_eq!(kind(&entry), want, "{entry}");
        }
    }

    #[test]
    fn restart_policies_read_as_compose_s() {
        for (v, want, dropped) in [
            (J::from("no"), "no", false),
            (J::Bool(false), "no", false),
            (J::from("always"), "always", false),
            (J::from("on-failure"), "on-failure", false),
            (J::from("on-failure:3"), "on-failure", true),
            (J::from("unless-stopped"), "unless-stopped", false),
        ] {
            let (policy, why) = restart("restart", &v).unwrap();
            assert_eq!((policy, why.is_some()), (want, dropped), "{v}");
        }
        for v in ["sometimes", "on-failure:x", "always:1"] {
            assert!(restart("restart", &J::from(v)).is_err(), "{v}");
        }
    }

    #[test]
    fn compose_durations_become_stead_s() {
        for (text, want) in [
            ("1m30s", Some("90s")),
            ("1h", Some("1h")),
            ("1.5s", Some("1500ms")),
            ("250ms", Some("250ms")),
            ("2000us", Some("2ms")),
            ("10", Some("10s")),
            ("0s", None),
            ("0", None),
        ] {
            assert_eq!(
                compose_duration("d", &J::from(text)).unwrap().as_deref(),
                want,
                "{text}"
            );
        }
        for text in ["", "1x", "s", "1.2.3s", "1ns"] {
            assert!(compose_duration("d", &J::from(text)).is_err(), "{text}");
        }
    }
}
