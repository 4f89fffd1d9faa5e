//! `stead-plane exposure`: which devices run an image, or an image with a
//! vulnerable package in it, from the fleet's signed reports (read as
//! `status` reads them, one at a time, every signature checked against
//! the enrolled keys), the SBOMs given, and, with the host's directory,
//! which published revision moves each affected module off it. The rules
//! are [`crate::plane::exposure`]'s; this reads the files, and with
//! `--sbom-from-registry` asks each digest's registry for its SBOMs
//! ([`crate::cli::registry`]) the first time a counted report names it,
//! during the one pass over the reports.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::fleet::{Reading, Reports, enrolled_keys, verdicts};
use crate::cli::registry::Registries;
use crate::model::fleet::GroupName;
use crate::model::names::{ModuleName, NodeId};
use crate::plane::document::Desired;
use crate::plane::envelope::Envelope;
use crate::plane::exposure::{
    Exposure, MoveOff, Package, Question, Sbom, Seen, moves_off, read_sbom,
};
use crate::plane::group::{GroupDesired, HeldGroup, compose};
use crate::plane::publish::{group_path, node_path};
use crate::views::ReportRuns;

/// The largest SBOM read.
const MAX_SBOM: u64 = 256 << 20;
/// The largest list of package versions read.
const MAX_LIST: u64 = 16 << 20;
/// The largest document read from the site.
const MAX_DOCUMENT: u64 = 4 << 20;
/// A time past every rollout's end: what the documents served give once
/// each rollout has reached every device (a halted one stays halted).
const AT_THE_END: u64 = u32::MAX as u64;

/// What `exposure` is asked.
#[derive(Debug, PartialEq, Eq)]
pub struct Ask {
    pub reports: Reports,
    pub fleet: PathBuf,
    pub site: Option<PathBuf>,
    pub digests: Vec<String>,
    pub packages: Vec<String>,
    pub vulnerable: Option<PathBuf>,
    pub sboms: Vec<PathBuf>,
    /// SBOMs fetched from the registry, with its logins and CA.
    pub from_registry: Option<Box<FromRegistry>>,
    pub json: bool,
}

/// `--sbom-from-registry`'s logins and CA.
#[derive(Debug, PartialEq, Eq)]
pub struct FromRegistry {
    pub auth: Option<PathBuf>,
    pub ca: Option<PathBuf>,
}

