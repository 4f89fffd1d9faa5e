//! Large answers written as they are read: an object whose one array (every
//! intention, every module's status, the events) is serialised an element
//! at a time into bounded chunks, on a blocking thread, while the client
//! reads. The text is exactly what `serde_json::to_vec_pretty` of the whole
//! value gives, so the API's output does not change; only one element's
//! value and one chunk are in memory at a time for each answer, not the
//! whole value and then its whole text.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame};
use serde_json::{Map, Value as J};
use tokio::sync::mpsc;

/// The size a chunk is sent at.
pub const CHUNK: usize = 64 << 10;
/// How many chunks may wait for a slow client: with [`CHUNK`], at most
/// 256 KiB of an answer is held however slowly it is read.
const QUEUED: usize = 3;

/// A response body fed by a producer through a bounded channel.
pub struct Chunks(mpsc::Receiver<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b))))
    }
}

/// Writes one answer: the object's text before its array, each element,
/// and the text after, sending a chunk whenever [`CHUNK`] bytes are ready.
pub struct Writer {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
    suffix: Vec<u8>,
    first: bool,
    gone: bool,
}

/// The body an answer is read from and the [`Writer`] that feeds it, for
/// `head` with its array under `key` (which `head` need not hold).
pub fn channel(mut head: Map<String, J>, key: &str) -> (Chunks, Writer) {
    let (tx, rx) = mpsc::channel(QUEUED);
    head.insert(key.to_string(), J::Array(Vec::new()));
    let (prefix, suffix) = split_at_array(&J::Object(head), key);
    let writer = Writer {
        tx,
        buf: prefix,
        suffix,
        first: true,
        gone: false,
    };
    (Chunks(rx), writer)
}

impl Writer {
    /// Adds one element of the array; false once the client has gone (the
    /// producer then stops).
    pub fn push(&mut self, element: &J) -> bool {
        if self.gone {
            return false;
        }
        element_text(element, self.first, &mut self.buf);
        self.first = false;
        if self.buf.len() >= CHUNK {
            self.flush();
        }
        !self.gone
    }

    /// Ends the answer without closing it: what was sent is not valid
    /// JSON, so a reader cannot take a cut list for the whole.
    pub fn abort(&mut self) {
        self.gone = true;
        self.buf.clear();
        self.suffix.clear();
    }

    /// Ends the array and the object, and sends what is left.
    pub fn finish(mut self) {
        if self.gone {
            return;
        }
        if !self.first {
            self.buf.extend_from_slice(b"\n  ]");
        } else {
            self.buf.extend_from_slice(b"[]");
        }
        let suffix = std::mem::take(&mut self.suffix);
        self.buf.extend_from_slice(&suffix);
        self.flush();
    }

    fn flush(&mut self) {
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        // Blocking: the producer runs on a blocking thread, and waits here
        // while the client is slow (the channel's bound is the memory bound).
        if self.tx.blocking_send(chunk).is_err() {
            self.gone = true;
        }
    }
}

/// The pretty text of `whole` (an object whose `key` is an empty array)
/// around that array: what comes before `[]` and what comes after it,
/// with the answer's closing newline.
fn split_at_array(whole: &J, key: &str) -> (Vec<u8>, Vec<u8>) {
    let mut text = serde_json::to_vec_pretty(whole).unwrap_or_default();
    text.push(b'\n');
    let mut marker = serde_json::to_vec(key).unwrap_or_default();
    marker.extend_from_slice(b": []");
    // The key is at the top level, so it is at the start of a line after
    // two spaces: no string value can contain that text (a newline inside
    // a string is escaped).
    let mut needle = b"\n  ".to_vec();
    needle.extend_from_slice(&marker);
    match text
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
    {
        Some(at) => {
            let open = at + needle.len() - 2;
            let suffix = text.split_off(open + 2);
            text.truncate(open);
            (text, suffix)
        }
        None => (text, Vec::new()),
    }
}

/// One element of a top-level array as the pretty text has it: after a
/// comma (the opening bracket for the first), on its own line, indented
/// four spaces.
fn element_text(element: &J, first: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(if first { b"[\n    " } else { b",\n    " });
    let text = serde_json::to_vec_pretty(element).unwrap_or_default();
    // A newline in the text is always between tokens (one in a string is
    // escaped), so indenting after each one indents the element.
    for b in text {
        out.push(b);
        if b == b'\n' {
            out.extend_from_slice(b"    ");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the writer would send for `head` with `items` under `key`.
    fn streamed(head: J, key: &str, items: &[J]) -> Vec<u8> {
        let J::Object(head) = head else { panic!() };
        let mut h = head.clone();
        h.insert(key.into(), J::Array(Vec::new()));
        let (mut out, suffix) = split_at_array(&J::Object(h), key);
        if items.is_empty() {
            out.extend_from_slice(b"[]");
        } else {
            for (k, i) in items.iter().enumerate() {
                element_text(i, k == 0, &mut out);
            }
            out.extend_from_slice(b"\n  ]");
        }
        out.extend_from_slice(&suffix);
        out
    }

    fn whole(head: J, key: &str, items: &[J]) -> Vec<u8> {
        let mut v = head;
        v[key] = J::Array(items.to_vec());
        let mut t = serde_json::to_vec_pretty(&v).unwrap();
        t.push(b'\n');
        t
    }

    #[test]
    fn the_streamed_text_is_the_pretty_text_of_the_whole() {
        let nested = json!({"a": {"b": [1, {"c": "x\ny"}], "e": {}}, "f": []});
        let cases: Vec<(J, &str, Vec<J>)> = vec![
            (json!({}), "intentions", vec![]),
            (json!({}), "intentions", vec![json!({"name": "a"})]),
            (
                json!({}),
                "intentions",
                vec![nested.clone(), json!(2), json!(null)],
            ),
            (
                json!({"next": 3}),
                "events",
                vec![json!({"seq": 1}), json!({"seq": 2})],
            ),
            (json!({"next": 0}), "events", vec![]),
            (
                json!({"node": {"id": "n"}, "plane": null}),
                "modules",
                vec![nested.clone()],
            ),
            (
                json!({"node": {"modules": []}, "z": "\"modules\": []"}),
                "modules",
                vec![json!(1)],
            ),
        ];
        for (head, key, items) in cases {
            let got = String::from_utf8(streamed(head.clone(), key, &items)).unwrap();
            let want = String::from_utf8(whole(head, key, &items)).unwrap();
            assert_eq!(got, want);
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_writer_sends_bounded_chunks_that_add_up_to_the_answer() {
        use http_body_util::BodyExt;
        let items: Vec<J> = (0..2000)
            .map(|k| json!({"k": k, "pad": "p".repeat(100)}))
            .collect();
        let want = whole(json!({"next": 1}), "events", &items);
        let (body, mut w) = channel(json!({"next": 1}).as_object().cloned().unwrap(), "events");
        let feed = items.clone();
        std::thread::spawn(move || {
            for i in &feed {
                assert!(w.push(i));
            }
            w.finish();
        });
        let mut body = body;
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            assert!(data.len() < CHUNK + 1024, "a chunk of {} bytes", data.len());
            got.extend_from_slice(&data);
        }
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(want).unwrap()
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_client_that_goes_stops_the_producer() {
        let (body, mut w) = channel(Map::new(), "intentions");
        drop(body);
        let pushed = std::thread::spawn(move || {
            (0..10_000)
                .take_while(|_| w.push(&json!("p".repeat(1000))))
                .count()
        })
        .join()
        .unwrap();
        assert!(pushed < 100, "{pushed} pushed after the client left");
    }
}
