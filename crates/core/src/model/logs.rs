//! A container's logs as the engine's `GET /containers/{id}/logs` sends
//! them, read into text, pure: the stream of frames a container without a
//! terminal has (an 8-byte header each: which stream, then the length), or
//! the raw bytes of one with a terminal; and a module's log masked of the
//! values opened for it before it leaves the device.

/// The most bytes of one module's logs an upload carries: a range that
/// holds more is cut at its end, and says so.
pub const MAX_LOG_BYTES: usize = 8 * 1024 * 1024;

/// The text of the engine's log answer `raw`: its frames' payloads in
/// order (stdout and stderr as they came), or `raw` as it is when it is
/// not framed (a container with a terminal). A last frame cut short is
/// kept as far as it came.
pub fn demux(raw: &[u8]) -> Vec<u8> {
    let framed = raw.len() >= 8 && matches!(raw[0], 0..=2) && raw[1..4] == [0, 0, 0];
    if !framed {
        return raw.to_vec();
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut rest = raw;
    while rest.len() >= 8 {
        let len = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let body = &rest[8..];
        let take = len.min(body.len());
        out.extend_from_slice(&body[..take]);
        rest = &body[take..];
    }
    out
}

/// How a log cut at [`MAX_LOG_BYTES`] ends.
pub const CUT: &str = "\n[stead: cut here: the range holds more than the upload carries]\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream: u8, text: &str) -> Vec<u8> {
        let mut f = vec![stream, 0, 0, 0];
        f.extend_from_slice(&(text.len() as u32).to_be_bytes());
        f.extend_from_slice(text.as_bytes());
        f
    }

    #[test]
    fn frames_are_read_into_their_text_and_a_terminal_s_bytes_are_kept() {
        let both = [
            frame(1, "out 1\n"),
            frame(2, "err 1\n"),
            frame(1, "out 2\n"),
        ]
        .concat();
        // (the answer, its text)
        let cut = {
            let mut f = frame(1, "whole\n");
            f.extend(frame(2, "cut short\n")[..12].iter());
            f
        };
        #[rustfmt::skip]
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (both, "out 1\nerr 1\nout 2\n"),
            (cut, "whole\ncut "),
            (b"a terminal's line\r\n".to_vec(), "a terminal's line\r\n"),
            (Vec::new(), ""),
            (frame(1, ""), ""),
        ];
        for (raw, want) in cases {
            assert_eq!(String::from_utf8(demux(&raw)).unwrap(), want, "{raw:?}");
        }
    }
}
