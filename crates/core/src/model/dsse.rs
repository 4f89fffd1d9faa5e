//! DSSE (Dead Simple Signing Envelope, v1) as both its users read it: the
//! pre-authentication encoding a signature covers ([`pae`]), for the
//! plane's documents (`plane::envelope`) and for in-toto attestations of
//! an image (`model::image_policy`).

/// The DSSE v1 pre-authentication encoding, the bytes a signature covers:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, each LEN the byte
/// length in ASCII decimal.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_type.len() + payload.len() + 32);
    pae_into(payload_type, payload, &mut out);
    out
}

/// [`pae`] into `out`, which is cleared first (a reader of many envelopes
/// keeps one buffer).
pub fn pae_into(payload_type: &str, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
}
