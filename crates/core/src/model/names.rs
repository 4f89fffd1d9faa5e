//! Checked names: module names, node ids, digests, setting keys, input names
//! and absolute paths. Each is built only through `TryFrom`/`new`, so a value
//! of one of these types is valid wherever it travels (store, labels, API).

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why a name, key, digest or path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidName(pub String);

macro_rules! string_newtype {
    ($(#[$m:meta])* $name:ident, $check:expr) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(into = "String")]
        pub struct $name(String);

        // Checked inside the reader (not serde's `try_from`, which checks
        // after it): a JSON reader places the refusal at the string, so
        // `model::json::path_at` names its field.
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_string(Checked::<$name>(std::marker::PhantomData))
            }
        }

        impl $name {
            /// The checked string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidName;
            fn try_from(s: String) -> Result<Self, InvalidName> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(&s).map_err(InvalidName)?;
                Ok(Self(s))
            }
        }

        impl TryFrom<&str> for $name {
            type Error = InvalidName;
            fn try_from(s: &str) -> Result<Self, InvalidName> {
                Self::try_from(s.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// Reads a checked name from a string, checking it as it is read.
struct Checked<T>(std::marker::PhantomData<T>);

impl<T> serde::de::Visitor<'_> for Checked<T>
where
    T: TryFrom<String, Error = InvalidName>,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        self.visit_string(s.to_owned())
    }

    fn visit_string<E: serde::de::Error>(self, s: String) -> Result<T, E> {
        T::try_from(s).map_err(E::custom)
    }
}

string_newtype!(
    /// A module name: `[a-z0-9][a-z0-9-]{0,62}`. The container is `stead-<name>`.
    ModuleName,
    |s| {
        let ok = !s.is_empty()
            && s.len() <= 63
            && s.bytes().enumerate().all(|(i, b)| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || (i > 0 && b == b'-')
            });
        if ok {
            Ok(())
        } else {
            Err(format!(
                "invalid module name {s:?}: must match [a-z0-9][a-z0-9-]{{0,62}}"
            ))
        }
    }
);

impl ModuleName {
    /// The name of the container that runs this module.
    pub fn container_name(&self) -> String {
        format!("stead-{}", self.0)
    }

    /// The name its successor is created under during a recreate, while the
    /// running container keeps its name (a dot: no module name has one, so
    /// no module's container can take it).
    pub fn successor_name(&self) -> String {
        format!("stead-{}.next", self.0)
    }

    /// The name the module's old container is moved to during a recreate,
    /// once its successor runs, so that the successor can take the module's
    /// name at once and the old one is stopped and removed afterwards (a
    /// dot: no module's container can take it).
    pub fn retired_name(&self) -> String {
        format!("stead-{}.old", self.0)
    }
}

string_newtype!(
    /// This node's id, carried by every container it manages as `stead.managed-by`.
    NodeId,
    |s| {
        let ok = !s.is_empty()
            && s.len() <= 63
            && s.bytes().enumerate().all(|(i, b)| {
                b.is_ascii_alphanumeric() || (i > 0 && matches!(b, b'-' | b'_' | b'.'))
            });
        if ok {
            Ok(())
        } else {
            Err(format!(
                "invalid node id {s:?}: must match [A-Za-z0-9][A-Za-z0-9._-]{{0,62}}"
            ))
        }
    }
);

string_newtype!(
    /// A content digest, `sha256:` followed by 64 lowercase hex digits.
    Digest,
    |s| {
        let hex = s.strip_prefix("sha256:").unwrap_or("");
        if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(())
        } else {
            Err(format!("invalid digest {s:?}: must be sha256:<64 lowercase hex digits>"))
        }
    }
);

/// A key digests are keyed with (HMAC-SHA256), derived from the device's
/// local key. Never printed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DigestKey(pub [u8; 32]);

impl fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DigestKey(..)")
    }
}

