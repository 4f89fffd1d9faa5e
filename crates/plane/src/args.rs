//! The operator's command line, as types (clap's derive): each verb is a
//! variant, each option a field with its help, read into the commands'
//! own types ([`crate::cli::plane::PlaneCommand`]) by [`Cli::into_command`].
//! Completions for bash, zsh and fish and the manual pages are made from
//! the same types (`stead-plane completions`, `stead-plane man`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cli::devices::SealTo;
use crate::cli::fleet::Reports;
use crate::cli::plane::{PlaneCommand, parse_lifetime, parse_node, parse_rate};
use crate::model::fleet::{GroupName, Threshold};
use crate::model::names::{ModuleName, NodeId};
use crate::plane::upload::Target;

/// The operator's tool for a fleet of stead devices: keys, signed
/// documents, publishing, enrolment, sealed values, roll-ups, staged
/// rollouts, the root of trust, releases and Compose import.
#[derive(Debug, Parser)]
#[command(name = "stead-plane", version = stead_core::VERSION)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub verb: Verb,
}

/// A verb of `stead-plane`.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Make a signing key pair: PATH (the secret key, mode 0600) and
    /// PATH.pub (the public key, for the devices' trusted_keys)
    Keygen {
        /// Where to write the secret key; the public key goes to PATH.pub
        #[arg(long, value_name = "PATH")]
        out: PathBuf,
        /// Replace key files that already exist
        #[arg(long)]
        force: bool,
    },
    /// Sign a desired-state payload (JSON, from stdin or --in) for one
    /// node; the signed document goes to stdout (or --out). Sets node,
    /// revision and issued_at (now); sets expires only when the payload
    /// has none
    Sign {
        /// The secret key file. Give it twice to sign with two keys (during
        /// a rotation): the document carries a signature by each
        #[arg(long = "key", value_name = "PATH", required = true)]
        keys: Vec<PathBuf>,
        /// The node the document is for
        #[arg(long, value_name = "NODE", value_parser = parse_node)]
        node: NodeId,
        /// The revision (1 to 2^53). By default the current unix time in
        /// seconds, so documents signed at least a second apart have
        /// increasing revisions, and a node takes the newer
        #[arg(long, value_name = "N", value_parser = parse_revision)]
        revision: Option<u64>,
        /// How long the document is good for when the payload has no
        /// expires: 30d, 12h, 90m, 3600s (at most 3650d)
        #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_lifetime)]
        expires_in: Duration,
        /// Read the payload from FILE instead of stdin
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        /// Write the signed document to FILE (atomically) instead of stdout
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Sign a group's payload (JSON, from stdin or --in), as a team's
    /// delegated key signs its own group's document; the signed document
    /// goes to stdout (or --out), to be served as
    /// groups/<name>/desired.json. Sets group, revision and issued_at
    /// (now); sets expires only when the payload has none
    SignGroup {
        /// The secret key file (give it again for more signatures: a
        /// delegation's threshold)
        #[arg(long = "key", value_name = "PATH", required = true)]
        keys: Vec<PathBuf>,
        /// The group the document is for
        #[arg(long, value_name = "NAME", value_parser = parse_node)]
        group: GroupName,
        /// The revision (1 to 2^53). By default the current unix time in
        /// seconds
        #[arg(long, value_name = "N", value_parser = parse_revision)]
        revision: Option<u64>,
        /// How long the document is good for when the payload has no
        /// expires (at most 3650d)
        #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_lifetime)]
        expires_in: Duration,
        /// Read the payload from FILE instead of stdin
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        /// Write the signed document to FILE (atomically) instead of stdout
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Check a signed document (from stdin or --in) as a node would:
    /// signed by a trusted key, a valid payload, not expired (and, with
    /// --node, for that node). Prints what it holds and which key signed it
    Verify {
        /// A trusted public key: a .pub file, or the key's base64. Give it
        /// twice for two keys (during a rotation)
        #[arg(long = "key", value_name = "PUB", required = true)]
        keys: Vec<String>,
        /// Refuse a document for any other node
        #[arg(long, value_name = "NODE", value_parser = parse_node)]
        node: Option<NodeId>,
        /// Read the document from FILE instead of stdin
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
    },
    /// Sign a fleet's documents from its description into the directory a
    /// host serves: groups/<name>.json, nodes/<id>.json, nodes.csv
    /// (node,groups) and node-defaults.json become
    /// groups/<name>/desired.json and nodes/<id>/desired.json; only what
    /// changed (or expires soon) is signed, each node checked against its
    /// groups first
    Publish {
        /// The secret key file (give it twice for two)
        #[arg(long = "key", value_name = "PATH", required = true)]
        keys: Vec<PathBuf>,
        #[command(flatten)]
        trusted: Trusted,
        /// The fleet's description
        #[arg(long, value_name = "DIR")]
        fleet: PathBuf,
        /// The directory the host serves
        #[arg(long, value_name = "DIR")]
        site: PathBuf,
        /// Say what would be signed; write nothing
        #[arg(long)]
        dry_run: bool,
        /// How long a document signed now is good for, unless its payload
        /// says (at most 3650d)
        #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_lifetime)]
        expires_in: Duration,
        /// Sign again a document that expires within this, even unchanged
        #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = parse_lifetime)]
        refresh_before: Duration,
        #[command(flatten)]
        upload: Upload,
    },
    /// Take the devices' public keys from their reports into the fleet's
    /// description (DIR/device-keys.csv: node,age1…,report key). A report
    /// key is taken only from a report it signed; a node's first keys are
    /// taken on trust; keys other than the ones enrolled are kept out
    /// (exit 1) unless --replace
    Enroll {
        /// The fleet's description
        #[arg(long, value_name = "DIR")]
        fleet: PathBuf,
        /// Where the reports are
        #[arg(long, value_name = "DIR|URL", value_parser = Reports::parse)]
        reports: Reports,
        /// Take a node's new key over the one enrolled (every value sealed
        /// for it must then be sealed again)
        #[arg(long)]
        replace: bool,
    },
    /// Seal a value (from stdin) to one device for one field of one module:
    /// the text to give as { "sealed": "…" } goes to stdout. One trailing
    /// newline is dropped from an env or settings value
    #[command(group(clap::ArgGroup::new("recipient").required(true).args(["fleet", "to"])))]
    Seal {
        /// The node it is for
        #[arg(long, value_name = "NODE", value_parser = parse_node)]
        node: NodeId,
        /// The module it is for
        #[arg(long, value_name = "MODULE", value_parser = parse_module)]
        module: ModuleName,
        /// Where it goes: env.<NAME>, settings.<key> or files.<path>
        #[arg(long, value_name = "FIELD")]
        field: String,
        /// Seal to the node's key enrolled in DIR/device-keys.csv
        #[arg(long, value_name = "DIR")]
        fleet: Option<PathBuf>,
        /// Seal to this key (age1…, as stead status shows it)
        #[arg(long, value_name = "AGE1")]
        to: Option<String>,
    },
    /// Roll a fleet's reports up (every status.json under DIR, or in a web
    /// server's listing at URL and those it lists, read one at a time):
    /// devices per revision, modules per state, failing devices and why,
    /// devices not heard from, each group's rollout
    Status {
        /// Where the reports are
        #[arg(long, value_name = "DIR|URL", value_parser = Reports::parse)]
        reports: Reports,
        /// The fleet's description: a report counts only signed by the
        /// report key DIR/device-keys.csv enrolls for its node (without it,
        /// none is checked, and none counts: all are listed)
        #[arg(long, value_name = "DIR")]
        fleet: Option<PathBuf>,
        /// The directory the host serves: each group's claims are counted
        /// within the revision its document there has
        #[arg(long, value_name = "DIR")]
        site: Option<PathBuf>,
        /// A device whose last report is older is not heard from
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_lifetime)]
        silent_after: Duration,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Which devices run an image, or an image holding a vulnerable
    /// package version: from the reports signed by their devices' enrolled
    /// keys, every affected device, group and module listed whole, with
    /// (given the host's directory) the published revision that moves each
    /// off it. Without a question: the devices per image digest
    Exposure {
        /// Where the reports are
        #[arg(long, value_name = "DIR|URL", value_parser = Reports::parse)]
        reports: Reports,
        /// The fleet's description: a report counts only signed by the
        /// report key DIR/device-keys.csv enrolls for its node
        #[arg(long, value_name = "DIR")]
        fleet: PathBuf,
        /// An image's manifest digest or ID (sha256:…, or repo@sha256:…);
        /// give one per image
        #[arg(long = "digest", value_name = "DIGEST")]
        digests: Vec<String>,
        /// A vulnerable package version (name@version, or a package URL
        /// pkg:type/namespace/name@version); give one per version
        #[arg(long = "package", value_name = "PACKAGE")]
        packages: Vec<String>,
        /// A file of vulnerable package versions, one per line
        #[arg(long, value_name = "FILE")]
        vulnerable: Option<PathBuf>,
        /// A directory of SBOMs (CycloneDX or SPDX JSON, bare or an in-toto
        /// statement's predicate), each naming the image digest it is of:
        /// where a package is found
        #[arg(long = "sbom", value_name = "DIR")]
        sboms: Vec<PathBuf>,
        /// Also fetch, for every image digest the counted reports name by
        /// repository, the SBOMs its registry holds: OCI referrers (the
        /// referrers API or its tag schema) of a CycloneDX or SPDX type, and
        /// cosign's attestations (tag sha256-<hex>.att) of those predicate
        /// types. Each blob is checked against its digest; an attestation's
        /// signature is not checked. A registry that does not answer is
        /// reported per digest and fails nothing
        #[arg(long)]
        sbom_from_registry: bool,
        /// Registry logins for --sbom-from-registry (Docker's config.json
        /// form, as the agent's registry_auth)
        #[arg(long, value_name = "FILE", requires = "sbom_from_registry")]
        registry_auth: Option<PathBuf>,
        /// Extra CA certificates (PEM) a registry is trusted by, for
        /// --sbom-from-registry
        #[arg(long, value_name = "FILE", requires = "sbom_from_registry")]
        registry_ca: Option<PathBuf>,
        /// The directory the host serves: each affected module told which
        /// published revision moves it off the image
        #[arg(long, value_name = "DIR")]
        site: Option<PathBuf>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// The plane's root of trust: which keys sign documents, and which sign
    /// the next root (a threshold of them), versioned and published beside
    /// the documents
    #[command(subcommand)]
    Root(RootVerb),
    /// Staged rollouts of group documents
    #[command(subcommand)]
    Rollout(RolloutVerb),
    /// Sign a release statement of stead itself: its version, the store
    /// schema it writes and reads from, and each target's binary (its
    /// SHA-256 and size, read from the file, and where a node fetches it).
    /// A node takes it from a document's agent field or `stead
    /// self-update`
    Release {
        /// The secret key file (give it twice for two)
        #[arg(long = "key", value_name = "PATH", required = true)]
        keys: Vec<PathBuf>,
        /// The release's version (SemVer)
        #[arg(long, value_name = "VERSION", value_parser = parse_version)]
        version: String,
        /// A target's binary (aarch64-unknown-linux-musl=dist/stead-…);
        /// give one per target
        #[arg(long = "binary", value_name = "TARGET=FILE", required = true, value_parser = parse_binary)]
        binaries: Vec<(String, PathBuf)>,
        /// Where the binaries will be: each is <URL>/<its file name>; by
        /// default its file name alone, relative to the statement's own URL
        #[arg(long, value_name = "URL")]
        url_base: Option<String>,
        /// The store schema the release writes (default: this build's)
        #[arg(long, value_name = "N", default_value_t = stead_core::model::release::STORE_SCHEMA)]
        schema: u64,
        /// The oldest store schema it opens
        #[arg(long, value_name = "N", default_value_t = 1)]
        reads_from: u64,
        /// Write the statement to FILE (atomically) instead of stdout
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Publish content-defined chunks of images' layers beside the
    /// documents, in casync's format: DIR/chunks/<diff ID hex>.caibx per
    /// layer and the chunk store DIR/chunks/store.castr/ (gzip). A device
    /// whose plane is this host rebuilds a layer it lacks from the chunks
    /// of the layers it has and fetches only the others; where no index is
    /// published, or the chunks would cost more, it pulls the layer. A
    /// layer indexed already is not read again
    Chunks {
        /// The directory the host serves
        #[arg(long, value_name = "DIR")]
        site: PathBuf,
        /// Registry logins (Docker's config.json form, as the agent's
        /// registry_auth)
        #[arg(long, value_name = "FILE")]
        registry_auth: Option<PathBuf>,
        /// Extra CA certificates (PEM) a registry is trusted by
        #[arg(long, value_name = "FILE")]
        registry_ca: Option<PathBuf>,
        /// The images (repo:tag or repo@sha256:…; every platform of an
        /// index)
        #[arg(value_name = "IMAGE", required = true)]
        images: Vec<String>,
    },
    /// Make intention files from a Compose file, one per service. Keys that
    /// cannot be carried are listed on stderr (exit 3); a file that cannot
    /// be imported writes nothing (exit 2). See docs/import.md
    Import {
        /// Write `<module>.toml` files into this directory (made when
        /// missing) instead of printing them
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Overwrite intention files that exist
        #[arg(long)]
        force: bool,
        /// Copy a config's file into an intention even when it is outside
        /// the Compose file's directory
        #[arg(long)]
        allow_outside: bool,
        /// The project's name, which names its network and volumes (as
        /// Compose's -p; else COMPOSE_PROJECT_NAME, the file's `name:`, the
        /// directory's name)
        #[arg(short = 'p', long, value_name = "NAME")]
        project_name: Option<String>,
        /// `compose`: a named volume is `<project>_<volume>`, as Compose
        /// names it, so a stack moved over finds its data. `plain`: its
        /// key, as stead 0.5.0 named it
        #[arg(long, value_enum, default_value = "compose")]
        volume_names: VolumeNames,
        /// The Compose file
        file: PathBuf,
    },
    /// Print the completions of a shell (bash, zsh, fish) to stdout
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Write the manual pages (stead-plane.1 and one per verb) into DIR
    Man {
        /// The directory (made when missing)
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// `--trusted PUB` of the commands that sign over what a site serves.
#[derive(Debug, Args)]
pub struct Trusted {
    /// A key of the devices' trusted_keys, where a published root's chain
    /// starts (by default the --key keys): what the host serves is
    /// verified against it, or the newest root's document keys
    #[arg(long = "trusted", value_name = "PUB")]
    pub trusted: Vec<String>,
}

/// `--upload s3://BUCKET/PREFIX` and its options, of the commands that
/// write the site (docs/fleet.md, "Publishing to a bucket").
#[derive(Debug, Args)]
pub struct Upload {
    /// Once the run has written the site, put into the bucket every
    /// document of the site that the bucket does not hold as it is (by
    /// its ETag), roots first, then groups, then nodes; the site stays the
    /// source of truth. Path-style, on --s3-endpoint
    #[arg(long, value_name = "s3://BUCKET/PREFIX", value_parser = Target::parse, requires = "s3_credentials")]
    pub upload: Option<Target>,
    /// The AWS credentials file whose [default] key signs the upload (the
    /// format the devices' plane.s3_credentials has; the operator's own
    /// file, 0600)
    #[arg(long, value_name = "FILE", requires = "upload")]
    pub s3_credentials: Option<PathBuf>,
    /// The region the upload's signatures are for
    #[arg(
        long,
        value_name = "REGION",
        default_value = "us-east-1",
        requires = "upload"
    )]
    pub s3_region: String,
    /// The S3 endpoint (MinIO, Ceph, Garage, moto: http://host:9000); by
    /// default AWS's for the region, https://s3.REGION.amazonaws.com
    #[arg(long, value_name = "URL", value_parser = parse_endpoint, requires = "upload")]
    pub s3_endpoint: Option<http::Uri>,
    /// A PEM file of CA certificates trusted for the endpoint, besides the
    /// system's bundle
    #[arg(long, value_name = "FILE", requires = "upload")]
    pub s3_ca: Option<PathBuf>,
}

impl Upload {
    /// The upload asked for, if any.
    fn into_upload(self) -> Option<Box<crate::cli::upload::Upload>> {
        let target = self.upload?;
        let endpoint = self.s3_endpoint.unwrap_or_else(|| {
            format!("https://s3.{}.amazonaws.com", self.s3_region)
                .parse()
                .unwrap_or_else(|_| http::Uri::from_static("https://s3.amazonaws.com"))
        });
        Some(Box::new(crate::cli::upload::Upload {
            target,
            // clap's `requires` holds it with --upload.
            credentials: self.s3_credentials.unwrap_or_default(),
            region: self.s3_region,
            endpoint,
            ca: self.s3_ca,
        }))
    }
}

/// `--s3-endpoint`: an `http://` or `https://` URL of a host alone (no
/// path, query or credentials).
fn parse_endpoint(s: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = s.parse().map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err("an http:// or https:// URL".into());
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err("an endpoint must not carry a user name or password".into());
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("no host".into());
    }
    if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
        return Err("a host alone, without a path or query (the bucket is --upload's)".into());
    }
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
    format!("{}://{authority}", uri.scheme_str().unwrap_or("https"))
        .parse()
        .map_err(|e| format!("not a URL: {e}"))
}

