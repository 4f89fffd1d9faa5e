//! The agent's own configuration file (TOML, every key optional). Relative
//! paths are taken relative to the file's directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use std::net::SocketAddr;

use crate::model::names::NodeId;
use crate::model::time::parse_duration;
use crate::reconcile::Tuning;
use crate::status::judge::Settle;

/// The default config file.
pub const DEFAULT_CONFIG: &str = "/etc/stead/stead.toml";
/// The engine's usual socket.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";
/// The HTTP API's default port (on 127.0.0.1).
pub const DEFAULT_API_PORT: u16 = 7411;

/// Why the config could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A field is wrong.
    #[error("config {path}: {field}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// The agent's configuration, with defaults filled in.
#[derive(Clone, Debug)]
pub struct Config {
    /// This node's id: the value of `stead.managed-by` on its containers.
    pub node_id: NodeId,
    /// Where the store and composed files live.
    pub data_dir: PathBuf,
    /// Where intention files are read from.
    pub intentions_dir: PathBuf,
    /// The engine's unix socket.
    pub docker_socket: String,
    /// Time between passes when nothing triggers one sooner.
    pub heartbeat: Duration,
    /// First wait after the engine is found away.
    pub backoff_min: Duration,
    /// Longest wait between attempts to reach the engine.
    pub backoff_max: Duration,
    /// Settling and crash-loop windows.
    pub tuning: Tuning,
    /// Where the HTTP API listens.
    pub api_listen: SocketAddr,
    /// The API's bearer token, when configured (otherwise one is generated
    /// into the data directory on first start).
    pub api_token: Option<String>,
    /// Registry logins, in Docker's `config.json` form.
    pub registry_auth: Option<PathBuf>,
    /// A CA bundle (PEM) trusted for registries besides the system's.
    pub registry_ca: Option<PathBuf>,
    /// Registries reached over plain HTTP when they do not speak TLS
    /// (besides those on loopback).
    pub insecure_registries: Vec<String>,
    /// The base of a faulted reload's backoff.
    pub reload_retry_interval: Duration,
    /// The central plane, when this node has one.
    pub plane: Option<PlaneConfig>,
    /// Where the output of a module without its own `logging` goes.
    pub logging: crate::model::runtime::NodeLogging,
    /// How unused images are collected.
    pub images: crate::model::disk::Policy,
    /// Who fetches an image's blobs (`[images] fetch`).
    pub fetch: crate::model::fetch::Puller,
    /// The site's peers (`[site]`), when there are any.
    pub site: Option<SiteConfig>,
    /// How long a candidate agent (an update of stead itself) has to
    /// prove itself before the launcher goes back to the version it
    /// replaced.
    pub confirm_window: Duration,
    /// Keys trusted for release statements of stead itself, besides the
    /// plane's (a device without a plane).
    pub update_keys: Vec<crate::plane::envelope::PublicKey>,
    /// Every input's digest in a container's labels keyed with the
    /// device's key (a sealed value's always is).
    pub keyed_digests: bool,
    /// `[clock] step`: with CAP_SYS_TIME, the system clock is stepped
    /// forward to the time floor at start and to a plane host's `Date`
    /// read over verified TLS.
    pub clock_step: bool,
    /// `[[image_policy]]`: which images may run, by the device's own
    /// config (the rules a document's `images` holds), one more document
    /// beside the plane's, or alone on a device without a plane.
    pub image_policy: crate::model::image_policy::Rules,
    /// `labels`: what the device is, in the operator's words
    /// (`board = "rev-b"`): among its facts, for a group's `when`.
    pub labels: std::collections::BTreeMap<String, String>,
    /// `[actions] reboot`: a signed document's `reboot` action may reboot
    /// this device (through systemd); off unless said.
    pub reboot_allowed: bool,
}

pub use crate::plane::config::PlaneConfig;

/// The most keys trusted at once.
pub const MAX_TRUSTED_KEYS: usize = 8;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoggingDoc {
    driver: Option<String>,
    max_size: Option<String>,
    max_file: Option<u32>,
}