/// A running SHA-256 (ring's, which TLS links already).
pub struct Hasher(ring::digest::Context);

impl Hasher {
    /// A new hash.
    pub fn new() -> Hasher {
        Hasher(ring::digest::Context::new(&ring::digest::SHA256))
    }

    /// Hashes more bytes.
    pub fn update(&mut self, bytes: impl AsRef<[u8]>) {
        self.0.update(bytes.as_ref());
    }
}

impl Default for Hasher {
    fn default() -> Self {
        Hasher::new()
    }
}

impl Digest {
    /// The sha256 digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        let mut h = Hasher::new();
        h.update(bytes);
        Digest::from_hasher(h)
    }

    /// Finishes a running hash into a digest.
    pub fn from_hasher(h: Hasher) -> Digest {
        Digest::written(h.0.finish().as_ref())
    }

    /// The keyed digest of `bytes` in a domain of its own: HMAC-SHA256
    /// under `key`, written as a digest is. Without the key it cannot be
    /// computed, so a guessed value cannot be checked against it.
    pub fn keyed(key: &DigestKey, domain: &str, bytes: &[u8]) -> Digest {
        let mut m =
            ring::hmac::Context::with_key(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key.0));
        m.update(domain.as_bytes());
        m.update(b"\n");
        m.update(bytes);
        Digest::written(m.sign().as_ref())
    }

    fn written(out: &[u8]) -> Digest {
        let mut s = String::with_capacity(71);
        s.push_str("sha256:");
        for b in out {
            s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            s.push(char::from(b"0123456789abcdef"[usize::from(b & 0xf)]));
        }
        Digest(s)
    }

    /// The digest of a structured value's canonical JSON encoding, in a
    /// domain of its own. Callers pass types whose maps are `BTreeMap`s, so
    /// the encoding is canonical.
    pub fn canonical<T: Serialize + ?Sized>(domain: &str, value: &T) -> Digest {
        let mut h = Hasher::new();
        h.update(domain.as_bytes());
        h.update(b"\n");
        h.update(serde_json::to_vec(value).expect("canonical values serialise"));
        Digest::from_hasher(h)
    }

    /// The 64 hex digits without the algorithm prefix.
    pub fn hex(&self) -> &str {
        &self.0[7..]
    }

    /// A short form for people: `sha256:` and the first 12 hex digits.
    pub fn short(&self) -> &str {
        &self.0[..19]
    }
}

/// The longest setting key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The most segments a setting key may have (each is a level of nesting).
pub const MAX_KEY_SEGMENTS: usize = 16;

string_newtype!(
    /// A dotted setting key such as `database.url`: non-empty segments of
    /// `[A-Za-z0-9_-]`.
    SettingKey,
    |s| {
        if s.len() > MAX_KEY_BYTES || s.bytes().filter(|b| *b == b'.').count() >= MAX_KEY_SEGMENTS {
            // Not quoted: the key may be huge.
            return Err(format!(
                "invalid setting key ({} bytes, {} segments): at most {MAX_KEY_BYTES} bytes and {MAX_KEY_SEGMENTS} segments",
                s.len(),
                s.split('.').count()
            ));
        }
        let ok = !s.is_empty()
            && s.split('.').all(|seg| {
                !seg.is_empty()
                    && seg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            });
        if ok {
            Ok(())
        } else {
            Err(format!(
                "invalid setting key {s:?}: dotted segments of [A-Za-z0-9_-], none empty"
            ))
        }
    }
);

/// The field name of a setting in errors: `settings."<key>"`, or just
/// `settings` for a key too long to quote back.
pub fn setting_field(key: &str) -> String {
    if key.len() > MAX_KEY_BYTES {
        "settings".into()
    } else {
        format!("settings.{key:?}")
    }
}

impl SettingKey {
    /// The key's segments, outermost first.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('.')
    }
}

