//! What `--upload s3://BUCKET/PREFIX` puts in a bucket, pure: the target
//! read from its URL, which files of a site are the documents a host
//! serves and in what order they go up (roots before the root that names
//! them, `root.json` last of roots, then group documents, then the node
//! documents that name the groups), which of them the bucket does not
//! already hold (an object's ETag, the MD5 of its single-part PUT, against
//! the file's), an S3 `ListObjectsV2` answer read, and keys and query
//! values encoded as SigV4 signs them. The requests are `cli::upload`'s.

use std::collections::BTreeMap;

use crate::model::fleet::GroupName;
use crate::model::names::NodeId;

/// Where a site is uploaded: a bucket (path-style, on the endpoint) and
/// a prefix of its keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The bucket's name.
    pub bucket: String,
    /// The keys' prefix, without a leading or trailing `/` (empty: the
    /// bucket's top).
    pub prefix: String,
}

impl Target {
    /// `s3://BUCKET[/PREFIX]`: a bucket name (3 to 63 of `a-z 0-9 . - _`,
    /// upper case too for old buckets) and a prefix of path segments of
    /// `A-Z a-z 0-9 . - _` (no `.` or `..` segment, no empty one but a
    /// trailing `/`).
    pub fn parse(s: &str) -> Result<Target, String> {
        let rest = s
            .strip_prefix("s3://")
            .ok_or_else(|| format!("{s:?}: give s3://BUCKET/PREFIX"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        let name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
        if !(3..=63).contains(&bucket.len()) || !bucket.chars().all(name) {
            return Err(format!(
                "{bucket:?}: not a bucket name (3 to 63 letters, digits, '.', '-', '_')"
            ));
        }
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|seg| seg.is_empty() || seg == "." || seg == ".." || !seg.chars().all(name))
        {
            return Err(format!(
                "{prefix:?}: a prefix is path segments of letters, digits, '.', '-', '_'"
            ));
        }
        Ok(Target {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The key of the site's file `rel`.
    pub fn key(&self, rel: &str) -> String {
        if self.prefix.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.prefix)
        }
    }

    /// What every key of the site starts with (for a listing).
    pub fn list_prefix(&self) -> String {
        self.key("")
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

/// When a file of the site goes up, `None` for one a host does not serve
/// from the operator (a device's report, anything else): each root of
/// `roots/` in version order (a device walks them one at a time to the
/// version `root.json` says), then `root.json`, then the group documents,
/// then the node documents (a node's document may name a group only now
/// published, and a device that sees it fetches its groups at once).
pub fn order(rel: &str) -> Option<(u8, u64)> {
    if rel == "root.json" {
        return Some((1, 0));
    }
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["roots", file] => {
            let v = file.strip_suffix(".json")?;
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) || v.starts_with('0') {
                return None;
            }
            Some((0, v.parse().ok()?))
        }
        ["groups", name, "desired.json"] => GroupName::try_from(*name).ok().map(|_| (2, 0)),
        ["nodes", name, "desired.json"] => NodeId::try_from(*name).ok().map(|_| (3, 0)),
        _ => None,
    }
}

/// Whether an object's ETag says it holds bytes of MD5 `md5` (lower-case
/// hex): S3 makes a single-part PUT's ETag the MD5 of its body, quoted. An
/// ETag of another kind (a multipart upload's, an SSE-KMS object's) never
/// matches, and the file is put again.
pub fn holds(etag: &str, md5: &str) -> bool {
    let e = etag.strip_prefix("W/").unwrap_or(etag).trim_matches('"');
    e.eq_ignore_ascii_case(md5)
}

/// The files to put, in the order they go up, each step a list that may
/// go up at once: every served file of `site` (path relative to the site,
/// its MD5) that `bucket` (key to ETag) does not hold as it is.
pub fn plan(
    target: &Target,
    site: &[(String, String)],
    bucket: &BTreeMap<String, String>,
) -> Vec<Vec<String>> {
    let mut todo: Vec<((u8, u64), &String)> = site
        .iter()
        .filter_map(|(rel, md5)| {
            let at = order(rel)?;
            let held = bucket
                .get(&target.key(rel))
                .is_some_and(|etag| holds(etag, md5));
            (!held).then_some((at, rel))
        })
        .collect();
    todo.sort();
    let mut steps: Vec<Vec<String>> = Vec::new();
    let mut last = None;
    for (at, rel) in todo {
        // Roots one at a time; the others by kind.
        let step = if at.0 == 0 { at } else { (at.0, 0) };
        if last != Some(step) {
            steps.push(Vec::new());
            last = Some(step);
        }
        if let Some(s) = steps.last_mut() {
            s.push(rel.clone());
        }
    }
    steps
}

/// `s` encoded as SigV4 and S3 take a query value or a key's path (with
/// `slash`, `/` kept): the unreserved characters as they are, every other
/// byte `%XX`.
pub fn encode(s: &str, slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One page of a `ListObjectsV2` answer: each key's ETag, and the token
/// of the next page when there is one.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// Key to ETag.
    pub objects: BTreeMap<String, String>,
    /// `NextContinuationToken`, when `IsTruncated` is true.
    pub next: Option<String>,
}

/// The raw text of each `<name>…</name>` in `xml`, in order.
fn raw<'a>(xml: &'a str, name: &str) -> Result<Vec<&'a str>, String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        let end = after
            .find(&close)
            .ok_or_else(|| format!("<{name}> is not closed"))?;
        out.push(&after[..end]);
        rest = &after[end + close.len()..];
    }
    Ok(out)
}

