//! How far staging is, and where that is reported: a ConfigMap on the cluster the Job runs on (which the
//! function observes through provider-kubernetes and turns into the ModelCache's status), a file (for tests
//! and for running `stage` by hand), and the log.
//!
//! The ConfigMap's keys are the contract with the composer (`compose::model_cache::progress`): every value a
//! string, as a ConfigMap's data is.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

pub const FILES_STAGED: &str = "filesStaged";
pub const FILES_TOTAL: &str = "filesTotal";
pub const BYTES_STAGED: &str = "bytesStaged";
pub const BYTES_TOTAL: &str = "bytesTotal";
pub const LAST_ERROR: &str = "lastError";
pub const STATE: &str = "state";
pub const COMMIT: &str = "commit";

/// Where staging is in its run.
#[derive(Clone, Copy, PartialEq, Eq, Debug, strum::IntoStaticStr)]
pub enum State {
    /// Asking the Hub what the revision holds.
    Listing,
    /// Fetching and checking files.
    Downloading,
    /// The snapshot is whole and in place.
    Complete,
    /// This run gave up; `lastError` says why.
    Failed,
}

/// Counters the downloads update as they go; read by the reporters.
pub struct Progress {
    files_total: AtomicU64,
    bytes_total: AtomicU64,
    files_staged: AtomicU64,
    bytes_staged: AtomicU64,
    text: Mutex<Text>,
}

struct Text {
    state: State,
    commit: String,
    last_error: String,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            files_total: AtomicU64::new(0),
            bytes_total: AtomicU64::new(0),
            files_staged: AtomicU64::new(0),
            bytes_staged: AtomicU64::new(0),
            text: Mutex::new(Text {
                state: State::Listing,
                commit: String::new(),
                last_error: String::new(),
            }),
        }
    }
}

impl Progress {
    pub fn totals(&self, commit: &str, files: u64, bytes: u64) {
        self.files_total.store(files, Ordering::Relaxed);
        self.bytes_total.store(bytes, Ordering::Relaxed);
        let mut text = self.text();
        text.commit = commit.to_owned();
        text.state = State::Downloading;
    }

    pub fn add_bytes(&self, bytes: u64) {
        self.bytes_staged.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Bytes counted that turned out wrong (a blob whose digest did not match, a partial file dropped).
    pub fn remove_bytes(&self, bytes: u64) {
        let _ = self
            .bytes_staged
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(bytes))
            });
    }

    pub fn file_staged(&self) {
        self.files_staged.fetch_add(1, Ordering::Relaxed);
    }

    pub fn set_last_error(&self, message: impl Into<String>) {
        let message = message.into();
        tracing::warn!(error = %message, "staging attempt failed");
        self.text().last_error = message;
    }

    pub fn set_state(&self, state: State) {
        self.text().state = state;
    }

    fn text(&self) -> std::sync::MutexGuard<'_, Text> {
        self.text.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every figure, as the ConfigMap's data.
    pub fn data(&self) -> BTreeMap<String, String> {
        let text = self.text();
        let state: &'static str = text.state.into();
        BTreeMap::from([
            (
                FILES_STAGED.to_owned(),
                self.files_staged.load(Ordering::Relaxed).to_string(),
            ),
            (
                FILES_TOTAL.to_owned(),
                self.files_total.load(Ordering::Relaxed).to_string(),
            ),
            (
                BYTES_STAGED.to_owned(),
                self.bytes_staged.load(Ordering::Relaxed).to_string(),
            ),
            (
                BYTES_TOTAL.to_owned(),
                self.bytes_total.load(Ordering::Relaxed).to_string(),
            ),
            (LAST_ERROR.to_owned(), text.last_error.clone()),
            (STATE.to_owned(), state.to_owned()),
            (COMMIT.to_owned(), text.commit.clone()),
        ])
    }
}

/// Where progress goes besides the log.
pub enum Sink {
    /// Patches the data of ConfigMap `name` in `namespace` on the cluster the process runs in.
    ConfigMap { api: Api<ConfigMap>, name: String },
    /// Replaces a JSON file (written beside it, then renamed).
    File(PathBuf),
}

impl Sink {
    /// A ConfigMap through the in-cluster config (or the kubeconfig, outside a cluster).
    pub async fn config_map(namespace: &str, name: &str) -> Result<Self, kube::Error> {
        let client = kube::Client::try_default().await?;
        Ok(Self::ConfigMap {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
        })
    }

    /// Writes `data`. Reporting never stops staging: a failure is logged and the next report tries again (the
    /// ConfigMap may not be created yet, or the API server may be away for a moment).
    pub async fn write(&self, data: &BTreeMap<String, String>) {
        match self {
            Self::ConfigMap { api, name } => {
                let patch = serde_json::json!({ "data": data });
                if let Err(e) = api
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::warn!(error = %e, configmap = %name, "cannot report progress");
                }
            }
            Self::File(path) => {
                let temporary = path.with_extension("tmp");
                let written = serde_json::to_vec(data)
                    .map_err(std::io::Error::other)
                    .and_then(|bytes| std::fs::write(&temporary, bytes))
                    .and_then(|()| std::fs::rename(&temporary, path));
                if let Err(e) = written {
                    tracing::warn!(error = %e, path = %path.display(), "cannot report progress");
                }
            }
        }
    }
}

/// Reports every `interval` until `done` resolves, then once more with the final figures.
pub async fn report_until(
    progress: &Progress,
    sinks: &[Sink],
    interval: std::time::Duration,
    done: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(done);
    loop {
        let data = progress.data();
        tracing::info!(
            files = %format!("{}/{}", data[FILES_STAGED], data[FILES_TOTAL]),
            bytes = %format!("{}/{}", data[BYTES_STAGED], data[BYTES_TOTAL]),
            state = %data[STATE],
            "staging"
        );
        for sink in sinks {
            sink.write(&data).await;
        }
        tokio::select! {
            () = &mut done => break,
            () = tokio::time::sleep(interval) => {}
        }
    }
    let data = progress.data();
    for sink in sinks {
        sink.write(&data).await;
    }
}
