//! A small fault-injecting HTTP proxy in front of moto. It counts every AWS request (by operation) and can
//! answer the next requests with throttling, 500s, slow answers or no answer at all; answer a share of all
//! requests with throttling or 500s; or kill the provider right after the first Create-type call of each kind
//! has reached moto, before its answer is back.

#![allow(dead_code)]

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 400 ThrottlingException, as EKS answers when rate-limited.
    Throttle,
    /// 500 with an empty error body.
    ServerError,
    /// Forwarded, but answered only after this delay.
    Slow(Duration),
    /// Never answered; the connection is held open until the client gives up.
    Hang,
    /// Forwarded to moto, but the answer is dropped: the call happened and the caller never learns it.
    Lost,
    /// 400 InvalidParameterException, as EKS answers a request that can never succeed (an unsupported
    /// Kubernetes version, a quota, a bad parameter).
    Reject,
}

#[derive(Default)]
struct State {
    faults: VecDeque<Fault>,
    /// Only requests whose operation contains this text get faults; empty: all.
    fault_filter: String,
    requests: Vec<String>,
    /// moto is one Python process: more requests at once than this only make it time out.
    upstream_slots: Option<Arc<tokio::sync::Semaphore>>,
    /// Every request whose operation contains this text gets `Fault::Reject`, for as long as it is set.
    reject_always: Option<String>,
    /// Requests not given a queued fault get throttling or a 500 (alternately) at this rate.
    random: Option<Random>,
    crash: Option<Crash>,
    /// How many requests got a fault.
    faulted: usize,
}

/// A fixed-seed generator, so a failing run can be replayed.
struct Random {
    rate: f64,
    state: u64,
    next_is_throttle: bool,
}

impl Random {
    fn draw(&mut self) -> Option<Fault> {
        // SplitMix64.
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
        if unit >= self.rate {
            return None;
        }
        self.next_is_throttle = !self.next_is_throttle;
        Some(if self.next_is_throttle {
            Fault::Throttle
        } else {
            Fault::ServerError
        })
    }
}

struct Crash {
    /// The provider process to kill (kept current by the test across restarts).
    pid: Arc<AtomicU32>,
    /// Which calls kill it, by kind.
    kind_of: fn(&str) -> Option<String>,
    seen: BTreeSet<String>,
    killed: tokio::sync::mpsc::UnboundedSender<String>,
}

#[derive(Clone)]
pub struct FaultProxy {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl FaultProxy {
    pub async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, upstream_port, shared.clone()));
            }
        });
        Self { port, state }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Applies `faults` to the next requests whose operation contains `filter` ("" = any).
    pub fn inject(&self, filter: &str, faults: &[Fault]) {
        let mut s = self.state.lock().unwrap();
        s.fault_filter = filter.to_string();
        s.faults.extend(faults.iter().copied());
    }

    /// Rejects every request whose operation contains `filter`, from now on.
    pub fn reject_always(&self, filter: &str) {
        self.state.lock().unwrap().reject_always = Some(filter.to_string());
    }

    /// At most `n` requests reach moto at once; the rest queue in the proxy.
    pub fn limit_upstream(&self, n: usize) {
        self.state.lock().unwrap().upstream_slots = Some(Arc::new(tokio::sync::Semaphore::new(n)));
    }

    /// From now on, `rate` of the requests (0.0..1.0) that have no queued fault are answered with throttling
    /// or a 500, alternately, from a fixed seed.
    pub fn fail_at_random(&self, rate: f64, seed: u64) {
        self.state.lock().unwrap().random = Some(Random {
            rate,
            state: seed,
            next_is_throttle: false,
        });
    }

    /// From now on, the first Create-type call of each kind (see [`create_kind`]) is forwarded to moto and,
    /// once moto has answered, the process whose PID `pid` holds is killed (SIGKILL) before the answer is
    /// passed on; the kind is then sent on the returned channel, so the test can start the provider again.
    pub fn crash_after_each_new_create(
        &self,
        pid: Arc<AtomicU32>,
    ) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        self.crash_after_each_new(pid, create_kind)
    }

    /// The same for the first Delete-type call of each kind (see [`delete_kind`]).
    pub fn crash_after_each_new_delete(
        &self,
        pid: Arc<AtomicU32>,
    ) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        self.crash_after_each_new(pid, delete_kind)
    }

    fn crash_after_each_new(
        &self,
        pid: Arc<AtomicU32>,
        kind_of: fn(&str) -> Option<String>,
    ) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        let (killed, rx) = tokio::sync::mpsc::unbounded_channel();
        self.state.lock().unwrap().crash = Some(Crash {
            pid,
            kind_of,
            seen: BTreeSet::new(),
            killed,
        });
        rx
    }

    /// Stops killing the provider after calls.
    pub fn stop_crashing(&self) {
        self.state.lock().unwrap().crash = None;
    }

    /// How many requests got a fault (queued, rejected or drawn).
    pub fn faulted(&self) -> usize {
        self.state.lock().unwrap().faulted
    }

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn count(&self, operation: &str) -> usize {
        self.requests().iter().filter(|r| r.contains(operation)).count()
    }
}

