//! The real kube-apiserver (with etcd and kube-controller-manager, for owner-reference garbage collection) that
//! the end-to-end tests run on, from `tests/controlplane/controlplane.sh`.
//!
//! - Inside `controlplane.sh run -- cargo test ...` (as `tests/run.sh` runs them), or after
//!   `eval "$(controlplane.sh up)"`: `CONTROLPLANE_API` says a control plane runs and `KUBECONFIG` reaches it.
//! - Otherwise the first test of the process starts one with the script (`run`, in a state directory of its own)
//!   and it lives as long as the test process: the script's command waits for this PID to end, then the script
//!   stops every process it started.
//!
//! Either way, a control plane that cannot be had fails the test, naming why; nothing is skipped.
//!
//! The provider watches every namespace and the cluster-wide ManagedResourceDefinitions and CRDs, so two
//! providers on one API server would reconcile each other's resources. Tests on a shared server therefore take
//! `Exclusive` (a file lock, so it also holds across test processes) for their whole run; each still works in a
//! namespace of its own, so what a failed test leaves behind cannot pass for the next one's.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use super::repo_root;

pub struct ApiServer {
    pub kubeconfig: PathBuf,
}

static SHARED: OnceLock<Result<ApiServer, String>> = OnceLock::new();

/// The API server of this test process (started on first use when none is given).
pub fn shared() -> &'static ApiServer {
    match SHARED.get_or_init(find_or_start) {
        Ok(server) => server,
        Err(why) => panic!("no real kube-apiserver for the end-to-end tests: {why}"),
    }
}

fn find_or_start() -> Result<ApiServer, String> {
    if std::env::var_os("CONTROLPLANE_API").is_some() {
        let kubeconfig = std::env::var_os("KUBECONFIG").map(PathBuf::from).ok_or(
            "CONTROLPLANE_API is set but KUBECONFIG is not (eval the output of `controlplane.sh up`)",
        )?;
        if !kubeconfig.is_file() {
            return Err(format!(
                "KUBECONFIG {} does not exist: is the control plane still up?",
                kubeconfig.display()
            ));
        }
        return Ok(ApiServer { kubeconfig });
    }
    start_own()
}

/// `controlplane.sh run -- CMD`, CMD printing the kubeconfig's path and then waiting for this process to end.
fn start_own() -> Result<ApiServer, String> {
    let script = repo_root().join("tests/controlplane/controlplane.sh");
    remove_stale_states();
    let base = std::env::temp_dir().join(format!("provider-eks-controlplane-{}", std::process::id()));
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let log_path = base.join("controlplane.log");
    let log = File::create(&log_path).map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    eprintln!(
        "starting a control plane with {} (CONTROLPLANE_API is not set); its log: {}",
        script.display(),
        log_path.display()
    );
    let mut child = Command::new("bash")
        .arg(&script)
        .args(["run", "--", "bash", "-c"])
        // tail's own output must not be the pipe: GNU tail -f exits once the pipe's reader has gone.
        .arg(r#"echo "ready $KUBECONFIG"; exec tail --pid="$0" -f /dev/null >/dev/null"#)
        .arg(std::process::id().to_string())
        .env("CONTROLPLANE_STATE", base.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout from controlplane.sh")?;
    // The script bounds every build and start itself, so this read ends: with the line, or at its exit.
    let mut line = String::new();
    let _ = BufReader::new(stdout).read_line(&mut line);
    match line.trim().strip_prefix("ready ") {
        Some(path) => Ok(ApiServer {
            kubeconfig: PathBuf::from(path),
        }),
        None => {
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            Err(format!(
                "controlplane.sh did not start ({status}); the end of its log:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ))
        }
    }
}

/// The state directories (etcd's data, certificates, logs) of earlier test processes that have ended and whose
/// control planes are down (the script removes its PID list last): the script leaves the directory, so the next run
/// clears it. A directory whose PID list remains is left alone, as `down` may still be reading it.
fn remove_stale_states() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("provider-eks-controlplane-") else {
            continue;
        };
        let ended = !std::path::Path::new(&format!("/proc/{pid}")).exists();
        if ended && !entry.path().join("state/pids").exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Holds the shared API server for one test: released when dropped (also when the test panics or its process
/// dies). A `flock` child holds the lock while its stdin, which only this value holds, stays open.
pub struct Exclusive {
    holder: Child,
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        drop(self.holder.stdin.take());
        let _ = self.holder.wait();
    }
}

impl ApiServer {
    /// Blocks until no other test (of any process) uses this API server.
    pub fn exclusive(&self) -> Exclusive {
        let path = self.kubeconfig.with_file_name("provider-eks-e2e.lock");
        let mut holder = Command::new("flock")
            .arg(&path)
            .args(["sh", "-c", "echo locked; exec cat >/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run flock (util-linux) for {}: {e}", path.display()));
        let mut line = String::new();
        let _ = BufReader::new(holder.stdout.take().unwrap()).read_line(&mut line);
        assert_eq!(line.trim(), "locked", "flock could not lock {}", path.display());
        Exclusive { holder }
    }

    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", self.kubeconfig.display()));
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("bad kubeconfig {}: {e}", self.kubeconfig.display()));
        kube::Client::try_from(config).unwrap()
    }
}
