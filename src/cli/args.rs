//! The command line read into a [`Command`]: one table row per command
//! (its options, arguments and help), read by one small parser, with the
//! help and the usage lines printed from the same rows. [`parse`] is pure:
//! the arguments in, a command, a help text or a usage error out.
//!
//! The conventions are the usual ones: `--name VALUE`, `--name=VALUE`,
//! `-c VALUE`, `-cVALUE`, short flags together (`-fc FILE`), `--` before
//! arguments that start with `-`, options before, between or after the
//! arguments. An option given twice is an error unless it may repeat
//! (`--key`); an option's value that starts with `-` must be attached
//! (`--reason=-x`).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::time::Duration;

use super::plane::{PlaneCommand, parse_lifetime, parse_node, parse_rate};
use super::{Command, ImagesCommand};

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// A command to run.
    Command(Command),
    /// Print this help (to stdout, exit 0).
    Help(String),
    /// Print the version line (to stdout, exit 0).
    Version,
}

/// A command line that cannot be read: the whole text for stderr, which
/// names what is wrong and the command's usage. Exit code 2.
#[derive(Debug, PartialEq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An option of a command.
struct Opt {
    long: &'static str,
    short: Option<char>,
    /// The value's name (`FILE`); empty for a flag.
    value: &'static str,
    /// The value when the option is not given; empty for none.
    default: &'static str,
    /// Must be given.
    required: bool,
    /// May be given more than once, each value kept.
    many: bool,
    help: &'static str,
}

impl Opt {
    /// `--config <FILE>`, `--once`: how errors and usage lines name it.
    fn name(&self) -> String {
        if self.value.is_empty() {
            format!("--{}", self.long)
        } else {
            format!("--{} <{}>", self.long, self.value)
        }
    }
}

const fn flag(long: &'static str, short: Option<char>, help: &'static str) -> Opt {
    Opt {
        long,
        short,
        value: "",
        default: "",
        required: false,
        many: false,
        help,
    }
}

/// `--trusted PUB` of the commands that sign over what a site serves
/// (`plane publish`, `plane rollout watch`).
const TRUSTED: Opt = Opt {
    many: true,
    ..valued(
        "trusted",
        "PUB",
        "A key of the devices' trusted_keys, where a published root's \
         chain starts (by default the --key keys): what the host serves \
         is verified against it, or the newest root's document keys",
    )
};

const fn valued(long: &'static str, value: &'static str, help: &'static str) -> Opt {
    Opt {
        long,
        short: None,
        value,
        default: "",
        required: false,
        many: false,
        help,
    }
}

const AGENT_CONFIG: Opt = Opt {
    short: Some('c'),
    ..valued("config", "FILE", "The agent's config file")
};
const CLIENT_CONFIG: Opt = Opt {
    help: "The agent's config file (for its address and token)",
    ..AGENT_CONFIG
};

/// A positional argument.
struct Arg {
    name: &'static str,
    kind: Kind,
    help: &'static str,
}

#[derive(PartialEq)]
enum Kind {
    Required,
    Optional,
    /// One or more.
    Many,
}

const MODULE: Arg = Arg {
    name: "MODULE",
    kind: Kind::Required,
    help: "The module",
};

/// A command: its options and arguments, or its subcommands.
struct Spec {
    name: &'static str,
    /// One line: the command's entry in its parent's list.
    about: &'static str,
    /// More paragraphs of its own help; empty for none.
    more: &'static str,
    opts: &'static [Opt],
    args: &'static [Arg],
    subs: &'static [Spec],
}

const fn leaf(name: &'static str, about: &'static str, opts: &'static [Opt]) -> Spec {
    Spec {
        name,
        about,
        more: "",
        opts,
        args: &[],
        subs: &[],
    }
}

const fn group(name: &'static str, about: &'static str, subs: &'static [Spec]) -> Spec {
    Spec {
        subs,
        ..leaf(name, about, &[])
    }
}