/// The path words of the rest-json APIs (EKS, EFS) that are not names.
const PATH_WORDS: [&str; 7] = [
    "2015-02-01",
    "clusters",
    "node-groups",
    "addons",
    "pod-identity-associations",
    "file-systems",
    "mount-targets",
];

/// Requests the same Create-type operation whoever makes it: for the query protocol (EC2, IAM) the action, when
/// it makes or attaches something; for the rest-json APIs (EKS, EFS) a POST to a collection, its path with the
/// names in it replaced by `*`.
pub fn create_kind(op: &str) -> Option<String> {
    const VERBS: [&str; 7] = [
        "Create",
        "Allocate",
        "Attach",
        "Associate",
        "Authorize",
        "Put",
        "Add",
    ];
    let to_collection = |path: &str| {
        let last = path.rsplit('/').next().unwrap_or_default();
        last != "2015-02-01" && PATH_WORDS.contains(&last)
    };
    kind(op, &VERBS, "POST", to_collection)
}

/// Requests the same Delete-type operation whoever makes it: for the query protocol the action, when it
/// deletes, detaches, releases or revokes something; for the rest-json APIs a DELETE, its path with the names
/// in it replaced by `*`.
pub fn delete_kind(op: &str) -> Option<String> {
    const VERBS: [&str; 5] = ["Delete", "Detach", "Disassociate", "Release", "Revoke"];
    kind(op, &VERBS, "DELETE", |_| true)
}

fn kind(op: &str, verbs: &[&str], method: &str, path_counts: impl Fn(&str) -> bool) -> Option<String> {
    if let Some(action) = op.strip_prefix("EC2 ") {
        return verbs
            .iter()
            .any(|v| action.starts_with(v))
            .then(|| action.to_owned());
    }
    let path = op.strip_prefix(method)?.strip_prefix(' ')?;
    if !path_counts(path) {
        return None;
    }
    let general: Vec<&str> = path
        .split('/')
        .map(|segment| {
            if segment.is_empty() || PATH_WORDS.contains(&segment) {
                segment
            } else {
                "*"
            }
        })
        .collect();
    Some(format!("{method} {}", general.join("/")))
}

/// The AWS service a request is signed for (`ec2`, `iam`, `eks`, `elasticfilesystem`).
fn service(head: &str) -> String {
    head.lines()
        .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
        .and_then(|l| l.split("Credential=").nth(1))
        .and_then(|c| c.split('/').nth(3))
        .unwrap_or_default()
        .to_owned()
}

