//! Which devices run an image (`stead-plane exposure`), pure: the
//! question (image digests, package versions), the SBOMs that say which
//! packages each image holds (CycloneDX and SPDX JSON, bare or as an
//! in-toto statement's predicate), the answer taken from the fleet's
//! reports one at a time ([`Exposure::take`]: only a report signed by the
//! key enrolled for its node counts; the others are listed, since a
//! device whose report cannot be trusted may be affected), and which
//! published revision would move an affected module off the image
//! ([`moves_off`]).
//!
//! A module is found by every digest its report names: the manifest
//! digests the engine pulled its image by (`repo@sha256:…`) and its image
//! ID. Without a question, the answer is the devices per digest, every
//! digest whole. With one, every affected device is listed, never capped:
//! it is the list a security officer acts on.
//!
//! SBOMs fetched from the registry (`--sbom-from-registry`) keep the one
//! pass: the question may grow while reports are read
//! ([`Exposure::ask_sbom`]). The first time a counted report names a
//! digest by a repository, its SBOMs are fetched and asked about before
//! that report is taken, so every report naming a digest is matched
//! against a question already settled for it; what is kept is one entry
//! per distinct digest ([`Exposure::registry`]), never per device. A
//! digest is looked up once, at the repositories the first report naming
//! it gives.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value as J;

use crate::model::text::escape;
use crate::views::signed::Unverified;
use crate::views::{ReportRuns, ReportView};

/// The most unreadable or unverified reports named (all are counted).
pub const LISTED: usize = 50;
/// The most references and modules kept per digest in the table.
const PER_DIGEST: usize = 8;
/// The most packages read from one SBOM.
pub const MAX_PACKAGES: usize = 200_000;

/// A manifest or image digest, `sha256:<64 lowercase hex>`, taken from a
/// bare digest or a `repo@sha256:…` reference (`None` for anything else).
pub fn digest_of(s: &str) -> Option<String> {
    let d = s.rsplit_once('@').map_or(s, |(_, d)| d);
    let hex = d.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("sha256:{}", hex.to_ascii_lowercase()))
}

/// `--digest`: a digest or a `repo@digest` reference.
pub fn parse_digest(s: &str) -> Result<String, String> {
    digest_of(s.trim()).ok_or_else(|| {
        format!(
            "{:?} is not an image digest (sha256: and 64 hex digits, or repo@sha256:…)",
            crate::model::text::clip(s, 100)
        )
    })
}

/// A package version: a name and a version, and its package URL's
/// `type/namespace/name` when it has one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Package {
    pub name: String,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purl: Option<String>,
}

impl Package {
    /// A package version as a list names it: a package URL
    /// (`pkg:deb/debian/openssl@3.0.11-1`), `name@version`, or `name
    /// version`.
    pub fn parse(s: &str) -> Result<Package, String> {
        let s = s.trim();
        let shown = crate::model::text::clip(s, 100);
        if let Some(p) = s.strip_prefix("pkg:") {
            return purl(p).ok_or_else(|| {
                format!("{shown:?}: a package URL needs a type, a name and a version")
            });
        }
        let (name, version) = match s.split_once(char::is_whitespace) {
            Some((n, v)) => (n, v.trim()),
            // A name may begin with `@` (npm's scopes).
            None => match s.get(1..).and_then(|r| r.rfind('@')) {
                Some(at) => (&s[..=at], &s[at + 2..]),
                None => ("", ""),
            },
        };
        if name.is_empty() || version.is_empty() || version.contains(char::is_whitespace) {
            return Err(format!(
                "{shown:?} names no package version (name@version, \"name version\", or pkg:type/name@version)"
            ));
        }
        Ok(Package {
            name: name.to_string(),
            version: version.to_string(),
            purl: None,
        })
    }

    /// Whether `other` (a package an SBOM lists) is this version: the
    /// same package URL and version when both have one, else the same
    /// name (case aside) and version.
    pub fn is(&self, other: &Package) -> bool {
        if self.version != other.version {
            return false;
        }
        match (&self.purl, &other.purl) {
            (Some(a), Some(b)) => a == b,
            _ => self.name.eq_ignore_ascii_case(&other.name),
        }
    }

