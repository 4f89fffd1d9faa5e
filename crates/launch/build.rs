//! The static release launcher (musl, linked by rust-lld) drops its unwind
//! tables: the release profile aborts on panic, nothing unwinds.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.contains("-linux-musl") && std::env::var("PROFILE").as_deref() == Ok("release") {
        let script = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
            .join("../../packaging/discard-unwind.ld");
        println!("cargo:rustc-link-arg-bins=--no-eh-frame-hdr");
        println!("cargo:rustc-link-arg-bins={}", script.display());
        println!("cargo:rerun-if-changed=../../packaging/discard-unwind.ld");
    }
}