/// Throttling as each API answers it: EC2 `RequestLimitExceeded` (503, XML), IAM `Throttling` (400, XML),
/// the rest-json APIs `ThrottlingException` (400).
fn throttle_answer(head: &str) -> String {
    let (status, content_type, body) = match service(head).as_str() {
        "ec2" => (
            "503 Service Unavailable",
            "text/xml",
            "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>proxy</RequestID></Response>".to_owned(),
        ),
        "iam" => (
            "400 Bad Request",
            "text/xml",
            "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>proxy</RequestId></ErrorResponse>".to_owned(),
        ),
        _ => (
            "400 Bad Request",
            "application/json",
            r#"{"message":"Rate exceeded"}"#.to_owned(),
        ),
    };
    format!(
        "HTTP/1.1 {status}\r\nx-amzn-errortype: ThrottlingException\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// "METHOD /path" for EKS (rest-json), "EC2 Action" for EC2 (query protocol, action in the form body).
fn operation(head: &str, body: &[u8]) -> String {
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let body = String::from_utf8_lossy(body);
    match body.split('&').find_map(|p| p.strip_prefix("Action=")) {
        Some(action) => format!("EC2 {action}"),
        None => format!("{method} {}", path.split('?').next().unwrap_or_default()),
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_string())
        })
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf[header_end..header_end + length].to_vec()))
}

async fn serve(mut socket: TcpStream, upstream_port: u16, state: Arc<Mutex<State>>) {
    // One request per connection: every answer carries `Connection: close`.
    let Some((head, body)) = read_request(&mut socket).await else {
        return;
    };
    let op = operation(&head, &body);
    let (fault, crash) = {
        let mut s = state.lock().unwrap();
        s.requests.push(op.clone());
        let queued = if s.reject_always.as_ref().is_some_and(|f| op.contains(f.as_str())) {
            Some(Fault::Reject)
        } else if op.contains(&s.fault_filter) {
            s.faults.pop_front()
        } else {
            None
        };
        let fault = queued.or_else(|| s.random.as_mut().and_then(Random::draw));
        s.faulted += usize::from(fault.is_some());
        let crash = match (&mut s.crash, fault) {
            (Some(c), None) => (c.kind_of)(&op)
                .filter(|kind| c.seen.insert(kind.clone()))
                .map(|kind| (c.pid.clone(), c.killed.clone(), kind)),
            _ => None,
        };
        (fault, crash)
    };
    match fault {
        Some(Fault::Throttle) => {
            let _ = socket.write_all(throttle_answer(&head).as_bytes()).await;
            return;
        }
        Some(Fault::Reject) => {
            let body = r#"{"message":"unsupported Kubernetes version 1.99"}"#;
            let answer = format!(
                "HTTP/1.1 400 Bad Request\r\nx-amzn-errortype: InvalidParameterException\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
            return;
        }
        Some(Fault::ServerError) => {
            let answer =
                "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            let _ = socket.write_all(answer.as_bytes()).await;
            return;
        }
        Some(Fault::Hang) => {
            tokio::time::sleep(Duration::from_secs(120)).await;
            return;
        }
        Some(Fault::Slow(delay)) => tokio::time::sleep(delay).await,
        Some(Fault::Lost) | None => {}
    }
    let slots = state.lock().unwrap().upstream_slots.clone();
    let _slot = match &slots {
        Some(s) => s.clone().acquire_owned().await.ok(),
        None => None,
    };
    let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", upstream_port)).await else {
        return;
    };
    let head: String = head
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:") && !l.is_empty())
        .map(|l| format!("{l}\r\n"))
        .collect();
    let request = [format!("{head}Connection: close\r\n\r\n").into_bytes(), body].concat();
    if upstream.write_all(&request).await.is_err() {
        return;
    }
    let mut answer = Vec::new();
    // A moto that never finishes its answer must not hold the connection (and a slot) forever.
    let _ = tokio::time::timeout(Duration::from_secs(60), upstream.read_to_end(&mut answer)).await;
    if fault == Some(Fault::Lost) {
        tokio::time::sleep(Duration::from_secs(120)).await;
        return;
    }
    if let Some((pid, killed, kind)) = crash {
        let pid = pid.load(Ordering::SeqCst);
        if pid != 0 {
            // SAFETY: kill(2) on a PID: no memory is shared. The test started this process and has not reaped it.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = killed.send(kind);
        return;
    }
    let _ = socket.write_all(&answer).await;
    let _ = socket.shutdown().await;
}
