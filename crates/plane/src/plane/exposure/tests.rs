use super::*;
use serde_json::json;

const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const ID: &str = "sha256:9999999999999999999999999999999999999999999999999999999999999999";

#[test]
fn digests_are_read_from_a_digest_or_a_reference_and_nothing_else() {
    let upper = D1.replace('1', "A");
    let cases: [(&str, Option<String>); 7] = [
        (D1, Some(D1.into())),
        (&format!("reg:5000/app@{D1}"), Some(D1.into())),
        (&upper, Some(upper.to_ascii_lowercase())),
        ("reg/app:1", None),
        ("sha256:1234", None),
        ("sha512:11", None),
        (&format!("{D1}0"), None),
    ];
    for (s, want) in cases {
        assert_eq!(digest_of(s), want, "{s}");
    }
    assert!(
        parse_digest("app:1")
            .unwrap_err()
            .contains("not an image digest")
    );
}

#[test]
fn package_versions_are_read_from_a_list_line() {
    let p = |name: &str, version: &str, purl: Option<&str>| Package {
        name: name.into(),
        version: version.into(),
        purl: purl.map(str::to_string),
    };
    let cases: [(&str, Result<Package, &str>); 9] = [
        ("openssl@3.0.11", Ok(p("openssl", "3.0.11", None))),
        ("openssl 3.0.11-1", Ok(p("openssl", "3.0.11-1", None))),
        ("@scope/pkg@1.2.0", Ok(p("@scope/pkg", "1.2.0", None))),
        (
            "pkg:deb/debian/openssl@3.0.11-1~deb12u1?arch=amd64",
            Ok(p("openssl", "3.0.11-1~deb12u1", Some("deb/debian/openssl"))),
        ),
        (
            "pkg:npm/%40scope/pkg@1.0.0",
            Ok(p("pkg", "1.0.0", Some("npm/@scope/pkg"))),
        ),
        ("openssl", Err("names no package version")),
        ("openssl@", Err("names no package version")),
        ("pkg:deb/openssl", Err("a package URL needs")),
        ("pkg:@1", Err("a package URL needs")),
    ];
    for (s, want) in cases {
        match (Package::parse(s), want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{s}"),
            (Err(e), Err(want)) => assert!(e.contains(want), "{s}: {e}"),
            (got, want) => panic!("{s}: {got:?}, wanted {want:?}"),
        }
    }
}

#[test]
fn a_package_is_the_same_version_by_its_url_or_else_its_name() {
    let deb = Package::parse("pkg:deb/debian/openssl@3.0.11").unwrap();
    let alpine = Package::parse("pkg:apk/alpine/openssl@3.0.11").unwrap();
    let plain = Package::parse("OpenSSL@3.0.11").unwrap();
    let newer = Package::parse("openssl@3.0.12").unwrap();
    let cases = [
        (&deb, &deb, true),
        (&deb, &alpine, false),
        (&plain, &deb, true),
        (&deb, &plain, true),
        (&plain, &newer, false),
    ];
    for (a, b, want) in cases {
        assert_eq!(a.is(b), want, "{a:?} {b:?}");
    }
}

fn cyclonedx(component: J, packages: J) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "bomFormat": "CycloneDX", "specVersion": "1.5",
        "metadata": {"component": component},
        "components": packages,
    }))
    .unwrap()
}