/// A module without its own logging writes rotating files, in the engine's
/// driver for them (`local` on the Docker Engine), so that no module fills
/// a device's flash. The file size before rotation:
pub const DEFAULT_LOG_MAX_SIZE: &str = "10m";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImagesDoc {
    collect: Option<String>,
    fetch: Option<String>,
    high: Option<u8>,
    low: Option<u8>,
    min_age: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SiteDoc {
    listen: Option<String>,
    #[serde(default)]
    allow: Vec<String>,
    rate: Option<serde_json::Value>,
    keep: Option<String>,
    #[serde(default)]
    peers: Vec<String>,
    mdns: Option<String>,
}

/// `[site]`: the devices on this device's LAN that share what each
/// fetched ([`crate::site`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SiteConfig {
    /// Where this device serves its peers; none: it only asks.
    pub listen: Option<SocketAddr>,
    /// The networks it serves (required with `listen`).
    pub allow: Vec<crate::model::site::Cidr>,
    /// The most bytes a second it serves, in all.
    pub rate: u64,
    /// How long what it fetched stays to be served after the engine
    /// loaded it.
    pub keep: Duration,
    /// The peers it asks before the WAN, as base URLs.
    pub peers: Vec<String>,
    /// The network interface it finds its peers on by mDNS (and answers
    /// on, when it listens); none: no mDNS.
    pub mdns: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockDoc {
    step: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionsDoc {
    reboot: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateDoc {
    confirm_window: Option<String>,
    #[serde(default)]
    trusted_keys: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlaneDoc {
    url: String,
    trusted_keys: Vec<String>,
    ca: Option<PathBuf>,
    poll_interval: Option<String>,
    token_file: Option<PathBuf>,
    s3_credentials: Option<PathBuf>,
    s3_region: Option<String>,
    client_cert: Option<PathBuf>,
    client_key: Option<PathBuf>,
    nudge: Option<NudgeDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NudgeDoc {
    broker: String,
    topic: Option<String>,
    jitter: Option<String>,
    username: Option<String>,
    password_file: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ConfigDoc {
    node_id: Option<String>,
    data_dir: Option<PathBuf>,
    intentions_dir: Option<PathBuf>,
    docker_socket: Option<String>,
    heartbeat: Option<String>,
    backoff_min: Option<String>,
    backoff_max: Option<String>,
    settle_window: Option<String>,
    crash_loop_restarts: Option<u32>,
    crash_backoff_min: Option<String>,
    crash_backoff_max: Option<String>,
    crash_backoff_reset: Option<String>,
    api_listen: Option<String>,
    api_token: Option<String>,
    registry_auth: Option<PathBuf>,
    registry_ca: Option<PathBuf>,
    #[serde(default)]
    insecure_registries: Vec<String>,
    reload_retry_interval: Option<String>,
    plane: Option<PlaneDoc>,
    logging: Option<LoggingDoc>,
    images: Option<ImagesDoc>,
    update: Option<UpdateDoc>,
    #[serde(default)]
    keyed_digests: bool,
    clock: Option<ClockDoc>,
    image_policy: Option<serde_json::Value>,
    site: Option<SiteDoc>,
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
    actions: Option<ActionsDoc>,
}

/// The device's labels: at most [`crate::model::facts::MAX_LABELS`], each
/// key and value checked as a group's `when` checks them.
fn labels(
    labels: std::collections::BTreeMap<String, String>,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    use crate::model::facts::{MAX_LABELS, check_label};
    if labels.len() > MAX_LABELS {
        return Err(format!("{} labels, more than {MAX_LABELS}", labels.len()));
    }
    for (k, v) in &labels {
        check_label(k, v)?;
    }
    Ok(labels)
}

/// Reads `[[image_policy]]` as a document's `images` is read, each key a
/// PEM text or the path of a PEM file (relative to the config's
/// directory: `base`); the error names the field.
fn image_policy(
    value: Option<serde_json::Value>,
    base: &Path,
) -> Result<crate::model::image_policy::Rules, (String, String)> {
    use crate::model::image_policy::Rules;
    let Some(mut value) = value else {
        return Ok(Rules::default());
    };
    let read = |at: String, key: &mut serde_json::Value| -> Result<(), (String, String)> {
        let Some(text) = key.as_str() else {
            return Ok(());
        };
        if text.trim_start().starts_with("-----BEGIN") {
            return Ok(());
        }
        let path = base.join(text);
        let pem = std::fs::read_to_string(&path).map_err(|e| {
            (
                at,
                format!("cannot read the key file {}: {e}", path.display()),
            )
        })?;
        *key = serde_json::Value::String(pem);
        Ok(())
    };
    if let Some(rules) = value.as_array_mut() {
        for (i, rule) in rules.iter_mut().enumerate() {
            if let Some(keys) = rule.get_mut("keys").and_then(|k| k.as_array_mut()) {
                for (k, key) in keys.iter_mut().enumerate() {
                    read(format!("[{i}].keys[{k}]"), key)?;
                }
            }
            let keys = rule
                .get_mut("attestation")
                .and_then(|a| a.get_mut("keys"))
                .and_then(|k| k.as_array_mut());
            for (k, key) in keys.into_iter().flatten().enumerate() {
                read(format!("[{i}].attestation.keys[{k}]"), key)?;
            }
        }
    }
    Rules::parse(value)
}

/// Public keys from their base64 text, at most [`MAX_TRUSTED_KEYS`]; the
/// error names the key by its index.
fn trusted_keys(
    field: &str,
    keys: &[String],
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Vec<crate::plane::envelope::PublicKey>, ConfigError> {
    if keys.len() > MAX_TRUSTED_KEYS {
        return Err(invalid(field, format!("at most {MAX_TRUSTED_KEYS} keys")));
    }
    keys.iter()
        .enumerate()
        .map(|(i, k)| {
            crate::plane::envelope::PublicKey::parse(k)
                .map_err(|e| invalid(&format!("{field}[{i}]"), e.to_string()))
        })
        .collect()
}

/// Reads `[plane.nudge]`; the error names the field.
fn nudge(
    d: NudgeDoc,
    node: &NodeId,
    abs: &dyn Fn(PathBuf) -> PathBuf,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<crate::plane::config::NudgeConfig, ConfigError> {
    use crate::plane::config::{DEFAULT_NUDGE_JITTER, DEFAULT_NUDGE_TOPIC};
    let broker = d
        .broker
        .parse::<crate::model::mqtt::Broker>()
        .map_err(|e| invalid("plane.nudge.broker", e))?;
    let topic = d
        .topic
        .unwrap_or_else(|| DEFAULT_NUDGE_TOPIC.to_string())
        .replace("{node}", node.as_str());
    crate::model::mqtt::check_topic(&topic).map_err(|e| invalid("plane.nudge.topic", e))?;
    let jitter = match d.jitter {
        None => DEFAULT_NUDGE_JITTER,
        Some(j) => parse_duration(&j).map_err(|m| invalid("plane.nudge.jitter", m))?,
    };
    if d.password_file.is_some() && d.username.is_none() {
        return Err(invalid(
            "plane.nudge.password_file",
            "is the password of a username, which is not given".into(),
        ));
    }
    Ok(crate::plane::config::NudgeConfig {
        broker,
        topic,
        jitter,
        username: d.username,
        password_file: d.password_file.map(abs),
    })
}

/// Reads `[site]`; the error names the field.
fn site(
    d: SiteDoc,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<SiteConfig, ConfigError> {
    use crate::model::site::{Cidr, DEFAULT_KEEP, DEFAULT_RATE, MAX_PEERS};
    let listen = match d.listen.as_deref() {
        None => None,
        Some(l) => Some(l.parse::<SocketAddr>().map_err(|_| {
            invalid(
                "site.listen",
                format!("{l:?} is not an address and port (0.0.0.0:7412)"),
            )
        })?),
    };
    let allow = d
        .allow
        .iter()
        .enumerate()
        .map(|(i, a)| {
            a.parse::<Cidr>()
                .map_err(|e| invalid(&format!("site.allow[{i}]"), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if listen.is_some() && allow.is_empty() {
        return Err(invalid(
            "site.allow",
            "the networks served must be named when site.listen is set (192.168.1.0/24)".into(),
        ));
    }
    let rate = match d.rate {
        None => DEFAULT_RATE,
        Some(v) => {
            let b = match v {
                serde_json::Value::Number(n) => n
                    .as_i64()
                    .map(crate::model::runtime::Bytes::Number)
                    .ok_or_else(|| invalid("site.rate", "a whole number of bytes".into()))?,
                serde_json::Value::String(t) => crate::model::runtime::Bytes::Text(t),
                _ => return Err(invalid("site.rate", "bytes a second (4m, 512k)".into())),
            };
            let n = crate::model::runtime::parse_bytes(&b).map_err(|e| invalid("site.rate", e))?;
            u64::try_from(n)
                .ok()
                .filter(|n| *n >= 1024)
                .ok_or_else(|| invalid("site.rate", "at least 1k bytes a second".into()))?
        }
    };
    let keep = match d.keep {
        None => Duration::from_secs(DEFAULT_KEEP),
        Some(k) => parse_duration(&k).map_err(|m| invalid("site.keep", m))?,
    };
    if d.peers.len() > MAX_PEERS {
        return Err(invalid("site.peers", format!("at most {MAX_PEERS} peers")));
    }
    let peers = d
        .peers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            crate::model::site::peer_url(p).map_err(|e| invalid(&format!("site.peers[{i}]"), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mdns = match d.mdns {
        None => None,
        Some(i) => {
            // As the kernel checks an interface's name.
            let ok = !i.is_empty()
                && i.len() < 16
                && i != "."
                && i != ".."
                && !i.contains(['/', ':'])
                && !i.chars().any(char::is_whitespace);
            if !ok {
                return Err(invalid(
                    "site.mdns",
                    format!("{i:?} is not a network interface's name (eth0)"),
                ));
            }
            Some(i)
        }
    };
    Ok(SiteConfig {
        listen,
        allow,
        rate,
        keep,
        peers,
        mdns,
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Config {
    /// Reads the config file. A missing file at the default path means all
    /// defaults; a missing file named explicitly is an error.
    pub fn load(path: &Path, explicit: bool) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => String::new(),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                });
            }
        };
        Self::parse(&text, path)
    }

    /// Parses config text; `path` locates relative paths and names errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let p = path.display().to_string();
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            path: p.clone(),
            field: field.into(),
            message,
        };
        let t: toml::Table = toml::from_str(text).map_err(|e| {
            invalid(
                "(file)",
                crate::model::intention::without_values(e.message()),
            )
        })?;
        let v = crate::model::json::from_toml(t).map_err(|(f, m)| invalid(&f, m))?;
        let doc: ConfigDoc = crate::model::json::read_value(&v).map_err(|e| {
            invalid(
                if e.path == "." { "(file)" } else { &e.path },
                crate::model::intention::without_values(&e.message()),
            )
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // Paths handed to the engine must be absolute: resolve against the
        // working directory when the config file itself was named relatively.
        let abs = |p: PathBuf| {
            let p = if p.is_absolute() { p } else { base.join(p) };
            std::path::absolute(&p).unwrap_or(p)
        };
        let node = doc.node_id.unwrap_or_else(hostname);
        let node_id = NodeId::try_from(node).map_err(|e| invalid("node_id", e.0))?;
        let dur =
            |field: &str, v: Option<String>, default: Duration| -> Result<Duration, ConfigError> {
                v.map_or(Ok(default), |s| {
                    parse_duration(&s).map_err(|m| invalid(field, m))
                })
            };
        let docker_socket = doc.docker_socket.unwrap_or_else(|| {
            std::env::var("DOCKER_HOST")
                .ok()
                .filter(|h| h.starts_with("unix://"))
                .unwrap_or_else(|| DEFAULT_SOCKET.to_string())
        });
        if docker_socket.contains("://") && !docker_socket.starts_with("unix://") {
            return Err(invalid(
                "docker_socket",
                format!("{docker_socket:?}: only unix sockets are supported"),
            ));
        }
        for (i, r) in doc.insecure_registries.iter().enumerate() {
            if r.contains('@') {
                return Err(invalid(
                    &format!("insecure_registries[{i}]"),
                    "must be a host[:port], without a user name or password".into(),
                ));
            }
        }
        let cfg = Config {
            node_id: node_id.clone(),
            data_dir: abs(doc
                .data_dir
                .unwrap_or_else(|| PathBuf::from("/var/lib/stead"))),
            intentions_dir: abs(doc
                .intentions_dir
                .unwrap_or_else(|| PathBuf::from("/etc/stead/intentions.d"))),
            docker_socket,
            heartbeat: dur("heartbeat", doc.heartbeat, Duration::from_secs(10))?,
            backoff_min: dur("backoff_min", doc.backoff_min, Duration::from_millis(500))?,
            backoff_max: dur("backoff_max", doc.backoff_max, Duration::from_secs(30))?,
            tuning: Tuning::default(),
            api_listen: SocketAddr::from(([127, 0, 0, 1], DEFAULT_API_PORT)),
            api_token: None,
            registry_auth: doc.registry_auth.map(abs),
            registry_ca: doc.registry_ca.map(abs),
            insecure_registries: doc.insecure_registries,
            reload_retry_interval: dur(
                "reload_retry_interval",
                doc.reload_retry_interval,
                Duration::from_secs(60),
            )?,
            plane: None,
            logging: crate::model::runtime::NodeLogging::Rotate {
                driver: None,
                max_size: DEFAULT_LOG_MAX_SIZE.into(),
                max_file: None,
            },
            images: Default::default(),
            fetch: Default::default(),
            site: None,
            confirm_window: dur(
                "update.confirm_window",
                doc.update.as_ref().and_then(|u| u.confirm_window.clone()),
                crate::update::confirm::WINDOW,
            )?,
            update_keys: trusted_keys(
                "update.trusted_keys",
                doc.update.as_ref().map_or(&[][..], |u| &u.trusted_keys),
                &invalid,
            )?,
            keyed_digests: doc.keyed_digests,
            clock_step: doc.clock.as_ref().and_then(|c| c.step).unwrap_or(false),
            reboot_allowed: doc.actions.as_ref().and_then(|a| a.reboot).unwrap_or(false),
            image_policy: image_policy(doc.image_policy, base)
                .map_err(|(f, m)| invalid(&format!("image_policy{f}"), m))?,
            labels: labels(doc.labels).map_err(|m| invalid("labels", m))?,
        };
        let api_listen: SocketAddr = match doc.api_listen.as_deref() {
            None => SocketAddr::from(([127, 0, 0, 1], DEFAULT_API_PORT)),
            Some(s) => s
                .parse()
                .map_err(|_| invalid("api_listen", format!("{s:?} is not an address:port")))?,
        };
        if let Some(t) = &doc.api_token {
            if t.len() < 16 || t.contains(char::is_whitespace) {
                return Err(invalid(
                    "api_token",
                    "must be at least 16 characters, without spaces".into(),
                ));
            }
        }
        if !api_listen.ip().is_loopback() && doc.api_token.is_none() {
            return Err(invalid(
                "api_listen",
                format!("{api_listen} is not a loopback address: set api_token to listen there"),
            ));
        }
        let d = Tuning::default();
        let crash_restarts = doc.crash_loop_restarts.unwrap_or(d.settle.crash_restarts);
        if crash_restarts == 0 {
            return Err(invalid("crash_loop_restarts", "must be at least 1".into()));
        }
        let tuning = Tuning {
            settle: Settle {
                window: dur("settle_window", doc.settle_window, d.settle.window)?,
                crash_restarts,
            },
            crash_backoff_min: dur(
                "crash_backoff_min",
                doc.crash_backoff_min,
                d.crash_backoff_min,
            )?,
            crash_backoff_max: dur(
                "crash_backoff_max",
                doc.crash_backoff_max,
                d.crash_backoff_max,
            )?,
            crash_backoff_reset: dur(
                "crash_backoff_reset",
                doc.crash_backoff_reset,
                d.crash_backoff_reset,
            )?,
        };
        let plane = match doc.plane {
            None => None,
            Some(pd) => {
                crate::net::check_no_userinfo(&pd.url).map_err(|m| invalid("plane.url", m))?;
                let url: http::Uri = pd
                    .url
                    .parse()
                    .ok()
                    .filter(|u: &http::Uri| {
                        matches!(u.scheme_str(), Some("http" | "https"))
                            && u.host().is_some()
                            && u.query().is_none()
                    })
                    .ok_or_else(|| {
                        invalid(
                            "plane.url",
                            format!(
                                "{:?} is not an http:// or https:// base URL",
                                crate::net::without_userinfo(&pd.url)
                            ),
                        )
                    })?;
                if pd.trusted_keys.is_empty() {
                    return Err(invalid(
                        "plane.trusted_keys",
                        "names no key: a document is trusted only when signed by one".into(),
                    ));
                }
                let trusted_keys = trusted_keys("plane.trusted_keys", &pd.trusted_keys, &invalid)?;
                let poll_interval = dur(
                    "plane.poll_interval",
                    pd.poll_interval,
                    Duration::from_secs(15 * 60),
                )?;
                let auth = match (pd.token_file, pd.s3_credentials, pd.s3_region) {
                    (None, None, None) => None,
                    (Some(t), None, None) => {
                        Some(crate::net::auth::HostAuth::Bearer { token_file: abs(t) })
                    }
                    (None, Some(c), region) => Some(crate::net::auth::HostAuth::S3 {
                        credentials: abs(c),
                        region: region.unwrap_or_else(|| "us-east-1".into()),
                    }),
                    (None, None, Some(_)) => {
                        return Err(invalid(
                            "plane.s3_region",
                            "is the region of s3_credentials, which is not given".into(),
                        ));
                    }
                    (Some(_), Some(_), _) | (Some(_), None, Some(_)) => {
                        return Err(invalid(
                            "plane.token_file",
                            "a bearer token or an S3 key (s3_credentials), not both".into(),
                        ));
                    }
                };
                let client_cert = match (pd.client_cert, pd.client_key) {
                    (None, None) => None,
                    (Some(c), Some(k)) => Some((abs(c), abs(k))),
                    (Some(_), None) => {
                        return Err(invalid(
                            "plane.client_key",
                            "the key of client_cert is not given".into(),
                        ));
                    }
                    (None, Some(_)) => {
                        return Err(invalid(
                            "plane.client_cert",
                            "the certificate of client_key is not given".into(),
                        ));
                    }
                };
                let nudge = match pd.nudge {
                    None => None,
                    Some(n) => Some(nudge(n, &node_id, &abs, &invalid)?),
                };
                Some(PlaneConfig {
                    url,
                    trusted_keys,
                    ca: pd.ca.map(abs),
                    poll_interval,
                    auth,
                    client_cert,
                    nudge,
                })
            }
        };
        let logging = {
            let l = doc.logging.unwrap_or(LoggingDoc {
                driver: None,
                max_size: None,
                max_file: None,
            });
            let driver = l.driver;
            if let Some(driver) = &driver
                && (driver.is_empty()
                    || !driver
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c)))
            {
                return Err(invalid(
                    "logging.driver",
                    format!("{driver:?} is not a log driver name"),
                ));
            }
            // Rotation is what the local and json-file drivers take, and the
            // engine's own choice when no driver is named.
            if driver
                .as_deref()
                .is_none_or(|d| matches!(d, "local" | "json-file"))
            {
                let size = l.max_size.unwrap_or_else(|| DEFAULT_LOG_MAX_SIZE.into());
                crate::model::runtime::parse_bytes(&crate::model::runtime::Bytes::Text(
                    size.clone(),
                ))
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    invalid(
                        "logging.max_size",
                        format!("{size:?} is not a size such as 10m"),
                    )
                })?;
                if l.max_file == Some(0) {
                    return Err(invalid("logging.max_file", "at least 1".into()));
                }
                crate::model::runtime::NodeLogging::Rotate {
                    driver,
                    max_size: size,
                    max_file: l.max_file,
                }
            } else if l.max_size.is_some() || l.max_file.is_some() {
                return Err(invalid(
                    "logging.driver",
                    format!(
                        "{:?} does not rotate files: max_size and max_file are for local and json-file",
                        driver.unwrap_or_default()
                    ),
                ));
            } else {
                crate::model::runtime::NodeLogging::Driver(crate::model::runtime::Logging {
                    driver: driver.unwrap_or_default(),
                    options: Default::default(),
                })
            }
        };
        let fetch;
        let images = {
            use crate::model::disk::{Collect, Policy};
            let d = Policy::default();
            let i = doc.images.unwrap_or(ImagesDoc {
                collect: None,
                fetch: None,
                high: None,
                low: None,
                min_age: None,
            });
            let collect = match i.collect.as_deref() {
                None | Some("pulled") => Collect::Pulled,
                Some("all") => Collect::All,
                Some(other) => {
                    return Err(invalid(
                        "images.collect",
                        format!("{other:?} is not \"pulled\" or \"all\""),
                    ));
                }
            };
            fetch = match i.fetch.as_deref() {
                None | Some("agent") => crate::model::fetch::Puller::Agent,
                Some("engine") => crate::model::fetch::Puller::Engine,
                Some(other) => {
                    return Err(invalid(
                        "images.fetch",
                        format!("{other:?} is not \"agent\" or \"engine\""),
                    ));
                }
            };
            let (high, low) = (i.high.unwrap_or(d.high), i.low.unwrap_or(d.low));
            if !(1..=99).contains(&high) {
                return Err(invalid("images.high", "a percent from 1 to 99".into()));
            }
            if low >= high {
                return Err(invalid(
                    "images.low",
                    format!("{low} must be below images.high ({high})"),
                ));
            }
            let min_age =
                dur("images.min_age", i.min_age, Duration::from_secs(d.min_age))?.as_secs();
            Policy {
                collect,
                high,
                low,
                min_age,
            }
        };
        let site = match doc.site {
            Some(d) => Some(site(d, &invalid)?),
            None => None,
        };
        let cfg = Config {
            tuning,
            api_listen,
            api_token: doc.api_token,
            plane,
            logging,
            images,
            fetch,
            site,
            ..cfg
        };
        if cfg.tuning.crash_backoff_min > cfg.tuning.crash_backoff_max {
            return Err(invalid(
                "crash_backoff_min",
                "must not be more than crash_backoff_max".into(),
            ));
        }
        if cfg.backoff_min > cfg.backoff_max {
            return Err(invalid(
                "backoff_min",
                "must not be more than backoff_max".into(),
            ));
        }
        Ok(cfg)
    }

    /// The store file.
    pub fn store_path(&self) -> PathBuf {
        self.data_dir.join("stead.redb")
    }

    /// Where the device-local key is kept (it seals what containers'
    /// labels carry for a store rebuild).
    pub fn local_key_path(&self) -> PathBuf {
        self.data_dir.join("local.key")
    }

    /// Where the generated API token is kept.
    pub fn token_path(&self) -> PathBuf {
        self.data_dir.join("api-token")
    }

    /// Where the running agent writes the address its API listens on.
    pub fn api_addr_path(&self) -> PathBuf {
        self.data_dir.join("api-addr")
    }

    /// Where composed files are written.
    pub fn files_dir(&self) -> PathBuf {
        self.data_dir.join("files")
    }

    /// Where a panicking agent notes what it was acting on, for the crash
    /// guard at the next start.
    pub fn panic_path(&self) -> PathBuf {
        self.data_dir.join("panic")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configs_image_policy_reads_keys_inline_or_from_files_and_names_each_fault() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        let key = crate::model::image_policy::PublicKey::Ed25519(vec![7; 32]);
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(key.to_der())
        );
        std::fs::write(dir.path().join("cosign.pub"), &pem).unwrap();
        std::fs::write(
            dir.path().join("rsa.pub"),
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
        )
        .unwrap();
        let at = dir.path().join("stead.toml");
        let rule = |keys: &str| {
            format!(
                "[[image_policy]]\nscope = \"reg.example/acme\"\nrequire = \"sigstore\"\nkeys = [{keys}]\n"
            )
        };
        // (the config, the field at fault and its message's start, or None)
        let cases: Vec<(String, Option<(&str, &str)>)> = vec![
            (String::new(), None),
            (rule(&format!("{pem:?}")), None),
            (rule("\"cosign.pub\""), None),
            (
                rule(&format!(
                    "{:?}",
                    dir.path().join("cosign.pub").display().to_string()
                )),
                None,
            ),
            (
                rule("\"missing.pub\""),
                Some(("image_policy[0].keys[0]", "cannot read the key file")),
            ),
            (
                rule("\"rsa.pub\""),
                Some(("image_policy[0].keys[0]", "not an ECDSA P-256 or Ed25519")),
            ),
            (
                rule("").replace("keys = []", ""),
                Some(("image_policy[0].keys", "1 to 8 public keys")),
            ),
            (
                format!(
                    "{}attestation = {{ predicate_type = \"https://slsa.dev/provenance/v1\", keys = [\"nope.pub\"] }}\n",
                    rule("\"cosign.pub\"")
                ),
                Some((
                    "image_policy[0].attestation.keys[0]",
                    "cannot read the key file",
                )),
            ),
            (
                "[[image_policy]]\nscope = \"library/app\"\nrequire = \"none\"\n".into(),
                Some((
                    "image_policy[0].scope",
                    "scope \"library/app\": name the registry",
                )),
            ),
            (
                "[[image_policy]]\nscope = \"*\"\nrequire = \"gpg\"\n".into(),
                Some(("image_policy[0].require", "\"gpg\"")),
            ),
        ];
        for (text, want) in cases {
            let got = Config::parse(&text, &at);
            match want {
                None => {
                    let c = got.unwrap_or_else(|e| panic!("{text}: {e}"));
                    if !text.is_empty() {
                        let rules = &c.image_policy.0;
                        assert_eq!(rules.len(), 1, "{text}");
                        assert_eq!(
                            rules[0].require,
                            crate::model::image_policy::Require::Sigstore(vec![key.clone()])
                        );
                    } else {
                        assert!(c.image_policy.0.is_empty());
                    }
                }
                Some((field, start)) => match got {
                    Err(ConfigError::Invalid {
                        field: f, message, ..
                    }) => {
                        assert_eq!(f, field, "{text}: {message}");
                        assert!(message.starts_with(start), "{text}: {message}");
                    }
                    other => panic!("{text}: {other:?}"),
                },
            }
        }
    }

    #[test]
    fn defaults_and_relative_paths() {
        let c = Config::parse(
            "node_id = \"edge-1\"\ndata_dir = \"data\"\nheartbeat = \"2s\"",
            Path::new("/etc/x/stead.toml"),
        )
        .unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/etc/x/data"));
        assert_eq!(c.intentions_dir, PathBuf::from("/etc/stead/intentions.d"));
        assert_eq!(c.heartbeat, Duration::from_secs(2));
        assert_eq!(c.store_path(), PathBuf::from("/etc/x/data/stead.redb"));
    }

    #[test]
    fn bad_fields_are_named() {
        let e = Config::parse("heartbeat = \"soon\"", Path::new("c.toml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("config c.toml: heartbeat: invalid duration"),
            "{e}"
        );
        let e = Config::parse("hartbeat = \"1s\"", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("unknown field `hartbeat`"), "{e}");
        let e = Config::parse("node_id = \"bad id\"", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("node_id"), "{e}");
        let e = Config::parse(
            "docker_socket = \"tcp://1.2.3.4:2375\"",
            Path::new("c.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("docker_socket"), "{e}");
        // A value written where another kind was meant is never quoted back
        // (the config holds the API token).
        for text in [
            "api_token = 31415926535897932",
            "api_token = 3.14159265358979",
            "node_id = 31415926535897932",
        ] {
            let e = Config::parse(text, Path::new("c.toml")).unwrap_err();
            assert!(e.to_string().contains("invalid type"), "{e}");
            assert!(!e.to_string().contains("3141592"), "{text}: {e}");
        }
    }

    #[test]
    fn reboots_are_allowed_only_when_asked_and_bad_values_are_named() {
        // (the config, whether a document may reboot the device, or the field at fault)
        for (text, want) in [
            ("", Ok(false)),
            ("[actions]", Ok(false)),
            ("[actions]\nreboot = true", Ok(true)),
            ("[actions]\nreboot = false", Ok(false)),
            ("[actions]\nreboot = \"yes\"", Err("actions.reboot")),
            ("[actions]\nshell = true", Err("unknown field")),
        ] {
            let got = Config::parse(text, Path::new("c.toml"))
                .map(|c| c.reboot_allowed)
                .map_err(|e| e.to_string());
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w, "{text}"),
                (Err(e), Err(field)) => assert!(e.contains(field), "{text}: {e}"),
                (got, want) => panic!("{text}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn the_clock_is_stepped_only_when_asked_and_bad_values_are_named() {
        for (text, want) in [
            ("", Ok(false)),
            ("[clock]", Ok(false)),
            ("[clock]\nstep = false", Ok(false)),
            ("[clock]\nstep = true", Ok(true)),
            ("[clock]\nstep = \"yes\"", Err("clock.step")),
            ("[clock]\nstep = 1", Err("clock.step")),
            ("[clock]\nslew = true", Err("unknown field")),
            ("clock = true", Err("clock")),
        ] {
            let got = Config::parse(text, Path::new("c.toml"))
                .map(|c| c.clock_step)
                .map_err(|e| e.to_string());
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w, "{text}"),
                (Err(e), Err(field)) => assert!(e.contains(field), "{text}: {e}"),
                (got, want) => panic!("{text}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn the_site_section_names_peers_and_networks_and_bad_values_are_named() {
        let c = Config::parse(
            "[site]\nlisten = \"0.0.0.0:7412\"\nallow = [\"192.168.1.0/24\", \"fd00::/8\"]\nrate = \"2m\"\nkeep = \"24h\"\npeers = [\"192.168.1.12\", \"till-3.local:7000\"]",
            Path::new("c.toml"),
        )
        .unwrap();
        let s = c.site.unwrap();
        assert_eq!(s.listen, Some("0.0.0.0:7412".parse().unwrap()));
        assert_eq!(s.allow.len(), 2);
        assert_eq!(s.rate, 2 << 20);
        assert_eq!(s.keep, Duration::from_secs(86400));
        assert_eq!(
            s.peers,
            ["http://192.168.1.12:7412", "http://till-3.local:7000"]
        );
        assert_eq!(s.mdns, None);
        let c = Config::parse("[site]\npeers = [\"10.0.0.2\"]", Path::new("c.toml")).unwrap();
        let s = c.site.unwrap();
        assert_eq!((s.listen, s.rate), (None, crate::model::site::DEFAULT_RATE));
        let c = Config::parse("[site]\nmdns = \"enp1s0\"", Path::new("c.toml")).unwrap();
        assert_eq!(c.site.unwrap().mdns.as_deref(), Some("enp1s0"));
        assert!(
            Config::parse("", Path::new("c.toml"))
                .unwrap()
                .site
                .is_none()
        );
        // (text, the field the error names, what it says)
        for (text, field, says) in [
            (
                "[site]\nlisten = \"0.0.0.0:7412\"",
                "site.allow",
                "must be named",
            ),
            (
                "[site]\nlisten = \"7412\"\nallow = [\"10.0.0.0/8\"]",
                "site.listen",
                "address and port",
            ),
            (
                "[site]\nallow = [\"10.0.0.0/33\"]",
                "site.allow[0]",
                "0 to 32",
            ),
            ("[site]\nrate = \"fast\"", "site.rate", "unit"),
            ("[site]\nrate = 10", "site.rate", "at least 1k"),
            ("[site]\nkeep = \"a while\"", "site.keep", ""),
            (
                "[site]\npeers = [\"10.0.0.2\", \"http://x\"]",
                "site.peers[1]",
                "host:port",
            ),
            ("[site]\nmdns = true", "site", "string"),
            ("[site]\nmdns = \"eth0/1\"", "site.mdns", "interface"),
            ("[site]\nmdns = \"\"", "site.mdns", "interface"),
            (
                "[site]\nmdns = \"a-very-long-name0\"",
                "site.mdns",
                "interface",
            ),
            ("[site]\nmdn = \"eth0\"", "unknown field", ""),
        ] {
            let e = Config::parse(text, Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field) && e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn image_collection_has_defaults_and_bad_keys_are_named() {
        use crate::model::disk::{Collect, Policy};
        let c = Config::parse("", Path::new("c.toml")).unwrap();
        assert_eq!(c.images, Policy::default());
        use crate::model::fetch::Puller;
        assert_eq!(c.fetch, Puller::Agent);
        let e = Config::parse("[images]\nfetch = \"engine\"", Path::new("c.toml")).unwrap();
        assert_eq!(e.fetch, Puller::Engine);
        let c = Config::parse(
            "[images]\ncollect = \"all\"\nhigh = 70\nlow = 60\nmin_age = \"1s\"",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(
            c.images,
            Policy {
                collect: Collect::All,
                high: 70,
                low: 60,
                min_age: 1
            }
        );
        for (text, field) in [
            ("[images]\ncollect = \"some\"", "images.collect"),
            ("[images]\nfetch = \"peers\"", "images.fetch"),
            ("[images]\nhigh = 100", "images.high"),
            ("[images]\nhigh = 0", "images.high"),
            ("[images]\nlow = 85", "images.low"),
            ("[images]\nhigh = 50", "images.low"),
            ("[images]\nmin_age = \"soon\"", "images.min_age"),
            ("[images]\nsize = 1", "unknown field"),
        ] {
            let e = Config::parse(text, Path::new("c.toml")).unwrap_err();
            assert!(e.to_string().contains(field), "{text}: {e}");
        }
    }

    #[test]
    fn the_default_logging_rotates_and_bad_keys_are_named() {
        use crate::engine::Flavour;
        let c = Config::parse("", Path::new("c.toml")).unwrap();
        let docker = Flavour::Docker.node_logging(&c.logging);
        assert_eq!(docker.driver, "local");
        assert_eq!(docker.options["max-size"], "10m");
        assert_eq!(docker.options["max-file"], "3");
        // Podman has no `local` driver and keeps one file per container.
        let podman = Flavour::Podman("4.3.1".into()).node_logging(&c.logging);
        assert_eq!(podman.driver, "json-file");
        assert_eq!(podman.options["max-size"], "10m");
        assert!(!podman.options.contains_key("max-file"));
        // A driver named is every engine's.
        let c = Config::parse(
            "[logging]\ndriver = \"local\"\nmax_size = \"1m\"",
            Path::new("c.toml"),
        )
        .unwrap();
        let l = Flavour::Podman("4.3.1".into()).node_logging(&c.logging);
        assert_eq!(l.driver, "local");
        assert_eq!(l.options["max-size"], "1m");
        // Podman keeps one file: max-file is passed only when named (and
        // refused at create there).
        assert!(!l.options.contains_key("max-file"));
        let c = Config::parse("[logging]\nmax_file = 2", Path::new("c.toml")).unwrap();
        let l = Flavour::Podman("4.3.1".into()).node_logging(&c.logging);
        assert_eq!(l.options["max-file"], "2");
        let l = Flavour::Docker.node_logging(&c.logging);
        assert_eq!(
            (l.driver.as_str(), l.options["max-file"].as_str()),
            ("local", "2")
        );
        let c = Config::parse("[logging]\ndriver = \"journald\"", Path::new("c.toml")).unwrap();
        let l = Flavour::Docker.node_logging(&c.logging);
        assert_eq!(l.driver, "journald");
        assert!(l.options.is_empty());
        for (text, needle) in [
            ("[logging]\nmax_size = \"big\"", "logging.max_size"),
            ("[logging]\nmax_file = 0", "logging.max_file"),
            (
                "[logging]\ndriver = \"journald\"\nmax_file = 2",
                "does not rotate",
            ),
            ("[logging]\ndriver = \"a b\"", "logging.driver"),
        ] {
            let e = Config::parse(text, Path::new("c.toml")).unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn a_nudge_names_its_broker_and_topic_and_bad_values_are_named() {
        let key = crate::plane::envelope::SecretKey::generate()
            .unwrap()
            .public()
            .to_base64();
        let text = |nudge: &str| {
            format!(
                "node_id = \"till-3\"\n[plane]\nurl = \"https://plane.example\"\ntrusted_keys = [{key:?}]\n[plane.nudge]\n{nudge}"
            )
        };
        let c = Config::parse(
            &text("broker = \"mqtts://broker.lan\"\ntopic = \"stead/{node}/hint\"\njitter = \"10s\"\nusername = \"edge\"\npassword_file = \"pw\""),
            Path::new("/etc/stead/c.toml"),
        )
        .unwrap();
        let n = c.plane.unwrap().nudge.unwrap();
        assert_eq!(n.broker.to_string(), "mqtts://broker.lan:8883");
        assert_eq!(n.topic, "stead/till-3/hint");
        assert_eq!(n.jitter, Duration::from_secs(10));
        assert_eq!(n.password_file, Some(PathBuf::from("/etc/stead/pw")));
        let c = Config::parse(&text("broker = \"mqtt://10.0.0.1\""), Path::new("c.toml")).unwrap();
        let n = c.plane.unwrap().nudge.unwrap();
        assert_eq!(
            (n.topic.as_str(), n.jitter),
            ("stead/nudge", crate::plane::config::DEFAULT_NUDGE_JITTER)
        );
        // (the table's lines, the field the error names)
        for (nudge, field) in [
            ("broker = \"http://broker\"", "plane.nudge.broker"),
            ("broker = \"mqtt://u:pw@broker\"", "plane.nudge.broker"),
            (
                "broker = \"mqtt://b\"\ntopic = \"a/#/b\"",
                "plane.nudge.topic",
            ),
            (
                "broker = \"mqtt://b\"\njitter = \"soon\"",
                "plane.nudge.jitter",
            ),
            (
                "broker = \"mqtt://b\"\npassword_file = \"pw\"",
                "plane.nudge.password_file",
            ),
            ("broker = \"mqtt://b\"\npassword = \"pw\"", "unknown field"),
            ("topic = \"t\"", "broker"),
        ] {
            let e = Config::parse(&text(nudge), Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{nudge}: {e}");
            assert!(!e.contains(":pw@"), "{nudge}: {e}");
        }
    }

    #[test]
    fn no_url_in_the_config_carries_a_password() {
        let key = crate::plane::envelope::SecretKey::generate()
            .unwrap()
            .public()
            .to_base64();
        let plane = |url: &str| format!("[plane]\nurl = {url:?}\ntrusted_keys = [{key:?}]\n");
        assert!(Config::parse(&plane("https://plane.example/base"), Path::new("c.toml")).is_ok());
        for (text, field) in [
            (
                plane("https://fleet:s3cret@plane.example/base"),
                "plane.url",
            ),
            (plane("https://fleet@plane.example"), "plane.url"),
            (plane("http://fleet:s3cret@plane.example?x=1"), "plane.url"),
            (
                "insecure_registries = [\"r:5000\", \"me:s3cret@r:5000\"]".into(),
                "insecure_registries[1]",
            ),
        ] {
            let e = Config::parse(&text, Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field) && e.contains("password"), "{text}: {e}");
            assert!(!e.contains("s3cret"), "{text}: {e}");
        }
        // A URL refused for another reason is not shown with its password.
        let e = Config::parse(&plane("ftp://s3cret@h"), Path::new("c.toml")).unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