/// The text of each `<name>…</name>` in `xml`, unescaped, in order.
fn elements(xml: &str, name: &str) -> Result<Vec<String>, String> {
    raw(xml, name)?.into_iter().map(unescape).collect()
}

/// XML's five named entities and character references.
fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let end = after
            .find(';')
            .ok_or_else(|| "an entity without ';'".to_string())?;
        let c = match &after[..end] {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            e => {
                let n = match e.strip_prefix("#x").or_else(|| e.strip_prefix("#X")) {
                    Some(h) => u32::from_str_radix(h, 16).ok(),
                    None => e.strip_prefix('#').and_then(|d| d.parse().ok()),
                };
                n.and_then(char::from_u32)
                    .ok_or_else(|| format!("an unknown entity &{e};"))?
            }
        };
        out.push(c);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Reads a `ListObjectsV2` answer.
pub fn read_page(xml: &str) -> Result<Page, String> {
    if !xml.contains("<ListBucketResult") {
        return Err("not a ListBucketResult".into());
    }
    let mut objects = BTreeMap::new();
    for contents in raw(xml, "Contents")? {
        let key = elements(contents, "Key")?;
        let etag = elements(contents, "ETag")?;
        match (key.as_slice(), etag.as_slice()) {
            ([k], [e]) => objects.insert(k.clone(), e.clone()),
            ([k], []) => objects.insert(k.clone(), String::new()),
            _ => return Err("an object without one key".into()),
        };
    }
    let truncated = elements(xml, "IsTruncated")?.first().map(String::as_str) == Some("true");
    let next = if truncated {
        Some(
            elements(xml, "NextContinuationToken")?
                .into_iter()
                .next()
                .filter(|t| !t.is_empty())
                .ok_or("a truncated listing without a NextContinuationToken")?,
        )
    } else {
        None
    };
    Ok(Page { objects, next })
}