#[test]
fn an_sbom_names_its_image_and_its_packages() {
    let hex1 = &D1[7..];
    let comps = json!([
        {"type": "library", "name": "openssl", "version": "3.0.11",
         "purl": "pkg:deb/debian/openssl@3.0.11?arch=amd64",
         "components": [{"name": "zlib", "version": "1.3"}]},
        {"type": "library", "name": "no-version"},
    ]);
    let spdx = |described: J, id_of_pkg: &str| {
        serde_json::to_vec(&json!({
            "spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT",
            "documentDescribes": described,
            "packages": [
                {"SPDXID": "SPDXRef-image", "name": "app", "versionInfo": id_of_pkg,
                 "externalRefs": [{"referenceType": "purl",
                   "referenceLocator": format!("pkg:oci/app@sha256%3A{hex1}?repository_url=reg/app")}]},
                {"SPDXID": "SPDXRef-p1", "name": "busybox", "versionInfo": "1.36.1",
                 "externalRefs": [{"referenceType": "purl", "referenceLocator": "pkg:deb/debian/busybox@1.36.1"}]},
            ],
        }))
        .unwrap()
    };
    let statement = serde_json::to_vec(&json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "reg/app", "digest": {"sha256": &D2[7..]}}],
        "predicateType": "https://cyclonedx.org/bom",
        "predicate": {"bomFormat": "CycloneDX", "components": comps},
    }))
    .unwrap();
    let envelope = {
        use base64::Engine as _;
        serde_json::to_vec(&json!({
            "payloadType": "application/vnd.in-toto+json",
            "payload": base64::engine::general_purpose::STANDARD.encode(&statement),
            "signatures": [],
        }))
        .unwrap()
    };
    let named_by_file = format!("sha256-{}.cdx.json", &D2[7..]);
    let digests = |s: &Sbom| s.digests.iter().cloned().collect::<Vec<_>>();
    let names = |s: &Sbom| s.packages.iter().map(Package::shown).collect::<Vec<_>>();
    // (bytes, file name, digests or error, packages)
    type Case<'a> = (
        Vec<u8>,
        &'a str,
        Result<Vec<&'a str>, &'a str>,
        Vec<&'a str>,
    );
    let cases: Vec<Case> = vec![
        (
            cyclonedx(
                json!({"type": "container", "name": "reg/app", "version": D1}),
                comps.clone(),
            ),
            "x.json",
            Ok(vec![D1]),
            vec!["pkg:deb/debian/openssl@3.0.11", "zlib@1.3"],
        ),
        (
            cyclonedx(
                json!({"name": "app", "purl": format!("pkg:oci/app@sha256%3A{hex1}")}),
                json!([]),
            ),
            "x.json",
            Ok(vec![D1]),
            vec![],
        ),
        (
            cyclonedx(json!({"name": "app", "version": "1.0"}), json!([])),
            &named_by_file,
            Ok(vec![D2]),
            vec![],
        ),
        (
            cyclonedx(json!({"name": "app", "version": "1.0"}), json!([])),
            "app.json",
            Err("names no image digest"),
            vec![],
        ),
        (
            spdx(json!(["SPDXRef-image"]), "1.0"),
            "x.spdx.json",
            Ok(vec![D1]),
            vec!["pkg:deb/debian/busybox@1.36.1"],
        ),
        (
            spdx(json!([]), D2),
            "x.spdx.json",
            Err("names no image digest"),
            vec![],
        ),
        (statement.clone(), "x", Ok(vec![D2]), vec![]),
        (envelope, "x", Ok(vec![D2]), vec![]),
        (
            b"{}".to_vec(),
            "x",
            Err("neither a CycloneDX nor an SPDX"),
            vec![],
        ),
        (b"<xml/>".to_vec(), "x", Err("not JSON"), vec![]),
    ];
    for (n, (bytes, file, want, packages)) in cases.into_iter().enumerate() {
        match (read_sbom(&bytes, file), want) {
            (Ok(s), Ok(want)) => {
                assert_eq!(digests(&s), want, "case {n}");
                if !packages.is_empty() {
                    let mut got = names(&s);
                    got.sort();
                    assert_eq!(got, packages, "case {n}");
                }
            }
            (Err(e), Err(want)) => assert!(e.contains(want), "case {n}: {e}"),
            (got, want) => panic!("case {n}: {got:?}, wanted {want:?}"),
        }
    }
}

#[test]
fn the_served_documents_move_a_module_off_a_digest_or_say_why_not() {
    let doc = "groups/eu/desired.json";
    let cases = [
        (
            Some(format!("reg/app@{D2}")),
            Some("reg/app:1"),
            "moved off by groups/eu/desired.json revision 7",
        ),
        (Some("reg/app:2".into()), Some("reg/app:1"), "moved off by"),
        (
            Some(format!("reg/app:1@{D1}")),
            Some("reg/app:1"),
            "not moved off",
        ),
        (
            Some("reg/app:1".into()),
            Some("reg/app:1"),
            "moved off only if the tag moved",
        ),
        (Some("reg/app:1".into()), None, "moved off by"),
        (
            None,
            Some("reg/app:1"),
            "removed by groups/eu/desired.json revision 7",
        ),
    ];
    for (image, reported, want) in cases {
        let got = moves_off((image.as_deref(), doc, 7), D1, reported).line();
        assert!(got.starts_with(want), "{image:?} {reported:?}: {got}");
    }
}

fn report(node: &str, modules: J) -> ReportView {
    serde_json::from_value(json!({
        "agent_version": "0.7.0",
        "clock": {"plane_date": null, "status": "ok", "system": ""},
        "device_key": null, "engine": "reachable",
        "modules": modules, "node": node, "passing": true,
        "plane": {"conflicts": [], "error": null, "held": null, "last_contact": null,
                  "refusal": null, "url": "",
                  "groups": [{"error": null, "group": "eu", "revision": 4, "rollout": null, "running": 4}]},
        "quarantine": null, "sent_at": "", "seq": 1, "undelivered": 0,
    }))
    .unwrap()
}

fn module(digests: &[String], id: &str) -> J {
    json!({"desired_digest": null, "health": null, "image": "reg/app:1",
           "image_digests": digests, "image_id": id, "last_error": null,
           "restart_count": null, "running_digest": null, "state": "running"})
}

