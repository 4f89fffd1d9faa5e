//! The engine calls read into types of their own rather than bollard's:
//! the container list, the one answer every pass depends on, must not fail
//! as a whole for one word the Docker Engine API's types do not know
//! (Podman lists a container waiting for its restart as `stopped`;
//! bollard's state enum refuses it, and with it the whole list); and the
//! version, read once to learn both the API version and which engine this
//! is; and, on Podman, libpod's word on whether a network resolves names
//! and which network backend it has (the Docker-compatible API says
//! neither). Only what the agent reads is taken; states stay words, for
//! [`crate::engine::ContainerState::parse`].

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde::Deserialize;

use crate::engine::EngineError;

/// One container of the list, as the engine says it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Listed {
    /// Its ID.
    pub id: String,
    /// Its names, with the engine's leading `/`.
    #[serde(default)]
    pub names: Option<Vec<String>>,
    /// Its labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Its state word.
    #[serde(default)]
    pub state: Option<String>,
    /// Its status line.
    #[serde(default)]
    pub status: Option<String>,
    /// The image ID it runs.
    #[serde(rename = "ImageID", default)]
    pub image_id: Option<String>,
    /// When it was created, seconds since the epoch.
    #[serde(default)]
    pub created: Option<i64>,
    /// Its mounts.
    #[serde(default)]
    pub mounts: Option<Vec<ListedMount>>,
}

/// A mount of a listed container.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListedMount {
    /// Its host source.
    #[serde(default)]
    pub source: Option<String>,
}

/// What `GET /version` says that the agent reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Version {
    /// The newest API version the engine speaks (`1.41`).
    pub api_version: String,
    /// Its parts (`Podman Engine`, …).
    #[serde(default)]
    pub components: Option<Vec<Component>>,
}

/// A part of the engine, as its version names it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Component {
    /// Its name.
    pub name: String,
    /// Its version.
    #[serde(default)]
    pub version: String,
}

/// What `GET /info` says that the agent reads.
#[derive(Debug, Deserialize)]
pub struct Info {
    /// Where the engine keeps its images and containers (Podman: its
    /// graph root).
    #[serde(rename = "DockerRootDir", default)]
    pub docker_root_dir: Option<String>,
}

/// What libpod's `GET /libpod/networks/{name}/json` says that the agent
/// reads (Podman only).
#[derive(Debug, Deserialize)]
pub struct LibpodNetwork {
    /// Whether the network's containers resolve each other's names (CNI's
    /// dnsname plugin, or netavark's aardvark-dns); absent before Podman 4.
    #[serde(default)]
    pub dns_enabled: Option<bool>,
}

/// What libpod's `GET /libpod/info` says that the agent reads (Podman only).
#[derive(Debug, Deserialize)]
pub struct LibpodInfo {
    /// The host's part.
    pub host: LibpodHost,
}

/// The host's part of libpod's info.
#[derive(Debug, Deserialize)]
pub struct LibpodHost {
    /// `cni` or `netavark`.
    #[serde(rename = "networkBackend", default)]
    pub network_backend: String,
}

/// Parses the list's body.
pub fn parse(body: &[u8]) -> Result<Vec<Listed>, EngineError> {
    serde_json::from_slice(body).map_err(|e| EngineError::Refused {
        status: 0,
        message: format!("the container list does not read: {e}"),
    })
}

/// `GET /version` (unversioned: it says which versions there are).
pub async fn version(socket: &Path) -> Result<Version, EngineError> {
    let body = get(socket, "/version").await?;
    serde_json::from_slice(&body).map_err(|e| EngineError::Refused {
        status: 0,
        message: format!("the engine's version does not read: {e}"),
    })
}

/// `GET /v<version>/info`.
pub async fn info(socket: &Path, version: &str) -> Result<Info, EngineError> {
    let body = get(socket, &format!("/v{version}/info")).await?;
    serde_json::from_slice(&body).map_err(|e| EngineError::Refused {
        status: 0,
        message: format!("the engine's info does not read: {e}"),
    })
}

