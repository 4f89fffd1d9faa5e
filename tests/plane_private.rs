//! A plane on a host that is not public. Over HTTPS, nginx asking for a
//! client certificate and a bearer token: the agent presents both, and
//! nobody without them is answered. And a private bucket of an
//! S3-compatible server run by the test (moto's, from PyPI, which checks
//! every request's AWS Signature Version 4 against the IAM keys it made).
//! Documents are put by botocore (a third party's signer) and read by the
//! real agent with its own; its report is PUT the same way; 304s work; an
//! anonymous GET is refused; a key file others may read is refused, naming
//! it; a key rotated by replacing the file is read again. And the
//! operator's tool publishing straight to that bucket (`stead-plane
//! publish --upload`, `root verify --upload`) with the same credentials
//! file: every object reads back byte for byte, a second publish puts
//! only what changed, a key refused or not allowed to put fails naming the
//! answer and no secret, and a device takes what was published so. The
//! server comes from `STEAD_TEST_MOTO` (the venv scripts/test.sh makes):
//! without it the test fails, saying so.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use common::agent::{Agent, http_get};
use common::desired::*;
use common::s3::{Moto, credentials, venv};
use common::*;
use stead::plane::envelope::SecretKey;

fn polls(agent: &Agent, outcome: &str) -> u64 {
    let (_, m) = agent.get("/metrics");
    m.lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "stead_plane_polls_total{{outcome=\"{outcome}\"}} "
            ))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A node whose plane is a private bucket on moto's S3 server, polled
/// every second with the key its credentials file holds.
struct S3Node {
    moto: Moto,
    key: serde_json::Value,
    signing: SecretKey,
    d: tempfile::TempDir,
    key_file: PathBuf,
    creds: PathBuf,
    n: Node,
}

impl S3Node {
    fn start(tag: &str) -> S3Node {
        let moto = Moto::start();
        let key: serde_json::Value = serde_json::from_str(&moto.py(&["setup"])).unwrap();
        let signing = SecretKey::generate().unwrap();
        let d = tempfile::tempdir().unwrap();
        let key_file = d.path().join("key.json");
        std::fs::write(&key_file, key.to_string()).unwrap();
        let creds = d.path().join("credentials");
        credentials(&creds, &key, 0o600);
        let n = Node::new(tag).with_config(&format!(
        "[plane]\nurl = \"{}/fleet\"\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"\ns3_credentials = {:?}\ns3_region = \"us-east-1\"",
        moto.url,
        signing.public().to_base64(),
        creds.display().to_string()
    ));
        S3Node {
            moto,
            key,
            signing,
            d,
            key_file,
            creds,
            n,
        }
    }
}