/// Runs it: exit 0 with the answer (affected devices or not), 1 refused
/// (bad input, nothing read).
pub fn exposure(ask: &Ask) -> crate::cli::failure::Result<ExitCode> {
    let refused = |e: String| Ok(super::plane::refused(format_args!("{e}")));
    // The walk of a directory's reports runs ahead while the keys are read.
    let walk = match Reading::start(&ask.reports) {
        Ok(r) => r,
        Err(e) => return refused(e),
    };
    let keys = match enrolled_keys(&ask.fleet) {
        Ok(k) => k,
        Err(e) => return refused(e),
    };
    let mut vulnerable = Vec::new();
    for p in &ask.packages {
        match Package::parse(p) {
            Ok(p) => vulnerable.push(p),
            Err(e) => return refused(format!("--package: {e}")),
        }
    }
    if let Some(file) = &ask.vulnerable {
        match read_list(file) {
            Ok(mut l) => vulnerable.append(&mut l),
            Err(e) => return refused(e),
        }
    }
    if !vulnerable.is_empty() && ask.sboms.is_empty() && ask.from_registry.is_none() {
        return refused(
            "a package is found in an image only through its SBOM: give --sbom DIR \
             (CycloneDX or SPDX JSON, one per image) or --sbom-from-registry"
                .into(),
        );
    }
    let mut sboms = Vec::new();
    for dir in &ask.sboms {
        match read_sboms(dir) {
            Ok(mut s) => sboms.append(&mut s),
            Err(e) => return refused(e),
        }
    }
    let mut question = None::<Question>;
    for d in &ask.digests {
        match crate::plane::exposure::parse_digest(d) {
            Ok(d) => question.get_or_insert_default().digest(d),
            Err(e) => return refused(format!("--digest: {e}")),
        }
    }
    if !vulnerable.is_empty() {
        let q = question.get_or_insert_default();
        for (_, sbom) in &sboms {
            q.sbom(sbom, &vulnerable);
        }
    }
    let asked_packages = !vulnerable.is_empty();
    let mut registries = match &ask.from_registry {
        None => None,
        Some(f) => match Registries::new(f.auth.as_deref(), f.ca.as_deref()) {
            Ok(r) => Some(r),
            Err(e) => return refused(e),
        },
    };
    let runtime = match registries {
        None => None,
        Some(_) => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => Some(r),
            Err(e) => return refused(format!("cannot start the async runtime: {e}")),
        },
    };
    // Which digests an SBOM was given for (marked in the table).
    let mut described: HashMap<String, usize> = sboms
        .iter()
        .flat_map(|(_, s)| s.digests.iter().map(|d| (d.clone(), s.packages.len())))
        .collect();
    let mut x = Exposure::new(question);
    let reading = super::progress::Progress::stderr("reports read", None);
    let index = crate::plane::enroll::Index::new(&keys);
    let read = walk.judged(
        &|batch| {
            verdicts::<ReportRuns>(Some(&index), batch)
                .into_iter()
                .map(|v| v.map(Seen::from))
                .collect()
        },
        &mut |source, v| {
            reading.step();
            if let (Some(reg), Some(rt), Ok(r)) = (registries.as_mut(), runtime.as_ref(), &v) {
                fetch_new(&mut x, reg, rt, r, &vulnerable);
            }
            x.take(source, v);
        },
    );
    if let Err(e) = read {
        return refused(e);
    }
    reading.done();
    for (d, f) in x.registry.iter().flatten() {
        if f.sboms > 0 {
            described.insert(d.clone(), f.sboms);
        }
    }
    x.finish(
        keys.keys().map(|n| n.as_str()),
        (!ask.sboms.is_empty() || ask.from_registry.is_some()).then_some(&described),
    );
    if let Some(site) = &ask.site {
        let mut served = Served::new(site);
        for a in &mut x.affected {
            for m in &mut a.modules {
                m.moved_off =
                    Some(served.moves_off(&a.node, &m.module, &m.digest, m.image.as_deref()));
            }
        }
    }
    if asked_packages && x.asked.as_ref().is_some_and(BTreeMap::is_empty) {
        eprintln!(
            "stead-plane: no SBOM given or fetched lists a version asked for: no image is known to hold one"
        );
    }
    if ask.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&x).expect("an exposure serialises")
        );
    } else {
        print!("{}", x.text());
    }
    Ok(ExitCode::SUCCESS)
}

/// Fetches the SBOMs of every digest `r` names by a repository that no
/// report named before, and asks about them, before `r` is taken. A
/// digest is looked up at each repository `r` names it by until one
/// answers; why none did is recorded for it.
fn fetch_new(
    x: &mut Exposure,
    reg: &mut Registries,
    rt: &tokio::runtime::Runtime,
    r: &Seen,
    vulnerable: &[Package],
) {
    let mut by_digest: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (d, repo) in Exposure::named_by(r) {
        if !x.fetched(&d) {
            by_digest.entry(d).or_default().push(repo);
        }
    }
    for (d, repos) in by_digest {
        let mut last = (String::new(), Err(String::new()));
        for repo in repos {
            // Its own thread: the reports may be read inside a runtime
            // already (from a URL), where another cannot block.
            let found = std::thread::scope(|s| {
                s.spawn(|| rt.block_on(reg.sboms(&repo, &d)))
                    .join()
                    .unwrap_or_else(|_| Err("the registry client failed".into()))
            });
            let ok = found.is_ok();
            last = (repo, found);
            if ok {
                break;
            }
        }
        let (repo, found) = last;
        x.ask_sbom(
            &repo,
            &d,
            found.as_deref().map_err(Clone::clone),
            vulnerable,
        );
    }
}