/// `GET /v<version>/containers/json?all=1` on the engine's unix socket,
/// with the engine's list filters when given (`{"health":["healthy"]}`).
pub async fn containers(
    socket: &Path,
    version: &str,
    filters: Option<&str>,
) -> Result<Vec<Listed>, EngineError> {
    let query = match filters {
        Some(f) => format!("all=1&filters={}", percent_encode(f)),
        None => "all=1".to_string(),
    };
    parse(&get(socket, &format!("/v{version}/containers/json?{query}")).await?)
}

/// Podman's libpod `GET /v<podman>/libpod/networks/<name>/json`.
pub async fn libpod_network(
    socket: &Path,
    podman: &str,
    name: &str,
) -> Result<LibpodNetwork, EngineError> {
    let path = format!(
        "/v{}/libpod/networks/{}/json",
        percent_encode(podman),
        percent_encode(name)
    );
    serde_json::from_slice(&get(socket, &path).await?).map_err(|e| EngineError::Refused {
        status: 0,
        message: format!("Podman's network {name} does not read: {e}"),
    })
}

/// Podman's libpod `GET /v<podman>/libpod/info`.
pub async fn libpod_info(socket: &Path, podman: &str) -> Result<LibpodInfo, EngineError> {
    let path = format!("/v{}/libpod/info", percent_encode(podman));
    serde_json::from_slice(&get(socket, &path).await?).map_err(|e| EngineError::Refused {
        status: 0,
        message: format!("Podman's info does not read: {e}"),
    })
}

/// A GET on the engine's unix socket; the body of a 200.
async fn get(socket: &Path, path: &str) -> Result<Bytes, EngineError> {
    let away = |e: &dyn std::fmt::Display| EngineError::Unreachable(e.to_string());
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| away(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| away(&e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = http::Request::get(path)
        .header("host", "docker")
        .body(Empty::<Bytes>::new())
        .map_err(|e| away(&e))?;
    let resp = sender.send_request(req).await.map_err(|e| away(&e))?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| away(&e))?
        .to_bytes();
    if status != 200 {
        return Err(EngineError::Refused {
            status,
            message: String::from_utf8_lossy(&body).trim().to_string(),
        });
    }
    Ok(body)
}

/// Every byte but the unreserved ones as `%XX`.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_docker_does_not_have_does_not_fail_the_list() {
        // Podman's words, with what the agent reads (and fields it does not).
        let body = br#"[
          {"Id":"aa","Names":["/stead-m"],"Image":"x","ImageID":"sha256:11","Command":"sh","Created":1796024394,
           "Ports":[],"Labels":{"stead.module":"m"},"State":"stopped","Status":"Exited (3) 1 second ago",
           "HostConfig":{"NetworkMode":"bridge"},"NetworkSettings":{"Networks":{}},"Mounts":[{"Type":"bind","Source":"/srv/a","Destination":"/a"}]},
          {"Id":"bb","Names":null,"Labels":null,"State":"running","Status":"Up 2 seconds","Created":1,"Mounts":null}
        ]"#;
        let list = parse(body).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].state.as_deref(), Some("stopped"));
        assert_eq!(list[0].image_id.as_deref(), Some("sha256:11"));
        assert_eq!(
            list[0].mounts.as_ref().unwrap()[0].source.as_deref(),
            Some("/srv/a")
        );
        assert_eq!(list[1].id, "bb");
        assert!(list[1].names.is_none());
        let e = parse(b"{\"message\":\"no\"}").unwrap_err();
        assert!(
            e.to_string().contains("the container list does not read"),
            "{e}"
        );
        let v: Version = serde_json::from_slice(
            br#"{"Platform":{"Name":"linux/amd64/debian-12"},"Components":[{"Name":"Podman Engine","Version":"4.3.1","Details":{"APIVersion":"4.3.1"}}],"Version":"4.3.1","ApiVersion":"1.41","MinAPIVersion":"1.24"}"#,
        )
        .unwrap();
        assert_eq!(v.api_version, "1.41");
        assert_eq!(v.components.unwrap()[0].name, "Podman Engine");
        assert_eq!(
            percent_encode(r#"{"health":["healthy"]}"#),
            "%7B%22health%22%3A%5B%22healthy%22%5D%7D"
        );
    }
}
