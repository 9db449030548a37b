//! A small fault-injecting HTTP proxy in front of moto. It counts every AWS request (by operation) and can
//! answer the next requests with throttling, 500s, slow answers or no answer at all.

#![allow(dead_code)]

use std::collections::VecDeque;
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

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn count(&self, operation: &str) -> usize {
        self.requests().iter().filter(|r| r.contains(operation)).count()
    }
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
    let fault = {
        let mut s = state.lock().unwrap();
        s.requests.push(op.clone());
        if s.reject_always.as_ref().is_some_and(|f| op.contains(f.as_str())) {
            Some(Fault::Reject)
        } else if op.contains(&s.fault_filter) {
            s.faults.pop_front()
        } else {
            None
        }
    };
    match fault {
        Some(Fault::Throttle) => {
            let body = r#"{"message":"Rate exceeded"}"#;
            let answer = format!(
                "HTTP/1.1 400 Bad Request\r\nx-amzn-errortype: ThrottlingException\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
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
    let _ = socket.write_all(&answer).await;
    let _ = socket.shutdown().await;
}
