//! Stamps the git commit, its time and the target into the binary: the
//! commit and target for `--version`, the time as the earliest "now" the
//! agent believes (a device whose clock reads 1970 is at least as late as
//! the code it runs).

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=STEAD_GIT_COMMIT={commit}");
    // SOURCE_DATE_EPOCH first (reproducible builds), then the commit's time.
    let time = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .or_else(|| {
            std::process::Command::new("git")
                .args(["log", "-1", "--format=%ct"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
        })
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    println!("cargo:rustc-env=STEAD_BUILD_TIME={time}");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!(
        "cargo:rustc-env=STEAD_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    // The static release binaries (musl, linked by rust-lld) drop their
    // unwind tables: the release profile aborts on panic, nothing unwinds.
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.contains("-linux-musl") && std::env::var("PROFILE").as_deref() == Ok("release") {
        let script = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
            .join("packaging/discard-unwind.ld");
        println!("cargo:rustc-link-arg-bins=--no-eh-frame-hdr");
        // Identical code folded (lld): Rust emits its functions
        // `unnamed_addr` (their addresses mean nothing), so the copies that
        // monomorphisation makes of one body for types alike are kept once.
        println!("cargo:rustc-link-arg-bins=--icf=all");
        println!("cargo:rustc-link-arg-bins={}", script.display());
        println!("cargo:rerun-if-changed=packaging/discard-unwind.ld");
    }
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}