/// `stead-plane root …`.
#[derive(Debug, Subcommand)]
pub enum RootVerb {
    /// Write the next root's payload (unsigned): version 1, or the one
    /// after --after's. Sign it with `root sign` by a threshold of the
    /// previous root's keys and of its own
    Init {
        /// A key that signs the next root (a .pub file or base64)
        #[arg(long = "root-key", value_name = "PUB", required = true)]
        root_keys: Vec<String>,
        /// How many root keys must sign the next root
        #[arg(long, value_name = "N", default_value = "1", value_parser = parse_threshold)]
        threshold: usize,
        /// A key that signs documents (a .pub file or base64)
        #[arg(long = "documents-key", value_name = "PUB", required = true)]
        document_keys: Vec<String>,
        /// A delegation: keys that sign documents only within a scope,
        /// `name=team-a;keys=a.pub,b.pub;threshold=1;groups=eu,eu-lab;modules=a-`
        /// (groups, a module prefix, or both; threshold 1 by default)
        #[arg(long = "delegate", value_name = "SPEC")]
        delegations: Vec<String>,
        /// A key of the allow-list role: with one, every image a document
        /// names must be pinned and in the allow-list these keys sign
        #[arg(long = "allow-list-key", value_name = "PUB")]
        allow_list_keys: Vec<String>,
        /// How many allow-list keys must sign the allow-list
        #[arg(long, value_name = "N", default_value = "1", value_parser = parse_threshold, requires = "allow_list_keys")]
        allow_list_threshold: usize,
        /// The root this one follows (its signed file)
        #[arg(long, value_name = "FILE")]
        after: Option<PathBuf>,
        /// How long it is good for (at most 3650d)
        #[arg(long, value_name = "DURATION", default_value = "365d", value_parser = parse_lifetime)]
        expires_in: Duration,
        /// Write it to FILE instead of stdout
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Write the next allow-list of image digests (unsigned): version 1,
    /// or the one after --after's. Sign it with `root sign` by a
    /// threshold of the root's allow-list keys
    AllowList {
        /// An image allowed: `sha256:<digest>` or `<repository>@sha256:<digest>`
        #[arg(long = "image", value_name = "IMAGE")]
        images: Vec<String>,
        /// A file of images allowed, one a line (`#` starts a comment)
        #[arg(long = "images-from", value_name = "FILE")]
        images_from: Option<PathBuf>,
        /// The allow-list this one follows (its signed file)
        #[arg(long, value_name = "FILE")]
        after: Option<PathBuf>,
        /// How long it is good for (at most 3650d)
        #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_lifetime)]
        expires_in: Duration,
        /// Write it to FILE instead of stdout
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Sign a root or an allow-list: a payload from `root init` or `root
    /// allow-list` becomes signed; a signed one gets a signature by each
    /// key more
    Sign {
        /// A secret key file
        #[arg(long = "key", value_name = "PATH", required = true)]
        keys: Vec<PathBuf>,
        /// Read it from FILE instead of stdin
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        /// Write it to FILE instead of stdout
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Walk the root chain as a device would, from the keys of its
    /// trusted_keys through SITE/roots/1.json, 2.json, …, then, with --in,
    /// the root given as the next one, and with --allow-list the
    /// allow-list given, under the root the chain ends at; with
    /// --publish, write them where the host serves them
    /// (SITE/roots/<version>.json and SITE/root.json,
    /// SITE/allow-list.json)
    #[command(group(clap::ArgGroup::new("published").args(["input", "allow_list"]).multiple(true)))]
    Verify {
        /// A key of the devices' trusted_keys (their first root)
        #[arg(long = "trusted", value_name = "PUB", required = true)]
        trusted: Vec<String>,
        /// The directory the host serves
        #[arg(long, value_name = "DIR")]
        site: PathBuf,
        /// A signed root to check as the next one
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        /// A signed allow-list to check under the root
        #[arg(long = "allow-list", value_name = "FILE")]
        allow_list: Option<PathBuf>,
        /// Publish the root --in gives and the allow-list --allow-list
        /// gives, once they check
        #[arg(long, requires = "published")]
        publish: bool,
        #[command(flatten)]
        upload: Upload,
    },
}

/// `stead-plane rollout …`.
#[derive(Debug, Subcommand)]
pub enum RolloutVerb {
    /// Halt each group rollout whose devices on the new revision fail at or
    /// over the threshold: its document is signed again, one revision on,
    /// with halt and the reason, where the host serves it. Stateless: run
    /// it from cron or CI where the key is
    Watch {
        /// The secret key file (give it twice for two)
        #[arg(long = "key", value_name = "PATH", required = true)]
        keys: Vec<PathBuf>,
        #[command(flatten)]
        trusted: Trusted,
        /// Where the devices' reports are
        #[arg(long, value_name = "DIR|URL", value_parser = Reports::parse)]
        reports: Reports,
        /// The fleet's description: a report counts only signed by the
        /// report key DIR/device-keys.csv enrolls for its node
        #[arg(long, value_name = "DIR")]
        fleet: PathBuf,
        /// The directory the host serves
        #[arg(long, value_name = "DIR")]
        site: PathBuf,
        /// Watch this group (again for more); by default every group the
        /// site has
        #[arg(long = "group", value_name = "NAME", value_parser = parse_node)]
        groups: Vec<GroupName>,
        /// Halt at or over this share of failing devices on the new
        /// revision (failed, crash-looping or quarantined modules)
        #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = parse_rate)]
        rate: u64,
        /// Halt only once at least N devices report running the new
        /// revision
        #[arg(long, value_name = "N", default_value_t = 10)]
        min_reports: u64,
        /// Say what would be halted; write nothing
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        upload: Upload,
    },
}

/// How `import` names a named volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VolumeNames {
    /// `<project>_<volume>`, as Compose names it
    Compose,
    /// its key, as stead 0.5.0 named it
    Plain,
}

/// What a command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    /// A fleet verb.
    Plane(PlaneCommand),
    /// `import`.
    Import {
        /// `--out`.
        out: Option<PathBuf>,
        /// `--force`.
        force: bool,
        /// The importer's options.
        options: crate::import::Options,
        /// The Compose file.
        file: PathBuf,
    },
    /// `completions SHELL`.
    Completions(clap_complete::Shell),
    /// `man --out DIR`.
    Man(PathBuf),
}

impl Cli {
    /// The command this line asks for, in the commands' own types.
    pub fn into_command(self) -> Command {
        let plane = Command::Plane;
        match self.verb {
            Verb::Keygen { out, force } => plane(PlaneCommand::Keygen { out, force }),
            Verb::SignGroup {
                keys,
                group,
                revision,
                expires_in,
                input,
                out,
            } => plane(PlaneCommand::SignGroup {
                keys,
                group,
                revision,
                expires_in,
                input,
                out,
            }),
            Verb::Sign {
                keys,
                node,
                revision,
                expires_in,
                input,
                out,
            } => plane(PlaneCommand::Sign {
                keys,
                node,
                revision,
                expires_in,
                input,
                out,
            }),
            Verb::Verify { keys, node, input } => plane(PlaneCommand::Verify { keys, node, input }),
            Verb::Publish {
                keys,
                trusted,
                fleet,
                site,
                dry_run,
                expires_in,
                refresh_before,
                upload,
            } => plane(PlaneCommand::Publish {
                keys,
                trusted: trusted.trusted,
                fleet,
                site,
                dry_run,
                expires_in,
                refresh_before,
                upload: upload.into_upload(),
            }),
            Verb::Enroll {
                fleet,
                reports,
                replace,
            } => plane(PlaneCommand::Enroll {
                fleet,
                reports,
                replace,
            }),
            Verb::Seal {
                node,
                module,
                field,
                fleet,
                to,
            } => plane(PlaneCommand::Seal {
                node,
                module,
                field,
                // clap's group holds exactly one of the two.
                to: match (fleet, to) {
                    (Some(dir), _) => SealTo::Fleet(dir),
                    (None, Some(key)) => SealTo::Key(key),
                    (None, None) => SealTo::Key(String::new()),
                },
            }),
            Verb::Exposure {
                reports,
                fleet,
                digests,
                packages,
                vulnerable,
                sboms,
                sbom_from_registry,
                registry_auth,
                registry_ca,
                site,
                json,
            } => plane(PlaneCommand::Exposure(crate::cli::exposure::Ask {
                reports,
                fleet,
                site,
                digests,
                packages,
                vulnerable,
                sboms,
                from_registry: sbom_from_registry.then(|| {
                    Box::new(crate::cli::exposure::FromRegistry {
                        auth: registry_auth,
                        ca: registry_ca,
                    })
                }),
                json,
            })),
            Verb::Status {
                reports,
                fleet,
                site,
                silent_after,
                json,
            } => plane(PlaneCommand::Status {
                reports,
                fleet,
                site,
                silent_after,
                json,
            }),
            Verb::Root(RootVerb::Init {
                root_keys,
                threshold,
                document_keys,
                delegations,
                allow_list_keys,
                allow_list_threshold,
                after,
                expires_in,
                out,
            }) => plane(PlaneCommand::RootInit {
                root_keys,
                threshold,
                document_keys,
                scoped: crate::cli::trust::Scoped {
                    delegations,
                    allow_list_keys,
                    allow_list_threshold,
                },
                after,
                expires_in,
                out,
            }),
            Verb::Root(RootVerb::AllowList {
                images,
                images_from,
                after,
                expires_in,
                out,
            }) => plane(PlaneCommand::AllowList {
                images,
                images_from,
                after,
                expires_in,
                out,
            }),
            Verb::Root(RootVerb::Sign { keys, input, out }) => {
                plane(PlaneCommand::RootSign { keys, input, out })
            }
            Verb::Root(RootVerb::Verify {
                trusted,
                site,
                input,
                allow_list,
                publish,
                upload,
            }) => plane(PlaneCommand::RootVerify {
                trusted,
                site,
                input,
                allow_list,
                publish,
                upload: upload.into_upload(),
            }),
            Verb::Rollout(RolloutVerb::Watch {
                keys,
                trusted,
                reports,
                fleet,
                site,
                groups,
                rate,
                min_reports,
                dry_run,
                upload,
            }) => plane(PlaneCommand::Watch {
                keys,
                trusted: trusted.trusted,
                reports,
                fleet,
                site,
                groups,
                threshold: Threshold {
                    rate_permille: rate,
                    min_reports,
                },
                dry_run,
                upload: upload.into_upload(),
            }),
            Verb::Release {
                keys,
                version,
                binaries,
                url_base,
                schema,
                reads_from,
                out,
            } => plane(PlaneCommand::Release {
                keys,
                version,
                binaries,
                url_base,
                schema,
                reads_from,
                out,
            }),
            Verb::Chunks {
                site,
                registry_auth,
                registry_ca,
                images,
            } => plane(PlaneCommand::Chunks {
                site,
                registry_auth,
                registry_ca,
                images,
            }),
            Verb::Import {
                out,
                force,
                allow_outside,
                project_name,
                volume_names,
                file,
            } => Command::Import {
                out,
                force,
                options: crate::import::Options {
                    allow_outside,
                    project: project_name,
                    plain_volume_names: volume_names == VolumeNames::Plain,
                },
                file,
            },
            Verb::Completions { shell } => Command::Completions(shell),
            Verb::Man { out } => Command::Man(out),
        }
    }
}

/// `--revision`: 1 to 2^53.
fn parse_revision(s: &str) -> Result<u64, String> {
    let n = s.parse::<u64>().map_err(|e| e.to_string())?;
    let max = crate::plane::accept::MAX_REVISION;
    if (1..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is not in 1..={max}"))
    }
}

/// `--module`: a module's name.
fn parse_module(s: &str) -> Result<ModuleName, String> {
    ModuleName::try_from(s).map_err(|e| e.0)
}

/// `--version`: SemVer.
fn parse_version(s: &str) -> Result<String, String> {
    semver::Version::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// `--binary TARGET=FILE`.
fn parse_binary(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((target, file)) if !target.is_empty() && !file.is_empty() => {
            Ok((target.to_string(), PathBuf::from(file)))
        }
        _ => Err("TARGET=FILE".into()),
    }
}

/// `--threshold`: 1 to the most keys a root has.
fn parse_threshold(s: &str) -> Result<usize, String> {
    let max = crate::plane::root::MAX_KEYS;
    s.parse::<usize>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("{s:?}: 1 to {max}"))
}

#[cfg(test)]
mod tests;