#[test]
fn devices_are_counted_per_digest_and_each_affected_one_listed_whole() {
    let pulled = vec![format!("reg/app@{D1}")];
    let reports = [
        report(
            "a",
            json!({"web": module(&pulled, ID), "db": module(&pulled, ID)}),
        ),
        report("b", json!({"web": module(&[], ID)})),
        report(
            "c",
            json!({"web": module(&[format!("reg/other@{D2}")], D2)}),
        ),
    ];
    let mut table = Exposure::new(None);
    for r in reports.clone() {
        table.take("x", Ok(r.into()));
    }
    table.take("a2", Ok(report("a", json!({})).into()));
    table.take("d", Err(Unverified::NotEnrolled));
    table.finish(["a", "b", "c", "e"], None);
    let t = table.digests.as_ref().unwrap();
    assert_eq!((t[D1].devices, t[D1].modules), (1, 2));
    // The image ID counts the device that pulled it and the one that did
    // not; D2 is both c's manifest digest and its ID, counted once.
    assert_eq!((t[ID].devices, t[ID].modules), (2, 3));
    assert_eq!((t[D2].devices, t[D2].modules), (1, 1));
    assert_eq!(t[ID].repositories, ["image ID".to_string()].into());
    assert_eq!((table.devices, table.unverified, table.missing), (3, 2, 1));
    assert_eq!(table.missing_listed, ["e"]);

    let mut q = Question::default();
    q.digest(D1.into());
    let mut asked = Exposure::new(Some(q));
    for r in reports.iter().rev() {
        asked.take("x", Ok(r.clone().into()));
    }
    asked.finish(["a", "b", "c"], None);
    assert_eq!(asked.affected_devices, 1);
    let a = &asked.affected[0];
    assert_eq!(
        (a.node.as_str(), a.groups.clone()),
        ("a", vec!["eu@4".to_string()])
    );
    let names: Vec<&str> = a.modules.iter().map(|m| m.module.as_str()).collect();
    assert_eq!(names, ["db", "web"]);
    assert_eq!(a.modules[0].why, ["asked"]);
    assert!(
        asked.text().contains("affected devices 1"),
        "{}",
        asked.text()
    );
}

#[test]
fn an_sbom_listing_a_vulnerable_version_asks_for_its_images() {
    let sbom = read_sbom(
        &cyclonedx(
            json!({"version": D1}),
            json!([{"name": "openssl", "version": "3.0.11", "purl": "pkg:deb/debian/openssl@3.0.11"}]),
        ),
        "x",
    )
    .unwrap();
    let mut q = Question::default();
    let vulnerable = [
        Package::parse("openssl@3.0.11").unwrap(),
        Package::parse("zlib@1.2").unwrap(),
    ];
    assert_eq!(q.sbom(&sbom, &vulnerable), 1);
    assert_eq!(q.targets[D1], ["openssl@3.0.11".to_string()].into());
    let mut none = Question::default();
    assert_eq!(none.sbom(&sbom, &vulnerable[1..]), 0);
    assert!(none.is_empty());
}

#[test]
fn sboms_from_the_registry_grow_the_question_before_the_reports_naming_them_are_taken() {
    let vulnerable = [Package::parse("openssl@3.0.11").unwrap()];
    let listing = |d: &str, version: &str| Sbom {
        digests: [d.to_string()].into(),
        packages: vec![Package::parse(&format!("openssl@{version}")).unwrap()],
        format: "CycloneDX",
    };
    let r = report(
        "a",
        json!({"web": module(&[format!("reg/app@{D1}"), format!("reg/other@{D2}")], ID)}),
    );
    assert_eq!(
        Exposure::named_by(&r.clone().into()),
        [
            (D1.to_string(), "reg/app".to_string()),
            (D2.to_string(), "reg/other".to_string())
        ]
    );
    // (what the registry holds for D1, whether device a is affected)
    for (found, affected) in [
        (Ok(vec![listing(D1, "3.0.11")]), true),
        (Ok(vec![listing(D1, "3.0.12")]), false),
        (Ok(vec![]), false),
        (Err("reg: no answer in time".to_string()), false),
    ] {
        let mut x = Exposure::new(Some(Question::default()));
        assert!(!x.fetched(D1));
        x.ask_sbom(
            "reg/app",
            D1,
            found.as_deref().map_err(Clone::clone),
            &vulnerable,
        );
        assert!(x.fetched(D1) && !x.fetched(D2));
        x.take("x", Ok(r.clone().into()));
        x.finish(["a"], None);
        assert_eq!(x.affected_devices == 1, affected, "{found:?}");
        let f = &x.registry.as_ref().unwrap()[D1];
        assert_eq!(f.sboms, found.as_ref().map_or(0, Vec::len));
        let text = x.text();
        match &found {
            Err(why) => assert_eq!(f.not_known.as_deref(), Some(why.as_str())),
            Ok(v) if v.is_empty() => assert!(text.contains("no SBOM in the registry"), "{text}"),
            Ok(_) => assert!(text.contains("SBOMs in the registry 1"), "{text}"),
        }
        if found.is_err() {
            assert!(
                text.contains(&format!("SBOM not known: {D1} (reg/app)")),
                "{text}"
            );
        }
    }
}
