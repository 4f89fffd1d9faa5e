//! Module versions as a registry publishes them: tags read strictly as
//! `[v]MAJOR.MINOR.PATCH[-suffix]` (`latest`, dates and commit hashes are
//! not versions), a range of compatible versions (`^1.4`, `>=1.2, <2`), and
//! the choice of the newest compatible tag. A suffix (`-alpine`) is a
//! variant, not a pre-release: a tag matches only tags of the same suffix.

use std::cmp::Ordering;
use std::fmt;

/// A tag that is a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagVersion {
    /// The tag as published.
    pub tag: String,
    /// Its version (no pre-release, no build).
    pub version: semver::Version,
    /// Its variant suffix, without the dash.
    pub suffix: Option<String>,
}

impl TagVersion {
    /// Reads a tag as a version; `None` when it is not one.
    pub fn parse(tag: &str) -> Option<TagVersion> {
        let core = tag.strip_prefix('v').unwrap_or(tag);
        let (core, suffix) = match core.split_once('-') {
            Some((c, s)) => {
                let ok = !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
                if !ok {
                    return None;
                }
                (c, Some(s.to_string()))
            }
            None => (core, None),
        };
        let mut parts = core.split('.');
        let mut next = || -> Option<u64> {
            let p = parts.next()?;
            // No leading zeros, digits only (a date or a hash is not one).
            if p.is_empty() || p.len() > 9 || (p.len() > 1 && p.starts_with('0')) {
                return None;
            }
            if !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse().ok()
        };
        let (major, minor, patch) = (next()?, next()?, next()?);
        if parts.next().is_some() {
            return None;
        }
        Some(TagVersion {
            tag: tag.to_string(),
            version: semver::Version::new(major, minor, patch),
            suffix,
        })
    }

    /// Whether `other` is the same variant (the same suffix, or none).
    pub fn same_variant(&self, other: &TagVersion) -> bool {
        self.suffix == other.suffix
    }
}

impl fmt::Display for TagVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.tag)
    }
}

/// A range of compatible versions, as an intention's `update.range` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    text: String,
    req: semver::VersionReq,
}

impl Range {
    /// Parses a range (`^1.4`, `~1.4.2`, `>=1.2, <2`, `1.*`); the error
    /// says what is wrong.
    pub fn parse(s: &str) -> Result<Range, String> {
        if s.trim().is_empty() || s.len() > 128 {
            return Err("a range is 1 to 128 characters, such as \"^1.4\"".into());
        }
        let req = semver::VersionReq::parse(s).map_err(|e| format!("invalid range: {e}"))?;
        if req.comparators.iter().any(|c| !c.pre.is_empty()) {
            return Err("a range names no pre-release (a tag's suffix is its variant)".into());
        }
        Ok(Range {
            text: s.to_string(),
            req,
        })
    }

    /// Whether a version is within the range.
    pub fn matches(&self, v: &TagVersion) -> bool {
        self.req.matches(&v.version)
    }

    /// The range as a semver requirement.
    pub fn req(&self) -> &semver::VersionReq {
        &self.req
    }

    /// The range as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The candidates for an update from `running`, newest first: tags that
/// are versions of the same variant, within `range`, and not below the
/// running version. Of two tags for one version (`v1.2.0`, `1.2.0`), the
/// one written as the running tag is (with or without `v`) comes first.
pub fn candidates<'a>(
    tags: impl IntoIterator<Item = &'a str>,
    range: &Range,
    running: &TagVersion,
) -> Vec<TagVersion> {
    let running_v = running.tag.starts_with('v');
    let mut out: Vec<TagVersion> = tags
        .into_iter()
        .filter_map(TagVersion::parse)
        .filter(|t| t.same_variant(running) && range.matches(t) && t.version >= running.version)
        .collect();
    super::sort::sort_by(&mut out, |a, b| {
        b.version
            .cmp(&a.version)
            .then_with(|| {
                let (av, bv) = (a.tag.starts_with('v'), b.tag.starts_with('v'));
                match (av == running_v, bv == running_v) {
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    _ => Ordering::Equal,
                }
            })
            .then_with(|| a.tag.cmp(&b.tag))
    });
    out
}

/// The first `keep` of [`candidates`] over a tag list read one tag at a
/// time, holding at most a few times `keep` tags whatever the list's
/// length.
pub struct Newest<'a> {
    range: &'a Range,
    running: &'a TagVersion,
    keep: usize,
    tags: Vec<String>,
}

