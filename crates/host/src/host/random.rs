//! Randomness, read from the system in one place: secrets (keys, the API
//! token) from `/dev/urandom` or an error, and numbers for names and
//! jitter, which fall back to the time and the process.

use std::io::Read;

/// `N` bytes for a secret: from `/dev/urandom`, or its error.
pub fn secret<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Eight random bytes from the system, for names and jitter (never a
/// secret).
pub fn random_u64() -> u64 {
    match secret::<8>() {
        Ok(b) => u64::from_le_bytes(b),
        // No /dev/urandom: the time and the process, which differ between
        // two agents started on one node.
        Err(_) => crate::host::clock::now_ns() as u64 ^ (u64::from(std::process::id()) << 32),
    }
}
