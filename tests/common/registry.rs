//! Real OCI registries for tests: Debian's `docker-registry` (Distribution)
//! on loopback, plain HTTP, or with TLS from a test CA made here and
//! htpasswd (bcrypt) auth; two of them may share one storage directory, so
//! images pushed to the plain one (the engine pushes to loopback without
//! TLS) are served by the TLS one too. Versioned images are made from the
//! test image with `docker commit --change LABEL …`. A [`Site`] is the
//! two together, as a fleet's devices pull from it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stead::plane::envelope::SecretKey;

use super::plane::Plane;
use super::{IMAGE_1, Node};

/// A registry process; killed on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// Its storage directory.
    pub storage: PathBuf,
    /// Its log.
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

/// TLS material for a registry: a CA, and a server certificate for
/// 127.0.0.1 signed by it.
pub struct Tls {
    /// The CA certificate (PEM), for clients to trust.
    pub ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tls {
    /// Makes a CA and a server certificate with openssl.
    pub fn new() -> Tls {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        let run = |args: &[&str]| {
            let o = Command::new("openssl").args(args).output().unwrap();
            assert!(
                o.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        let s = |p: &PathBuf| p.display().to_string();
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=stead test CA",
            "-keyout",
            &s(&p("ca.key")),
            "-out",
            &s(&p("ca.pem")),
        ]);
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &s(&p("server.key")),
            "-out",
            &s(&p("server.csr")),
        ]);
        std::fs::write(
            p("ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            &s(&p("server.csr")),
            "-CA",
            &s(&p("ca.pem")),
            "-CAkey",
            &s(&p("ca.key")),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &s(&p("ext")),
            "-out",
            &s(&p("server.pem")),
        ]);
        Tls {
            ca: p("ca.pem"),
            cert: p("server.pem"),
            key: p("server.key"),
            _dir: dir,
        }
    }

    /// The server certificate and its key (PEM files).
    pub fn server(&self) -> (&Path, &Path) {
        (&self.cert, &self.key)
    }

    /// A client certificate for `cn` signed by the CA, and its key (0600),
    /// in `dir`.
    pub fn client(&self, cn: &str, dir: &Path) -> (PathBuf, PathBuf) {
        let ca_dir = self.ca.parent().unwrap();
        let (cert, key, csr, ext) = (
            dir.join(format!("{cn}.pem")),
            dir.join(format!("{cn}.key")),
            dir.join(format!("{cn}.csr")),
            dir.join(format!("{cn}.ext")),
        );
        std::fs::write(
            &ext,
            "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        let s = |p: &Path| p.display().to_string();
        for args in [
            vec![
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &format!("/CN={cn}"),
                "-keyout",
                &s(&key),
                "-out",
                &s(&csr),
            ],
            vec![
                "x509",
                "-req",
                "-in",
                &s(&csr),
                "-CA",
                &s(&self.ca),
                "-CAkey",
                &s(&ca_dir.join("ca.key")),
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &s(&ext),
                "-out",
                &s(&cert),
            ],
        ] {
            let o = Command::new("openssl").args(&args).output().unwrap();
            assert!(
                o.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        (cert, key)
    }
}

/// How a test registry authenticates.
#[derive(Clone, Copy)]
enum Auth<'a> {
    None,
    Htpasswd(&'a str, &'a str),
    /// A bearer-token challenge naming this realm, tokens checked against
    /// this certificate bundle.
    Token(&'a str, &'a Path),
}

/// The Docker Engine's CLI, whichever engine the suite runs against: the
/// test images are pushed from it.
pub fn docker_engine(args: &[&str]) -> String {
    let o = Command::new("docker")
        .env("DOCKER_HOST", "unix:///var/run/docker.sock")
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Podman trusts the test CA for this registry while it lives (Podman
/// pulls plain HTTP from no registry it is not told is insecure).
pub struct Trusted(Option<PathBuf>);

impl Trusted {
    pub fn new(tls: &Tls, addr: &str) -> Trusted {
        if !super::on_podman() {
            return Trusted(None);
        }
        let dir = PathBuf::from(format!("/etc/containers/certs.d/{addr}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&tls.ca, dir.join("ca.crt")).unwrap();
        Trusted(Some(dir))
    }
}

impl Drop for Trusted {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A free loopback port (bound and released: the registry takes it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Registry {
    /// A plain-HTTP registry with its own storage.
    pub fn plain() -> Registry {
        Registry::start(None, None, Auth::None)
    }

    /// A registry over TLS with htpasswd auth for `user:password`, serving
    /// `storage` (another registry's).
    pub fn tls_with_auth(tls: &Tls, storage: &Path, user: &str, password: &str) -> Registry {
        Registry::start(Some(tls), Some(storage), Auth::Htpasswd(user, password))
    }

    /// A registry over TLS whose `/v2/` challenge asks for a bearer token
    /// from `realm` (its tokens are never checked: no test gets one).
    pub fn tls_with_token_realm(tls: &Tls, realm: &str) -> Registry {
        Registry::start(Some(tls), None, Auth::Token(realm, &tls.ca))
    }

    fn start(tls: Option<&Tls>, storage: Option<&Path>, auth: Auth<'_>) -> Registry {
        let o = Command::new("docker-registry").arg("--version").output();
        assert!(
            o.is_ok_and(|o| o.status.success()),
            "docker-registry is needed (scripts/test.sh installs it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let storage = storage.map_or_else(|| dir.path().join("storage"), Path::to_path_buf);
        std::fs::create_dir_all(&storage).unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            storage.display()
        );
        if let Some(t) = tls {
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                t.cert.display(),
                t.key.display()
            ));
        }
        if let Auth::Token(realm, bundle) = auth {
            config.push_str(&format!(
                "auth:\n  token:\n    realm: {realm}\n    service: stead-test\n    issuer: stead-test\n    rootcertbundle: {}\n",
                bundle.display()
            ));
        }
        if let Auth::Htpasswd(user, password) = auth {
            let o = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .expect("htpasswd runs (apache2-utils)");
            assert!(o.status.success());
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, &o.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: stead-test\n    path: {}\n",
                file.display()
            ));
        }
        let cfg = dir.path().join("config.yml");
        std::fs::write(&cfg, config).unwrap();
        let log = dir.path().join("registry.log");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                Instant::now() < end,
                "the registry on {addr} never listened: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry {
            child,
            addr,
            storage,
            log,
            _dir: dir,
        }
    }

    /// Pushes a new image to `repo:tag` here: the test image with these
    /// labels (each push of new labels is a new image); returns its image
    /// ID and its manifest digest.
    pub fn push(&self, repo: &str, tag: &str, labels: &[(&str, &str)]) -> (String, String) {
        let changes: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("LABEL {k}={v}"))
            .collect();
        let changes: Vec<&str> = changes.iter().map(String::as_str).collect();
        self.push_changed(repo, tag, &changes)
    }

    /// Pushes a new image to `repo:tag` here: the test image with these
    /// Dockerfile changes (`ENV X=1`, `LABEL k=v`); returns its image ID and
    /// its manifest digest.
    pub fn push_changed(&self, repo: &str, tag: &str, changes: &[&str]) -> (String, String) {
        let target = format!("{}/{repo}:{tag}", self.addr);
        let tmp = docker_engine(&["create", IMAGE_1, "true"]);
        let mut args = vec!["commit".to_string()];
        // A label that differs per push, so every push is its own image.
        args.push("--change".into());
        args.push(format!("LABEL org.example.pushed={repo}:{tag}"));
        for c in changes {
            args.push("--change".into());
            args.push(c.to_string());
        }
        args.push(tmp.clone());
        args.push(target.clone());
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        docker_engine(&a);
        docker_engine(&["rm", &tmp]);
        docker_engine(&["push", &target]);
        let id = docker_engine(&["image", "inspect", "--format", "{{.Id}}", &target]);
        let digests = docker_engine(&[
            "image",
            "inspect",
            "--format",
            "{{range .RepoDigests}}{{println .}}{{end}}",
            &target,
        ]);
        let prefix = format!("{}/{repo}@", self.addr);
        let digest = digests
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .expect("pushed image has a digest here")
            .to_string();
        (id, digest)
    }

    /// Tags `repo:tag` here as an OCI image index listing one manifest (by
    /// its digest) for `linux/<arch>`.
    pub fn push_index(&self, repo: &str, tag: &str, manifest_digest: &str, arch: &str) {
        let (code, _, manifest) = raw(
            &self.addr,
            "GET",
            &format!("/v2/{repo}/manifests/{manifest_digest}"),
            &[(
                "Accept",
                "application/vnd.docker.distribution.manifest.v2+json",
            )],
            b"",
        );
        assert_eq!(code, 200);
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "digest": manifest_digest,
                "size": manifest.len(),
                "platform": { "os": "linux", "architecture": arch }
            }]
        })
        .to_string();
        let (code, head, _) = raw(
            &self.addr,
            "PUT",
            &format!("/v2/{repo}/manifests/{tag}"),
            &[("Content-Type", "application/vnd.oci.image.index.v1+json")],
            index.as_bytes(),
        );
        assert_eq!(code, 201, "{head}");
    }

    /// The requests the registry logged (method and path), in order.
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let method = l
                    .split("http.request.method=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?;
                let uri = l.split("http.request.uri=\"").nth(1)?.split('"').next()?;
                Some(format!("{method} {uri}"))
            })
            .collect()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw HTTP request to a plain registry: (status, headers and body).
