//! Where this node's central plane is and which keys it signs with, as the
//! agent's config file says (read by `crate::config`).

use std::path::PathBuf;
use std::time::Duration;

use crate::model::names::NodeId;

/// Where the central plane is and which keys it signs with.
#[derive(Clone, Debug)]
pub struct PlaneConfig {
    /// The plane's base URL: the document is `<url>/nodes/<node_id>/desired.json`.
    pub url: http::Uri,
    /// The keys a document must be signed by (one of them; two during a
    /// rotation).
    pub trusted_keys: Vec<super::envelope::PublicKey>,
    /// A CA bundle (PEM) trusted for the plane besides the system's.
    pub ca: Option<PathBuf>,
    /// How often to poll until a document says otherwise.
    pub poll_interval: Duration,
    /// How each request to the plane's host is authenticated, when it is
    /// not public: a bearer token or an S3 key, read from its file.
    pub auth: Option<crate::net::auth::HostAuth>,
    /// A client certificate and its key (PEM files) for a host that asks
    /// for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// The broker whose hints start a poll sooner (`[plane.nudge]`).
    pub nudge: Option<NudgeConfig>,
}

/// The topic subscribed to when the config names none.
pub const DEFAULT_NUDGE_TOPIC: &str = "stead/nudge";
/// The window a hint's poll is taken in, when the config says none.
pub const DEFAULT_NUDGE_JITTER: Duration = Duration::from_secs(30);

/// An MQTT broker whose messages are hints that the plane has something
/// new (`crate::plane::nudge`): never a source of truth.
#[derive(Clone, Debug, PartialEq)]
pub struct NudgeConfig {
    pub broker: crate::model::mqtt::Broker,
    /// One topic (`{node}` in the config replaced by the node's ID).
    pub topic: String,
    /// A hint's poll is taken at a random moment within this, at most
    /// one per window.
    pub jitter: Duration,
    pub username: Option<String>,
    /// The password's file, read at each connection.
    pub password_file: Option<PathBuf>,
}

impl PlaneConfig {
    /// The client for the plane's host: its CA, its client certificate,
    /// its credentials on every request to its origin (and to no other).
    /// The error names a file that cannot be used.
    pub fn http(&self) -> Result<crate::net::http::Http, String> {
        // Certificates are checked at max(clock, the time floor).
        let http = crate::net::http::Http::at_floor(
            self.ca.as_deref(),
            self.client_cert
                .as_ref()
                .map(|(c, k)| (c.as_path(), k.as_path())),
            crate::host::clock::process_floor(),
        )?;
        Ok(http.with_host_auth(&self.url, self.auth.clone()))
    }

    /// The URL of this node's document.
    pub fn document_url(&self, node: &NodeId) -> String {
        format!(
            "{}/nodes/{}/desired.json",
            self.url.to_string().trim_end_matches('/'),
            node.as_str()
        )
    }

    /// The URL of a group's document.
    pub fn group_url(&self, group: &NodeId) -> String {
        format!(
            "{}/groups/{}/desired.json",
            self.url.to_string().trim_end_matches('/'),
            group.as_str()
        )
    }

    /// Where reports go when the document does not say.
    pub fn default_report_url(&self, node: &NodeId) -> String {
        format!(
            "{}/nodes/{}/status.json",
            self.url.to_string().trim_end_matches('/'),
            node.as_str()
        )
    }

    /// Where an action's upload goes without an `upload_to`: beside the
    /// node's report, under `nodes/<node>/uploads` on the plane's host
    /// (its credentials), `<action id>/<name>` there.
    pub fn uploads_base(&self, node: &NodeId) -> String {
        format!(
            "{}/nodes/{}/uploads",
            self.url.to_string().trim_end_matches('/'),
            node.as_str()
        )
    }
}
