//! Starts the functions under test as child processes on free loopback ports and stops them when dropped.

use std::{
    fs::File,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use bytes::Bytes;
use tonic::transport::Channel;

use crate::load::{Caller, connect};

/// How long a server may take from spawn to its first answered RunFunction (Python imports grpc and protobuf).
const STARTUP_LIMIT: Duration = Duration::from_secs(60);
const STARTUP_POLL: Duration = Duration::from_millis(100);

/// A function to start: a name for the table and the command line, which gets `--address 127.0.0.1:PORT`.
pub struct Spec {
    pub name: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// A running function. Killed and reaped on drop, so an early return never leaves one behind.
pub struct Running {
    pub name: &'static str,
    pub port: u16,
    pub log: PathBuf,
    child: Child,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `limit` for the server to exit on its own (after a signal sent by pid), without blocking the
    /// runtime: a server shutting down gracefully waits for this side to close its connections.
    pub async fn exited(&mut self, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Ok(());
            }
            tokio::time::sleep(STARTUP_POLL).await;
        }
        Err(format!("{} did not exit within {limit:?}", self.name))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A benchmark server holds no state worth a graceful stop; SIGKILL also reaches a wedged one.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An unused loopback port. Another process could take it before the server binds it; startup then fails
/// loudly rather than measuring the wrong thing.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub fn start(spec: &Spec, log_dir: &Path) -> Result<Running, String> {
    let port = free_port().map_err(|e| format!("cannot find a free port: {e}"))?;
    let log = log_dir.join(format!("{}.log", spec.name));
    let log_file = File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let stderr = log_file
        .try_clone()
        .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let child = Command::new(&spec.program)
        .args(&spec.args)
        .args(["--address", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {} ({}): {e}", spec.name, spec.program.display()))?;
    Ok(Running {
        name: spec.name,
        port,
        log,
        child,
    })
}

/// Waits until `server` answers `probe`, and returns the connection to measure on.
pub async fn ready(server: &mut Running, probe: &Bytes) -> Result<Channel, String> {
    let started = Instant::now();
    let mut last_error = String::from("no attempt yet");
    while started.elapsed() < STARTUP_LIMIT {
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!(
                "{} exited with {status} before serving; see {}",
                server.name,
                server.log.display()
            ));
        }
        match connect(server.port).await {
            Ok(channel) => match Caller::new(&channel).call(probe).await {
                Ok(_) => return Ok(channel),
                Err(status) => last_error = status.to_string(),
            },
            Err(e) => last_error = e.to_string(),
        }
        tokio::time::sleep(STARTUP_POLL).await;
    }
    Err(format!(
        "{} did not answer RunFunction within {STARTUP_LIMIT:?} ({last_error}); see {}",
        server.name,
        server.log.display()
    ))
}
