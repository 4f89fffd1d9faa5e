//! A tar stream read as it comes, pure: which of its bytes are the
//! content of a regular file, and where each file begins and ends. What
//! an engine's image export is read with, to find the layers in it
//! (whatever the archive names them); nothing is extracted.

/// A piece of the stream, as [`TarStream::feed`] hands it over.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A regular file begins, of this many bytes.
    Begin(u64),
    /// Some of its content, in order.
    Data(&'a [u8]),
    /// It ended.
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a header (this many of its bytes are in `header`).
    Header,
    /// In an entry's content: bytes left, whether it is a regular file,
    /// the padding after it.
    Body { left: u64, regular: bool, pad: u64 },
    /// Padding to the block: bytes left.
    Pad(u64),
    /// The end blocks came: the rest is ignored.
    End,
}

/// The reader's state.
#[derive(Clone, Debug)]
pub struct TarStream {
    state: State,
    header: Vec<u8>,
}

impl Default for TarStream {
    fn default() -> Self {
        TarStream {
            state: State::Header,
            header: Vec::with_capacity(512),
        }
    }
}

/// A header's size field: octal, or base-256 when its first bit is set.
fn size(field: &[u8]) -> Option<u64> {
    if field[0] & 0x80 != 0 {
        let mut v: u64 = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            v = v.checked_mul(256)?.checked_add(u64::from(b))?;
        }
        return Some(v);
    }
    let s = std::str::from_utf8(field).ok()?;
    let s = s.trim_matches(|c: char| c == '\0' || c == ' ');
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

fn checksum_ok(h: &[u8]) -> bool {
    let sum: u64 = h
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u64::from(b)
            }
        })
        .sum();
    let Ok(s) = std::str::from_utf8(&h[148..156]) else {
        return false;
    };
    u64::from_str_radix(s.trim_matches(|c: char| c == '\0' || c == ' '), 8) == Ok(sum)
}

impl TarStream {
    /// Takes the next bytes of the stream, handing each piece to `f`.
    /// The error says what is not tar.
    pub fn feed<'a>(
        &mut self,
        mut data: &'a [u8],
        mut f: impl FnMut(Piece<'a>),
    ) -> Result<(), String> {
        while !data.is_empty() {
            match self.state {
                State::End => return Ok(()),
                State::Header => {
                    let take = (512 - self.header.len()).min(data.len());
                    self.header.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if self.header.len() < 512 {
                        continue;
                    }
                    let h = std::mem::take(&mut self.header);
                    self.header = Vec::with_capacity(512);
                    if h.iter().all(|&b| b == 0) {
                        self.state = State::End;
                        continue;
                    }
                    if !checksum_ok(&h) {
                        return Err("a tar header whose checksum does not match".into());
                    }
                    let len =
                        size(&h[124..136]).ok_or("a tar header with a size it cannot read")?;
                    let regular = matches!(h[156], b'0' | 0 | b'7');
                    if regular {
                        f(Piece::Begin(len));
                        if len == 0 {
                            f(Piece::End);
                        }
                    }
                    let pad = (512 - len % 512) % 512;
                    self.state = if len == 0 {
                        State::Header
                    } else {
                        State::Body {
                            left: len,
                            regular,
                            pad,
                        }
                    };
                }
                State::Body { left, regular, pad } => {
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(data.len());
                    if regular {
                        f(Piece::Data(&data[..take]));
                    }
                    data = &data[take..];
                    let left = left - take as u64;
                    if left > 0 {
                        self.state = State::Body { left, regular, pad };
                        continue;
                    }
                    if regular {
                        f(Piece::End);
                    }
                    self.state = if pad == 0 {
                        State::Header
                    } else {
                        State::Pad(pad)
                    };
                }
                State::Pad(left) => {
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(data.len());
                    data = &data[take..];
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::Header
                    } else {
                        State::Pad(left)
                    };
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::archive::{END, header, padding};

    fn tar(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, body) in files {
            out.extend_from_slice(&header(name, body.len() as u64));
            out.extend_from_slice(body);
            out.extend(std::iter::repeat_n(0u8, padding(body.len() as u64)));
        }
        out.extend_from_slice(&END);
        out
    }

    /// The files read back, fed `piece` bytes at a time.
    fn read(t: &[u8], piece: usize) -> Result<Vec<Vec<u8>>, String> {
        let mut r = TarStream::default();
        let mut files: Vec<Vec<u8>> = Vec::new();
        let mut open = false;
        for part in t.chunks(piece) {
            r.feed(part, |p| match p {
                Piece::Begin(_) => {
                    assert!(!open);
                    open = true;
                    files.push(Vec::new());
                }
                Piece::Data(d) => files.last_mut().unwrap().extend_from_slice(d),
                Piece::End => open = false,
            })?;
        }
        assert!(!open);
        Ok(files)
    }

    #[test]
    fn regular_files_are_read_whole_however_the_stream_is_cut() {
        let big = vec![7u8; 5000];
        let t = tar(&[
            ("a", b"hello"),
            ("empty", b""),
            ("blobs/sha256/x", &big),
            ("c", &[1u8; 512]),
        ]);
        for piece in [1, 100, 511, 512, 513, 4096, t.len()] {
            let files = read(&t, piece).unwrap();
            assert_eq!(
                files,
                vec![b"hello".to_vec(), vec![], big.clone(), vec![1u8; 512]],
                "{piece}"
            );
        }
    }

    #[test]
    fn a_damaged_header_is_an_error_and_what_follows_the_end_is_ignored() {
        let mut t = tar(&[("a", b"hello")]);
        t.extend_from_slice(b"trailing bytes past the end blocks");
        assert_eq!(read(&t, 64).unwrap().len(), 1);
        let mut bad = tar(&[("a", b"hello")]);
        bad[0] ^= 1;
        assert!(read(&bad, 64).is_err());
        // A link's or a directory's header carries no content to read.
        let mut link = tar(&[("a", b"")]);
        link[156] = b'2';
        let sum: u32 = link[..512]
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u32::from(b)
                }
            })
            .sum();
        link[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        assert_eq!(read(&link, 64).unwrap().len(), 0);
    }

    #[test]
    fn sizes_read_in_octal_and_in_base_256() {
        assert_eq!(size(b"00000001750\0"), Some(1000));
        assert_eq!(size(b"           \0"), Some(0));
        let mut f = [0u8; 12];
        f[0] = 0x80;
        f[4..12].copy_from_slice(&(10u64 << 33).to_be_bytes());
        assert_eq!(size(&f), Some(10 << 33));
        assert_eq!(size(b"0000000z750\0"), None);
    }
}
