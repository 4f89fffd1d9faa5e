//! One builder of intention files for the suites: a module's TOML, its
//! top-level keys before its tables whatever order they are given in.

use super::idle_after;

/// An intention file being built.
#[derive(Clone, Debug)]
pub struct Module {
    keys: Vec<String>,
    tables: Vec<String>,
}

impl Module {
    /// `name` and `image`; nothing else set.
    pub fn new(name: &str, image: &str) -> Module {
        Module {
            keys: vec![format!("name = {name:?}"), format!("image = {image:?}")],
            tables: Vec::new(),
        }
    }

    /// A top-level key, its value written as TOML (`"always"`, `["a"]`, `1`).
    pub fn set(mut self, key: &str, toml: &str) -> Module {
        self.keys.push(format!("{key} = {toml}"));
        self
    }

    /// Top-level lines as written (several keys, a comment).
    pub fn raw(mut self, lines: &str) -> Module {
        if !lines.trim().is_empty() {
            self.keys.push(lines.trim_end().to_string());
        }
        self
    }

    /// `command = ["sh", "-c", script]`.
    pub fn sh(self, script: &str) -> Module {
        self.set("command", &format!("[\"sh\", \"-c\", {script:?}]"))
    }

    /// A shell that prints `print`, then idles and exits on SIGTERM.
    pub fn idle(self, print: &str) -> Module {
        self.sh(&idle_after(print))
    }

    /// A table (`[config]`, `[update]`, …) with its lines.
    pub fn table(mut self, header: &str, lines: &str) -> Module {
        self.tables
            .push(format!("[{header}]\n{}", lines.trim_end()));
        self
    }

    /// A line added to a table, made when it is not there yet.
    pub fn in_table(mut self, header: &str, line: &str) -> Module {
        let head = format!("[{header}]\n");
        match self.tables.iter_mut().find(|t| t.starts_with(&head)) {
            Some(t) => {
                t.push('\n');
                t.push_str(line);
            }
            None => self.tables.push(format!("{head}{line}")),
        }
        self
    }

    /// A JSON config file at `path` with these defaults (a TOML inline table).
    pub fn json_config(self, path: &str, defaults: &str) -> Module {
        self.table(
            "config",
            &format!("path = {path:?}\nformat = \"json\"\ndefaults = {defaults}"),
        )
    }

    /// The file's text.
    pub fn toml(&self) -> String {
        self.to_string()
    }
}

impl std::fmt::Display for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.keys.join("\n"))?;
        for t in &self.tables {
            write!(f, "\n{t}\n")?;
        }
        Ok(())
    }
}
