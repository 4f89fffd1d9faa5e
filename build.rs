//! The release binaries' link arguments. The commit, its time and the
//! target the binary says (`--version`, the metrics' `stead_build_info`)
//! are stamped once, by the core's build script (`stead_core::COMMIT`,
//! `TARGET`, `BUILD_TIME`, `VERSION`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
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
}