    /// How it is shown.
    pub fn shown(&self) -> String {
        match &self.purl {
            Some(p) => format!("pkg:{p}@{}", self.version),
            None => format!("{}@{}", self.name, self.version),
        }
    }
}

/// Percent-decodes a package URL's part (an invalid escape stays as it
/// is).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A package URL after `pkg:`: `type/namespace/name@version?q#sub`.
fn purl(p: &str) -> Option<Package> {
    let p = p.split('#').next().unwrap_or(p);
    let p = p.split('?').next().unwrap_or(p);
    let (path, version) = p.rsplit_once('@')?;
    let path = path.trim_matches('/');
    let (ty, rest) = path.split_once('/')?;
    let name = unescape(rest.rsplit('/').next()?);
    let version = unescape(version);
    if ty.is_empty() || name.is_empty() || version.is_empty() {
        return None;
    }
    let key: Vec<String> = std::iter::once(ty.to_ascii_lowercase())
        .chain(rest.split('/').map(unescape))
        .collect();
    Some(Package {
        name,
        version,
        purl: Some(key.join("/")),
    })
}

/// A package URL's version when it is an image digest
/// (`pkg:oci/app@sha256%3A…`).
fn purl_digest(p: &str) -> Option<String> {
    let p = p.strip_prefix("pkg:")?;
    let p = p.split(['?', '#']).next()?;
    digest_of(&unescape(p.rsplit_once('@')?.1))
}

/// What one SBOM says: the image digests it is of and the packages in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sbom {
    pub digests: BTreeSet<String>,
    pub packages: Vec<Package>,
    /// `CycloneDX` or `SPDX`.
    pub format: &'static str,
}