pub fn raw(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head, out[split + 4..].to_vec())
}

/// Where the images are: a plain registry they are pushed to (from the
/// Docker Engine, which keeps none of them) and signed in, and the same
/// storage served over TLS with a login, which the agent and its engine
/// pull from (Podman pulls plain HTTP from no registry it is not told is
/// insecure).
pub struct Site {
    pub plain: Registry,
    pub reg: Registry,
    pub tls: Tls,
    _trusted: Trusted,
}

impl Site {
    pub fn new() -> Site {
        let plain = Registry::plain();
        let tls = Tls::new();
        let reg = Registry::tls_with_auth(&tls, &plain.storage, "ci", "s3cret");
        let trusted = Trusted::new(&tls, &reg.addr);
        Site {
            plain,
            reg,
            tls,
            _trusted: trusted,
        }
    }

    /// The agent's name of `repo:tag`.
    pub fn image(&self, repo: &str, tag: &str) -> String {
        format!("{}/{repo}:{tag}", self.reg.addr)
    }

    /// Pushes a new image to `repo:tag`; its manifest digest.
    pub fn push(&self, repo: &str, tag: &str, v: &str) -> String {
        let (_, digest) = self.plain.push(repo, tag, &[("v", v)]);
        docker_engine(&["rmi", &format!("{}/{repo}:{tag}", self.plain.addr)]);
        digest
    }

