//! The operator's command line read into its commands: one line per case,
//! the command it gives or the first words of clap's error.

use clap::Parser as _;

use super::*;

/// What a line gives: the command's Debug, or `error: …` with clap's
/// message on one line (its lists of arguments joined by spaces).
fn outcome(line: &str) -> String {
    let words = std::iter::once("stead-plane").chain(line.split_whitespace());
    match Cli::try_parse_from(words) {
        Ok(cli) => format!("{:?}", cli.into_command()),
        Err(e) => {
            let text = e.to_string();
            let first = text.split("\n\n").next().unwrap_or_default();
            first.split_whitespace().collect::<Vec<_>>().join(" ")
        }
    }
}

#[test]
fn each_command_line_is_its_command_or_says_what_is_wrong() {
    #[rustfmt::skip]
    let cases = [
        ("release --key k --version 0.7.0 --binary t=f", "Plane(Release { keys: [\"k\"], version: \"0.7.0\", binaries: [(\"t\", \"f\")], url_base: None, schema: 9, reads_from: 1, out: None })"),
        ("release --key k --version 0.7.0 --binary a=x --binary b=y --url-base https://h/r --schema 10 --reads-from 3 --out o", "Plane(Release { keys: [\"k\"], version: \"0.7.0\", binaries: [(\"a\", \"x\"), (\"b\", \"y\")], url_base: Some(\"https://h/r\"), schema: 10, reads_from: 3, out: Some(\"o\") })"),
        ("release --key k --version seven --binary t=f", "error: invalid value 'seven' for '--version <VERSION>': unexpected character 's' while parsing major version number"),
        ("release --key k --version 0.7.0 --binary tf", "error: invalid value 'tf' for '--binary <TARGET=FILE>': TARGET=FILE"),
        ("release --key k --binary t=f", "error: the following required arguments were not provided: --version <VERSION>"),
        ("publish --key k --fleet f --site s", "Plane(Publish { keys: [\"k\"], trusted: [], fleet: \"f\", site: \"s\", dry_run: false, expires_in: 2592000s, refresh_before: 604800s, upload: None })"),
        ("publish --key k --trusted a --trusted b --fleet f --site s", "Plane(Publish { keys: [\"k\"], trusted: [\"a\", \"b\"], fleet: \"f\", site: \"s\", dry_run: false, expires_in: 2592000s, refresh_before: 604800s, upload: None })"),
        ("rollout watch --key k --trusted a --reports r --fleet f --site s", "Plane(Watch { keys: [\"k\"], trusted: [\"a\"], reports: Dir(\"r\"), fleet: \"f\", site: \"s\", groups: [], threshold: Threshold { rate_permille: 50, min_reports: 10 }, dry_run: false, upload: None })"),
        ("enroll --fleet f --reports r", "Plane(Enroll { fleet: \"f\", reports: Dir(\"r\"), replace: false })"),
        ("enroll --fleet f --reports http://h/r --replace", "Plane(Enroll { fleet: \"f\", reports: Index(http://h/r/), replace: true })"),
        ("enroll --reports r", "error: the following required arguments were not provided: --fleet <DIR>"),
        ("seal --node n --module db --field env.P --fleet f", "Plane(Seal { node: NodeId(\"n\"), module: ModuleName(\"db\"), field: \"env.P\", to: Fleet(\"f\") })"),
        ("seal --node n --module db --field env.P --to age1x", "Plane(Seal { node: NodeId(\"n\"), module: ModuleName(\"db\"), field: \"env.P\", to: Key(\"age1x\") })"),
        ("seal --node n --module db --field env.P", "error: the following required arguments were not provided: <--fleet <DIR>|--to <AGE1>>"),
        ("seal --node n --module db --field env.P --fleet f --to age1x", "error: the argument '--fleet <DIR>' cannot be used with '--to <AGE1>'"),
        ("seal --node n --module Bad --field env.P --to age1x", "error: invalid value 'Bad' for '--module <MODULE>': invalid module name \"Bad\": must match [a-z0-9][a-z0-9-]{0,62}"),
        ("root init --root-key a --root-key b --threshold 2 --documents-key c", "Plane(RootInit { root_keys: [\"a\", \"b\"], threshold: 2, document_keys: [\"c\"], scoped: Scoped { delegations: [], allow_list_keys: [], allow_list_threshold: 1 }, after: None, expires_in: 31536000s, out: None })"),
        ("root init --root-key a --documents-key c --after r.json --expires-in 30d --out o", "Plane(RootInit { root_keys: [\"a\"], threshold: 1, document_keys: [\"c\"], scoped: Scoped { delegations: [], allow_list_keys: [], allow_list_threshold: 1 }, after: Some(\"r.json\"), expires_in: 2592000s, out: Some(\"o\") })"),
        ("root init --root-key a --documents-key c --threshold 0", "error: invalid value '0' for '--threshold <N>': \"0\": 1 to 8"),
        ("root init --root-key a", "error: the following required arguments were not provided: --documents-key <PUB>"),
        ("root sign --key k --in p", "Plane(RootSign { keys: [\"k\"], input: Some(\"p\"), out: None })"),
        ("root verify --trusted a --site s", "Plane(RootVerify { trusted: [\"a\"], site: \"s\", input: None, allow_list: None, publish: false, upload: None })"),
        ("root verify --trusted a --site s --in r --publish", "Plane(RootVerify { trusted: [\"a\"], site: \"s\", input: Some(\"r\"), allow_list: None, publish: true, upload: None })"),
        ("root verify --trusted a --site s --allow-list l --publish", "Plane(RootVerify { trusted: [\"a\"], site: \"s\", input: None, allow_list: Some(\"l\"), publish: true, upload: None })"),
        ("root init --root-key a --documents-key c --delegate d1 --delegate d2 --allow-list-key x --allow-list-key y --allow-list-threshold 2", "Plane(RootInit { root_keys: [\"a\"], threshold: 1, document_keys: [\"c\"], scoped: Scoped { delegations: [\"d1\", \"d2\"], allow_list_keys: [\"x\", \"y\"], allow_list_threshold: 2 }, after: None, expires_in: 31536000s, out: None })"),
        ("root init --root-key a --documents-key c --allow-list-threshold 2", "error: the following required arguments were not provided: --allow-list-key <PUB>"),
        ("root allow-list --image sha256:x --images-from f --after a --out o", "Plane(AllowList { images: [\"sha256:x\"], images_from: Some(\"f\"), after: Some(\"a\"), expires_in: 2592000s, out: Some(\"o\") })"),
        ("root verify --trusted a --site s --publish", "error: the following required arguments were not provided: <--in <FILE>|--allow-list <FILE>>"),
        ("sign-group --key k --group edge-eu --in p", "Plane(SignGroup { keys: [\"k\"], group: NodeId(\"edge-eu\"), revision: None, expires_in: 2592000s, input: Some(\"p\"), out: None })"),
        ("keygen --out k", "Plane(Keygen { out: \"k\", force: false })"),
        ("keygen", "error: the following required arguments were not provided: --out <PATH>"),
        ("sign --key k --node edge-1", "Plane(Sign { keys: [\"k\"], node: NodeId(\"edge-1\"), revision: None, expires_in: 2592000s, input: None, out: None })"),
        ("sign --key a --key b --node n --revision 9007199254740992 --expires-in 12h --in p --out d", "Plane(Sign { keys: [\"a\", \"b\"], node: NodeId(\"n\"), revision: Some(9007199254740992), expires_in: 43200s, input: Some(\"p\"), out: Some(\"d\") })"),
        ("sign --key k", "error: the following required arguments were not provided: --node <NODE>"),
        ("sign", "error: the following required arguments were not provided: --key <PATH> --node <NODE>"),
        ("sign --key k --node BAD!", "error: invalid value 'BAD!' for '--node <NODE>': invalid node id \"BAD!\": must match [A-Za-z0-9][A-Za-z0-9._-]{0,62}"),
        ("sign --key k --node n --revision 0", "error: invalid value '0' for '--revision <N>': 0 is not in 1..=9007199254740992"),
        ("sign --key k --node n --revision 9007199254740993", "error: invalid value '9007199254740993' for '--revision <N>': 9007199254740993 is not in 1..=9007199254740992"),
        ("verify --key k.pub --key AAAA --node n --in d", "Plane(Verify { keys: [\"k.pub\", \"AAAA\"], node: Some(NodeId(\"n\")), input: Some(\"d\") })"),
        ("verify", "error: the following required arguments were not provided: --key <PUB>"),
        ("import f.yml", "Import { out: None, force: false, options: Options { allow_outside: false, project: None, plain_volume_names: false }, file: \"f.yml\" }"),
        ("import --out d --force --allow-outside -p proj --volume-names plain f.yml", "Import { out: Some(\"d\"), force: true, options: Options { allow_outside: true, project: Some(\"proj\"), plain_volume_names: true }, file: \"f.yml\" }"),
        ("import --volume-names x f", "error: invalid value 'x' for '--volume-names <VOLUME_NAMES>' [possible values: compose, plain]"),
        ("import", "error: the following required arguments were not provided: <FILE>"),
        ("publish --key k --fleet f --site s --upload s3://fleet/prod --s3-credentials c", "Plane(Publish { keys: [\"k\"], trusted: [], fleet: \"f\", site: \"s\", dry_run: false, expires_in: 2592000s, refresh_before: 604800s, upload: Some(Upload { target: Target { bucket: \"fleet\", prefix: \"prod\" }, credentials: \"c\", region: \"us-east-1\", endpoint: https://s3.us-east-1.amazonaws.com/, ca: None }) })"),
        ("rollout watch --key k --reports r --fleet f --site s --upload s3://fleet --s3-credentials c --s3-region eu-west-1 --s3-endpoint http://127.0.0.1:9000/ --s3-ca ca.pem", "Plane(Watch { keys: [\"k\"], trusted: [], reports: Dir(\"r\"), fleet: \"f\", site: \"s\", groups: [], threshold: Threshold { rate_permille: 50, min_reports: 10 }, dry_run: false, upload: Some(Upload { target: Target { bucket: \"fleet\", prefix: \"\" }, credentials: \"c\", region: \"eu-west-1\", endpoint: http://127.0.0.1:9000/, ca: Some(\"ca.pem\") }) })"),
        ("root verify --trusted a --site s --upload s3://fleet/p --s3-credentials c", "Plane(RootVerify { trusted: [\"a\"], site: \"s\", input: None, allow_list: None, publish: false, upload: Some(Upload { target: Target { bucket: \"fleet\", prefix: \"p\" }, credentials: \"c\", region: \"us-east-1\", endpoint: https://s3.us-east-1.amazonaws.com/, ca: None }) })"),
        ("publish --key k --fleet f --site s --upload s3://fleet/p", "error: the following required arguments were not provided: --s3-credentials <FILE>"),
        ("publish --key k --fleet f --site s --s3-credentials c", "error: the following required arguments were not provided: --upload <s3://BUCKET/PREFIX>"),
        ("publish --key k --fleet f --site s --upload https://fleet/p --s3-credentials c", "error: invalid value 'https://fleet/p' for '--upload <s3://BUCKET/PREFIX>': \"https://fleet/p\": give s3://BUCKET/PREFIX"),
        ("publish --key k --fleet f --site s --upload s3://fleet --s3-credentials c --s3-endpoint http://h:9000/bucket", "error: invalid value 'http://h:9000/bucket' for '--s3-endpoint <URL>': a host alone, without a path or query (the bucket is --upload's)"),
        ("publish --key k --fleet f --site s --upload s3://fleet --s3-credentials c --s3-endpoint http://k:s@h:9000", "error: invalid value 'http://k:s@h:9000' for '--s3-endpoint <URL>': an endpoint must not carry a user name or password"),
        ("status --reports r", "Plane(Status { reports: Dir(\"r\"), fleet: None, site: None, silent_after: 86400s, json: false })"),
        ("status --reports r --fleet f", "Plane(Status { reports: Dir(\"r\"), fleet: Some(\"f\"), site: None, silent_after: 86400s, json: false })"),
        ("rollout watch --key k --reports r --site s", "error: the following required arguments were not provided: --fleet <DIR>"),
        ("completions bash", "Completions(Bash)"),
    ];
    let mut wrong = Vec::new();
    for (line, want) in cases {
        let got = outcome(line);
        if got != want {
            wrong.push(format!("{line}\n  got  {got}\n  want {want}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_bad_lifetime_says_the_form() {
    let e = outcome("sign --key k --node n --expires-in 3651d");
    assert!(
        e.contains("for '--expires-in <DURATION>'") && e.contains("from 1s to 3650d"),
        "{e}"
    );
}

#[test]
fn clap_finds_nothing_wrong_in_the_command_line() {
    use clap::CommandFactory as _;
    Cli::command().debug_assert();
}