/// Reads an SBOM: CycloneDX JSON or SPDX JSON, bare or the predicate of
/// an in-toto statement (as `cosign attest` makes one; its subjects are
/// the image's digests). The image it is of is named by the document
/// (CycloneDX's `metadata.component`: a `sha256:` version or a `pkg:oci`
/// URL; SPDX's described package: the same, or its SHA256 checksum), or
/// failing that by `file`'s name (`sha256-<hex>…` or `sha256:<hex>…`).
pub fn read_sbom(bytes: &[u8], file: &str) -> Result<Sbom, String> {
    let doc: J = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let mut digests = BTreeSet::new();
    // An in-toto statement, or a DSSE envelope of one.
    let doc = match doc.get("payload").and_then(J::as_str) {
        Some(p) => {
            use base64::Engine as _;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(|e| format!("an envelope whose payload is not base64: {e}"))?;
            serde_json::from_slice(&raw).map_err(|e| format!("an envelope's payload: {e}"))?
        }
        None => doc,
    };
    let doc = if doc.get("predicateType").is_some() {
        for s in doc["subject"].as_array().into_iter().flatten() {
            if let Some(h) = s["digest"]["sha256"].as_str()
                && let Some(d) = digest_of(&format!("sha256:{h}"))
            {
                digests.insert(d);
            }
        }
        doc.get("predicate").cloned().unwrap_or(J::Null)
    } else {
        doc
    };
    let mut sbom = if doc["bomFormat"] == "CycloneDX" {
        cyclonedx(&doc)?
    } else if doc["spdxVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("SPDX-"))
    {
        spdx(&doc)?
    } else {
        return Err("neither a CycloneDX nor an SPDX JSON document".into());
    };
    sbom.digests.extend(digests);
    if sbom.digests.is_empty() {
        let name = file.replace("sha256-", "sha256:");
        if let Some(at) = name.find("sha256:")
            && let Some(d) = name.get(at..at + 71).and_then(digest_of)
        {
            sbom.digests.insert(d);
        }
    }
    if sbom.digests.is_empty() {
        return Err(format!(
            "names no image digest ({}: a sha256: version or a pkg:oci URL of the image it is of; \
             or a file name with sha256-<hex>)",
            match sbom.format {
                "CycloneDX" => "metadata.component",
                _ => "the package it describes",
            }
        ));
    }
    Ok(sbom)
}

fn string(v: &J, key: &str) -> Option<String> {
    v.get(key).and_then(J::as_str).map(str::to_string)
}

/// A package an SBOM lists: by its package URL, named and versioned as
/// the SBOM says when it says (a URL's name is its last part, escaped).
fn listed(from_purl: Option<Package>, named: Option<(String, String)>) -> Option<Package> {
    match (from_purl, named) {
        (Some(mut p), Some((name, version))) => {
            p.name = name;
            p.version = version;
            Some(p)
        }
        (Some(p), None) => Some(p),
        (None, Some((name, version))) => Some(Package {
            name,
            version,
            purl: None,
        }),
        (None, None) => None,
    }
}

fn cyclonedx(doc: &J) -> Result<Sbom, String> {
    let mut sbom = Sbom {
        format: "CycloneDX",
        ..Sbom::default()
    };
    let top = &doc["metadata"]["component"];
    for d in [
        top.get("version").and_then(J::as_str).and_then(digest_of),
        top.get("purl").and_then(J::as_str).and_then(purl_digest),
    ]
    .into_iter()
    .flatten()
    {
        sbom.digests.insert(d);
    }
    let mut stack: Vec<&J> = doc["components"].as_array().into_iter().flatten().collect();
    while let Some(c) = stack.pop() {
        if sbom.packages.len() >= MAX_PACKAGES {
            return Err(format!("lists more than {MAX_PACKAGES} packages"));
        }
        stack.extend(c["components"].as_array().into_iter().flatten());
        let from_purl = c
            .get("purl")
            .and_then(J::as_str)
            .and_then(|p| p.strip_prefix("pkg:"))
            .and_then(purl);
        sbom.packages.extend(listed(
            from_purl,
            string(c, "name").zip(string(c, "version")),
        ));
    }
    Ok(sbom)
}

fn spdx(doc: &J) -> Result<Sbom, String> {
    let mut sbom = Sbom {
        format: "SPDX",
        ..Sbom::default()
    };
    let mut described: HashSet<&str> = doc["documentDescribes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(J::as_str)
        .collect();
    for r in doc["relationships"].as_array().into_iter().flatten() {
        if r["relationshipType"] == "DESCRIBES"
            && r["spdxElementId"] == "SPDXRef-DOCUMENT"
            && let Some(id) = r["relatedSpdxElement"].as_str()
        {
            described.insert(id);
        }
    }
    let packages = doc["packages"].as_array().map_or(&[][..], Vec::as_slice);
    if packages.len() > MAX_PACKAGES {
        return Err(format!("lists more than {MAX_PACKAGES} packages"));
    }
    for p in packages {
        let purls: Vec<&str> = p["externalRefs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["referenceType"] == "purl")
            .filter_map(|r| r["referenceLocator"].as_str())
            .collect();
        if p["SPDXID"]
            .as_str()
            .is_some_and(|id| described.contains(id))
        {
            let checksums = p["checksums"].as_array().into_iter().flatten();
            let sums = checksums
                .filter(|c| c["algorithm"] == "SHA256")
                .filter_map(|c| c["checksumValue"].as_str())
                .map(|h| format!("sha256:{h}"));
            let found = purls
                .iter()
                .filter_map(|u| purl_digest(u))
                .chain(p["versionInfo"].as_str().and_then(digest_of))
                .chain(sums.filter_map(|s| digest_of(&s)));
            sbom.digests.extend(found);
            continue;
        }
        let from_purl = purls
            .iter()
            .find_map(|u| u.strip_prefix("pkg:").and_then(purl));
        sbom.packages.extend(listed(
            from_purl,
            string(p, "name").zip(string(p, "versionInfo")),
        ));
    }
    Ok(sbom)
}

/// The question: the digests asked for, each with why (`asked`, or the
/// vulnerable packages an SBOM of it lists).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Question {
    pub targets: BTreeMap<String, BTreeSet<String>>,
}

impl Question {
    /// Asks for `digest` itself.
    pub fn digest(&mut self, digest: String) {
        self.targets
            .entry(digest)
            .or_default()
            .insert("asked".into());
    }

    /// Asks for every digest `sbom` is of when it lists one of
    /// `vulnerable`; returns how many of them it lists.
    pub fn sbom(&mut self, sbom: &Sbom, vulnerable: &[Package]) -> usize {
        let found: BTreeSet<String> = vulnerable
            .iter()
            .filter(|v| sbom.packages.iter().any(|p| v.is(p)))
            .map(Package::shown)
            .collect();
        if !found.is_empty() {
            for d in &sbom.digests {
                self.targets
                    .entry(d.clone())
                    .or_default()
                    .extend(found.iter().cloned());
            }
        }
        found.len()
    }

    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }
}

/// One digest in the fleet, without a question.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Running {
    /// Devices running it (a device counts once however many modules run
    /// it).
    pub devices: u64,
    /// Modules running it, over every device.
    pub modules: u64,
    /// The first module names that run it.
    pub names: BTreeSet<String>,
    /// The first repositories it was pulled from (`image ID`: a digest
    /// known only as an image's ID, built or loaded on the device).
    pub repositories: BTreeSet<String>,
    /// Whether an SBOM given names it (`null`: none were given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sbom: Option<bool>,
}

