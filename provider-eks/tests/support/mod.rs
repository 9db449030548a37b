//! Real peers for the integration tests, started by the tests themselves: a moto server (AWS) and, where a test
//! needs a stand-in for Kubernetes, kmock with our metadata-stamping subclass. Both run from the Python venv that
//! `bash tests/run.sh` builds; `MODELPLANE_PYTHON` overrides its path. Without it the tests fail saying so. The
//! real kube-apiserver comes from `apiserver`.
//!
//! Each peer reads its stdin and exits when it closes, so a peer never outlives the test process even when a
//! test panics or the peer sits in a `static`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The venv's Python; a missing venv fails the test, naming the fix.
pub fn python() -> PathBuf {
    let path = std::env::var_os("MODELPLANE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    assert!(
        path.exists(),
        "no Python venv at {} for moto and kmock (run `bash tests/run.sh` once, or set MODELPLANE_PYTHON)",
        path.display()
    );
    path
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Peer {
    pub port: u16,
    child: Child,
}

impl Peer {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Python snippet: exit as soon as stdin closes (our parent is gone).
const EXIT_WITH_PARENT: &str = "import os, sys, threading; threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()";

pub fn start_moto() -> Peer {
    let python = python();
    let port = free_port();
    let script = format!(
        "{EXIT_WITH_PARENT}\nfrom moto.server import main\nmain(['-H', '127.0.0.1', '-p', '{port}'])"
    );
    let child = Command::new(python)
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port, "moto");
    Peer { port, child }
}

pub fn start_kmock() -> Peer {
    let python = python();
    let port = free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kmock_apiserver.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "kmock did not start");
    Peer { port, child }
}

/// A minimal HTTP/1.1 request; returns (status, body).
pub fn http(method: &str, url: &str, body: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut stream = TcpStream::connect(host).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A process's peak resident memory (VmHWM) in MiB, for the benchmarks.
pub fn peak_rss_mib(pid: u32) -> f64 {
    proc_status_mib(pid, "VmHWM:")
}

/// A process's resident memory now (VmRSS) in MiB, for the benchmarks.
pub fn rss_mib(pid: u32) -> f64 {
    proc_status_mib(pid, "VmRSS:")
}

fn proc_status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// Clears every moto service, so each test starts from an empty AWS account.
pub fn reset_moto(moto: &Peer) {
    let (status, _) = http("POST", &format!("{}/moto-api/reset", moto.url()), "");
    assert_eq!(status, 200, "moto reset failed");
}

pub const MOTO_CREDENTIALS: &str =
    "[default]\naws_access_key_id = AKIDMODELPLANETEST\naws_secret_access_key = moto-secret-never-logged\n";

/// The Secret `aws` in `namespace` holding [`MOTO_CREDENTIALS`] under `credentials`, and the ProviderConfig
/// credentials that point at it.
pub fn credentials_secret(namespace: &str) -> k8s_openapi::api::core::v1::Secret {
    k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("aws".into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        data: Some(std::collections::BTreeMap::from([(
            "credentials".to_string(),
            k8s_openapi::ByteString(MOTO_CREDENTIALS.into()),
        )])),
        ..Default::default()
    }
}

pub fn secret_credentials() -> modelplane_eks_api::Credentials {
    modelplane_eks_api::Credentials {
        source: modelplane_eks_api::CredentialsSource::Secret,
        secret_ref: Some(modelplane_eks_api::SecretKeySelector {
            name: "aws".into(),
            namespace: None,
            key: "credentials".into(),
        }),
        role_arn: None,
    }
}

pub mod apiserver;
pub mod fasteks;
pub mod fastkube;
pub mod fleet;
pub mod fleet_status;
pub mod objects;
pub mod proxy;
pub mod seed;
pub mod standin;
pub mod world;