static STEAD: Spec = group(
    "stead",
    "Keeps an edge node's containers true to what they were told to run",
    &[
        leaf(
            "run",
            "Run the agent (or one pass with --once)",
            &[
                AGENT_CONFIG,
                flag(
                    "once",
                    None,
                    "Do one pass, print one line per module, and exit",
                ),
            ],
        ),
        leaf(
            "check",
            "Validate the intentions and print each module's digests without touching the engine",
            &[AGENT_CONFIG],
        ),
        leaf(
            "status",
            "Show the running agent's node and module status",
            &[
                CLIENT_CONFIG,
                flag("json", None, "Print the API's JSON instead of a table"),
            ],
        ),
        Spec {
            args: &[Arg {
                name: "FILE",
                kind: Kind::Required,
                help: "The intention file",
            }],
            ..leaf(
                "apply",
                "State a module's intention (a TOML or JSON intention file) through the API",
                &[CLIENT_CONFIG],
            )
        },
        Spec {
            args: &[
                MODULE,
                Arg {
                    name: "SETTINGS",
                    kind: Kind::Many,
                    help: "KEY=VALUE pairs; dotted keys",
                },
            ],
            ..leaf(
                "set",
                "Set settings of a module: KEY=VALUE (VALUE read as JSON when it is JSON)",
                &[CLIENT_CONFIG],
            )
        },
        Spec {
            args: &[
                MODULE,
                Arg {
                    name: "KEYS",
                    kind: Kind::Many,
                    help: "Dotted keys",
                },
            ],
            ..leaf("unset", "Remove settings of a module", &[CLIENT_CONFIG])
        },
        Spec {
            args: &[MODULE],
            ..leaf(
                "rm",
                "Delete a module stated through the API (its container is removed)",
                &[CLIENT_CONFIG],
            )
        },
        Spec {
            args: &[Arg {
                name: "MODULE",
                kind: Kind::Optional,
                help: "The module; every module with an [update] section when left out",
            }],
            ..leaf(
                "reload",
                "Ask for a module (or every module with an [update] section) to be reloaded: \
                 its newest compatible version landed, with one restart",
                &[
                    CLIENT_CONFIG,
                    valued(
                        "reason",
                        "REASON",
                        "Why (required unless --cancel): carried into the request's log",
                    ),
                    flag(
                        "wait",
                        None,
                        "Wait until the request is done, failed or faulted; exit non-zero unless done",
                    ),
                    valued(
                        "cancel",
                        "ID",
                        "Cancel this open request instead: it ends failed, and the module goes \
                         back to what it ran before it (not with MODULE, --reason or --wait)",
                    ),
                ],
            )
        },
        leaf(
            "reloads",
            "List reload requests",
            &[
                CLIENT_CONFIG,
                flag("follow", Some('f'), "Keep printing as requests move"),
            ],
        ),
        leaf(
            "agent",
            "Show the agent itself: the version running and how the launcher started it, the \
             launcher's state (current, previous, a candidate on trial, the last one given up \
             on) and the updates of stead itself",
            &[CLIENT_CONFIG, flag("json", None, "Print the API's JSON")],
        ),
        Spec {
            args: &[Arg {
                name: "STATEMENT",
                kind: Kind::Required,
                help: "The release's signed statement: a file, or an http:// or https:// URL \
                       (a binary's relative URL is read against it; from a file, binaries \
                       need absolute URLs)",
            }],
            ..leaf(
                "self-update",
                "Update stead itself to the release a signed statement names: landed beside the \
                 running version, checked, switched with one restart, confirmed by what the new \
                 version does (or the launcher goes back)",
                &[
                    CLIENT_CONFIG,
                    flag(
                        "downgrade",
                        None,
                        "Allow a version below the running one (a deliberate rollback)",
                    ),
                    flag(
                        "wait",
                        None,
                        "Wait until the update is done, failed or faulted (through the agent's \
                         restart); exit non-zero unless done",
                    ),
                ],
            )
        },
        leaf(
            "sync",
            "Fetch the central plane's document now (a nudge: the plane stays the one source \
             of truth) and say what came of it",
            &[CLIENT_CONFIG],
        ),
        group(
            "images",
            "The engine's images as this node keeps them",
            &[leaf(
                "prune",
                "Remove the images no module of this node needs (those this node pulled, unless \
                 `[images] collect = \"all\"`), each with why; the others are listed with why \
                 each stays",
                &[
                    CLIENT_CONFIG,
                    flag("dry-run", None, "Say what would go, remove nothing"),
                ],
            )],
        ),
        leaf(
            "events",
            "Print the agent's event log",
            &[
                CLIENT_CONFIG,
                flag("follow", Some('f'), "Keep printing new events as they come"),
                Opt {
                    default: "0",
                    ..valued("since", "SINCE", "Start after this sequence number")
                },
            ],
        ),
        #[cfg(feature = "import")]
        Spec {
            more: "Keys that cannot be carried are listed on stderr (exit 3); a file that \
                   cannot be imported writes nothing (exit 2). See docs/import.md.",
            args: &[Arg {
                name: "FILE",
                kind: Kind::Required,
                help: "The Compose file",
            }],
            ..leaf(
                "import",
                "Make intention files from a Compose file, one per service",
                &[
                    valued(
                        "out",
                        "DIR",
                        "Write `<module>.toml` files into this directory (made when missing) \
                         instead of printing them",
                    ),
                    flag("force", None, "Overwrite intention files that exist"),
                    flag(
                        "allow-outside",
                        None,
                        "Copy a config's file into an intention even when it is outside the \
                         Compose file's directory",
                    ),
                    Opt {
                        short: Some('p'),
                        ..valued(
                            "project-name",
                            "NAME",
                            "The project's name, which names its network and volumes (as \
                             Compose's -p; else COMPOSE_PROJECT_NAME, the file's `name:`, the \
                             directory's name)",
                        )
                    },
                    Opt {
                        default: "compose",
                        ..valued(
                            "volume-names",
                            "compose|plain",
                            "`compose`: a named volume is `<project>_<volume>`, as Compose names \
                             it, so a stack moved over finds its data. `plain`: its key, as \
                             stead 0.5.0 named it",
                        )
                    },
                ],
            )
        },
        group(
            "plane",
            "Publish desired state for the central plane: keys, signing, verifying",
            &[
                leaf(
                    "keygen",
                    "Make a signing key pair: PATH (the secret key, mode 0600) and PATH.pub (the \
                     public key, for the devices' trusted_keys)",
                    &[
                        Opt {
                            required: true,
                            ..valued(
                                "out",
                                "PATH",
                                "Where to write the secret key; the public key goes to PATH.pub",
                            )
                        },
                        flag("force", None, "Replace key files that already exist"),
                    ],
                ),
                leaf(
                    "sign",
                    "Sign a desired-state payload (JSON, from stdin or --in) for one node; the \
                     signed document goes to stdout (or --out). Sets node, revision and \
                     issued_at (now); sets expires only when the payload has none",
                    &[
                        Opt {
                            required: true,
                            many: true,
                            ..valued(
                                "key",
                                "PATH",
                                "The secret key file. Give it twice to sign with two keys \
                                 (during a rotation): the document carries a signature by each",
                            )
                        },
                        Opt {
                            required: true,
                            ..valued("node", "NODE", "The node the document is for")
                        },
                        valued(
                            "revision",
                            "N",
                            "The revision (1 to 2^53). By default the current unix time in \
                             seconds, so documents signed at least a second apart have \
                             increasing revisions, and a node takes the newer",
                        ),
                        Opt {
                            default: "30d",
                            ..valued(
                                "expires-in",
                                "DURATION",
                                "How long the document is good for when the payload has no \
                                 expires: 30d, 12h, 90m, 3600s (at most 3650d)",
                            )
                        },
                        valued("in", "FILE", "Read the payload from FILE instead of stdin"),
                        valued(
                            "out",
                            "FILE",
                            "Write the signed document to FILE (atomically) instead of stdout",
                        ),
                    ],
                ),
                leaf(
                    "verify",
                    "Check a signed document (from stdin or --in) as a node would: signed by a \
                     trusted key, a valid payload, not expired (and, with --node, for that \
                     node). Prints what it holds and which key signed it",
                    &[
                        Opt {
                            required: true,
                            many: true,
                            ..valued(
                                "key",
                                "PUB",
                                "A trusted public key: a .pub file, or the key's base64. Give \
                                 it twice for two keys (during a rotation)",
                            )
                        },
                        valued("node", "NODE", "Refuse a document for any other node"),
                        valued("in", "FILE", "Read the document from FILE instead of stdin"),
                    ],
                ),
                leaf(
                    "publish",
                    "Sign a fleet's documents from its description into the directory a host \
                     serves: groups/<name>.json, nodes/<id>.json, nodes.csv (node,groups) and \
                     node-defaults.json become groups/<name>/desired.json and \
                     nodes/<id>/desired.json; only what changed (or expires soon) is signed, \
                     each node checked against its groups first",
                    &[
                        Opt {
                            required: true,
                            many: true,
                            ..valued("key", "PATH", "The secret key file (give it twice for two)")
                        },
                        TRUSTED,
                        Opt {
                            required: true,
                            ..valued("fleet", "DIR", "The fleet's description")
                        },
                        Opt {
                            required: true,
                            ..valued("site", "DIR", "The directory the host serves")
                        },
                        flag("dry-run", None, "Say what would be signed; write nothing"),
                        Opt {
                            default: "30d",
                            ..valued(
                                "expires-in",
                                "DURATION",
                                "How long a document signed now is good for, unless its \
                                 payload says (at most 3650d)",
                            )
                        },
                        Opt {
                            default: "7d",
                            ..valued(
                                "refresh-before",
                                "DURATION",
                                "Sign again a document that expires within this, even unchanged",
                            )
                        },
                    ],
                ),
                leaf(
                    "enroll",
                    "Take the devices' public keys from their reports into the fleet's \
                     description (DIR/device-keys.csv: node,age1…). A node's first key is taken \
                     on trust; a key other than the one enrolled is kept out (exit 1) unless \
                     --replace",
                    &[
                        Opt {
                            required: true,
                            ..valued("fleet", "DIR", "The fleet's description")
                        },
                        Opt {
                            required: true,
                            ..valued("reports", "DIR|URL", "Where the reports are")
                        },
                        flag(
                            "replace",
                            None,
                            "Take a node's new key over the one enrolled (every value sealed \
                             for it must then be sealed again)",
                        ),
                    ],
                ),
                leaf(
                    "seal",
                    "Seal a value (from stdin) to one device for one field of one module: \
                     the text to give as { \"sealed\": \"…\" } goes to stdout. One trailing \
                     newline is dropped from an env or settings value",
                    &[
                        Opt {
                            required: true,
                            ..valued("node", "NODE", "The node it is for")
                        },
                        Opt {
                            required: true,
                            ..valued("module", "MODULE", "The module it is for")
                        },
                        Opt {
                            required: true,
                            ..valued(
                                "field",
                                "FIELD",
                                "Where it goes: env.<NAME>, settings.<key> or files.<path>",
                            )
                        },
                        valued(
                            "fleet",
                            "DIR",
                            "Seal to the node's key enrolled in DIR/device-keys.csv",
                        ),
                        valued(
                            "to",
                            "AGE1",
                            "Seal to this key (age1…, as stead status shows it)",
                        ),
                    ],
                ),
                leaf(
                    "status",
                    "Roll a fleet's reports up (every status.json under DIR, or in a web \
                     server's listing at URL and those it lists, read one at a time): devices per revision, modules per state, failing devices and why, \
                     devices not heard from, each group's rollout",
                    &[
                        Opt {
                            required: true,
                            ..valued("reports", "DIR|URL", "Where the reports are")
                        },
                        valued(
                            "site",
                            "DIR",
                            "The directory the host serves: each group's claims are counted \
                             within the revision its document there has",
                        ),
                        Opt {
                            default: "24h",
                            ..valued(
                                "silent-after",
                                "DURATION",
                                "A device whose last report is older is not heard from",
                            )
                        },
                        flag("json", None, "Print JSON"),
                    ],
                ),
                group(
                    "root",
                    "The plane's root of trust: which keys sign documents, and which sign the \
                     next root (a threshold of them), versioned and published beside the \
                     documents",
                    &[
                        leaf(
                            "init",
                            "Write the next root's payload (unsigned): version 1, or the one \
                             after --after's. Sign it with `root sign` by a threshold of the \
                             previous root's keys and of its own",
                            &[
                                Opt {
                                    required: true,
                                    many: true,
                                    ..valued(
                                        "root-key",
                                        "PUB",
                                        "A key that signs the next root (a .pub file or base64)",
                                    )
                                },
                                Opt {
                                    default: "1",
                                    ..valued(
                                        "threshold",
                                        "N",
                                        "How many root keys must sign the next root",
                                    )
                                },
                                Opt {
                                    required: true,
                                    many: true,
                                    ..valued(
                                        "documents-key",
                                        "PUB",
                                        "A key that signs documents (a .pub file or base64)",
                                    )
                                },
                                valued(
                                    "after",
                                    "FILE",
                                    "The root this one follows (its signed file)",
                                ),
                                Opt {
                                    default: "365d",
                                    ..valued(
                                        "expires-in",
                                        "DURATION",
                                        "How long it is good for (at most 3650d)",
                                    )
                                },
                                valued("out", "FILE", "Write it to FILE instead of stdout"),
                            ],
                        ),
                        leaf(
                            "sign",
                            "Sign a root: a payload from `root init` becomes a signed root; a \
                             signed root gets a signature by each key more",
                            &[
                                Opt {
                                    required: true,
                                    many: true,
                                    ..valued("key", "PATH", "A secret key file")
                                },
                                valued("in", "FILE", "Read it from FILE instead of stdin"),
                                valued("out", "FILE", "Write it to FILE instead of stdout"),
                            ],
                        ),
                        leaf(
                            "verify",
                            "Walk the root chain as a device would, from the keys of its \
                             trusted_keys through SITE/roots/1.json, 2.json, …, then, with \
                             --in, the root given as the next one; with --publish, write it \
                             where the host serves it (SITE/roots/<version>.json and \
                             SITE/root.json)",
                            &[
                                Opt {
                                    required: true,
                                    many: true,
                                    ..valued(
                                        "trusted",
                                        "PUB",
                                        "A key of the devices' trusted_keys (their first root)",
                                    )
                                },
                                Opt {
                                    required: true,
                                    ..valued("site", "DIR", "The directory the host serves")
                                },
                                valued("in", "FILE", "A signed root to check as the next one"),
                                flag(
                                    "publish",
                                    None,
                                    "Publish the root --in gives, once it checks",
                                ),
                            ],
                        ),
                    ],
                ),
                group(
                    "rollout",
                    "Staged rollouts of group documents",
                    &[leaf(
                        "watch",
                        "Halt each group rollout whose devices on the new revision fail at or \
                         over the threshold: its document is signed again, one revision on, \
                         with halt and the reason, where the host serves it. Stateless: run \
                         it from cron or CI where the key is",
                        &[
                            Opt {
                                required: true,
                                many: true,
                                ..valued(
                                    "key",
                                    "PATH",
                                    "The secret key file (give it twice for two)",
                                )
                            },
                            TRUSTED,
                            Opt {
                                required: true,
                                ..valued("reports", "DIR|URL", "Where the devices' reports are")
                            },
                            Opt {
                                required: true,
                                ..valued("site", "DIR", "The directory the host serves")
                            },
                            Opt {
                                many: true,
                                ..valued(
                                    "group",
                                    "NAME",
                                    "Watch this group (again for more); by default every group \
                                     the site has",
                                )
                            },
                            Opt {
                                default: "5%",
                                ..valued(
                                    "rate",
                                    "PERCENT",
                                    "Halt at or over this share of failing devices on the new \
                                     revision (failed, crash-looping or quarantined modules)",
                                )
                            },
                            Opt {
                                default: "10",
                                ..valued(
                                    "min-reports",
                                    "N",
                                    "Halt only once at least N devices report running the new \
                                     revision",
                                )
                            },
                            flag("dry-run", None, "Say what would be halted; write nothing"),
                        ],
                    )],
                ),
                leaf(
                    "release",
                    "Sign a release statement of stead itself: its version, the store schema it \
                     writes and reads from, and each target's binary (its SHA-256 and size, \
                     read from the file, and where a node fetches it). A node takes it from a \
                     document's agent field or `stead self-update`",
                    &[
                        Opt {
                            required: true,
                            many: true,
                            ..valued("key", "PATH", "The secret key file (give it twice for two)")
                        },
                        Opt {
                            required: true,
                            ..valued("version", "VERSION", "The release's version (SemVer)")
                        },
                        Opt {
                            required: true,
                            many: true,
                            ..valued(
                                "binary",
                                "TARGET=FILE",
                                "A target's binary (aarch64-unknown-linux-musl=dist/stead-…); \
                                 give one per target",
                            )
                        },
                        valued(
                            "url-base",
                            "URL",
                            "Where the binaries will be: each is <URL>/<its file name>; by \
                             default its file name alone, relative to the statement's own URL",
                        ),
                        valued(
                            "schema",
                            "N",
                            "The store schema the release writes (default: this build's)",
                        ),
                        Opt {
                            default: "1",
                            ..valued("reads-from", "N", "The oldest store schema it opens")
                        },
                        valued(
                            "out",
                            "FILE",
                            "Write the statement to FILE (atomically) instead of stdout",
                        ),
                    ],
                ),
            ],
        ),
    ],
);