/// An affected device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Affected {
    pub node: String,
    /// The groups it is in, with the revision of each it runs.
    pub groups: Vec<String>,
    /// The revision of its own document it holds.
    pub revision: Option<u64>,
    pub modules: Vec<AffectedModule>,
}

/// An affected module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AffectedModule {
    pub module: String,
    /// The image reference its intention names.
    pub image: Option<String>,
    /// The digest asked for that it runs.
    pub digest: String,
    /// Why that digest is asked for.
    pub why: Vec<String>,
    /// Its state.
    pub state: String,
    /// Whether the published documents move it off (given the site).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_off: Option<MoveOff>,
}

/// A report not counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotCounted {
    pub source: String,
    pub why: String,
}

/// The fleet's answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Exposure {
    /// Reports counted: each signed by the key enrolled for its node.
    pub devices: u64,
    /// Without a question: every digest the counted devices run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digests: Option<BTreeMap<String, Running>>,
    /// With one: the digests asked for, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked: Option<BTreeMap<String, BTreeSet<String>>>,
    /// With one: how many devices run a digest asked for.
    pub affected_devices: u64,
    /// Every one of them, by node.
    pub affected: Vec<Affected>,
    /// Reports read and not counted: a device they speak for may be
    /// affected, and is not known to be.
    pub unverified: u64,
    pub unverified_listed: Vec<NotCounted>,
    /// Reports that could not be read.
    pub unreadable: u64,
    pub unreadable_listed: Vec<NotCounted>,
    /// Enrolled nodes without a counted report (not known either).
    pub missing: u64,
    pub missing_listed: Vec<String>,
    /// With SBOMs from the registry: per digest the counted reports name
    /// by a repository, what its registry holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<BTreeMap<String, FromRegistry>>,
    #[serde(skip)]
    question: Option<Question>,
    #[serde(skip)]
    counted: HashSet<String>,
}

/// What a registry holds for one digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FromRegistry {
    /// The repository asked.
    pub repository: String,
    /// The SBOMs found for it (0: none).
    pub sboms: usize,
    /// Why nothing is known (the registry did not answer, refused, or
    /// served something unreadable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_known: Option<String>,
}

/// Every digest a report's module is found by: its repository digests
/// (with each repository), then its image ID.
fn module_digests(m: &crate::views::ModuleRuns) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = m
        .image_digests
        .iter()
        .filter_map(|r| {
            let (repo, _) = r.rsplit_once('@')?;
            Some((digest_of(r)?, repo.to_string()))
        })
        .collect();
    if let Some(id) = m.image_id.as_deref().and_then(digest_of)
        && !out.iter().any(|(d, _)| *d == id)
    {
        out.push((id, "image ID".into()));
    }
    out
}

