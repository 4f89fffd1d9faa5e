//! A web server's directory listing read as links, for `stead-plane status
//! --reports URL` and `stead-plane rollout watch --reports URL`: the
//! directories under the one listed and the reports (`status.json`) in it.
//! The listings of nginx's `autoindex` (its default `html` format),
//! Apache's, Caddy's `browse` and Python's `http.server` are all HTML with
//! one `<a href>` per entry; this is the one reader of them. Nothing
//! outside the listed directory is followed: not its parent, not another
//! host, not a sort link (`?C=N`), so a walk of listings ends.
//!
//! A listing is read as it arrives ([`Listing::feed`]), never held whole:
//! what is kept is the entries found (at most [`MAX_ENTRIES`]) and a link
//! not yet ended (at most [`MAX_HREF`] bytes). A page that is not a
//! listing this reads (nginx's `json` or `xml` autoindex, an error page, a
//! file) is an error, never an empty directory: a listing links to a
//! report, a directory or its parent ([`Listing::finish`]).

use http::Uri;

/// The most entries one listing may name.
pub const MAX_ENTRIES: usize = 250_000;
/// The longest link followed; a longer one is passed over.
pub const MAX_HREF: usize = 4096;

/// What a listing is, said in every error about one.
pub const READ: &str = "an HTML directory listing (nginx's autoindex in its html format, \
                        Apache's, Caddy's browse, Python's http.server) linking to \
                        directories named for nodes, each holding a status.json";

/// An entry of a listing worth following.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// A directory directly under the one listed (its URI ends in `/`).
    Dir(Uri),
    /// A report in the one listed.
    Report(Uri),
}

/// What one link of a listing is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Link {
    Entry(Entry),
    /// The listed directory's parent (`../`, or its path).
    Parent,
    /// Anything else: not followed.
    Other,
}

/// A listing read as it arrives.
pub struct Listing {
    dir: Uri,
    /// What has not been read yet: the tail of what arrived.
    pending: Vec<u8>,
    /// Every entry linked, in order, repeats among them until the end.
    found: Vec<Entry>,
    parent: bool,
    over: bool,
}

impl Listing {
    /// The listing of `dir` (whose path ends in `/`), nothing read yet.
    pub fn new(dir: Uri) -> Listing {
        Listing {
            dir,
            pending: Vec::new(),
            found: Vec::new(),
            parent: false,
            over: false,
        }
    }

    /// Reads the next bytes of the listing.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        self.scan(false);
    }

    /// The entries, each once, in the order listed; or why this is not a
    /// listing this reads (`READ` says what is).
    pub fn finish(mut self) -> Result<Vec<Entry>, String> {
        self.scan(true);
        if self.over {
            return Err(format!("it names more than {MAX_ENTRIES} entries"));
        }
        if self.found.is_empty() && !self.parent {
            return Err(format!(
                "not a listing stead reads: no link to a report, a directory or its parent (expected {READ})"
            ));
        }
        // Each once, in the order first listed (looked up, not searched
        // for: a listing may name 100,000 directories).
        let mut seen = std::collections::HashSet::with_capacity(self.found.len());
        let first: Vec<bool> = self.found.iter().map(|e| seen.insert(e)).collect();
        drop(seen);
        let mut first = first.into_iter();
        self.found.retain(|_| first.next().unwrap_or(false));
        Ok(self.found)
    }

    /// Reads every link that has ended in what is pending (every one when
    /// `end`), keeping the rest.
    fn scan(&mut self, end: bool) {
        let mut at = 0;
        loop {
            let Some(found) = find_href(&self.pending[at..]) else {
                // Keep what may be the start of `href`.
                at = if end {
                    self.pending.len()
                } else {
                    self.pending.len().saturating_sub(3).max(at)
                };
                break;
            };
            let start = at + found;
            match value(&self.pending, start + 4, end) {
                Value::Done(v, next) => {
                    if v.len() <= MAX_HREF {
                        let href = unescape(&String::from_utf8_lossy(v));
                        self.link(&href);
                    }
                    at = next;
                }
                Value::NotOne => at = start + 4,
                Value::Unended if self.pending.len() - start > MAX_HREF => at = start + 4,
                Value::Unended => {
                    at = start;
                    break;
                }
            }
        }
        self.pending.drain(..at);
    }

    fn link(&mut self, href: &str) {
        match link(href, &self.dir) {
            Link::Entry(e) => {
                if self.found.len() >= MAX_ENTRIES {
                    // Past the limit nothing more is kept: the listing is
                    // refused whole.
                    self.over = true;
                    self.found = Vec::new();
                } else if !self.over {
                    self.found.push(e);
                }
            }
            Link::Parent => self.parent = true,
            Link::Other => {}
        }
    }
}

/// The entries of `html`, the whole listing of `dir`.
pub fn entries(html: &str, dir: &Uri) -> Result<Vec<Entry>, String> {
    let mut l = Listing::new(dir.clone());
    l.feed(html.as_bytes());
    l.finish()
}