#[test]
fn a_private_bucket_serves_the_plane_with_signed_requests_and_refuses_anyone_else() {
    let S3Node {
        moto,
        key,
        signing,
        d,
        key_file,
        creds,
        n,
    } = S3Node::start("s3");
    let m = n.module("web");
    let put = |name: &str, bytes: &[u8]| {
        let f = d.path().join("object");
        std::fs::write(&f, bytes).unwrap();
        moto.py(&[
            "put",
            key_file.to_str().unwrap(),
            "fleet",
            name,
            f.to_str().unwrap(),
        ]);
    };
    let doc = format!("nodes/{}/desired.json", n.id);
    put(
        &doc,
        &sign(&signing, &payload(&n, 1, vec![module(&m, "one")])),
    );

    // Read with the agent's signatures; then asked conditionally: 304s.
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    n.wait_for(30, "304s from the bucket", || {
        polls(&agent, "not-modified") >= 2
    });
    // The report is PUT, signed, and reads back with botocore.
    n.wait_for(30, "the report in the bucket", || {
        let out = Command::new(venv().join("bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/s3/moto.py"))
            .args(["get", &moto.url, key_file.to_str().unwrap(), "fleet"])
            .arg(format!("nodes/{}/status.json", n.id))
            .output()
            .unwrap();
        out.status.success() && {
            let r = common::plane::open_report(&n.id, &out.stdout);
            r["node"] == n.id.as_str() && r["plane"]["held"]["revision"] == 1
        }
    });
    // Nobody else reads it.
    let addr = moto.url.trim_start_matches("http://");
    let (code, _) = http_get(addr, &format!("/fleet/{doc}"));
    assert_eq!(code, 403, "an anonymous GET");
    // The key is not in what the agent shows.
    let secret = key["SecretAccessKey"].as_str().unwrap();
    for path in ["/v1/plane", "/v1/status"] {
        let (_, body) = agent.get(path);
        assert!(!body.contains(secret), "{path}: {body}");
    }

    // A key file others may read is refused, named; nothing is fetched.
    std::fs::set_permissions(&creds, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let p = wait_plane(&n, &agent, "the key file refused", |p| {
        p["error"]
            .as_str()
            .is_some_and(|e| e.contains("may be read by others (mode 0644): make it 0600"))
    });
    assert!(!p.to_string().contains(secret), "{p}");

    // The key rotated (the old one deleted): the file replaced is read at
    // the next request, and the next revision is taken.
    let new: serde_json::Value =
        serde_json::from_str(&moto.py(&["rotate", key_file.to_str().unwrap()])).unwrap();
    std::fs::write(&key_file, new.to_string()).unwrap();
    credentials(&creds, &new, 0o600);
    put(
        &doc,
        &sign(&signing, &payload(&n, 2, vec![module(&m, "two")])),
    );
    wait_v(&n, &m, "two");
    wait_plane(&n, &agent, "no error", |p| p["error"].is_null());

    // The operator's tool publishes the next one from a fleet description
    // straight to the bucket, with the same credentials file: the device
    // takes it.
    let key_path = d.path().join("plane.key");
    stead::host::keyfile::write(&key_path, &signing).unwrap();
    let fleet = d.path().join("fleet");
    std::fs::create_dir_all(fleet.join("nodes")).unwrap();
    std::fs::write(
        fleet.join(format!("nodes/{}.json", n.id)),
        serde_json::json!({
            "poll": {"interval": "1s", "jitter": "100ms"},
            "modules": [module(&m, "three")],
        })
        .to_string(),
    )
    .unwrap();
    let site = d.path().join("site");
    let (ok, out, err) = common::plane::plane_cli_with(
        &[
            "publish",
            "--key",
            key_path.to_str().unwrap(),
            "--fleet",
            fleet.to_str().unwrap(),
            "--site",
            site.to_str().unwrap(),
            "--upload",
            "s3://fleet",
            "--s3-credentials",
            creds.to_str().unwrap(),
            "--s3-endpoint",
            &moto.url,
        ],
        "",
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("uploaded {doc}")), "{out}");
    wait_v(&n, &m, "three");
    let log = Agent::log(&n);
    assert!(!log.contains(secret) && !log.contains(new["SecretAccessKey"].as_str().unwrap()));
    assert!(!out.contains(new["SecretAccessKey"].as_str().unwrap()));
}