/// A counted report, reduced to what an exposure reads of it: made on
/// the thread that read the report, so that the rest of it is dropped
/// there and little crosses to the one that answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The node it speaks for.
    pub node: String,
    /// Its modules, by name.
    pub modules: BTreeMap<String, crate::views::ModuleRuns>,
    /// The groups its held document lists.
    pub groups: Vec<crate::views::GroupRuns>,
    /// The revision of the document it holds.
    pub revision: Option<u64>,
}

impl From<ReportRuns> for Seen {
    fn from(r: ReportRuns) -> Seen {
        Seen {
            node: r.node,
            modules: r.modules,
            revision: r.plane.held.map(|h| h.revision),
            groups: r.plane.groups,
        }
    }
}

impl From<ReportView> for Seen {
    fn from(r: ReportView) -> Seen {
        ReportRuns::from(r).into()
    }
}

impl Exposure {
    /// An answer to `question` (none: devices per digest).
    pub fn new(question: Option<Question>) -> Exposure {
        Exposure {
            digests: question.is_none().then(BTreeMap::new),
            asked: question.as_ref().map(|q| q.targets.clone()),
            question,
            ..Exposure::default()
        }
    }

    /// Whether `digest` was looked up in its registry already.
    pub fn fetched(&self, digest: &str) -> bool {
        self.registry
            .as_ref()
            .is_some_and(|r| r.contains_key(digest))
    }

    /// Records what the registry of `repository` holds for `digest`: its
    /// SBOMs (asked about `vulnerable` when there is a question) or why
    /// nothing is known. Done before the first report naming `digest` is
    /// taken.
    pub fn ask_sbom(
        &mut self,
        repository: &str,
        digest: &str,
        found: Result<&[Sbom], String>,
        vulnerable: &[Package],
    ) {
        let (sboms, not_known) = match found {
            Ok(sboms) => {
                if let Some(q) = self.question.as_mut() {
                    for s in sboms {
                        q.sbom(s, vulnerable);
                    }
                    self.asked = Some(q.targets.clone());
                }
                (sboms.len(), None)
            }
            Err(why) => (0, Some(why)),
        };
        self.registry.get_or_insert_default().insert(
            digest.to_string(),
            FromRegistry {
                repository: repository.to_string(),
                sboms,
                not_known,
            },
        );
    }

    /// The repositories a report names each digest by.
    pub fn named_by(r: &Seen) -> Vec<(String, String)> {
        r.modules
            .values()
            .flat_map(|m| &m.image_digests)
            .filter_map(|x| {
                let (repo, _) = x.rsplit_once('@')?;
                Some((digest_of(x)?, repo.to_string()))
            })
            .collect()
    }

    /// Takes one report as [`crate::views::signed::verify`] judged it.
    pub fn take(&mut self, source: &str, verdict: Result<Seen, Unverified>) {
        let r = match verdict {
            Ok(r) => r,
            Err(Unverified::Unreadable(e)) => {
                self.unreadable += 1;
                if self.unreadable_listed.len() < LISTED {
                    self.unreadable_listed.push(NotCounted {
                        source: source.to_string(),
                        why: e,
                    });
                }
                return;
            }
            Err(why) => return self.not_counted(source, why.to_string()),
        };
        if !self.counted.insert(r.node.clone()) {
            return self.not_counted(source, format!("a second report of node {}", r.node));
        }
        self.devices += 1;
        match &self.question {
            None => self.tally(&r),
            Some(q) => {
                let modules: Vec<AffectedModule> = r
                    .modules
                    .iter()
                    .filter_map(|(name, m)| {
                        let (digest, why) = module_digests(m)
                            .into_iter()
                            .find_map(|(d, _)| q.targets.get(&d).map(|w| (d, w)))?;
                        Some(AffectedModule {
                            module: name.clone(),
                            image: m.image.clone(),
                            digest,
                            why: why.iter().cloned().collect(),
                            state: m.state.clone(),
                            moved_off: None,
                        })
                    })
                    .collect();
                if !modules.is_empty() {
                    self.affected_devices += 1;
                    self.affected.push(Affected {
                        node: r.node.clone(),
                        groups: r
                            .groups
                            .iter()
                            .map(|g| match g.running {
                                Some(n) => format!("{}@{n}", g.group),
                                None => g.group.clone(),
                            })
                            .collect(),
                        revision: r.revision,
                        modules,
                    });
                }
            }
        }
    }

