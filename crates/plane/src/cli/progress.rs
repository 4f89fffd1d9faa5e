//! Progress of a long run (publishing 10,000 nodes, rolling up 100,000
//! reports), drawn on stderr only when stderr is a terminal (indicatif):
//! piped, as tests and CI run the tool, nothing more is written to stdout
//! or stderr than without it. Lines the command prints to stdout while a
//! bar is drawn go through [`Progress::say`], which lifts the bar for
//! them.

use std::fmt::Display;
use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar (a known count) or a counter (an unknown one), or nothing.
pub struct Progress(ProgressBar);

impl Progress {
    /// `len` steps of `what` (none: counted as they come), drawn on stderr
    /// when it is a terminal.
    pub fn stderr(what: &str, len: Option<u64>) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        Progress::to(terminal.then(ProgressDrawTarget::stderr), what, len)
    }

    /// Drawn on `target`, or on nothing.
    fn to(target: Option<ProgressDrawTarget>, what: &str, len: Option<u64>) -> Progress {
        let Some(target) = target else {
            return Progress(ProgressBar::hidden());
        };
        let (template, bar) = match len {
            Some(n) => (
                "{msg} {wide_bar} {human_pos}/{human_len} ({eta} left)",
                ProgressBar::with_draw_target(Some(n), target),
            ),
            None => (
                "{spinner} {msg}: {human_pos} in {elapsed}",
                ProgressBar::with_draw_target(None, target),
            ),
        };
        // The templates are this file's own: one that did not read would
        // draw indicatif's default, never fail the command.
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        if len.is_none() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Progress(bar)
    }

    /// One more step done.
    pub fn step(&self) {
        self.0.inc(1);
    }

    /// Prints `line` to stdout, the bar lifted while it is.
    pub fn say(&self, line: impl Display) {
        self.0.suspend(|| println!("{line}"));
    }

    /// Done: the bar is cleared, leaving what was printed.
    pub fn done(self) {
        self.0.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // A command that returns early (a refusal) leaves no bar behind.
        if !self.0.is_finished() {
            self.0.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<Vec<String>>>);

    impl Screen {
        fn put(&self, s: String) -> std::io::Result<()> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(s);
            Ok(())
        }
        fn written(&self) -> Vec<String> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
            self.put(format!("up {n}"))
        }
        fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
            self.put(format!("down {n}"))
        }
        fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
            self.put(format!("right {n}"))
        }
        fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
            self.put(format!("left {n}"))
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.put(format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.put(s.to_string())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.put("clear".into())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Runs a long run's progress with stderr a terminal or not: what the
    /// terminal was given.
    fn run(terminal: bool, len: Option<u64>) -> Vec<String> {
        let screen = Screen::default();
        let target = terminal.then(|| ProgressDrawTarget::term_like(Box::new(screen.clone())));
        let p = Progress::to(target, "signing", len);
        for _ in 0..1000 {
            p.step();
        }
        p.0.tick();
        p.done();
        screen.written()
    }

    #[test]
    fn progress_is_drawn_only_on_a_terminal() {
        // (stderr a terminal, a known count, something drawn)
        #[rustfmt::skip]
        let cases = [
            (false, Some(1000), false),
            (false, None, false),
            (true, Some(1000), true),
            (true, None, true),
        ];
        for (terminal, len, drawn) in cases {
            let written = run(terminal, len);
            assert_eq!(
                !written.is_empty(),
                drawn,
                "{terminal} {len:?}: {written:?}"
            );
        }
        // On a terminal, it says what it counts.
        assert!(
            run(true, Some(1000)).iter().any(|w| w.contains("signing")),
            "{:?}",
            run(true, Some(1000))
        );
    }

    #[test]
    fn what_the_commands_make_is_hidden_unless_stderr_is_a_terminal() {
        // Under `cargo test` in CI, stderr is piped: hidden, so it writes
        // nothing.
        let terminal = std::io::stderr().is_terminal();
        for len in [Some(3), None] {
            let p = Progress::stderr("reading reports", len);
            assert_eq!(p.0.is_hidden(), !terminal, "{len:?}");
            p.step();
            p.say(format_args!("a line to stdout, {len:?}"));
            p.done();
        }
    }
}