string_newtype!(
    /// The name of one input a container is created from, by its syntax: a
    /// field's name (`image`, `env`, `shm_size`: `[a-z][a-z0-9_]*`) or a
    /// kind and an absolute path (`config:/etc/app.json`,
    /// `mount:/data`). Which names this agent knows is the labels' reader's
    /// business ([`crate::model::labels`]): a name is not refused for being
    /// one a newer agent added.
    InputName,
    |s| {
        let word = |w: &str| {
            w.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        };
        let ok = match s.split_once(':') {
            Some((kind, path)) => word(kind) && path.starts_with('/'),
            None => word(s),
        };
        if ok && !s.contains(['\n', '\0']) {
            Ok(())
        } else {
            Err(format!("invalid input name {s:?}"))
        }
    }
);

string_newtype!(
    /// An environment variable name, as Compose and the engine take one:
    /// anything but empty, with no `=`, blank or control character (so
    /// `discovery.type` and `VAR-WITH-DASHES` are names; NUL is a control
    /// character).
    EnvName,
    |s| {
        let ok = !s.is_empty() && !s.chars().any(|c| c == '=' || c.is_whitespace() || c.is_control());
        if ok {
            Ok(())
        } else {
            Err(format!("invalid environment variable name {s:?}: a name is not empty and has no `=`, blank or control character"))
        }
    }
);

string_newtype!(
    /// An absolute, normalised path with no `..`, `.` or empty components,
    /// on the host or inside a container.
    AbsPath,
    |s| {
        if s.contains('\0') || s.contains('\n') {
            return Err(format!("invalid path {s:?}: contains a control character"));
        }
        let p = Path::new(s);
        if !p.is_absolute() {
            return Err(format!("invalid path {s:?}: must be absolute"));
        }
        if s.len() > 1 && s.ends_with('/') || s.contains("//") {
            return Err(format!("invalid path {s:?}: must be normalised (no trailing or double slash)"));
        }
        // `Path::components` drops inner `.` segments, so look at the text.
        if s.split('/').any(|seg| seg == "." || seg == "..")
            || p.components().any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
        {
            return Err(format!("invalid path {s:?}: must not contain `.` or `..`"));
        }
        if s == "/" {
            return Err("invalid path \"/\": must name a file or directory below the root".into());
        }
        Ok(())
    }
);

string_newtype!(
    /// A host path a bind mount takes from: an [`AbsPath`], or the host's
    /// root itself (`/`, for a read-only view of the whole host).
    HostPath,
    |s| {
        if s == "/" {
            return Ok(());
        }
        AbsPath::try_from(s).map(|_| ()).map_err(|e| e.0)
    }
);

impl HostPath {
    /// The path as a `Path`.
    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }

    /// The path as an owned `PathBuf`.
    pub fn to_path_buf(&self) -> PathBuf {
        PathBuf::from(&self.0)
    }
}

/// A path as the engine and Compose take it for a mount: one trailing slash
/// names the same path as none (`/etc/prometheus/` is `/etc/prometheus`),
/// so both spellings are one path and one digest. What else a checked path
/// refuses is still refused.
pub fn trailing_slash_dropped(s: &str) -> &str {
    match s.strip_suffix('/') {
        Some(rest) if !rest.is_empty() => rest,
        _ => s,
    }
}