    fn not_counted(&mut self, source: &str, why: String) {
        self.unverified += 1;
        if self.unverified_listed.len() < LISTED {
            self.unverified_listed.push(NotCounted {
                source: source.to_string(),
                why,
            });
        }
    }

    fn tally(&mut self, r: &Seen) {
        let Some(table) = self.digests.as_mut() else {
            return;
        };
        let mut seen = HashSet::new();
        for (name, m) in &r.modules {
            for (d, repo) in module_digests(m) {
                let row = table.entry(d.clone()).or_default();
                row.modules += 1;
                if seen.insert(d) {
                    row.devices += 1;
                }
                if row.names.len() < PER_DIGEST {
                    row.names.insert(name.clone());
                }
                if row.repositories.len() < PER_DIGEST {
                    row.repositories.insert(repo);
                }
            }
        }
    }

    /// Once every report is taken: the `enrolled` nodes no report of which
    /// was counted; the affected devices in node order; each digest marked
    /// with whether one of `sboms` (when given) names it.
    pub fn finish<'n>(
        &mut self,
        enrolled: impl IntoIterator<Item = &'n str>,
        sboms: Option<&HashMap<String, usize>>,
    ) {
        for node in enrolled {
            if !self.counted.contains(node) {
                self.missing += 1;
                if self.missing_listed.len() < LISTED {
                    self.missing_listed.push(node.to_string());
                }
            }
        }
        self.affected.sort_by(|a, b| a.node.cmp(&b.node));
        if let (Some(table), Some(sboms)) = (self.digests.as_mut(), sboms) {
            for (d, row) in table.iter_mut() {
                row.sbom = Some(sboms.contains_key(d));
            }
        }
    }

    /// The answer as text: the table (largest first) or the affected
    /// devices, one line each, then what is not known.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "devices {} (reports signed by their enrolled keys)",
            self.devices
        );
        if let Some(table) = &self.digests {
            let mut rows: Vec<(&String, &Running)> = table.iter().collect();
            rows.sort_by(|a, b| b.1.devices.cmp(&a.1.devices).then(a.0.cmp(b.0)));
            let _ = writeln!(out, "digests {}", rows.len());
            for (d, row) in rows {
                let join = |s: &BTreeSet<String>| {
                    s.iter().map(|x| escape(x)).collect::<Vec<_>>().join(", ")
                };
                let sbom = match row.sbom {
                    Some(true) => "; SBOM given",
                    Some(false) => "; no SBOM given",
                    None => "",
                };
                let _ = writeln!(
                    out,
                    "  {d}  devices {}  modules {} ({})  from {}{sbom}",
                    row.devices,
                    row.modules,
                    join(&row.names),
                    join(&row.repositories)
                );
            }
        }
        if let Some(asked) = &self.asked {
            for (d, why) in asked {
                let why: Vec<String> = why.iter().map(|w| escape(w).into_owned()).collect();
                let _ = writeln!(out, "asked {d}: {}", why.join(", "));
            }
            let _ = writeln!(out, "affected devices {}", self.affected_devices);
            for a in &self.affected {
                let groups = if a.groups.is_empty() {
                    String::new()
                } else {
                    format!(
                        "  groups {}",
                        a.groups
                            .iter()
                            .map(|g| escape(g))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                let _ = writeln!(out, "  {}{groups}", escape(&a.node));
                for m in &a.modules {
                    let moved = m
                        .moved_off
                        .as_ref()
                        .map(|o| format!("; {}", o.line()))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "    {}  {}  {}  {}{moved}",
                        escape(&m.module),
                        escape(m.image.as_deref().unwrap_or("(image not reported)")),
                        m.digest,
                        m.state
                    );
                }
            }
        }
        if let Some(registry) = &self.registry {
            for (d, f) in registry {
                let repo = escape(&f.repository);
                let _ = match &f.not_known {
                    Some(why) => writeln!(out, "SBOM not known: {d} ({repo}): {}", escape(why)),
                    None if f.sboms == 0 => writeln!(out, "no SBOM in the registry: {d} ({repo})"),
                    None => writeln!(out, "SBOMs in the registry {}: {d} ({repo})", f.sboms),
                };
            }
        }
        let not_known = self.unverified + self.unreadable + self.missing;
        if not_known > 0 {
            let _ = writeln!(
                out,
                "not known {not_known}: unverified {}, unreadable {}, enrolled without a counted report {}",
                self.unverified, self.unreadable, self.missing
            );
            for n in self.unverified_listed.iter().chain(&self.unreadable_listed) {
                let _ = writeln!(out, "  {}: {}", escape(&n.source), escape(&n.why));
            }
            for n in &self.missing_listed {
                let _ = writeln!(out, "  {}: no report counted", escape(n));
            }
        }
        out
    }
}