/// Where the next `href` (in any case) starts.
fn find_href(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w.eq_ignore_ascii_case(b"href"))
}

/// An attribute's value after `href`.
enum Value<'a> {
    /// Its bytes, and where reading goes on.
    Done(&'a [u8], usize),
    /// `href` was not an attribute's name here.
    NotOne,
    /// Its end has not arrived yet.
    Unended,
}

/// The value of the attribute whose `=` is looked for from `i`.
fn value(b: &[u8], mut i: usize, end: bool) -> Value<'_> {
    let unended = if end { Value::NotOne } else { Value::Unended };
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    match b.get(i) {
        None => return unended,
        Some(b'=') => i += 1,
        Some(_) => return Value::NotOne,
    }
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    match b.get(i) {
        None => unended,
        Some(&q @ (b'"' | b'\'')) => match b[i + 1..].iter().position(|&c| c == q) {
            Some(len) => Value::Done(&b[i + 1..i + 1 + len], i + 2 + len),
            None => unended,
        },
        Some(_) => match b[i..]
            .iter()
            .position(|c| c.is_ascii_whitespace() || *c == b'>')
        {
            Some(len) => Value::Done(&b[i..i + len], i + len),
            None if end => Value::Done(&b[i..], b.len()),
            None => Value::Unended,
        },
    }
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// What one link is, resolved against `dir`: a child directory, a report
/// in it, its parent, or nothing to follow.
fn link(href: &str, dir: &Uri) -> Link {
    let base = dir.path();
    let parent = base
        .trim_end_matches('/')
        .rsplit_once('/')
        .map_or("/", |(p, _)| p);
    let parent = format!("{}/", parent.trim_end_matches('/'));
    if matches!(href, ".." | "../") || (href == parent && base != "/") {
        return Link::Parent;
    }
    entry(href, dir).map_or(Link::Other, Link::Entry)
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
            .unwrap()
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

    fn read_in_chunks(text: &str, size: usize) -> Result<Vec<Entry>, String> {
        let mut l = Listing::new("http://h/nodes/".parse().unwrap());
        for chunk in text.as_bytes().chunks(size) {
            l.feed(chunk);
        }
        l.finish()
    }

    #[test]
    fn a_listing_read_in_pieces_reads_as_a_whole() {
        let html = r#"<a href="../">../</a><a HREF = 'edge-1/'>x</a><a href=edge-2/>y</a>
<a href="status.json">s</a><a href="edge-4/<a href=edge-3/"#;
        let whole = read_in_chunks(html, html.len()).unwrap();
        assert_eq!(whole.len(), 4, "{whole:?}");
        for size in 1..html.len() {
            assert_eq!(read_in_chunks(html, size).unwrap(), whole, "{size}");
        }
    }

    #[test]
    fn what_is_not_a_listing_is_an_error_never_an_empty_directory() {
        let many: String = (0..=MAX_ENTRIES)
            .map(|i| format!("<a href=\"n{i}/\">"))
            .collect();
        let long = format!(
            "<a href=\"{}/\"><a href=\"../\">",
            "x".repeat(MAX_HREF + 10)
        );
        // (what was served, read as entries, or the error it gives)
        #[rustfmt::skip]
        let cases: [(&str, Result<usize, &str>); 10] = [
            // nginx's autoindex_format json and xml, of the same directory
            (r#"[{ "name":"edge-1", "type":"directory", "mtime":"Fri, 04 Dec 2026 10:00:00 GMT" }]"#, Err("not a listing stead reads")),
            (r#"<?xml version="1.0"?><list><directory mtime="2026-12-04T10:00:00Z">edge-1</directory></list>"#, Err("not a listing stead reads")),
            ("<html><body>Welcome to nginx!</body></html>", Err("no link to a report")),
            (r#"<a href="https://other.example/">elsewhere</a><a href="?C=N">sort</a>"#, Err("not a listing")),
            ("", Err("not a listing")),
            // an empty directory: its parent alone
            (r#"<pre><a href="../">../</a></pre>"#, Ok(0)),
            (r#"<a href="/">Parent Directory</a>"#, Ok(0)),            // Apache
            (r#"<a href="edge-1/">edge-1/</a>"#, Ok(1)),               // http.server: no parent link
            (&many, Err("more than 250000 entries")),
            (&long, Ok(0)),                                            // a link too long is passed over
        ];
        for (served, want) in cases {
            let got = read_in_chunks(served, 8192);
            match (got, want) {
                (Ok(e), Ok(n)) => assert_eq!(e.len(), n, "{}", &served[..served.len().min(80)]),
                (Err(e), Err(says)) => assert!(e.contains(says), "{e}"),
                (got, _) => panic!("{}: {got:?}", &served[..served.len().min(80)]),
            }
        }
    }
}