    /// A node polling `plane` every second, trusting `key`, logged in to
    /// the registry and trusting its CA.
    pub fn node(&self, tag: &str, plane: &Plane, key: &SecretKey) -> Node {
        self.node_with(tag, "", Some((plane, key)))
    }

    /// A node logged in to the registry and trusting its CA, with `extra`
    /// config (tables), polling `plane` every second and trusting its key
    /// when there is one.
    pub fn node_with(&self, tag: &str, extra: &str, plane: Option<(&Plane, &SecretKey)>) -> Node {
        let n = Node::new(tag);
        let auth = n.dir.path().join("registry-auth.json");
        std::fs::write(
            &auth,
            format!(
                r#"{{"auths": {{"{}": {{"username": "ci", "password": "s3cret"}}}}}}"#,
                self.reg.addr
            ),
        )
        .unwrap();
        let plane = plane.map_or(String::new(), |(plane, key)| {
            format!(
                "[plane]\nurl = {:?}\ntrusted_keys = [{:?}]\npoll_interval = \"1s\"",
                plane.base(),
                key.public().to_base64()
            )
        });
        n.with_config(&format!(
            "registry_auth = {:?}\nregistry_ca = {:?}\n{extra}\n{plane}",
            auth.display().to_string(),
            self.tls.ca.display().to_string(),
        ))
    }
}

/// Uploads a blob to `repo` at `reg` (a monolithic upload, as cosign and
/// oras push one); its digest.
pub fn push_blob(reg: &Registry, repo: &str, bytes: &[u8]) -> String {
    let digest = stead::registry::client::sha256(bytes);
    let (code, head, _) = raw(
        &reg.addr,
        "POST",
        &format!("/v2/{repo}/blobs/uploads/"),
        &[],
        b"",
    );
    assert_eq!(code, 202, "{head}");
    let location = head
        .lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .expect("an upload's location")
        .trim();
    let path = location
        .strip_prefix(&format!("http://{}", reg.addr))
        .unwrap_or(location);
    let (code, head, _) = raw(
        &reg.addr,
        "PUT",
        &format!("{path}&digest={digest}"),
        &[("Content-Type", "application/octet-stream")],
        bytes,
    );
    assert_eq!(code, 201, "{head}");
    digest
}

/// Builds the context `dir` on the Docker Engine and pushes it to
/// `repo:tag` on `reg` (the engine keeps no tag of it); returns its
/// reference there, its config digest and its layers (digest, size) from
/// the registry.
pub fn build_and_push(
    reg: &Registry,
    repo: &str,
    tag: &str,
    dir: &Path,
) -> (String, String, Vec<(String, u64)>) {
    let target = format!("{}/{repo}:{tag}", reg.addr);
    // Never from the build cache: an image of the same Dockerfile built
    // by another test, or by the other engine's suite beside this one,
    // would be shared, and removed under this one.
    docker_engine(&[
        "build",
        "-q",
        "--no-cache",
        "-t",
        &target,
        &dir.display().to_string(),
    ]);
    docker_engine(&["push", &target]);
    let m = raw(
        &reg.addr,
        "GET",
        &format!("/v2/{repo}/manifests/{tag}"),
        &[(
            "Accept",
            "application/vnd.docker.distribution.manifest.v2+json",
        )],
        b"",
    );
    let m: serde_json::Value = serde_json::from_slice(&m.2).unwrap();
    let layers = m["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["digest"].as_str().unwrap().to_string(),
                l["size"].as_u64().unwrap(),
            )
        })
        .collect();
    (
        target,
        m["config"]["digest"].as_str().unwrap().to_string(),
        layers,
    )
}

/// The digest `reg` names `repo:tag`'s manifest by (its
/// `Docker-Content-Digest`, as a registry client reads it).
pub fn manifest_digest(reg: &Registry, repo: &str, tag: &str) -> String {
    let head = raw(
        &reg.addr,
        "HEAD",
        &format!("/v2/{repo}/manifests/{tag}"),
        &[(
            "Accept",
            "application/vnd.docker.distribution.manifest.v2+json",
        )],
        b"",
    )
    .1;
    head.lines()
        .find_map(|l| l.strip_prefix("Docker-Content-Digest: "))
        .unwrap_or_else(|| panic!("{repo}:{tag}: no digest in {head}"))
        .trim()
        .to_string()
}