impl<'a> Newest<'a> {
    /// Keeps the `keep` newest candidates from `running` within `range`.
    pub fn new(range: &'a Range, running: &'a TagVersion, keep: usize) -> Newest<'a> {
        Newest {
            range,
            running,
            keep,
            tags: Vec::new(),
        }
    }

    /// Takes one tag in (a tag that is no candidate is dropped at once).
    pub fn offer(&mut self, tag: &str) {
        if candidates([tag], self.range, self.running).is_empty() {
            return;
        }
        self.tags.push(tag.to_string());
        if self.tags.len() >= 4 * self.keep.max(1) {
            self.tags = self.sorted().into_iter().map(|t| t.tag).collect();
        }
    }

    /// The candidates kept, newest first.
    pub fn finish(self) -> Vec<TagVersion> {
        self.sorted()
    }

    fn sorted(&self) -> Vec<TagVersion> {
        let mut out = candidates(
            self.tags.iter().map(String::as_str),
            self.range,
            self.running,
        );
        out.truncate(self.keep);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_read_one_at_a_time_is_the_head_of_the_candidates() {
        let many: Vec<String> = (0..200).map(|k| format!("1.{k}.0")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        for (tags, range, running, keep) in [
            (
                vec!["1.0.0", "1.2.0", "v1.2.0", "2.0.0", "latest"],
                "^1",
                "1.0.0",
                8,
            ),
            (vec!["1.0.0", "1.2.0", "v1.2.0", "1.1.0"], "^1", "v1.0.0", 2),
            (
                vec!["1.0.0-alpine", "1.3.0-alpine", "1.4.0"],
                "^1",
                "1.0.0-alpine",
                8,
            ),
            (vec!["a", "b", "20240101"], "^1", "1.0.0", 8),
            (many.clone(), "^1", "1.0.0", 8),
            (many.iter().rev().copied().collect(), "^1", "1.0.0", 3),
            (many.clone(), "~1.5", "1.5.0", 1),
        ] {
            let range = Range::parse(range).unwrap();
            let running = TagVersion::parse(running).unwrap();
            let mut n = Newest::new(&range, &running, keep);
            for t in &tags {
                n.offer(t);
            }
            let got: Vec<String> = n.finish().into_iter().map(|t| t.tag).collect();
            let want: Vec<String> = candidates(tags.iter().copied(), &range, &running)
                .into_iter()
                .take(keep)
                .map(|t| t.tag)
                .collect();
            assert_eq!(got, want, "{tags:?} {keep}");
        }
    }

    #[test]
    fn tags_are_versions_only_when_strictly_so() {
        let v = |t: &str| TagVersion::parse(t).map(|t| (t.version.to_string(), t.suffix));
        assert_eq!(v("1.2.0"), Some(("1.2.0".into(), None)));
        assert_eq!(v("v1.10.0"), Some(("1.10.0".into(), None)));
        assert_eq!(
            v("1.2.0-alpine"),
            Some(("1.2.0".into(), Some("alpine".into())))
        );
        assert_eq!(
            v("1.2.0-alpine3.18"),
            Some(("1.2.0".into(), Some("alpine3.18".into())))
        );
        for not in [
            "latest", "20240101", "1.2", "1", "1.2.3.4", "01.2.3", "1.02.3", "a1b2c3d", "v",
            "1.2.x", "1.2.3-", "V1.2.3", "1.2.3+b", "",
        ] {
            assert_eq!(v(not), None, "{not}");
        }
    }

    #[test]
    fn the_newest_compatible_tag_of_the_same_variant_comes_first() {
        let tags = [
            "v1.10.0",
            "1.2.0",
            "1.2.0-alpine",
            "20240101",
            "latest",
            "1.9.3",
            "2.0.0",
            "1.1.0",
            "1.10.0",
            "0.9.0",
        ];
        let pick = |running: &str, range: &str| -> Vec<String> {
            candidates(
                tags,
                &Range::parse(range).unwrap(),
                &TagVersion::parse(running).unwrap(),
            )
            .into_iter()
            .map(|t| t.tag)
            .collect()
        };
        assert_eq!(pick("1.2.0", "^1"), ["1.10.0", "v1.10.0", "1.9.3", "1.2.0"]);
        assert_eq!(
            pick("v1.2.0", "^1"),
            ["v1.10.0", "1.10.0", "1.9.3", "1.2.0"]
        );
        assert_eq!(pick("1.2.0", "~1.2"), ["1.2.0"]);
        assert_eq!(
            pick("1.2.0", ">=1.2, <3"),
            ["2.0.0", "1.10.0", "v1.10.0", "1.9.3", "1.2.0"]
        );
        // A suffix matches only itself; never below what runs.
        assert_eq!(pick("1.1.0-alpine", "^1"), ["1.2.0-alpine"]);
        assert_eq!(pick("1.9.3", "^1.2"), ["1.10.0", "v1.10.0", "1.9.3"]);
    }

    #[test]
    fn ranges_are_checked() {
        assert!(Range::parse("^1.4").is_ok());
        assert!(Range::parse(">=1.2, <2").is_ok());
        for bad in ["", "  ", "^1.4-rc.1", "not a range", ">=>1"] {
            assert!(Range::parse(bad).is_err(), "{bad:?}");
        }
    }
}