/// `stead-plane publish --upload` to a private bucket (moto checking
/// every signature), with the credentials file format the devices use: a
/// fleet and its root go up and read back byte for byte with botocore; a
/// second publish with one node changed puts that node's document alone
/// (the bucket keeps every version: each PUT is one); wrong credentials
/// exit non-zero naming the answer and no secret, the site written; the
/// next run puts what the bucket misses.
#[test]
fn publish_uploads_the_site_to_a_private_bucket_and_then_only_what_changed() {
    use serde_json::json;
    let moto = Moto::start();
    let key: serde_json::Value = serde_json::from_str(&moto.py(&["setup"])).unwrap();
    let d = tempfile::tempdir().unwrap();
    let key_file = d.path().join("key.json");
    std::fs::write(&key_file, key.to_string()).unwrap();
    let kf = key_file.to_str().unwrap();
    moto.py(&["versioning", kf, "fleet"]);
    let creds = d.path().join("credentials");
    credentials(&creds, &key, 0o600);
    let signing = SecretKey::generate().unwrap();
    let key_path = d.path().join("plane.key");
    stead::host::keyfile::write(&key_path, &signing).unwrap();
    let public = signing.public().to_base64();
    let (fleet, site) = (d.path().join("fleet"), d.path().join("site"));
    std::fs::create_dir_all(fleet.join("groups")).unwrap();
    std::fs::create_dir_all(fleet.join("nodes")).unwrap();
    let web = |tag: &str| json!({"name": "web", "image": format!("registry.example/web:{tag}")});
    std::fs::write(
        fleet.join("groups/edge.json"),
        json!({"modules": [web("1")]}).to_string(),
    )
    .unwrap();
    let own = |tag: &str| {
        json!({"groups": ["edge"], "modules": [{"name": "own", "image": format!("registry.example/own:{tag}")}]})
            .to_string()
    };
    std::fs::write(fleet.join("nodes/a.json"), own("1")).unwrap();
    std::fs::write(fleet.join("nodes.csv"), "node,groups\nb,edge\nc,edge\n").unwrap();
    let plane = |args: &[&str], creds: &Path| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend([
            "--site",
            site.to_str().unwrap(),
            "--upload",
            "s3://fleet/prod",
            "--s3-credentials",
            creds.to_str().unwrap(),
            "--s3-endpoint",
            &moto.url,
        ]);
        common::plane::plane_cli_with(&all, "")
    };
    let publish = |creds: &Path| {
        plane(
            &[
                "publish",
                "--key",
                key_path.to_str().unwrap(),
                "--fleet",
                fleet.to_str().unwrap(),
            ],
            creds,
        )
    };
    let versions = || -> std::collections::BTreeMap<String, u64> {
        serde_json::from_str(&moto.py(&["versions", kf, "fleet", "prod/"])).unwrap()
    };

    // A root, checked and published with root verify, then the fleet.
    let root = d.path().join("root-1.json");
    common::plane::plane_cli(&[
        "root",
        "init",
        "--root-key",
        &public,
        "--documents-key",
        &public,
        "--out",
        root.to_str().unwrap(),
    ]);
    common::plane::plane_cli(&[
        "root",
        "sign",
        "--key",
        key_path.to_str().unwrap(),
        "--in",
        root.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
    ]);
    let (ok, out, err) = plane(
        &[
            "root",
            "verify",
            "--trusted",
            &public,
            "--in",
            root.to_str().unwrap(),
            "--publish",
        ],
        &creds,
    );
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("2 of 2 documents uploaded to s3://fleet/prod"),
        "{out}"
    );
    let (ok, out, err) = publish(&creds);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("4 of 6 documents uploaded to s3://fleet/prod; 2 already there"),
        "{out}"
    );
    let served = [
        "root.json",
        "roots/1.json",
        "groups/edge/desired.json",
        "nodes/a/desired.json",
        "nodes/b/desired.json",
        "nodes/c/desired.json",
    ];
    let want: std::collections::BTreeMap<String, u64> =
        served.iter().map(|r| (format!("prod/{r}"), 1)).collect();
    assert_eq!(versions(), want, "one PUT of each, nothing else");
    let read_back = |rel: &str| {
        let out = Command::new(venv().join("bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/s3/moto.py"))
            .args(["get", &moto.url, kf, "fleet", &format!("prod/{rel}")])
            .output()
            .unwrap();
        assert!(out.status.success(), "{rel}");
        out.stdout
    };
    for rel in served {
        assert_eq!(
            read_back(rel),
            std::fs::read(site.join(rel)).unwrap(),
            "{rel}"
        );
    }
    assert_eq!(
        moto.py(&["type", kf, "fleet", "prod/nodes/a/desired.json"])
            .trim(),
        "application/json"
    );

    // One node changed: its document alone is signed and put.
    std::fs::write(fleet.join("nodes/a.json"), own("2")).unwrap();
    let (ok, out, err) = publish(&creds);
    assert!(ok, "{out}{err}");
    assert!(out.contains("uploaded nodes/a/desired.json"), "{out}");
    assert!(out.contains("1 of 6 documents uploaded"), "{out}");
    let mut want = want;
    want.insert("prod/nodes/a/desired.json".into(), 2);
    assert_eq!(versions(), want);
    assert_eq!(
        read_back("nodes/a/desired.json"),
        std::fs::read(site.join("nodes/a/desired.json")).unwrap()
    );

    // Wrong credentials: the site is written, nothing goes up, the answer
    // is named and no secret said.
    let wrong = d.path().join("wrong");
    std::fs::write(
        &wrong,
        format!(
            "[default]\naws_access_key_id = {}\naws_secret_access_key = n0t-the-s3cret\n",
            key["AccessKeyId"].as_str().unwrap()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrong, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    std::fs::write(fleet.join("nodes/a.json"), own("3")).unwrap();
    let (ok, out, err) = publish(&wrong);
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("cannot list s3://fleet/prod: HTTP 403 Forbidden"),
        "{err}"
    );
    let said = format!("{out}{err}");
    assert!(!said.contains("n0t-the-s3cret"), "{said}");
    assert!(
        !said.contains(key["SecretAccessKey"].as_str().unwrap()),
        "{said}"
    );
    assert!(out.contains("signed nodes/a/desired.json"), "{out}");
    assert_eq!(versions(), want, "nothing put");
    // A key that may list but not put: the first step that fails (the
    // group's) names the file and the answer, and the nodes after it are
    // not put.
    let reader: serde_json::Value = serde_json::from_str(&moto.py(&["reader", kf])).unwrap();
    let reader_creds = d.path().join("reader");
    credentials(&reader_creds, &reader, 0o600);
    std::fs::write(
        fleet.join("groups/edge.json"),
        json!({"modules": [web("2")]}).to_string(),
    )
    .unwrap();
    let (ok, out, err) = publish(&reader_creds);
    assert!(!ok, "{out}{err}");
    assert!(out.contains("signed groups/edge/desired.json"), "{out}");
    assert!(
        err.contains(
            "cannot upload groups/edge/desired.json to s3://fleet/prod/groups/edge/desired.json: \
             HTTP 403 Forbidden (AccessDenied)"
        ),
        "{err}"
    );
    assert!(
        !err.contains("nodes/a") && !out.contains("uploaded"),
        "{out}{err}"
    );
    assert!(!format!("{out}{err}").contains(reader["SecretAccessKey"].as_str().unwrap()));
    assert_eq!(versions(), want, "nothing put");
    // A file others may read is refused, naming it, never its content.
    std::fs::set_permissions(&creds, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let (ok, out, err) = publish(&creds);
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("may be read by others (mode 0644): make it 0600"),
        "{err}"
    );
    assert!(!format!("{out}{err}").contains(key["SecretAccessKey"].as_str().unwrap()));
    // The next run signs nothing and puts what the bucket misses.
    std::fs::set_permissions(&creds, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (ok, out, err) = publish(&creds);
    assert!(ok, "{out}{err}");
    assert!(out.contains("0 of 4 documents signed"), "{out}");
    assert!(out.contains("2 of 6 documents uploaded"), "{out}");
    want.insert("prod/nodes/a/desired.json".into(), 3);
    want.insert("prod/groups/edge/desired.json".into(), 2);
    assert_eq!(versions(), want);
    for rel in served {
        assert_eq!(
            read_back(rel),
            std::fs::read(site.join(rel)).unwrap(),
            "{rel}"
        );
    }
}

/// nginx on loopback over TLS, answering only a client with a certificate
/// of `tls`'s CA and `Authorization: Bearer <token>`; reports are PUT.
struct Private {
    child: Child,
    port: u16,
    root: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Private {
    fn drop(&mut self) {
        common::tls::end_nginx(&mut self.child);
    }
}

impl Private {
    fn start(tls: &common::registry::Tls, token: &str) -> Private {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("nodes")).unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        let port = common::registry::free_port();
        let (cert, key) = tls.server();
        let conf = format!(
            r#"user root root;
worker_processes 1;
daemon off;
pid "{d}/nginx.pid";
error_log "{d}/error.log" info;
events {{ worker_connections 64; }}
http {{
    default_type application/octet-stream;
    client_body_temp_path "{d}/tmp/body";
    proxy_temp_path "{d}/tmp/proxy";
    fastcgi_temp_path "{d}/tmp/fastcgi";
    uwsgi_temp_path "{d}/tmp/uwsgi";
    scgi_temp_path "{d}/tmp/scgi";
    access_log "{d}/access.log";
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate "{cert}";
        ssl_certificate_key "{key}";
        ssl_client_certificate "{ca}";
        ssl_verify_client on;
        root "{root}";
        if ($http_authorization != "Bearer {token}") {{ return 401; }}
        location ~ ^/nodes/[^/]+/status\.json$ {{
            dav_methods PUT;
            create_full_put_path on;
            limit_except GET PUT {{ deny all; }}
        }}
        location / {{ limit_except GET {{ deny all; }} }}
    }}
}}
"#,
            cert = cert.display(),
            key = key.display(),
            ca = tls.ca.display(),
            root = root.display(),
        );
        let child = common::tls::start_nginx(dir.path(), &conf, port);
        Private {
            child,
            port,
            root,
            _dir: dir,
        }
    }
}