/// A list of package versions: one per line (`#` starts a comment).
fn read_list(file: &Path) -> Result<Vec<Package>, String> {
    let bytes = crate::host::files::read_regular(file, MAX_LIST)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", file.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        out.push(Package::parse(line).map_err(|e| format!("{}:{}: {e}", file.display(), n + 1))?);
    }
    if out.is_empty() {
        return Err(format!("{} lists no package version", file.display()));
    }
    Ok(out)
}

/// Every SBOM in `dir` (its `.json` files, not below): one that does not
/// read refuses the run, naming it.
fn read_sboms(dir: &Path) -> Result<Vec<(String, Sbom)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("--sbom {}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|e| format!("--sbom {}: {e}", dir.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".json") || !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = e.path();
        let bytes = crate::host::files::read_regular(&path, MAX_SBOM)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let sbom = read_sbom(&bytes, &name).map_err(|e| format!("{}: {e}", path.display()))?;
        out.push((name, sbom));
    }
    if out.is_empty() {
        return Err(format!("--sbom {}: no .json file in it", dir.display()));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The documents the host serves, read once each (not verified: like
/// `status`, this signs nothing and says what the site holds).
struct Served<'a> {
    site: &'a Path,
    groups: HashMap<GroupName, Result<GroupDesired, String>>,
}

impl<'a> Served<'a> {
    fn new(site: &'a Path) -> Served<'a> {
        Served {
            site,
            groups: HashMap::new(),
        }
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        let bytes = crate::host::files::read_regular(&self.site.join(path), MAX_DOCUMENT)
            .map_err(|e| format!("{path}: {e}"))?;
        let env = Envelope::parse(&bytes).map_err(|e| format!("{path}: {e}"))?;
        Ok(env.payload)
    }

    fn group(&mut self, name: &GroupName) -> Result<GroupDesired, String> {
        if !self.groups.contains_key(name) {
            let path = group_path(name);
            let d = self
                .read(&path)
                .and_then(|p| GroupDesired::parse(&p).map_err(|e| format!("{path}: {e}")));
            self.groups.insert(name.clone(), d);
        }
        self.groups[name].clone()
    }

    /// What the served documents do to `node`'s `module`, running `digest`.
    fn moves_off(
        &mut self,
        node: &str,
        module: &str,
        digest: &str,
        reported: Option<&str>,
    ) -> MoveOff {
        match self.compose(node, module) {
            Ok((image, document, revision)) => {
                moves_off((image.as_deref(), &document, revision), digest, reported)
            }
            Err(why) => MoveOff::Unknown { why },
        }
    }

    /// The image the served documents give `module` on `node` once every
    /// rollout is over, and the document (and its revision) that decides
    /// it.
    fn compose(
        &mut self,
        node: &str,
        module: &str,
    ) -> Result<(Option<String>, String, u64), String> {
        let id = NodeId::try_from(node).map_err(|e| format!("node {node:?}: {e}"))?;
        let name = ModuleName::try_from(module).map_err(|e| format!("module {module:?}: {e}"))?;
        let path = node_path(&id);
        let payload = self.read(&path)?;
        let desired = Desired::parse(&payload).map_err(|e| format!("{path}: {e}"))?;
        let mut groups = BTreeMap::new();
        for g in &desired.groups {
            let d = self.group(g)?;
            groups.insert(
                g.clone(),
                HeldGroup {
                    desired: d,
                    took: false,
                    was_in: false,
                },
            );
        }
        // The document that decides the module: the node's own when it
        // names, changes or removes it, else the first of its groups that
        // has it.
        let own = desired.modules.contains_key(&name)
            || desired.overrides.contains_key(&name)
            || desired.remove.contains(&name);
        let decider = if own {
            (path.clone(), desired.revision)
        } else {
            desired
                .groups
                .iter()
                .find_map(|g| {
                    let d = &groups.get(g)?.desired;
                    d.modules
                        .contains_key(&name)
                        .then(|| (group_path(g), d.revision))
                })
                .unwrap_or((path.clone(), desired.revision))
        };
        let composed =
            compose(desired, &groups, &id, AT_THE_END, None).map_err(|e| format!("{path}: {e}"))?;
        let image = composed.modules.get(&name).map(|i| i.image.clone());
        Ok((image, decider.0, decider.1))
    }
}