/// Reads the command line (without the program's name).
pub fn parse(args: &[OsString]) -> Result<Parsed, UsageError> {
    let mut spec = &STEAD;
    let mut path = String::from("stead");
    let mut rest = args;
    while !spec.subs.is_empty() {
        let Some((first, more)) = rest.split_first() else {
            // As clap did: a group without its command is its help, on
            // stderr, exit 2.
            return Err(UsageError(help(spec, &path)));
        };
        rest = more;
        let word = first.to_str().unwrap_or_default();
        match word {
            "-h" | "--help" => return Ok(Parsed::Help(help(spec, &path))),
            "-V" | "--version" if spec.name == "stead" => return Ok(Parsed::Version),
            "help" => return help_command(spec, path, rest),
            _ => {}
        }
        match spec.subs.iter().find(|s| s.name == word) {
            Some(sub) => {
                spec = sub;
                path = format!("{path} {word}");
            }
            None if first.as_bytes().starts_with(b"-") => {
                return Err(misuse(spec, &path, &unexpected(first)));
            }
            None => {
                let what = format!("unrecognized subcommand '{}'", first.to_string_lossy());
                return Err(misuse(spec, &path, &what));
            }
        }
    }
    let m = match read(spec, &path, rest)? {
        Read::Help => return Ok(Parsed::Help(help(spec, &path))),
        Read::Matches(m) => m,
    };
    build(&m).map(Parsed::Command)
}

