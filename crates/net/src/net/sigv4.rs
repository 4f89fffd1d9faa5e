//! AWS Signature Version 4, as S3 and S3-compatible hosts take it: the
//! canonical request, the string to sign, the derived signing key and the
//! `Authorization` header (docs.aws.amazon.com, "Signature Version 4
//! signing process"); the credentials read from an AWS credentials file.
//! Pure but for reading that file.

use ring::digest::{SHA256, digest};
use ring::hmac;

/// An access key: its id, its secret, and a session token when it is a
/// temporary one. The secret is never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `AKIA…`.
    pub access_key_id: String,
    secret_access_key: String,
    /// A temporary key's token (`x-amz-security-token`).
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ..)", self.access_key_id)
    }
}

impl Credentials {
    /// A key of these parts.
    pub fn new(
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
    ) -> Credentials {
        Credentials {
            access_key_id,
            secret_access_key,
            session_token,
        }
    }

    /// Reads an AWS credentials file's `profile` (`[default]`): its
    /// `aws_access_key_id`, `aws_secret_access_key` and, when there is one,
    /// `aws_session_token`. An error names the line or the key, never a
    /// value.
    pub fn parse(text: &str, profile: &str) -> Result<Credentials, String> {
        let (mut section, mut id, mut secret, mut token) = (None, None, None, None);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = Some(name.trim().to_string());
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                return Err(format!("line {}: not key = value", n + 1));
            };
            if section.as_deref() != Some(profile) {
                continue;
            }
            let v = Some(v.trim().to_string());
            match k.trim() {
                "aws_access_key_id" => id = v,
                "aws_secret_access_key" => secret = v,
                "aws_session_token" => token = v,
                _ => {}
            }
        }
        let need = |v: Option<String>, key: &str| {
            v.filter(|v| !v.is_empty())
                .ok_or_else(|| format!("no {key} in profile [{profile}]"))
        };
        Ok(Credentials {
            access_key_id: need(id, "aws_access_key_id")?,
            secret_access_key: need(secret, "aws_secret_access_key")?,
            session_token: token.filter(|t| !t.is_empty()),
        })
    }
}

/// What is signed of a request.
pub struct Request<'a> {
    /// `GET`, `PUT`.
    pub method: &'a str,
    /// The path as sent (percent-encoded where it is).
    pub path: &'a str,
    /// The query as sent, without `?` (empty: none).
    pub query: &'a str,
    /// The headers signed: names in any case, values as sent.
    pub headers: &'a [(&'a str, &'a str)],
    /// The hex SHA-256 of the body.
    pub payload_hash: &'a str,
}

/// The hex SHA-256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    hex(digest(&SHA256, bytes).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A path segment's characters as SigV4 encodes them: unreserved ones
/// and `/` as they are, `%XX` left as it was sent, everything else
/// percent-encoded.
fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/' | b'%') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() { "/".into() } else { out }
}

/// The canonical request.
pub fn canonical_request(r: &Request) -> (String, String) {
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_ascii_lowercase(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect();
    crate::model::sort::sort(&mut headers);
    let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let mut query: Vec<(&str, &str)> = r
        .query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    crate::model::sort::sort(&mut query);
    let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    (
        format!(
            "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
            r.method,
            encode_path(r.path),
            query.join("&"),
            r.payload_hash
        ),
        signed,
    )
}

fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// The `Authorization` header's value for `r`, signed at `amz_date`
/// (`YYYYMMDDTHHMMSSZ`) for `region` and `service`.
pub fn authorization(
    c: &Credentials,
    region: &str,
    service: &str,
    amz_date: &str,
    r: &Request,
) -> String {
    let date = &amz_date[..amz_date.len().min(8)];
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let (canonical, signed) = canonical_request(r);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex_sha256(canonical.as_bytes())
    );
    let k = mac(
        format!("AWS4{}", c.secret_access_key).as_bytes(),
        date.as_bytes(),
    );
    let k = mac(&k, region.as_bytes());
    let k = mac(&k, service.as_bytes());
    let k = mac(&k, b"aws4_request");
    let signature = hex(&mac(&k, to_sign.as_bytes()));
    format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
        c.access_key_id
    )
}

/// `YYYYMMDDTHHMMSSZ` of a time in seconds since the epoch.
pub fn amz_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (y, m, d) = crate::model::time::civil_from_days(days);
    let s = secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn the_published_examples_sign_as_aws_says() {
        // AWS's SigV4 test suite, get-vanilla.
        let suite = Credentials::new(
            "AKIDEXAMPLE".into(),
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            None,
        );
        let r = Request {
            method: "GET",
            path: "/",
            query: "",
            headers: &[
                ("Host", "example.amazonaws.com"),
                ("X-Amz-Date", "20150830T123600Z"),
            ],
            payload_hash: EMPTY,
        };
        assert_eq!(
            authorization(&suite, "us-east-1", "service", "20150830T123600Z", &r),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
        // S3's documentation, "GET Object" (examplebucket, a range).
        let s3 = Credentials::new(
            "AKIAIOSFODNN7EXAMPLE".into(),
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            None,
        );
        let r = Request {
            method: "GET",
            path: "/test.txt",
            query: "",
            headers: &[
                ("Host", "examplebucket.s3.amazonaws.com"),
                ("Range", "bytes=0-9"),
                ("x-amz-content-sha256", EMPTY),
                ("x-amz-date", "20130524T000000Z"),
            ],
            payload_hash: EMPTY,
        };
        assert_eq!(
            authorization(&s3, "us-east-1", "s3", "20130524T000000Z", &r),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
        assert_eq!(amz_date(1_369_353_600), "20130524T000000Z");
    }

    #[test]
    fn a_credentials_file_is_read_by_profile_and_its_values_never_said() {
        let text = "# keys\n[other]\naws_access_key_id = X\n[default]\naws_access_key_id = AKIA1\naws_secret_access_key = s3cr3t\n";
        let c = Credentials::parse(text, "default").unwrap();
        assert_eq!(c.access_key_id, "AKIA1");
        assert_eq!(c.session_token, None);
        assert!(!format!("{c:?}").contains("s3cr3t"));
        for (text, says) in [
            (
                "[default]\naws_access_key_id = A\n",
                "no aws_secret_access_key in profile [default]",
            ),
            ("[default]\nsecret\n", "line 2: not key = value"),
            (
                "[x]\naws_access_key_id = A\naws_secret_access_key = B\n",
                "no aws_access_key_id",
            ),
        ] {
            let e = Credentials::parse(text, "default").unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains('B') || !text.contains("= B"), "{e}");
        }
    }
}
