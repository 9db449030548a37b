//! `modelplane-function stage`: what a ModelCache's hydration Job runs, from the function's own image.
//!
//! It asks the Hub which files the revision holds (with each LFS file's SHA-256), downloads several at once into
//! the Hub cache layout huggingface_hub reads ([`layout`]), resumes partial files with `Range` requests, checks
//! every file against the Hub's digest before it counts, and only then puts the snapshot in place. Progress goes
//! to a ConfigMap the function observes ([`progress`]). Nothing is installed at run time.
//!
//! Exit codes: 0 staged; [`EXIT_FINAL`] for what another attempt cannot fix (401/403/404, a full volume, a
//! listing that makes no sense), which the Job's pod failure policy turns into a failed Job at once; 1 for the
//! rest (the Job starts another pod, which resumes).

use std::{
    path::PathBuf,
    sync::{Arc, Mutex, atomic::AtomicU64},
    time::Duration,
};

pub mod hub;
pub mod layout;
pub mod progress;

use hub::Hub;
use progress::{Progress, Sink, State};

/// Exit code of a failure no retry can fix.
pub const EXIT_FINAL: u8 = 3;

/// Why an attempt failed.
#[derive(Debug)]
pub enum Failure {
    /// Another attempt cannot fix it.
    Permanent(String),
    /// Another attempt may pass; the Hub may have said when.
    Transient {
        message: String,
        retry_after: Option<Duration>,
    },
}

impl Failure {
    pub fn message(&self) -> &str {
        match self {
            Self::Permanent(message) | Self::Transient { message, .. } => message,
        }
    }
}

pub struct Options {
    pub repo: String,
    pub revision: String,
    /// `HF_HUB_CACHE`: the folder holding `models--org--name`.
    pub cache_dir: PathBuf,
    /// The Hub or a mirror of its API (`HF_ENDPOINT`).
    pub endpoint: String,
    pub token: Option<String>,
    /// Files downloading at once.
    pub concurrency: usize,
    /// Attempts per request (listing, each file) before this run gives up.
    pub attempts: u32,
    /// Wait before the second attempt, doubled for each one after.
    pub backoff: Duration,
    /// The longest wait between two attempts, `Retry-After` included.
    pub max_backoff: Duration,
    pub sinks: Vec<Sink>,
    /// Time between two progress reports.
    pub report_interval: Duration,
}

/// Stages the snapshot, reporting as it goes. `Ok` with the snapshot's folder once it is in place.
pub async fn run(options: Options) -> Result<PathBuf, Failure> {
    let progress = Arc::new(Progress::default());
    let (finished, finish) = tokio::sync::oneshot::channel::<()>();
    let staging = async {
        let result = stage(&options, &progress).await;
        match &result {
            Ok(_) => {
                progress.set_state(State::Complete);
                progress.set_last_error("");
            }
            Err(failure) => {
                progress.set_last_error(failure.message());
                progress.set_state(State::Failed);
            }
        }
        let _ = finished.send(());
        result
    };
    let reporting = progress::report_until(&progress, &options.sinks, options.report_interval, async {
        let _ = finish.await;
    });
    let (result, ()) = tokio::join!(staging, reporting);
    result
}

/// How often and how patiently one request is tried.
#[derive(Clone, Copy)]
struct Retry {
    attempts: u32,
    backoff: Duration,
    max_backoff: Duration,
}

async fn stage(options: &Options, progress: &Arc<Progress>) -> Result<PathBuf, Failure> {
    let retry = Retry {
        attempts: options.attempts,
        backoff: options.backoff,
        max_backoff: options.max_backoff,
    };
    let repo = &options.repo;
    if !is_repo_id(repo) {
        return Err(Failure::Permanent(format!(
            "{repo:?} is not a repo id of the form org/name (spec.huggingFace.repo)"
        )));
    }
    if !hub::is_safe_path(&options.revision) {
        return Err(Failure::Permanent(format!(
            "{repo}: revision {:?} is not a branch, tag or commit (spec.huggingFace.revision)",
            options.revision
        )));
    }
    let hub = Arc::new(Hub::new(&options.endpoint, repo, options.token.clone())?);
    let listing = retrying(retry, progress, || hub.list(&options.revision)).await?;
    let total: u64 = listing.files.iter().map(|f| f.size).sum();
    progress.totals(&listing.commit, listing.files.len() as u64, total);
    tracing::info!(%repo, revision = %options.revision, commit = %listing.commit, files = listing.files.len(),
                   bytes = total, "listed");

    let folder = layout::repo_folder(&options.cache_dir, repo);
    let blobs = folder.join("blobs");
    tokio::fs::create_dir_all(&blobs)
        .await
        .map_err(|e| Failure::Permanent(format!("{repo}: cannot create {}: {e}", blobs.display())))?;

    // Each worker takes the next file off the queue; the largest go first, so the last minutes are not one
    // huge file alone on one connection. Workers are tasks of their own, so checking digests uses every core.
    let mut queue = listing.files.clone();
    queue.sort_by_key(|f| f.size);
    let queue = Arc::new(Mutex::new(queue));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..options.concurrency.max(1) {
        let (queue, hub, progress) = (Arc::clone(&queue), Arc::clone(&hub), Arc::clone(progress));
        let (commit, blobs) = (listing.commit.clone(), blobs.clone());
        workers.spawn(async move {
            loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let Some(file) = next else { return Ok(()) };
                let counted = AtomicU64::new(0);
                retrying(retry, &progress, || {
                    layout::fetch_blob(&hub, &commit, &file, &blobs, &progress, &counted)
                })
                .await?;
                progress.file_staged();
            }
        });
    }
    // The first final failure ends the run (dropping the set stops the other workers); their partial files stay
    // for the next attempt to resume.
    while let Some(joined) = workers.join_next().await {
        joined.map_err(|e| Failure::Permanent(format!("{repo}: a download worker panicked: {e}")))??;
    }

    let (revision, commit, files) = (
        options.revision.clone(),
        listing.commit.clone(),
        listing.files.clone(),
    );
    let in_place = folder.clone();
    tokio::task::spawn_blocking(move || layout::commit_snapshot(&in_place, &revision, &commit, &files))
        .await
        .map_err(|e| Failure::Permanent(format!("{repo}: putting the snapshot in place panicked: {e}")))?
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::StorageFull => Failure::Permanent(format!(
                "{repo}: the volume is full putting the snapshot in place; raise spec.huggingFace.sizeGiB"
            )),
            _ => Failure::Transient {
                message: format!("{repo}: putting the snapshot in place: {e}"),
                retry_after: None,
            },
        })?;
    Ok(folder.join("snapshots").join(&listing.commit))
}

/// Runs `attempt` until it passes, fails for good, or has been tried `retry.attempts` times.
async fn retrying<T, F, Fut>(retry: Retry, progress: &Progress, mut attempt: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let attempts = retry.attempts.max(1);
    let mut tried = 0;
    loop {
        tried += 1;
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(failure @ Failure::Permanent(_)) => return Err(failure),
            Err(failure) if tried >= attempts => {
                return Err(Failure::Transient {
                    message: format!("{} (gave up after {attempts} attempts)", failure.message()),
                    retry_after: None,
                });
            }
            Err(failure) => {
                hub::pause(progress, &failure, tried - 1, retry.backoff, retry.max_backoff).await;
            }
        }
    }
}

/// `org/name`, as the ModelCache's XRD admits it.
fn is_repo_id(repo: &str) -> bool {
    let part = |p: &str| {
        p.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            && p != "."
            && !p.contains("..")
    };
    matches!(repo.split_once('/'), Some((org, name)) if part(org) && part(name))
}