/// `stead help [COMMAND]...`: the help of the command named.
fn help_command(
    mut spec: &'static Spec,
    mut path: String,
    names: &[OsString],
) -> Result<Parsed, UsageError> {
    for name in names {
        let word = name.to_str().unwrap_or_default();
        match spec.subs.iter().find(|s| s.name == word) {
            Some(sub) => {
                spec = sub;
                path = format!("{path} {word}");
            }
            None => {
                let what = format!("unrecognized subcommand '{}'", name.to_string_lossy());
                return Err(misuse(spec, &path, &what));
            }
        }
    }
    Ok(Parsed::Help(help(spec, &path)))
}

/// What a leaf command's arguments were, before they are made a command.
struct Matches {
    spec: &'static Spec,
    path: String,
    /// Each option given, in order, with its value (empty for a flag).
    opts: Vec<(&'static Opt, OsString)>,
    args: Vec<OsString>,
}

enum Read {
    Help,
    Matches(Matches),
}

/// Reads a leaf command's options and arguments.
fn read(spec: &'static Spec, path: &str, args: &[OsString]) -> Result<Read, UsageError> {
    let mut m = Matches {
        spec,
        path: path.to_string(),
        opts: Vec::new(),
        args: Vec::new(),
    };
    let mut words = args.iter();
    let mut only_args = false;
    while let Some(word) = words.next() {
        let bytes = word.as_bytes();
        if only_args || bytes == b"-" || !bytes.starts_with(b"-") {
            let room = spec.args.len() > m.args.len()
                || spec.args.last().is_some_and(|a| a.kind == Kind::Many);
            if !room {
                return Err(m.misuse(&unexpected(word)));
            }
            m.args.push(word.clone());
        } else if bytes == b"--" {
            only_args = true;
        } else if let Some(long) = bytes.strip_prefix(b"--") {
            let (name, attached) = match long.iter().position(|b| *b == b'=') {
                Some(at) => (&long[..at], Some(&long[at + 1..])),
                None => (long, None),
            };
            if name == b"help" && attached.is_none() {
                return Ok(Read::Help);
            }
            let Some(opt) = spec.opts.iter().find(|o| o.long.as_bytes() == name) else {
                let what = format!("unexpected argument '--{}'", String::from_utf8_lossy(name));
                return Err(m.misuse(&what));
            };
            if opt.value.is_empty() {
                if let Some(v) = attached {
                    let what = format!(
                        "unexpected value '{}' for '{}'",
                        String::from_utf8_lossy(v),
                        opt.name()
                    );
                    return Err(m.misuse(&what));
                }
                m.give(opt, OsString::new())?;
            } else {
                let value = value_of(&m, opt, attached, &mut words)?;
                m.give(opt, value)?;
            }
        } else {
            // Short options, together: `-fc FILE`, `-cFILE`, `-c=FILE`.
            let cluster = &bytes[1..];
            for (i, c) in cluster.iter().enumerate() {
                if *c == b'h' {
                    return Ok(Read::Help);
                }
                let Some(opt) = spec.opts.iter().find(|o| o.short == Some(char::from(*c))) else {
                    let what = format!(
                        "unexpected argument '-{}'",
                        String::from_utf8_lossy(&cluster[i..=i])
                    );
                    return Err(m.misuse(&what));
                };
                if opt.value.is_empty() {
                    m.give(opt, OsString::new())?;
                    continue;
                }
                let after = &cluster[i + 1..];
                let after = after.strip_prefix(b"=").unwrap_or(after);
                let attached = (!after.is_empty()).then_some(after);
                let value = value_of(&m, opt, attached, &mut words)?;
                m.give(opt, value)?;
                break;
            }
        }
    }
    let mut missing: Vec<String> = spec
        .opts
        .iter()
        .filter(|o| o.required && !m.opts.iter().any(|(g, _)| g.long == o.long))
        .map(Opt::name)
        .collect();
    missing.extend(
        spec.args
            .iter()
            .skip(m.args.len())
            .filter(|a| a.kind != Kind::Optional)
            .map(arg_usage),
    );
    if !missing.is_empty() {
        return Err(m.misuse(&format!(
            "the following required arguments were not provided: {}",
            missing.join(", ")
        )));
    }
    Ok(Read::Matches(m))
}

/// An option's value: attached (`--out=F`, `-oF`), or the next word
/// unless that is an option.
fn value_of<'a>(
    m: &Matches,
    opt: &Opt,
    attached: Option<&[u8]>,
    words: &mut impl Iterator<Item = &'a OsString>,
) -> Result<OsString, UsageError> {
    if let Some(v) = attached {
        return Ok(std::ffi::OsStr::from_bytes(v).to_os_string());
    }
    match words.next() {
        Some(w) if w.as_bytes() == b"-" || !w.as_bytes().starts_with(b"-") => Ok(w.clone()),
        _ => Err(m.misuse(&format!(
            "a value is required for '{}' but none was supplied",
            opt.name()
        ))),
    }
}

fn unexpected(word: &OsString) -> String {
    format!("unexpected argument '{}'", word.to_string_lossy())
}

impl Matches {
    fn misuse(&self, what: &str) -> UsageError {
        misuse(self.spec, &self.path, what)
    }

    fn give(&mut self, opt: &'static Opt, value: OsString) -> Result<(), UsageError> {
        if !opt.many && self.opts.iter().any(|(o, _)| o.long == opt.long) {
            return Err(self.misuse(&format!(
                "the argument '{}' cannot be used multiple times",
                opt.name()
            )));
        }
        self.opts.push((opt, value));
        Ok(())
    }

    fn opt(&self, long: &str) -> &'static Opt {
        match self.spec.opts.iter().find(|o| o.long == long) {
            Some(o) => o,
            None => unreachable!("{} has no option --{long}", self.path),
        }
    }

    fn values(&self, long: &str) -> impl Iterator<Item = &OsString> {
        let opt = self.opt(long);
        self.opts
            .iter()
            .filter(move |(o, _)| o.long == opt.long)
            .map(|(_, v)| v)
    }

    fn flag(&self, long: &str) -> bool {
        self.values(long).next().is_some()
    }

    fn path(&self, long: &str) -> Option<PathBuf> {
        self.values(long).next().map(PathBuf::from)
    }

    /// An option's value (or its default) as text read by `read`.
    fn parsed<T>(
        &self,
        long: &str,
        read: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, UsageError> {
        let opt = self.opt(long);
        let given = self.values(long).next();
        let text = match given {
            Some(v) => self.text(v, &opt.name())?,
            None if opt.default.is_empty() => return Ok(None),
            None => opt.default.to_string(),
        };
        read(&text)
            .map(Some)
            .map_err(|e| self.misuse(&format!("invalid value '{text}' for '{}': {e}", opt.name())))
    }

    fn string(&self, long: &str) -> Result<Option<String>, UsageError> {
        self.parsed(long, |s| Ok(s.to_string()))
    }

    fn text(&self, v: &OsString, what: &str) -> Result<String, UsageError> {
        v.to_str()
            .map(str::to_string)
            .ok_or_else(|| self.misuse(&format!("invalid UTF-8 in '{what}'")))
    }

    /// The positional arguments from the `n`th on, as text.
    fn texts(&self, n: usize) -> Result<Vec<String>, UsageError> {
        let name = self.spec.args.get(n).map_or("", |a| a.name);
        self.args
            .iter()
            .skip(n)
            .map(|v| self.text(v, name))
            .collect()
    }

    /// The `n`th positional argument, as text, when given.
    fn arg(&self, n: usize) -> Result<Option<String>, UsageError> {
        Ok(self.texts(n)?.into_iter().next())
    }

    /// A required positional argument (`read` saw it given).
    fn required(&self, n: usize) -> Result<String, UsageError> {
        Ok(self.arg(n)?.unwrap_or_default())
    }
}

