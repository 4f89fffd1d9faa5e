//! The command line read into a [`Command`]: one table row per command
//! (its options, arguments and help), read by one small parser, with the
//! help and the usage lines printed from the same rows. Each command's row
//! carries its typed id ([`Verb`]): the word typed is looked up in the
//! table once, and what it is made into is an exhaustive match on the
//! verb ([`build`]), never a string matched again at run time. [`parse`]
//! is pure: the arguments in, a command, a help text or a usage error out.
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

/// The device's commands, one per row of the table that runs something:
/// what [`build`] makes a [`Command`] of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Verb {
    Run,
    Check,
    Status,
    Apply,
    Set,
    Unset,
    Rm,
    Reload,
    Reloads,
    Agent,
    SelfUpdate,
    Sync,
    ImagesPrune,
    Events,
}

/// What a row of the table is: a command that runs, by its verb, or a
/// group of commands.
enum Body {
    Leaf(Verb),
    Group(&'static [Spec]),
}

/// A command: its options and arguments, or its subcommands.
struct Spec {
    name: &'static str,
    /// One line: the command's entry in its parent's list.
    about: &'static str,
    /// More paragraphs of its own help; empty for none.
    more: &'static str,
    opts: &'static [Opt],
    args: &'static [Arg],
    body: Body,
}

impl Spec {
    /// Its subcommands: none for a command that runs.
    fn subs(&self) -> &'static [Spec] {
        match self.body {
            Body::Leaf(_) => &[],
            Body::Group(subs) => subs,
        }
    }
}

const fn leaf(name: &'static str, verb: Verb, about: &'static str, opts: &'static [Opt]) -> Spec {
    Spec {
        name,
        about,
        more: "",
        opts,
        args: &[],
        body: Body::Leaf(verb),
    }
}

const fn group(name: &'static str, about: &'static str, subs: &'static [Spec]) -> Spec {
    Spec {
        name,
        about,
        more: "",
        opts: &[],
        args: &[],
        body: Body::Group(subs),
    }
}

