//! A fault-injecting proxy in front of a real registry: each request is
//! forwarded (one connection per request), unless a rule matching its
//! method and path still has uses left; then the rule's fault is answered
//! instead: a status (with `Retry-After` when given), a reset connection,
//! or the real answer with its body tampered.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a rule does.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Answers this status, with `Retry-After: <secs>` when given.
    Status(u16, Option<u64>),
    /// Closes the connection with a reset.
    Reset,
    /// Reads the request and never answers (for this long).
    Hang(Duration),
    /// Forwards, and flips a byte of the body.
    Tamper,
    /// Forwards after this long (a slow registry).
    Delay(Duration),
}

#[derive(Clone, Debug)]
struct Rule {
    method: String,
    path_contains: String,
    fault: Fault,
    uses: usize,
}

/// The proxy; it stops with the test process.
pub struct FaultProxy {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    rules: Arc<Mutex<Vec<Rule>>>,
    /// Every request: method, path, and the fault answered, if any.
    pub seen: Arc<Mutex<Vec<String>>>,
}

impl FaultProxy {
    /// A proxy to `upstream` (`127.0.0.1:<port>`).
    pub fn start(upstream: &str) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let rules: Arc<Mutex<Vec<Rule>>> = Arc::default();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let (r, s, up) = (rules.clone(), seen.clone(), upstream.to_string());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (r, s, up) = (r.clone(), s.clone(), up.clone());
                std::thread::spawn(move || serve(client, &up, &r, &s));
            }
        });
        FaultProxy { addr, rules, seen }
    }

    /// Answers the next `uses` requests of `method` whose path contains
    /// `path_contains` with `fault`.
    pub fn inject(&self, method: &str, path_contains: &str, fault: Fault, uses: usize) {
        self.rules.lock().unwrap().push(Rule {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            fault,
            uses,
        });
    }

    /// Forgets every rule.
    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }
}

fn serve(
    mut client: TcpStream,
    upstream: &str,
    rules: &Mutex<Vec<Rule>>,
    seen: &Mutex<Vec<String>>,
) {
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The request head (registry reads have no body; a push's body follows
    // and is forwarded as it comes).
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            // A TLS hello (clients try TLS first on loopback): answered as
            // a plain HTTP server answers it.
            Ok(1) if head.is_empty() && byte[0] == 0x16 => {
                let _ = client.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n");
                return;
            }
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut first = text.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (
        first.next().unwrap_or("").to_string(),
        first.next().unwrap_or("").to_string(),
    );
    let fault = {
        let mut rules = rules.lock().unwrap();
        rules
            .iter_mut()
            .find(|r| r.uses > 0 && r.method == method && path.contains(&r.path_contains))
            .map(|r| {
                r.uses -= 1;
                r.fault.clone()
            })
    };
    seen.lock()
        .unwrap()
        .push(format!("{method} {path} {fault:?}"));
    match fault {
        Some(Fault::Status(code, retry)) => {
            let retry = retry.map_or(String::new(), |s| format!("Retry-After: {s}\r\n"));
            let _ = write!(
                client,
                "HTTP/1.1 {code} Injected\r\n{retry}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
            );
        }
        Some(Fault::Reset) => {
            let sock = socket2_reset(client);
            drop(sock);
        }
        Some(Fault::Hang(d)) => {
            std::thread::sleep(d);
            drop(client);
        }
        Some(Fault::Tamper | Fault::Delay(_)) | None => {
            if let Some(Fault::Delay(d)) = fault {
                std::thread::sleep(d);
            }
            let tamper = matches!(fault, Some(Fault::Tamper));
            let Ok(mut up) = TcpStream::connect(upstream) else {
                return;
            };
            // One request per connection: the next one is matched afresh.
            let mut out = String::new();
            for line in text.split("\r\n") {
                if line.to_ascii_lowercase().starts_with("connection:") {
                    continue;
                }
                if line.is_empty() {
                    break;
                }
                out.push_str(line);
                out.push_str("\r\n");
            }
            out.push_str("Connection: close\r\n\r\n");
            if up.write_all(out.as_bytes()).is_err() {
                return;
            }
            let (mut cr, mut uw) = (client.try_clone().unwrap(), up.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut cr, &mut uw);
            });
            let mut answer = Vec::new();
            let _ = up.read_to_end(&mut answer);
            if tamper {
                if let Some(at) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
                    if let Some(b) = answer.get_mut(at + 4) {
                        *b ^= 0x20;
                    }
                }
            }
            let _ = client.write_all(&answer);
        }
    }
}

/// Closes a connection with a reset (SO_LINGER 0).
fn socket2_reset(s: TcpStream) -> TcpStream {
    use std::os::fd::AsRawFd;
    let linger = libc_linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on an open socket with a correctly sized struct.
    unsafe {
        setsockopt(
            s.as_raw_fd(),
            1,  // SOL_SOCKET
            13, // SO_LINGER
            &linger as *const libc_linger as *const std::ffi::c_void,
            std::mem::size_of::<libc_linger>() as u32,
        );
    }
    s
}

#[repr(C)]
struct libc_linger {
    l_onoff: i32,
    l_linger: i32,
}

unsafe extern "C" {
    fn setsockopt(fd: i32, level: i32, name: i32, value: *const std::ffi::c_void, len: u32) -> i32;
}
