//! A web server's directory listing read as links, for `stead plane status
//! --reports URL` and `stead plane rollout watch --reports URL`: the
//! directories under the one listed and the reports (`status.json`) in it.
//! The listings of nginx's `autoindex`, Apache's, Caddy's `browse` and
//! Python's `http.server` are all HTML with one `<a href>` per entry; this
//! is the one reader of them. Nothing outside the listed directory is
//! followed: not its parent, not another host, not a sort link (`?C=N`),
//! so a walk of listings ends.

use http::Uri;

/// An entry of a listing worth following.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// A directory directly under the one listed (its URI ends in `/`).
    Dir(Uri),
    /// A report in the one listed.
    Report(Uri),
}

/// The entries of `html`, the listing of `dir` (whose path ends in `/`),
/// each once, in the order listed.
pub fn entries(html: &str, dir: &Uri) -> Vec<Entry> {
    // A listing may name 100,000 directories: each is looked up, not
    // searched for.
    let mut seen = std::collections::HashSet::new();
    hrefs(html)
        .iter()
        .filter_map(|href| entry(href, dir))
        .filter(|e| seen.insert(e.clone()))
        .collect()
}

/// Every `href` attribute's value, its character references for `&`,
/// quotes and `<>` read.
fn hrefs(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lower = html.to_ascii_lowercase();
    let mut at = 0;
    while let Some(found) = lower[at..].find("href") {
        let mut i = at + found + 4;
        at = i;
        let bytes = html.as_bytes();
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if bytes.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let (start, end) = match bytes.get(i) {
            Some(&q @ (b'"' | b'\'')) => {
                let Some(len) = html[i + 1..].find(q as char) else {
                    break;
                };
                (i + 1, i + 1 + len)
            }
            Some(_) => {
                let len = html[i..]
                    .find(|c: char| c.is_ascii_whitespace() || c == '>')
                    .unwrap_or(html.len() - i);
                (i, i + len)
            }
            None => break,
        };
        out.push(unescape(&html[start..end]));
        at = end;
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// What one link is, resolved against `dir`: a child directory, a report
/// in it, or nothing to follow.
fn entry(href: &str, dir: &Uri) -> Option<Entry> {
    if href.contains(['?', '#']) {
        return None;
    }
    let base = dir.path();
    let path = if let Some(rest) = href
        .strip_prefix("http://")
        .or_else(|| href.strip_prefix("https://"))
    {
        let theirs: Uri = href.parse().ok()?;
        let same = theirs.scheme() == dir.scheme()
            && theirs.host() == dir.host()
            && theirs.port_u16() == dir.port_u16();
        if !same {
            return None;
        }
        format!("/{}", rest.split_once('/')?.1)
    } else if href.starts_with("//") {
        return None;
    } else if href.starts_with('/') {
        href.to_string()
    } else {
        format!("{base}{}", href.strip_prefix("./").unwrap_or(href))
    };
    let name = path.strip_prefix(base)?;
    let (segment, is_dir) = match name.strip_suffix('/') {
        Some(s) => (s, true),
        None => (name, false),
    };
    if segment.is_empty() || segment.contains('/') || segment == "." || segment == ".." {
        return None;
    }
    let uri = |p: &str| -> Option<Uri> {
        let mut parts = dir.clone().into_parts();
        parts.path_and_query = Some(p.parse().ok()?);
        Uri::from_parts(parts).ok()
    };
    if is_dir {
        Some(Entry::Dir(uri(&path)?))
    } else if segment == "status.json" {
        Some(Entry::Report(uri(&path)?))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_of_a_listing() {
        let dir: Uri = "http://plane.example:8080/nodes/".parse().unwrap();
        let d = |p: &str| {
            Some(Entry::Dir(
                format!("http://plane.example:8080{p}").parse().unwrap(),
            ))
        };
        let r = |p: &str| {
            Some(Entry::Report(
                format!("http://plane.example:8080{p}").parse().unwrap(),
            ))
        };
        // (href, what it is)
        #[rustfmt::skip]
        let cases = [
            ("edge-1/", d("/nodes/edge-1/")),                      // nginx, Apache, http.server
            ("./edge-1/", d("/nodes/edge-1/")),                    // Caddy
            ("/nodes/edge-1/", d("/nodes/edge-1/")),               // an absolute path
            ("http://plane.example:8080/nodes/edge-1/", d("/nodes/edge-1/")),
            ("status.json", r("/nodes/status.json")),
            ("edge%201/", d("/nodes/edge%201/")),                  // escaped as listed
            ("desired.json", None),                                // not a report
            ("edge-1/status.json", None),                          // not directly in it
            ("../", None),                                         // its parent
            ("/", None),
            ("/nodes/", None),                                     // itself
            ("/groups/g/", None),                                  // elsewhere on the host
            ("?C=N;O=D", None),                                    // Apache's sort links
            ("#top", None),
            ("edge-1/#x", None),
            ("http://other.example:8080/nodes/edge-1/", None),     // another host
            ("https://plane.example:8080/nodes/edge-1/", None),    // another scheme
            ("//other.example/nodes/edge-1/", None),
            ("./", None),
            ("a/b/", None),
        ];
        for (href, want) in cases {
            assert_eq!(entry(href, &dir), want, "{href}");
        }
    }

    #[test]
    fn hrefs_are_read_as_servers_write_them() {
        let html = r#"<html><body><h1>Index of /nodes/</h1><hr><pre><a href="../">../</a>
<a href="edge-1/">edge-1/</a>                                      03-Dec-2026 10:00       -
<A HREF='edge-2/'>edge-2/</A>
<a class="x" href = edge-3/ >edge-3/</a>
<a href="a&amp;b/">a&amp;b/</a>
<a href="edge-1/">again</a>
<a href="status.json">status.json</a>
</pre><hr></body></html>"#;
        let dir: Uri = "http://h/nodes/".parse().unwrap();
        let got: Vec<String> = entries(html, &dir)
            .into_iter()
            .map(|e| match e {
                Entry::Dir(u) => format!("dir {u}"),
                Entry::Report(u) => format!("report {u}"),
            })
            .collect();
        assert_eq!(
            got,
            [
                "dir http://h/nodes/edge-1/",
                "dir http://h/nodes/edge-2/",
                "dir http://h/nodes/edge-3/",
                "dir http://h/nodes/a&b/",
                "report http://h/nodes/status.json",
            ]
        );
    }
}