static STEAD: Spec = group(
    "stead",
    "Keeps an edge node's containers true to what they were told to run",
    &[
        leaf(
            "run",
            Verb::Run,
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
            Verb::Check,
            "Validate the intentions and print each module's digests without touching the engine",
            &[AGENT_CONFIG],
        ),
        leaf(
            "status",
            Verb::Status,
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
                Verb::Apply,
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
                Verb::Set,
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
            ..leaf(
                "unset",
                Verb::Unset,
                "Remove settings of a module",
                &[CLIENT_CONFIG],
            )
        },
        Spec {
            args: &[MODULE],
            ..leaf(
                "rm",
                Verb::Rm,
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
                Verb::Reload,
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
            Verb::Reloads,
            "List reload requests",
            &[
                CLIENT_CONFIG,
                flag("follow", Some('f'), "Keep printing as requests move"),
            ],
        ),
        leaf(
            "agent",
            Verb::Agent,
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
                Verb::SelfUpdate,
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
            Verb::Sync,
            "Fetch the central plane's document now (a nudge: the plane stays the one source \
             of truth) and say what came of it",
            &[CLIENT_CONFIG],
        ),
        group(
            "images",
            "The engine's images as this node keeps them",
            &[leaf(
                "prune",
                Verb::ImagesPrune,
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
            Verb::Events,
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
    ],
);

/// Reads the command line (without the program's name).
pub fn parse(args: &[OsString]) -> Result<Parsed, UsageError> {
    // The operator's commands are the operator's tool's: they are read
    // as the words given, and said where they went.
    if let Some(first) = args.first().and_then(|a| a.to_str())
        && matches!(first, "plane" | "import")
    {
        let words = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return Ok(Parsed::Command(Command::Moved { words }));
    }
    let mut spec = &STEAD;
    let mut path = String::from("stead");
    let mut rest = args;
    let verb = loop {
        let subs = match spec.body {
            Body::Leaf(verb) => break verb,
            Body::Group(subs) => subs,
        };
        let Some((first, more)) = rest.split_first() else {
            // As clap did: a group without its command is its help, on
            // stderr, exit 2.
            return Err(UsageError(help(spec, &path)));
        };
        rest = more;
        let word = first.to_str().unwrap_or_default();
        match word {
            "-h" | "--help" => return Ok(Parsed::Help(help(spec, &path))),
            "-V" | "--version" if std::ptr::eq(spec, &STEAD) => return Ok(Parsed::Version),
            "help" => return help_command(spec, path, rest),
            _ => {}
        }
        match subs.iter().find(|s| s.name == word) {
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
    };
    let m = match read(spec, verb, &path, rest)? {
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
        match spec.subs().iter().find(|s| s.name == word) {
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
    /// The command it is.
    verb: Verb,
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
fn read(
    spec: &'static Spec,
    verb: Verb,
    path: &str,
    args: &[OsString],
) -> Result<Read, UsageError> {
    let mut m = Matches {
        spec,
        verb,
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
    Ok(match m.verb {
        Verb::Run => Command::Run {
            config: config(),
            once: m.flag("once"),
        },
        Verb::Check => Command::Check { config: config() },
        Verb::Status => Command::Status {
            config: config(),
            json: m.flag("json"),
        },
        Verb::Apply => Command::Apply {
            config: config(),
            file: m.args.first().map(PathBuf::from).unwrap_or_default(),
        },
        Verb::Set => Command::Set {
            config: config(),
            module: m.required(0)?,
            settings: m.texts(1)?,
        },
        Verb::Unset => Command::Unset {
            config: config(),
            module: m.required(0)?,
            keys: m.texts(1)?,
        },
        Verb::Rm => Command::Rm {
            config: config(),
            module: m.required(0)?,
        },
        Verb::Reload => {
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
        Verb::Reloads => Command::Reloads {
            config: config(),
            follow: m.flag("follow"),
        },
        Verb::Sync => Command::Sync { config: config() },
        Verb::Agent => Command::Agent {
            config: config(),
            json: m.flag("json"),
        },
        Verb::SelfUpdate => Command::SelfUpdate {
            config: config(),
            statement: m.required(0)?,
            downgrade: m.flag("downgrade"),
            wait: m.flag("wait"),
        },
        Verb::ImagesPrune => Command::Images {
            command: ImagesCommand::Prune {
                config: config(),
                dry_run: m.flag("dry-run"),
            },
        },
        Verb::Events => Command::Events {
            config: config(),
            follow: m.flag("follow"),
            since: m.parsed("since", u64_text)?.unwrap_or_default(),
        },
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
    if !spec.subs().is_empty() {
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
        .subs()
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
    if std::ptr::eq(spec, &STEAD) {
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
            ("images prune --dry-run", "Images { command: Prune { config: None, dry_run: true } }"),
            ("images", "error: The engine's images as this node keeps them"),
            ("images help prune", "help: Remove the images no module of this node needs (those this node pulled, unless `[images] collect = \"all\"`), each with why; the others are listed with why each stays"),
            ("images nope", "error: unrecognized subcommand 'nope'"),
            ("events", "Events { config: None, follow: false, since: 0 }"),
            ("events -f --since 42", "Events { config: None, follow: true, since: 42 }"),
            ("events --since -1", "error: a value is required for '--since <SINCE>' but none was supplied"),
            ("events --since=-1", "error: invalid value '-1' for '--since <SINCE>': invalid digit found in string"),
        ];
        check(&cases);
    }

    #[test]
    fn a_usage_error_names_the_usage_and_the_help() {
        let Err(UsageError(e)) = parse(&line("reload web")) else {
            panic!("no error");
        };
        assert_eq!(
            e,
            "stead: the following required arguments were not provided: --reason <REASON>\n\
             Usage: stead reload [OPTIONS] [MODULE]\n\
             For more, try 'stead reload --help'.\n"
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
    fn every_verb_is_run_by_one_row_of_the_table_and_its_words() {
        /// The words that run each verb: exhaustive, so a verb added is
        /// named here.
        fn words(v: Verb) -> &'static str {
            match v {
                Verb::Run => "run",
                Verb::Check => "check",
                Verb::Status => "status",
                Verb::Apply => "apply",
                Verb::Set => "set",
                Verb::Unset => "unset",
                Verb::Rm => "rm",
                Verb::Reload => "reload",
                Verb::Reloads => "reloads",
                Verb::Agent => "agent",
                Verb::SelfUpdate => "self-update",
                Verb::Sync => "sync",
                Verb::ImagesPrune => "images prune",
                Verb::Events => "events",
            }
        }
        const ALL: [Verb; 14] = [
            Verb::Run,
            Verb::Check,
            Verb::Status,
            Verb::Apply,
            Verb::Set,
            Verb::Unset,
            Verb::Rm,
            Verb::Reload,
            Verb::Reloads,
            Verb::Agent,
            Verb::SelfUpdate,
            Verb::Sync,
            Verb::ImagesPrune,
            Verb::Events,
        ];
        fn leaves(spec: &'static Spec, path: &str, out: &mut Vec<(Verb, String)>) {
            match spec.body {
                Body::Leaf(v) => out.push((v, path.to_string())),
                Body::Group(subs) => {
                    for s in subs {
                        let path = [path, s.name].join(" ");
                        leaves(s, path.trim_start(), out);
                    }
                }
            }
        }
        let mut rows = Vec::new();
        leaves(&STEAD, "", &mut rows);
        for (verb, path) in &rows {
            assert_eq!(*path, words(*verb), "{verb:?}");
        }
        let mut verbs: Vec<Verb> = rows.iter().map(|(v, _)| *v).collect();
        verbs.sort();
        assert_eq!(verbs, ALL, "each verb on exactly one row");
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
            for s in spec.subs() {
                assert!(h.contains(&format!("  {}  ", s.name)), "{path}: {h}");
                walk(s, &format!("{path} {}", s.name));
            }
        }
        walk(&STEAD, "stead");
        let h = help(&STEAD.subs()[0], "stead run");
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