impl AbsPath {
    /// The path as a `Path`.
    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }

    /// The directory it is in and its name; `None` for a path directly
    /// under the root, whose directory is no `AbsPath`.
    pub fn split_parent(&self) -> Option<(AbsPath, &str)> {
        let (dir, name) = self.0.rsplit_once('/')?;
        // A checked path is normalised: its parts are themselves checked
        // paths, but the root itself is not one.
        AbsPath::try_from(dir).ok().map(|d| (d, name))
    }

    /// The path as an owned `PathBuf`.
    pub fn to_path_buf(&self) -> PathBuf {
        PathBuf::from(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_splits_into_its_directory_and_name() {
        let p = |s: &str| AbsPath::try_from(s).unwrap();
        let split = |s: &str| {
            p(s).split_parent()
                .map(|(d, n)| (d.to_string(), n.to_string()))
        };
        assert_eq!(
            split("/etc/app/c.json"),
            Some(("/etc/app".into(), "c.json".into()))
        );
        assert_eq!(split("/etc/c.json"), Some(("/etc".into(), "c.json".into())));
        assert_eq!(split("/app.json"), None);
    }

    #[test]
    fn module_names() {
        for ok in ["a", "sensor", "s-1", "0abc", &"a".repeat(63)] {
            assert!(ModuleName::try_from(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "A", "a_b", "a.b", &"a".repeat(64), "é"] {
            assert!(ModuleName::try_from(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn digests() {
        let d = Digest::of(b"hello");
        assert_eq!(
            d.as_str(),
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(d.short(), "sha256:2cf24dba5fb0");
        assert!(Digest::try_from(d.as_str()).is_ok());
        assert!(Digest::try_from("sha256:ABC").is_err());
        assert!(
            Digest::try_from(
                "md5:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
            )
            .is_err()
        );
    }

    #[test]
    fn a_mount_path_s_one_trailing_slash_is_dropped() {
        for (given, taken) in [
            ("/etc/prometheus/", "/etc/prometheus"),
            ("/etc/prometheus", "/etc/prometheus"),
            ("/", "/"),
            ("/a//", "/a/"),
            ("", ""),
        ] {
            assert_eq!(trailing_slash_dropped(given), taken, "{given:?}");
        }
        // Two slashes are still not a path.
        assert!(AbsPath::try_from(trailing_slash_dropped("/a//")).is_err());
    }

    #[test]
    fn paths() {
        for ok in ["/etc/x.json", "/a", "/srv/sensor/model.bin"] {
            assert!(AbsPath::try_from(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/",
            "etc/x",
            "/etc/../x",
            "/etc/./x",
            "/etc//x",
            "/etc/",
            "./x",
        ] {
            assert!(AbsPath::try_from(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys() {
        assert!(SettingKey::try_from("database.url").is_ok());
        assert!(SettingKey::try_from("a").is_ok());
        for bad in ["", ".a", "a.", "a..b", "a b"] {
            assert!(SettingKey::try_from(bad).is_err(), "{bad}");
        }
        let deep = vec!["a"; MAX_KEY_SEGMENTS].join(".");
        assert!(SettingKey::try_from(deep.as_str()).is_ok());
        let e = SettingKey::try_from(format!("{deep}.a")).unwrap_err();
        assert!(e.0.contains("17 segments"), "{e}");
        let huge = vec!["a"; 100_000].join(".");
        let e = SettingKey::try_from(huge).unwrap_err();
        assert!(e.0.len() < 200, "the key is not quoted back: {e}");
        assert!(SettingKey::try_from("x".repeat(MAX_KEY_BYTES + 1)).is_err());
        for ok in [
            "MODE_1",
            "1MODE",
            "discovery.type",
            "VAR-WITH-DASHES",
            "VAR.WITH.DOTS",
            "ÉTÉ",
        ] {
            assert!(EnvName::try_from(ok).is_ok(), "{ok}");
        }
        for bad in ["", "A=B", "A B", "A\tB", "A\0B", "A\nB"] {
            assert!(EnvName::try_from(bad).is_err(), "{bad:?}");
        }
        for ok in [
            "config:/etc/a",
            "image",
            "shm_size",
            "a_field_of_tomorrow",
            "mount:/",
        ] {
            assert!(InputName::try_from(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Image",
            "1x",
            "config:etc",
            "config:",
            ":/x",
            "a-b",
            "file:/a\nb",
            "x y",
        ] {
            assert!(InputName::try_from(bad).is_err(), "{bad:?}");
        }
    }
}
