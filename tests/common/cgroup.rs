//! A memory cgroup (v1) of its own with a limit, as the shipped unit's
//! `MemoryMax=` sets one; removed when dropped. The tests run as root.

use std::path::PathBuf;

/// A memory cgroup of its own, removed when dropped.
pub struct MemoryCgroup(pub PathBuf);

impl MemoryCgroup {
    pub fn new(name: &str, limit: &str) -> MemoryCgroup {
        let dir = std::path::Path::new("/sys/fs/cgroup/memory").join(name);
        std::fs::create_dir_all(&dir).expect("a memory cgroup (the tests run as root)");
        std::fs::write(dir.join("memory.limit_in_bytes"), limit).unwrap();
        MemoryCgroup(dir)
    }

    pub fn add(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    /// A wrapper command that joins this cgroup and then runs what follows
    /// it: the process is in the cgroup from its first allocation.
    pub fn wrapper(&self) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            format!(
                "echo $$ > '{}' && exec \"$@\"",
                self.0.join("cgroup.procs").display()
            ),
            "sh".into(),
        ]
    }

    pub fn oom_kills(&self) -> u64 {
        std::fs::read_to_string(self.0.join("memory.oom_control"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The resident set of `pid` (`VmRSS`) and its peak (`VmHWM`), in KiB.
pub fn rss_and_peak_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
