//! A URL as text: the one rule for the URLs stead is given (no user name
//! or password: [`check_no_userinfo`]) and how one is shown ([`shown`]:
//! no credentials, no query, clipped). Pure; the HTTP client is
//! `stead_net`'s.

/// The authority of a URL's text (between `scheme://` and the path, query
/// or fragment), if it has one.
fn authority(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    Some(rest.split(['/', '?', '#']).next().unwrap_or(rest))
}

/// Refuses a URL that carries a user name or password (`user:pass@host`):
/// a URL is shown in the status, the log and the plane's reports, so a
/// secret in it would be read where others read. The error never quotes
/// the URL; credentials go in files of their own.
pub fn check_no_userinfo(url: &str) -> Result<(), String> {
    match authority(url) {
        Some(a) if a.contains('@') => Err(
            "must not carry a user name or password (user:…@host): a URL is shown in the status, \
             the log and every report"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// The URL with any user name or password cut out (`scheme://…@host/…`),
/// for an error that has to show a URL it refuses.
pub fn without_userinfo(url: &str) -> String {
    match (url.find("://"), authority(url)) {
        (Some(at), Some(a)) => match a.rfind('@') {
            Some(i) => format!("{}…{}", &url[..at + 3], &url[at + 3 + i..]),
            None => url.to_string(),
        },
        _ => url.to_string(),
    }
}

/// The most of a URL's text shown (in the log, the status, a report): a
/// URL a document or a host gave may be of any length.
pub const SHOWN_URL: usize = 256;

/// A URL as it may be shown: without a user name or password, without
/// its query (a presigned URL's query is a credential: its signature lets
/// whoever holds it write until it expires), clipped to [`SHOWN_URL`]
/// bytes.
pub fn shown(url: &str) -> String {
    let u = without_userinfo(url);
    let u = match u.split_once('?') {
        Some((base, _)) => format!("{base}?…"),
        None => u,
    };
    crate::model::text::clip(&u, SHOWN_URL).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_not_shown() {
        assert_eq!(
            shown(
                "https://b.s3.amazonaws.com/n/status.json?X-Amz-Signature=abc&X-Amz-Credential=AKIA"
            ),
            "https://b.s3.amazonaws.com/n/status.json?…"
        );
        assert_eq!(shown("https://u:p@h/x"), "https://…@h/x");
        assert_eq!(shown("https://h/x"), "https://h/x");
        let long = format!("https://h/{}", "a".repeat(60_000));
        let s = shown(&long);
        assert!(s.len() <= SHOWN_URL && s.ends_with("bytes cut)"), "{s}");
    }

    #[test]
    fn userinfo_is_refused_and_never_shown() {
        for (url, refused, shown) in [
            (
                "https://plane.example/base",
                false,
                "https://plane.example/base",
            ),
            (
                "http://10.0.0.1:8080/s?a=b@c",
                false,
                "http://10.0.0.1:8080/s?a=b@c",
            ),
            ("http://h/p@q", false, "http://h/p@q"),
            (
                "https://user:s3cret@plane.example/x",
                true,
                "https://…@plane.example/x",
            ),
            (
                "https://user@plane.example",
                true,
                "https://…@plane.example",
            ),
            ("http://a:b@c@h:1?q", true, "http://…@h:1?q"),
            ("https://:s3cret@h#f", true, "https://…@h#f"),
            ("no scheme user:s3cret@h", false, "no scheme user:s3cret@h"),
        ] {
            assert_eq!(check_no_userinfo(url).is_err(), refused, "{url}");
            if let Err(e) = check_no_userinfo(url) {
                assert!(
                    !e.contains("s3cret") && e.contains("user name or password"),
                    "{e}"
                );
            }
            assert_eq!(without_userinfo(url), shown, "{url}");
        }
    }
}