/// Whether the documents the host serves move a module off a digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "kebab-case")]
pub enum MoveOff {
    /// The document's revision names another image for it.
    Revision {
        document: String,
        revision: u64,
        image: String,
    },
    /// The document's revision no longer runs it.
    Removed { document: String, revision: u64 },
    /// The revision served still names the digest: nothing published
    /// moves it.
    Stays { document: String, revision: u64 },
    /// The revision served names the same tag the device runs: it moves
    /// it only if the tag now names another digest.
    SameTag {
        document: String,
        revision: u64,
        image: String,
    },
    /// What the host serves for the node cannot be read.
    Unknown { why: String },
}

impl MoveOff {
    /// One line.
    pub fn line(&self) -> String {
        match self {
            MoveOff::Revision {
                document,
                revision,
                image,
            } => format!(
                "moved off by {} revision {revision} ({})",
                escape(document),
                escape(image)
            ),
            MoveOff::Removed { document, revision } => {
                format!("removed by {} revision {revision}", escape(document))
            }
            MoveOff::Stays { document, revision } => format!(
                "not moved off: {} revision {revision} still names it",
                escape(document)
            ),
            MoveOff::SameTag {
                document,
                revision,
                image,
            } => format!(
                "moved off only if the tag moved: {} revision {revision} names {}",
                escape(document),
                escape(image)
            ),
            MoveOff::Unknown { why } => format!("not known what moves it: {}", escape(why)),
        }
    }
}

/// Whether what the host serves moves a module off `digest`: `served` is
/// the image the node's served documents give the module (composed, every
/// rollout at its end), with the document and revision that decide it
/// (`None` image: they no longer run it); `reported` the reference the
/// device said its intention names.
pub fn moves_off(
    served: (Option<&str>, &str, u64),
    digest: &str,
    reported: Option<&str>,
) -> MoveOff {
    let (image, document, revision) = served;
    let document = document.to_string();
    let Some(image) = image else {
        return MoveOff::Removed { document, revision };
    };
    match digest_of(image) {
        Some(d) if d == digest => MoveOff::Stays { document, revision },
        Some(_) => MoveOff::Revision {
            document,
            revision,
            image: image.to_string(),
        },
        None if reported == Some(image) => MoveOff::SameTag {
            document,
            revision,
            image: image.to_string(),
        },
        None => MoveOff::Revision {
            document,
            revision,
            image: image.to_string(),
        },
    }
}

pub mod referrers;

#[cfg(test)]
mod tests;