/// Makes a leaf command's matches its command.
fn build(m: &Matches) -> Result<Command, UsageError> {
    let config = || m.path("config");
    let u64_text = |s: &str| s.parse::<u64>().map_err(|e| e.to_string());
    Ok(match m.spec.name {
        "run" => Command::Run {
            config: config(),
            once: m.flag("once"),
        },
        "check" => Command::Check { config: config() },
        "init" if m.path.ends_with("root init") => Command::Plane {
            command: PlaneCommand::RootInit {
                root_keys: m
                    .values("root-key")
                    .map(|k| m.text(k, "--root-key <PUB>"))
                    .collect::<Result<_, _>>()?,
                threshold: m
                    .parsed("threshold", |s| {
                        s.parse::<usize>()
                            .ok()
                            .filter(|n| (1..=crate::plane::root::MAX_KEYS).contains(n))
                            .ok_or_else(|| format!("{s:?}: 1 to {}", crate::plane::root::MAX_KEYS))
                    })?
                    .unwrap_or(1),
                document_keys: m
                    .values("documents-key")
                    .map(|k| m.text(k, "--documents-key <PUB>"))
                    .collect::<Result<_, _>>()?,
                after: m.path("after"),
                expires_in: m
                    .parsed("expires-in", parse_lifetime)?
                    .unwrap_or(Duration::from_secs(365 * 86_400)),
                out: m.path("out"),
            },
        },
        "sign" if m.path.ends_with("root sign") => Command::Plane {
            command: PlaneCommand::RootSign {
                keys: m.values("key").map(PathBuf::from).collect(),
                input: m.path("in"),
                out: m.path("out"),
            },
        },
        "verify" if m.path.ends_with("root verify") => {
            let publish = m.flag("publish");
            let input = m.path("in");
            if publish && input.is_none() {
                return Err(
                    m.misuse("the argument '--publish' needs '--in <FILE>' (the root to publish)")
                );
            }
            Command::Plane {
                command: PlaneCommand::RootVerify {
                    trusted: m
                        .values("trusted")
                        .map(|k| m.text(k, "--trusted <PUB>"))
                        .collect::<Result<_, _>>()?,
                    site: m.path("site").unwrap_or_default(),
                    input,
                    publish,
                },
            }
        }
        "status" if m.path.ends_with("plane status") => Command::Plane {
            command: PlaneCommand::Status {
                reports: m
                    .parsed("reports", super::fleet::Reports::parse)?
                    .unwrap_or_default(),
                site: m.path("site"),
                silent_after: m
                    .parsed("silent-after", parse_lifetime)?
                    .unwrap_or(std::time::Duration::from_secs(86_400)),
                json: m.flag("json"),
            },
        },
        "status" => Command::Status {
            config: config(),
            json: m.flag("json"),
        },
        "apply" => Command::Apply {
            config: config(),
            file: m.args.first().map(PathBuf::from).unwrap_or_default(),
        },
        "set" => Command::Set {
            config: config(),
            module: m.required(0)?,
            settings: m.texts(1)?,
        },
        "unset" => Command::Unset {
            config: config(),
            module: m.required(0)?,
            keys: m.texts(1)?,
        },
        "rm" => Command::Rm {
            config: config(),
            module: m.required(0)?,
        },
        "reload" => {
            let module = m.arg(0)?;
            let reason = m.string("reason")?;
            let wait = m.flag("wait");
            let cancel = m.parsed("cancel", u64_text)?;
            if cancel.is_some() {
                let other = [
                    (module.is_some(), "[MODULE]".to_string()),
                    (wait, m.opt("wait").name()),
                    (reason.is_some(), m.opt("reason").name()),
                ];
                if let Some((_, other)) = other.iter().find(|(given, _)| *given) {
                    let cancel = m.opt("cancel").name();
                    return Err(m.misuse(&format!(
                        "the argument '{cancel}' cannot be used with '{other}'"
                    )));
                }
            } else if reason.is_none() {
                return Err(m.misuse(&format!(
                    "the following required arguments were not provided: {}",
                    m.opt("reason").name()
                )));
            }
            Command::Reload {
                config: config(),
                module,
                reason,
                wait,
                cancel,
            }
        }
        "reloads" => Command::Reloads {
            config: config(),
            follow: m.flag("follow"),
        },
        "sync" => Command::Sync { config: config() },
        "agent" => Command::Agent {
            config: config(),
            json: m.flag("json"),
        },
        "self-update" => Command::SelfUpdate {
            config: config(),
            statement: m.required(0)?,
            downgrade: m.flag("downgrade"),
            wait: m.flag("wait"),
        },
        "prune" => Command::Images {
            command: ImagesCommand::Prune {
                config: config(),
                dry_run: m.flag("dry-run"),
            },
        },
        "events" => Command::Events {
            config: config(),
            follow: m.flag("follow"),
            since: m.parsed("since", u64_text)?.unwrap_or_default(),
        },
        #[cfg(feature = "import")]
        "import" => Command::Import {
            out: m.path("out"),
            force: m.flag("force"),
            allow_outside: m.flag("allow-outside"),
            project_name: m.string("project-name")?,
            volume_names: m
                .parsed("volume-names", |s| match s {
                    "compose" | "plain" => Ok(s.to_string()),
                    _ => Err("possible values: compose, plain".to_string()),
                })?
                .unwrap_or_default(),
            file: m.args.first().map(PathBuf::from).unwrap_or_default(),
        },
        "keygen" => Command::Plane {
            command: PlaneCommand::Keygen {
                out: m.path("out").unwrap_or_default(),
                force: m.flag("force"),
            },
        },
        "sign" => Command::Plane {
            command: PlaneCommand::Sign {
                keys: m.values("key").map(PathBuf::from).collect(),
                node: m
                    .parsed("node", parse_node)?
                    .unwrap_or_else(|| unreachable!("read checks that --node is given")),
                revision: m.parsed("revision", |s| {
                    let n = u64_text(s)?;
                    let max = crate::plane::accept::MAX_REVISION;
                    if (1..=max).contains(&n) {
                        Ok(n)
                    } else {
                        Err(format!("{n} is not in 1..={max}"))
                    }
                })?,
                expires_in: m
                    .parsed("expires-in", parse_lifetime)?
                    .unwrap_or(Duration::ZERO),
                input: m.path("in"),
                out: m.path("out"),
            },
        },
        "release" => Command::Plane {
            command: PlaneCommand::Release {
                keys: m.values("key").map(PathBuf::from).collect(),
                version: m
                    .parsed("version", |s| {
                        semver::Version::parse(s)
                            .map(|_| s.to_string())
                            .map_err(|e| e.to_string())
                    })?
                    .unwrap_or_default(),
                binaries: m
                    .values("binary")
                    .map(|b| {
                        let t = m.text(b, "--binary <TARGET=FILE>")?;
                        match t.split_once('=') {
                            Some((target, file)) if !target.is_empty() && !file.is_empty() => {
                                Ok((target.to_string(), PathBuf::from(file)))
                            }
                            _ => Err(m.misuse(&format!(
                                "invalid value '{t}' for '--binary <TARGET=FILE>': TARGET=FILE"
                            ))),
                        }
                    })
                    .collect::<Result<_, _>>()?,
                url_base: m.string("url-base")?,
                schema: m
                    .parsed("schema", u64_text)?
                    .unwrap_or(crate::store::SCHEMA_VERSION),
                reads_from: m.parsed("reads-from", u64_text)?.unwrap_or(1),
                out: m.path("out"),
            },
        },
        "publish" => Command::Plane {
            command: PlaneCommand::Publish {
                keys: m.values("key").map(PathBuf::from).collect(),
                trusted: m
                    .values("trusted")
                    .map(|k| m.text(k, "--trusted <PUB>"))
                    .collect::<Result<_, _>>()?,
                fleet: m.path("fleet").unwrap_or_default(),
                site: m.path("site").unwrap_or_default(),
                dry_run: m.flag("dry-run"),
                expires_in: m
                    .parsed("expires-in", parse_lifetime)?
                    .unwrap_or(std::time::Duration::from_secs(30 * 86_400)),
                refresh_before: m
                    .parsed("refresh-before", parse_lifetime)?
                    .unwrap_or(std::time::Duration::from_secs(7 * 86_400)),
            },
        },
        "enroll" => Command::Plane {
            command: PlaneCommand::Enroll {
                fleet: m.path("fleet").unwrap_or_default(),
                reports: m
                    .parsed("reports", super::fleet::Reports::parse)?
                    .unwrap_or_default(),
                replace: m.flag("replace"),
            },
        },
        "seal" => {
            let to = match (m.path("fleet"), m.string("to")?) {
                (Some(dir), None) => super::devices::SealTo::Fleet(dir),
                (None, Some(key)) => super::devices::SealTo::Key(key),
                (Some(_), Some(_)) => {
                    return Err(
                        m.misuse("the argument '--fleet <DIR>' cannot be used with '--to <AGE1>'")
                    );
                }
                (None, None) => {
                    return Err(m.misuse(
                        "the following required arguments were not provided: --fleet <DIR> or --to <AGE1>",
                    ));
                }
            };
            Command::Plane {
                command: PlaneCommand::Seal {
                    node: m
                        .parsed("node", parse_node)?
                        .unwrap_or_else(|| unreachable!("read checks that --node is given")),
                    module: m
                        .parsed("module", |s| {
                            crate::model::names::ModuleName::try_from(s).map_err(|e| e.0)
                        })?
                        .unwrap_or_else(|| unreachable!("read checks that --module is given")),
                    field: m.string("field")?.unwrap_or_default(),
                    to,
                },
            }
        }
        "watch" => Command::Plane {
            command: PlaneCommand::Watch {
                keys: m.values("key").map(PathBuf::from).collect(),
                trusted: m
                    .values("trusted")
                    .map(|k| m.text(k, "--trusted <PUB>"))
                    .collect::<Result<_, _>>()?,
                reports: m
                    .parsed("reports", super::fleet::Reports::parse)?
                    .unwrap_or_default(),
                site: m.path("site").unwrap_or_default(),
                groups: m
                    .values("group")
                    .map(|g| {
                        parse_node(&m.text(g, "--group <NAME>")?).map_err(|e| {
                            m.misuse(&format!("invalid value for '--group <NAME>': {e}"))
                        })
                    })
                    .collect::<Result<_, _>>()?,
                threshold: crate::model::fleet::Threshold {
                    rate_permille: m.parsed("rate", parse_rate)?.unwrap_or(50),
                    min_reports: m.parsed("min-reports", u64_text)?.unwrap_or(10),
                },
                dry_run: m.flag("dry-run"),
            },
        },
        "verify" => Command::Plane {
            command: PlaneCommand::Verify {
                keys: m
                    .values("key")
                    .map(|k| m.text(k, "--key <PUB>"))
                    .collect::<Result<_, _>>()?,
                node: m.parsed("node", parse_node)?,
                input: m.path("in"),
            },
        },
        other => unreachable!("no command {other} in the table"),
    })
}