/// The status a GET of `url` is answered with by a client of `http`
/// (0: no answer at all).
fn status_of(http: &stead::net::http::Http, url: &str, headers: &http::HeaderMap) -> u16 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(http.send(
        http::Method::GET,
        url.parse().unwrap(),
        headers,
        std::time::Duration::from_secs(10),
        1 << 20,
    ))
    .map_or(0, |a| a.status.as_u16())
}

#[test]
fn a_host_asking_for_a_client_certificate_and_a_token_is_answered_to_the_agent_alone() {
    let tls = common::registry::Tls::new();
    let token = format!("t0ken-{}", std::process::id());
    let host = Private::start(&tls, &token);
    let signing = SecretKey::generate().unwrap();
    let d = tempfile::tempdir().unwrap();
    let (cert, key) = tls.client("edge", d.path());
    let token_file = d.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let base = format!("https://127.0.0.1:{}", host.port);
    let n = Node::new("mtls").with_config(&format!(
        "[plane]\nurl = {base:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"\nca = {:?}\ntoken_file = {:?}\nclient_cert = {:?}\nclient_key = {:?}",
        signing.public().to_base64(),
        tls.ca.display().to_string(),
        token_file.display().to_string(),
        cert.display().to_string(),
        key.display().to_string(),
    ));
    let m = n.module("web");
    let doc = host.root.join(format!("nodes/{}/desired.json", n.id));
    std::fs::create_dir_all(doc.parent().unwrap()).unwrap();
    std::fs::write(
        &doc,
        sign(&signing, &payload(&n, 1, vec![module(&m, "one")])),
    )
    .unwrap();
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");
    n.wait_for(30, "the report PUT", || {
        std::fs::read(host.root.join(format!("nodes/{}/status.json", n.id)))
            .ok()
            .is_some_and(|b| common::plane::open_report(&n.id, &b)["node"] == n.id.as_str())
    });
    n.wait_for(30, "304s", || polls(&agent, "not-modified") >= 1);

    // Without the certificate there is no answer but nginx's refusal;
    // with it and without the token, 401; with both, the document.
    let url = format!("{base}/nodes/{}/desired.json", n.id);
    let no_cert = stead::net::http::Http::new(Some(&tls.ca)).unwrap();
    let with_cert = stead::net::http::Http::with_client_cert(Some(&tls.ca), &cert, &key).unwrap();
    let mut bearer = http::HeaderMap::new();
    bearer.insert(
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    assert_eq!(status_of(&no_cert, &url, &bearer), 400, "no certificate");
    assert_eq!(
        status_of(&with_cert, &url, &http::HeaderMap::new()),
        401,
        "no token"
    );
    assert_eq!(status_of(&with_cert, &url, &bearer), 200);
    // The token is said nowhere the agent speaks.
    for path in ["/v1/plane", "/v1/status"] {
        assert!(!agent.get(path).1.contains(&token), "{path}");
    }
    assert!(!Agent::log(&n).contains(&token));

    // A client key others may read, from the start: the plane is
    // configured, and its error names the file and its mode, as a token
    // file's does; put right, it is used with no restart.
    drop(agent);
    let mode = |m: u32| {
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap()
    };
    mode(0o644);
    let agent = Agent::start(&n);
    let plane = || -> serde_json::Value {
        serde_json::from_str(&agent.get("/v1/plane").1).unwrap_or_default()
    };
    let said = format!(
        "{} may be read by others (mode 0644): make it 0600",
        key.display()
    );
    n.wait_for(30, "the key's fault in the plane's error", || {
        let p = plane();
        p["configured"] == true && p["error"].as_str().is_some_and(|e| e.contains(&said))
    });
    let held_since = plane()["last_contact"].as_u64().unwrap_or(0);
    mode(0o600);
    n.wait_for(30, "the host answered again", || {
        let p = plane();
        p["error"].is_null() && p["last_contact"].as_u64() > Some(held_since)
    });
}

/// One-shot uploads to a private bucket: a support bundle to the plane's
/// host with the device's own credentials, and a module's logs to a
/// presigned URL the action names. Each is read back with botocore and
/// opened with the reference tools (tar); neither the bucket's key nor
/// the presigned URL's signature is in what the device shows, its events
/// or its log.
#[test]
fn uploads_go_to_the_plane_s_bucket_and_to_a_presigned_url_and_show_no_credential() {
    use serde_json::json;
    let S3Node {
        moto,
        key,
        signing,
        d,
        key_file,
        creds: _,
        n,
    } = S3Node::start("s3up");
    let m = n.module("web");
    let kf = key_file.to_str().unwrap();
    let put = |name: &str, bytes: &[u8]| {
        let f = d.path().join("object");
        std::fs::write(&f, bytes).unwrap();
        moto.py(&["put", kf, "fleet", name, f.to_str().unwrap()]);
    };
    let get = |name: &str| -> Option<Vec<u8>> {
        let out = Command::new(venv().join("bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/s3/moto.py"))
            .args(["get", &moto.url, kf, "fleet", name])
            .output()
            .unwrap();
        out.status.success().then_some(out.stdout)
    };
    let doc = format!("nodes/{}/desired.json", n.id);
    put(
        &doc,
        &sign(&signing, &payload(&n, 1, vec![module(&m, "one")])),
    );
    let agent = Agent::start(&n);
    wait_v(&n, &m, "one");

    let presigned = moto
        .py(&["presign", kf, "fleet", "drop/web.log"])
        .trim()
        .to_string();
    let signature = presigned
        .split(['?', '&'])
        .find_map(|p| p.strip_prefix("X-Amz-Signature="))
        .expect("a presigned URL's signature")
        .to_string();
    let expires = stead::model::time::format_rfc3339(now() + 3600);
    let mut p = payload(&n, 2, vec![module(&m, "one")]);
    p["actions"] = json!([
        {"id": "bundle-1", "kind": "support-bundle", "expires": expires},
        {"id": "logs-1", "kind": "upload-logs", "module": m, "expires": expires, "upload_to": presigned},
    ]);
    put(&doc, &sign(&signing, &p));
    let actions =
        || -> serde_json::Value { serde_json::from_str(&agent.get("/v1/actions").1).unwrap() };
    let status_of = |id: &str| {
        actions()["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .map(|a| a["status"].as_str().unwrap_or_default().to_string())
    };
    n.wait_for(120, "both uploads done", || {
        status_of("bundle-1").as_deref() == Some("done")
            && status_of("logs-1").as_deref() == Some("done")
    });

    // The bundle: on the plane's host, beside the node's report; a tar
    // the reference tar lists and opens.
    let bundle = get(&format!(
        "nodes/{}/uploads/bundle-1/support-bundle.tar",
        n.id
    ))
    .expect("the bundle in the bucket");
    let dir = d.path().join("bundle");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(d.path().join("b.tar"), &bundle).unwrap();
    let out = Command::new("tar")
        .args(["-xvf", d.path().join("b.tar").to_str().unwrap(), "-C"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    let module_log = format!("logs/{m}.log");
    for f in [
        "report.json",
        "events.json",
        "store.txt",
        "agent.log",
        &module_log,
    ] {
        assert!(listed.lines().any(|l| l == f), "{f} not in {listed}");
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["node"], n.id.as_str());
    let log = std::fs::read_to_string(dir.join(format!("logs/{m}.log"))).unwrap();
    assert!(log.contains("V=one"), "{log}");
    let store = std::fs::read_to_string(dir.join("store.txt")).unwrap();
    assert!(store.contains(&format!("  {m}: revision ")), "{store}");
    assert!(
        !std::fs::read_to_string(dir.join("agent.log"))
            .unwrap()
            .is_empty()
    );
    serde_json::from_slice::<serde_json::Value>(&std::fs::read(dir.join("events.json")).unwrap())
        .unwrap();

    // The module's logs: at the presigned URL, as text.
    let logs =
        String::from_utf8(get("drop/web.log").expect("the logs at the presigned URL")).unwrap();
    assert!(logs.contains("V=one"), "{logs}");

    // No credential anywhere the device shows or keeps in the clear.
    let secret = key["SecretAccessKey"].as_str().unwrap();
    let a = actions().to_string();
    assert!(
        a.contains("uploaded") && a.contains("drop/web.log?…"),
        "{a}"
    );
    let (_, events) = agent.get("/v1/events?limit=1000");
    let shown = [
        a,
        events,
        Agent::log(&n),
        String::from_utf8_lossy(&bundle).to_string(),
    ];
    for s in &shown {
        assert!(
            !s.contains(&signature),
            "the presigned URL's signature shown: {s}"
        );
        assert!(!s.contains(secret), "the bucket's key shown");
    }
}