/// An S3 error answer's `<Code>` (`AccessDenied`, `SignatureDoesNotMatch`,
/// …): all of it that is said (its other elements may repeat the request
/// signed).
pub fn error_code(xml: &str) -> Option<String> {
    let code = elements(xml, "Code").ok()?.into_iter().next()?;
    (!code.is_empty() && code.len() <= 64 && code.chars().all(|c| c.is_ascii_alphanumeric()))
        .then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_target() {
        let t = |b: &str, p: &str| {
            Ok(Target {
                bucket: b.into(),
                prefix: p.into(),
            })
        };
        #[rustfmt::skip]
        let cases: [(&str, Result<Target, String>); 10] = [
            ("s3://fleet", t("fleet", "")),
            ("s3://fleet/", t("fleet", "")),
            ("s3://fleet/prod/eu", t("fleet", "prod/eu")),
            ("s3://fleet/prod/eu/", t("fleet", "prod/eu")),
            ("s3://my.bucket-1/p_1", t("my.bucket-1", "p_1")),
            ("https://fleet/p", Err("\"https://fleet/p\": give s3://BUCKET/PREFIX".into())),
            ("s3://ab/p", Err("\"ab\": not a bucket name (3 to 63 letters, digits, '.', '-', '_')".into())),
            ("s3://fl eet/p", Err("\"fl eet\": not a bucket name (3 to 63 letters, digits, '.', '-', '_')".into())),
            ("s3://fleet/a//b", Err("\"a//b\": a prefix is path segments of letters, digits, '.', '-', '_'".into())),
            ("s3://fleet/a/../b", Err("\"a/../b\": a prefix is path segments of letters, digits, '.', '-', '_'".into())),
        ];
        for (text, want) in cases {
            assert_eq!(Target::parse(text), want, "{text}");
        }
        let p = Target::parse("s3://fleet/prod").unwrap();
        assert_eq!(p.key("root.json"), "prod/root.json");
        assert_eq!(p.list_prefix(), "prod/");
        let top = Target::parse("s3://fleet").unwrap();
        assert_eq!(top.key("root.json"), "root.json");
        assert_eq!(top.list_prefix(), "");
    }

    #[test]
    fn which_files_go_up_and_when() {
        #[rustfmt::skip]
        let cases: [(&str, Option<(u8, u64)>); 12] = [
            ("roots/1.json", Some((0, 1))),
            ("roots/12.json", Some((0, 12))),
            ("root.json", Some((1, 0))),
            ("groups/edge-eu/desired.json", Some((2, 0))),
            ("nodes/edge-0042/desired.json", Some((3, 0))),
            ("nodes/edge-0042/status.json", None),
            ("nodes/.hidden/desired.json", None),
            ("roots/01.json", None),
            ("roots/x.json", None),
            ("roots/.json", None),
            ("groups/a/b/desired.json", None),
            ("release.json", None),
        ];
        for (rel, want) in cases {
            assert_eq!(order(rel), want, "{rel}");
        }
    }

    #[test]
    fn an_etag_holds_the_bytes_of_its_md5() {
        let md5 = "9e107d9d372bb6826bd81d3542a419d6";
        #[rustfmt::skip]
        let cases: [(&str, bool); 5] = [
            ("\"9e107d9d372bb6826bd81d3542a419d6\"", true),
            ("9E107D9D372BB6826BD81D3542A419D6", true),
            ("W/\"9e107d9d372bb6826bd81d3542a419d6\"", true),
            ("\"9e107d9d372bb6826bd81d3542a419d6-2\"", false),
            ("", false),
        ];
        for (etag, want) in cases {
            assert_eq!(holds(etag, md5), want, "{etag}");
        }
    }

    #[test]
    fn what_is_put_and_in_what_order() {
        let t = Target::parse("s3://fleet/p").unwrap();
        let site: Vec<(String, String)> = [
            ("nodes/b/desired.json", "b1"),
            ("nodes/a/desired.json", "a1"),
            ("nodes/a/status.json", "s1"),
            ("groups/g/desired.json", "g1"),
            ("root.json", "r2"),
            ("roots/2.json", "r2"),
            ("roots/1.json", "r1"),
            ("roots/10.json", "r10"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let none = BTreeMap::new();
        assert_eq!(
            plan(&t, &site, &none),
            vec![
                vec!["roots/1.json".to_string()],
                vec!["roots/2.json".to_string()],
                vec!["roots/10.json".to_string()],
                vec!["root.json".to_string()],
                vec!["groups/g/desired.json".to_string()],
                vec![
                    "nodes/a/desired.json".to_string(),
                    "nodes/b/desired.json".to_string()
                ],
            ]
        );
        // What the bucket holds as it is stays; another ETag, or a key
        // outside the prefix, does not count.
        let bucket: BTreeMap<String, String> = [
            ("p/roots/1.json", "\"r1\""),
            ("p/roots/2.json", "\"r2\""),
            ("p/roots/10.json", "\"r10\""),
            ("p/root.json", "\"r2\""),
            ("p/groups/g/desired.json", "\"g1\""),
            ("p/nodes/a/desired.json", "\"a0\""),
            ("nodes/b/desired.json", "\"b1\""),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(
            plan(&t, &site, &bucket),
            vec![vec![
                "nodes/a/desired.json".to_string(),
                "nodes/b/desired.json".to_string()
            ]]
        );
    }

    #[test]
    fn keys_and_query_values_are_encoded_as_signed() {
        #[rustfmt::skip]
        let cases: [(&str, bool, &str); 4] = [
            ("p/nodes/a-1_b.c~/desired.json", true, "p/nodes/a-1_b.c~/desired.json"),
            ("p/", false, "p%2F"),
            ("1/a+b=c d", false, "1%2Fa%2Bb%3Dc%20d"),
            ("é", true, "%C3%A9"),
        ];
        for (s, slash, want) in cases {
            assert_eq!(encode(s, slash), want, "{s}");
        }
    }

    #[test]
    fn a_listing_is_read() {
        let page = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>fleet</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>
<Contents><Key>p/nodes/a&amp;b/desired.json</Key><LastModified>2026-12-06T00:00:00.000Z</LastModified><ETag>&quot;abc&quot;</ETag><Size>10</Size></Contents>
<Contents><Key>p/root.json</Key><ETag>"def"</ETag></Contents>
<NextContinuationToken>1/a+b=&#x3D;</NextContinuationToken></ListBucketResult>"#;
        let p = read_page(page).unwrap();
        assert_eq!(p.objects["p/nodes/a&b/desired.json"], "\"abc\"");
        assert_eq!(p.objects["p/root.json"], "\"def\"");
        assert_eq!(p.next.as_deref(), Some("1/a+b=="));
        let last = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
        assert_eq!(read_page(last).unwrap(), Page::default());
        #[rustfmt::skip]
        let bad: [(&str, &str); 4] = [
            ("<Error><Code>AccessDenied</Code></Error>", "not a ListBucketResult"),
            ("<ListBucketResult><Contents><Key>a</Key>", "<Contents> is not closed"),
            ("<ListBucketResult><Contents><Key>a&bogus;</Key></Contents></ListBucketResult>", "an unknown entity &bogus;"),
            ("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>", "a truncated listing without a NextContinuationToken"),
        ];
        for (xml, says) in bad {
            assert_eq!(read_page(xml).unwrap_err(), says, "{xml}");
        }
    }

    #[test]
    fn an_error_answer_says_its_code_alone() {
        #[rustfmt::skip]
        let cases: [(&str, Option<&str>); 4] = [
            ("<Error><Code>SignatureDoesNotMatch</Code><StringToSign>AWS4…</StringToSign></Error>", Some("SignatureDoesNotMatch")),
            ("<Error><Code>InvalidAccessKeyId</Code></Error>", Some("InvalidAccessKeyId")),
            ("<Error><Code>a b</Code></Error>", None),
            ("not xml", None),
        ];
        for (xml, want) in cases {
            assert_eq!(error_code(xml).as_deref(), want, "{xml}");
        }
    }
}