/// A usage error: what is wrong, the usage line, where help is.
fn misuse(spec: &Spec, path: &str, what: &str) -> UsageError {
    UsageError(format!(
        "stead: {what}\n{}\nFor more, try '{path} --help'.\n",
        usage(spec, path)
    ))
}

/// `<FILE>`, `[MODULE]`, `<SETTINGS>...`.
fn arg_usage(a: &Arg) -> String {
    match a.kind {
        Kind::Required => format!("<{}>", a.name),
        Kind::Optional => format!("[{}]", a.name),
        Kind::Many => format!("<{}>...", a.name),
    }
}

/// `Usage: stead plane sign [OPTIONS] --key <PATH> --node <NODE>`.
fn usage(spec: &Spec, path: &str) -> String {
    let mut u = format!("Usage: {path}");
    if !spec.subs.is_empty() {
        u.push_str(" <COMMAND>");
        return u;
    }
    if spec.opts.iter().any(|o| !o.required) {
        u.push_str(" [OPTIONS]");
    }
    for o in spec.opts.iter().filter(|o| o.required) {
        u = format!("{u} {}", o.name());
    }
    for a in spec.args {
        u = format!("{u} {}", arg_usage(a));
    }
    u
}

/// A command's help: what it does, its usage, its commands, arguments
/// and options, each with its own line.
fn help(spec: &Spec, path: &str) -> String {
    let mut out = format!("{}\n\n", spec.about);
    if !spec.more.is_empty() {
        out = format!("{out}{}\n\n", spec.more);
    }
    out = format!("{out}{}\n", usage(spec, path));
    let mut commands: Vec<(String, String)> = spec
        .subs
        .iter()
        .map(|s| (s.name.to_string(), s.about.to_string()))
        .collect();
    if !commands.is_empty() {
        commands.push((
            "help".into(),
            "Print this message or the help of the given subcommand(s)".into(),
        ));
    }
    let args: Vec<(String, String)> = spec
        .args
        .iter()
        .map(|a| (arg_usage(a), a.help.to_string()))
        .collect();
    let mut opts: Vec<(String, String)> = spec
        .opts
        .iter()
        .map(|o| {
            let short = o.short.map_or("    ".to_string(), |c| format!("-{c}, "));
            let default = if o.default.is_empty() {
                String::new()
            } else {
                format!(" [default: {}]", o.default)
            };
            (
                format!("{short}{}", o.name()),
                format!("{}{default}", o.help),
            )
        })
        .collect();
    opts.push(("-h, --help".into(), "Print help".into()));
    if spec.name == "stead" {
        opts.push(("-V, --version".into(), "Print version".into()));
    }
    for (title, rows) in [
        ("Commands", commands),
        ("Arguments", args),
        ("Options", opts),
    ] {
        if rows.is_empty() {
            continue;
        }
        let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
        out = format!("{out}\n{title}:\n");
        for (left, right) in rows {
            out = format!("{out}  {left:<width$}  {right}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command line as `parse` sees it, split at spaces.
    fn line(l: &str) -> Vec<OsString> {
        l.split_whitespace().map(OsString::from).collect()
    }

    /// What `parse` makes of a line, in one line: the command's Debug,
    /// `help: ` and the help's first line, `version`, or `error: ` and
    /// what is wrong.
    fn outcome(l: &str) -> String {
        match parse(&line(l)) {
            Ok(Parsed::Command(c)) => format!("{c:?}"),
            Ok(Parsed::Help(h)) => format!("help: {}", h.lines().next().unwrap_or_default()),
            Ok(Parsed::Version) => "version".into(),
            Err(UsageError(e)) => {
                let first = e.lines().next().unwrap_or_default();
                format!("error: {}", first.strip_prefix("stead: ").unwrap_or(first))
            }
        }
    }

    /// Each line is what `parse` makes of it.
    fn check(cases: &[(&str, &str)]) {
        for (l, want) in cases {
            assert_eq!(outcome(l), *want, "stead {l}");
        }
    }

    #[test]
    fn each_command_line_is_its_command_or_says_what_is_wrong() {
        #[rustfmt::skip]
        let cases = [
            // The program.
            ("--version", "version"),
            ("-V", "version"),
            ("-V run", "version"),
            ("--help", "help: Keeps an edge node's containers true to what they were told to run"),
            ("-h", "help: Keeps an edge node's containers true to what they were told to run"),
            ("help", "help: Keeps an edge node's containers true to what they were told to run"),
            ("", "error: Keeps an edge node's containers true to what they were told to run"),
            ("help run", "help: Run the agent (or one pass with --once)"),
            ("help plane sign", "help: Sign a desired-state payload (JSON, from stdin or --in) for one node; the signed document goes to stdout (or --out). Sets node, revision and issued_at (now); sets expires only when the payload has none"),
            ("help nope", "error: unrecognized subcommand 'nope'"),
            ("bogus", "error: unrecognized subcommand 'bogus'"),
            ("--bogus", "error: unexpected argument '--bogus'"),
            ("run --version", "error: unexpected argument '--version'"),
            // run and check.
            ("run", "Run { config: None, once: false }"),
            ("run --once -c c.toml", "Run { config: Some(\"c.toml\"), once: true }"),
            ("run --config=c.toml", "Run { config: Some(\"c.toml\"), once: false }"),
            ("run -cc.toml --once", "Run { config: Some(\"c.toml\"), once: true }"),
            ("run -c=c.toml", "Run { config: Some(\"c.toml\"), once: false }"),
            ("run --config - ", "Run { config: Some(\"-\"), once: false }"),
            ("run --help", "help: Run the agent (or one pass with --once)"),
            ("run -h --bogus", "help: Run the agent (or one pass with --once)"),
            ("run --bogus", "error: unexpected argument '--bogus'"),
            ("run -x", "error: unexpected argument '-x'"),
            ("run extra", "error: unexpected argument 'extra'"),
            ("run --config", "error: a value is required for '--config <FILE>' but none was supplied"),
            ("run --config --once", "error: a value is required for '--config <FILE>' but none was supplied"),
            ("run --once --once", "error: the argument '--once' cannot be used multiple times"),
            ("run -c a --config b", "error: the argument '--config <FILE>' cannot be used multiple times"),
            ("run --once=yes", "error: unexpected value 'yes' for '--once'"),
            ("check -c c.toml", "Check { config: Some(\"c.toml\") }"),
            ("check --once", "error: unexpected argument '--once'"),
            // The client commands.
            ("status --json", "Status { config: None, json: true }"),
            ("apply web.toml -c c.toml", "Apply { config: Some(\"c.toml\"), file: \"web.toml\" }"),
            ("apply", "error: the following required arguments were not provided: <FILE>"),
            ("set web a=1 b.c=\"x\" -c c.toml", "Set { config: Some(\"c.toml\"), module: \"web\", settings: [\"a=1\", \"b.c=\\\"x\\\"\"] }"),
            ("set web -- a=-1 -b=2", "Set { config: None, module: \"web\", settings: [\"a=-1\", \"-b=2\"] }"),
            ("set web", "error: the following required arguments were not provided: <SETTINGS>..."),
            ("set", "error: the following required arguments were not provided: <MODULE>, <SETTINGS>..."),
            ("set web -b=2", "error: unexpected argument '-b'"),
            ("unset web a b.c", "Unset { config: None, module: \"web\", keys: [\"a\", \"b.c\"] }"),
            ("unset web", "error: the following required arguments were not provided: <KEYS>..."),
            ("rm web", "Rm { config: None, module: \"web\" }"),
            ("rm web db", "error: unexpected argument 'db'"),
            ("reload web --reason why --wait", "Reload { config: None, module: Some(\"web\"), reason: Some(\"why\"), wait: true, cancel: None }"),
            ("reload --reason=-x", "Reload { config: None, module: None, reason: Some(\"-x\"), wait: false, cancel: None }"),
            ("reload --cancel 3", "Reload { config: None, module: None, reason: None, wait: false, cancel: Some(3) }"),
            ("reload web", "error: the following required arguments were not provided: --reason <REASON>"),
            ("reload --cancel 3 web", "error: the argument '--cancel <ID>' cannot be used with '[MODULE]'"),
            ("reload --cancel 3 --wait", "error: the argument '--cancel <ID>' cannot be used with '--wait'"),
            ("reload --cancel 3 --reason r", "error: the argument '--cancel <ID>' cannot be used with '--reason <REASON>'"),
            ("reload --cancel x", "error: invalid value 'x' for '--cancel <ID>': invalid digit found in string"),
            ("reloads -f", "Reloads { config: None, follow: true }"),
            ("reloads -fc c.toml", "Reloads { config: Some(\"c.toml\"), follow: true }"),
            ("sync", "Sync { config: None }"),
            ("agent", "Agent { config: None, json: false }"),
            ("agent --json -c c.toml", "Agent { config: Some(\"c.toml\"), json: true }"),
            ("self-update r.json", "SelfUpdate { config: None, statement: \"r.json\", downgrade: false, wait: false }"),
            ("self-update --downgrade --wait https://h/r.json", "SelfUpdate { config: None, statement: \"https://h/r.json\", downgrade: true, wait: true }"),
            ("self-update", "error: the following required arguments were not provided: <STATEMENT>"),
            ("plane release --key k --version 0.7.0 --binary t=f", "Plane { command: Release { keys: [\"k\"], version: \"0.7.0\", binaries: [(\"t\", \"f\")], url_base: None, schema: 9, reads_from: 1, out: None } }"),
            ("plane release --key k --version 0.7.0 --binary a=x --binary b=y --url-base https://h/r --schema 10 --reads-from 3 --out o", "Plane { command: Release { keys: [\"k\"], version: \"0.7.0\", binaries: [(\"a\", \"x\"), (\"b\", \"y\")], url_base: Some(\"https://h/r\"), schema: 10, reads_from: 3, out: Some(\"o\") } }"),
            ("plane release --key k --version seven --binary t=f", "error: invalid value 'seven' for '--version <VERSION>': unexpected character 's' while parsing major version number"),
            ("plane release --key k --version 0.7.0 --binary tf", "error: invalid value 'tf' for '--binary <TARGET=FILE>': TARGET=FILE"),
            ("plane release --key k --binary t=f", "error: the following required arguments were not provided: --version <VERSION>"),
            ("images prune --dry-run", "Images { command: Prune { config: None, dry_run: true } }"),
            ("images", "error: The engine's images as this node keeps them"),
            ("images help prune", "help: Remove the images no module of this node needs (those this node pulled, unless `[images] collect = \"all\"`), each with why; the others are listed with why each stays"),
            ("images nope", "error: unrecognized subcommand 'nope'"),
            ("events", "Events { config: None, follow: false, since: 0 }"),
            ("events -f --since 42", "Events { config: None, follow: true, since: 42 }"),
            ("events --since -1", "error: a value is required for '--since <SINCE>' but none was supplied"),
            ("events --since=-1", "error: invalid value '-1' for '--since <SINCE>': invalid digit found in string"),
            // The publisher's commands.
            ("plane publish --key k --fleet f --site s", "Plane { command: Publish { keys: [\"k\"], trusted: [], fleet: \"f\", site: \"s\", dry_run: false, expires_in: 2592000s, refresh_before: 604800s } }"),
            ("plane publish --key k --trusted a --trusted b --fleet f --site s", "Plane { command: Publish { keys: [\"k\"], trusted: [\"a\", \"b\"], fleet: \"f\", site: \"s\", dry_run: false, expires_in: 2592000s, refresh_before: 604800s } }"),
            ("plane rollout watch --key k --trusted a --reports r --site s", "Plane { command: Watch { keys: [\"k\"], trusted: [\"a\"], reports: Dir(\"r\"), site: \"s\", groups: [], threshold: Threshold { rate_permille: 50, min_reports: 10 }, dry_run: false } }"),
            ("plane enroll --fleet f --reports r", "Plane { command: Enroll { fleet: \"f\", reports: Dir(\"r\"), replace: false } }"),
            ("plane enroll --fleet f --reports http://h/r --replace", "Plane { command: Enroll { fleet: \"f\", reports: Index(http://h/r/), replace: true } }"),
            ("plane enroll --reports r", "error: the following required arguments were not provided: --fleet <DIR>"),
            ("plane seal --node n --module db --field env.P --fleet f", "Plane { command: Seal { node: NodeId(\"n\"), module: ModuleName(\"db\"), field: \"env.P\", to: Fleet(\"f\") } }"),
            ("plane seal --node n --module db --field env.P --to age1x", "Plane { command: Seal { node: NodeId(\"n\"), module: ModuleName(\"db\"), field: \"env.P\", to: Key(\"age1x\") } }"),
            ("plane seal --node n --module db --field env.P", "error: the following required arguments were not provided: --fleet <DIR> or --to <AGE1>"),
            ("plane seal --node n --module db --field env.P --fleet f --to age1x", "error: the argument '--fleet <DIR>' cannot be used with '--to <AGE1>'"),
            ("plane seal --node n --module Bad --field env.P --to age1x", "error: invalid value 'Bad' for '--module <MODULE>': invalid module name \"Bad\": must match [a-z0-9][a-z0-9-]{0,62}"),
            ("plane root init --root-key a --root-key b --threshold 2 --documents-key c", "Plane { command: RootInit { root_keys: [\"a\", \"b\"], threshold: 2, document_keys: [\"c\"], after: None, expires_in: 31536000s, out: None } }"),
            ("plane root init --root-key a --documents-key c --after r.json --expires-in 30d --out o", "Plane { command: RootInit { root_keys: [\"a\"], threshold: 1, document_keys: [\"c\"], after: Some(\"r.json\"), expires_in: 2592000s, out: Some(\"o\") } }"),
            ("plane root init --root-key a --documents-key c --threshold 0", "error: invalid value '0' for '--threshold <N>': \"0\": 1 to 8"),
            ("plane root init --root-key a", "error: the following required arguments were not provided: --documents-key <PUB>"),
            ("plane root sign --key k --in p", "Plane { command: RootSign { keys: [\"k\"], input: Some(\"p\"), out: None } }"),
            ("plane root verify --trusted a --site s", "Plane { command: RootVerify { trusted: [\"a\"], site: \"s\", input: None, publish: false } }"),
            ("plane root verify --trusted a --site s --in r --publish", "Plane { command: RootVerify { trusted: [\"a\"], site: \"s\", input: Some(\"r\"), publish: true } }"),
            ("plane root verify --trusted a --site s --publish", "error: the argument '--publish' needs '--in <FILE>' (the root to publish)"),
            ("plane keygen --out k", "Plane { command: Keygen { out: \"k\", force: false } }"),
            ("plane keygen", "error: the following required arguments were not provided: --out <PATH>"),
            ("plane sign --key k --node edge-1", "Plane { command: Sign { keys: [\"k\"], node: NodeId(\"edge-1\"), revision: None, expires_in: 2592000s, input: None, out: None } }"),
            ("plane sign --key a --key b --node n --revision 9007199254740992 --expires-in 12h --in p --out d", "Plane { command: Sign { keys: [\"a\", \"b\"], node: NodeId(\"n\"), revision: Some(9007199254740992), expires_in: 43200s, input: Some(\"p\"), out: Some(\"d\") } }"),
            ("plane sign --key k", "error: the following required arguments were not provided: --node <NODE>"),
            ("plane sign", "error: the following required arguments were not provided: --key <PATH>, --node <NODE>"),
            ("plane sign --key k --node BAD!", "error: invalid value 'BAD!' for '--node <NODE>': invalid node id \"BAD!\": must match [A-Za-z0-9][A-Za-z0-9._-]{0,62}"),
            ("plane sign --key k --node n --revision 0", "error: invalid value '0' for '--revision <N>': 0 is not in 1..=9007199254740992"),
            ("plane sign --key k --node n --revision 9007199254740993", "error: invalid value '9007199254740993' for '--revision <N>': 9007199254740993 is not in 1..=9007199254740992"),
            ("plane verify --key k.pub --key AAAA --node n --in d", "Plane { command: Verify { keys: [\"k.pub\", \"AAAA\"], node: Some(NodeId(\"n\")), input: Some(\"d\") } }"),
            ("plane verify", "error: the following required arguments were not provided: --key <PUB>"),
            ("plane", "error: Publish desired state for the central plane: keys, signing, verifying"),
            ("plane help sign", "help: Sign a desired-state payload (JSON, from stdin or --in) for one node; the signed document goes to stdout (or --out). Sets node, revision and issued_at (now); sets expires only when the payload has none"),
        ];
        check(&cases);
    }

    #[cfg(feature = "import")]
    #[test]
    fn import_reads_its_options() {
        #[rustfmt::skip]
        let cases = [
            ("import f.yml", "Import { out: None, force: false, allow_outside: false, project_name: None, volume_names: \"compose\", file: \"f.yml\" }"),
            ("import --out d --force --allow-outside -p proj --volume-names plain f.yml", "Import { out: Some(\"d\"), force: true, allow_outside: true, project_name: Some(\"proj\"), volume_names: \"plain\", file: \"f.yml\" }"),
            ("import --volume-names x f", "error: invalid value 'x' for '--volume-names <compose|plain>': possible values: compose, plain"),
            ("import", "error: the following required arguments were not provided: <FILE>"),
        ];
        check(&cases);
    }

    #[test]
    fn a_bad_lifetime_says_the_form() {
        let e = outcome("plane sign --key k --node n --expires-in 3651d");
        assert!(
            e.contains("for '--expires-in <DURATION>'") && e.contains("from 1s to 3650d"),
            "{e}"
        );
    }

    #[test]
    fn a_usage_error_names_the_usage_and_the_help() {
        let Err(UsageError(e)) = parse(&line("plane sign --key k")) else {
            panic!("no error");
        };
        assert_eq!(
            e,
            "stead: the following required arguments were not provided: --node <NODE>\n\
             Usage: stead plane sign [OPTIONS] --key <PATH> --node <NODE>\n\
             For more, try 'stead plane sign --help'.\n"
        );
    }

    #[test]
    fn a_value_that_is_not_utf8_is_kept_for_a_path_and_refused_for_text() {
        use std::os::unix::ffi::OsStringExt as _;
        let bad = OsString::from_vec(vec![b'f', 0xff]);
        let args = [OsString::from("apply"), bad.clone()];
        let Ok(Parsed::Command(Command::Apply { file, .. })) = parse(&args) else {
            panic!("not read");
        };
        assert_eq!(file.into_os_string(), bad);
        let args = [OsString::from("rm"), bad];
        assert!(matches!(parse(&args), Err(UsageError(e)) if e.contains("invalid UTF-8")));
    }

    #[test]
    fn every_help_lists_every_option_argument_and_command() {
        fn walk(spec: &'static Spec, path: &str) {
            let h = help(spec, path);
            assert!(h.contains(&usage(spec, path)), "{h}");
            for o in spec.opts {
                assert!(h.contains(&format!("{}  ", o.name())), "{path}: {h}");
                if !o.default.is_empty() {
                    assert!(h.contains(&format!("[default: {}]", o.default)), "{h}");
                }
            }
            for a in spec.args {
                assert!(h.contains(&arg_usage(a)), "{path}: {h}");
            }
            for s in spec.subs {
                assert!(h.contains(&format!("  {}  ", s.name)), "{path}: {h}");
                walk(s, &format!("{path} {}", s.name));
            }
        }
        walk(&STEAD, "stead");
        let h = help(&STEAD.subs[0], "stead run");
        assert_eq!(
            h,
            "Run the agent (or one pass with --once)\n\n\
             Usage: stead run [OPTIONS]\n\n\
             Options:\n  \
             -c, --config <FILE>  The agent's config file\n      \
             --once           Do one pass, print one line per module, and exit\n  \
             -h, --help           Print help\n"
        );
    }
}
