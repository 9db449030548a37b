//! The Hub cache layout huggingface_hub reads, written so that nothing in it looks complete before it is.
//!
//! ```text
//! models--org--name/
//!   blobs/<etag>                 content, named by its SHA-256 (LFS) or git blob id; only ever a checked whole
//!   blobs/<etag>.incomplete      a download under way, resumed from its length
//!   snapshots/<commit>/<path>    relative symlinks to ../../blobs/<etag>; the directory appears whole, by rename
//!   refs/<revision>              the commit, for a revision that is not one; written last
//! ```
//!
//! An engine resolving the repo with `HF_HUB_OFFLINE=1` finds either nothing or the whole snapshot.

use std::{
    io::{ErrorKind, Read},
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

use reqwest::StatusCode;
use ring::digest;
use tokio::io::AsyncWriteExt;

use super::{
    Failure,
    hub::{Digest, Hub, RepoFile},
    progress::Progress,
};

/// Staging's own directory inside the repo's folder: snapshots are assembled here, then renamed into
/// `snapshots/`. At the same depth as `snapshots/`, so the relative links stay right through the rename.
const ASSEMBLY: &str = ".modelplane-staging";
/// Buffered writes: one system call per this many bytes, not per network read.
const WRITE_BUFFER: usize = 1 << 20;

/// The repo's folder under the cache: `models--org--name`.
pub fn repo_folder(cache_dir: &Path, repo: &str) -> PathBuf {
    cache_dir.join(format!("models--{}", repo.replace('/', "--")))
}

/// The checker of one file's content.
enum Hasher {
    Sha256(digest::Context),
    GitBlob(digest::Context),
}

impl Hasher {
    fn new(file: &RepoFile) -> Self {
        match file.digest {
            Digest::Sha256(_) => Self::Sha256(digest::Context::new(&digest::SHA256)),
            Digest::GitBlob(_) => {
                // Git names a blob by the SHA-1 of a header and the content: integrity, not security.
                let mut context = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
                context.update(format!("blob {}\0", file.size).as_bytes());
                Self::GitBlob(context)
            }
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(c) | Self::GitBlob(c) => c.update(bytes),
        }
    }

    fn hex(self) -> String {
        let (Self::Sha256(c) | Self::GitBlob(c)) = self;
        c.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn name(&self) -> &'static str {
        match self {
            Self::Sha256(_) => "SHA-256",
            Self::GitBlob(_) => "git blob id",
        }
    }
}

/// An I/O failure while writing: a full volume is final and says so, anything else may pass.
fn write_failure(repo: &str, path: &str, what: &str, error: &std::io::Error) -> Failure {
    if error.kind() == ErrorKind::StorageFull || error.kind() == ErrorKind::QuotaExceeded {
        return Failure::Permanent(format!(
            "{repo}: file {path}: the volume is full ({what}: {error}); raise spec.huggingFace.sizeGiB to hold \
             the whole snapshot"
        ));
    }
    Failure::Transient {
        message: format!("{repo}: file {path}: {what}: {error}"),
        retry_after: None,
    }
}

/// One attempt at making `blobs/<etag>` whole and checked. `counted` is how many of the file's bytes
/// `progress` holds, kept right across attempts.
pub async fn fetch_blob(
    hub: &Hub,
    commit: &str,
    file: &RepoFile,
    blobs: &Path,
    progress: &Progress,
    counted: &AtomicU64,
) -> Result<(), Failure> {
    let repo = hub.repo();
    let fail = |what: &str, e: &std::io::Error| write_failure(repo, &file.path, what, e);
    let blob = blobs.join(file.etag());
    let partial = blobs.join(format!("{}.incomplete", file.etag()));
    let recount = |now: u64, counted: &AtomicU64| {
        let before = counted.swap(now, Ordering::Relaxed);
        if now >= before {
            progress.add_bytes(now - before);
        } else {
            progress.remove_bytes(before - now);
        }
    };
    // A blob is only ever renamed into place after its check: one of the right size is done.
    if tokio::fs::metadata(&blob)
        .await
        .is_ok_and(|m| m.len() == file.size)
    {
        recount(file.size, counted);
        return Ok(());
    }

    let mut have = tokio::fs::metadata(&partial).await.map_or(0, |m| m.len());
    if have > file.size {
        remove(&partial).await;
        have = 0;
    }
    // Resuming means checking the bytes already there as well.
    let (mut hasher, read) = hash_prefix(file, partial.clone(), have).await;
    have = read;
    recount(have, counted);

    if have < file.size {
        let mut response = hub.fetch(commit, file, have).await?;
        if response.status() == StatusCode::RANGE_NOT_SATISFIABLE {
            remove(&partial).await;
            recount(0, counted);
            return Err(Failure::Transient {
                message: format!(
                    "{repo}: file {}: the Hub refused to resume at byte {have}",
                    file.path
                ),
                retry_after: None,
            });
        }
        let resumed =
            response.status() == StatusCode::PARTIAL_CONTENT && content_range_starts_at(&response, have);
        if !resumed {
            // The whole file came back: start over.
            have = 0;
            hasher = Hasher::new(file);
            recount(0, counted);
        }
        let handle = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(resumed)
            .truncate(!resumed)
            .open(&partial)
            .await
            .map_err(|e| fail("opening the partial file", &e))?;
        let mut out = tokio::io::BufWriter::with_capacity(WRITE_BUFFER, handle);
        let cut = loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break None,
                Err(e) => break Some(e),
            };
            if have + chunk.len() as u64 > file.size {
                drop(out);
                remove(&partial).await;
                recount(0, counted);
                return Err(Failure::Transient {
                    message: format!(
                        "{repo}: file {}: the Hub sent more than its {} bytes",
                        file.path, file.size
                    ),
                    retry_after: None,
                });
            }
            hasher.update(&chunk);
            out.write_all(&chunk).await.map_err(|e| fail("writing", &e))?;
            have += chunk.len() as u64;
            recount(have, counted);
        };
        out.flush().await.map_err(|e| fail("writing", &e))?;
        out.get_ref().sync_all().await.map_err(|e| fail("syncing", &e))?;
        if have < file.size {
            let why = cut.map_or_else(|| "the connection closed".to_owned(), |e| e.to_string());
            return Err(Failure::Transient {
                message: format!(
                    "{repo}: file {}: {why} after {have} of {} bytes; resuming",
                    file.path, file.size
                ),
                retry_after: None,
            });
        }
    }

    let kind = hasher.name();
    let got = hasher.hex();
    if got != file.etag() {
        remove(&partial).await;
        recount(0, counted);
        return Err(Failure::Transient {
            message: format!(
                "{repo}: file {}: {kind} {got} does not match the Hub's {}; removed, fetching it again",
                file.path,
                file.etag()
            ),
            retry_after: None,
        });
    }
    tokio::fs::rename(&partial, &blob)
        .await
        .map_err(|e| fail("renaming the checked blob into place", &e))
}

/// Whether a `206` answer starts where the partial file ends (`Content-Range: bytes <from>-...`).
fn content_range_starts_at(response: &reqwest::Response, from: u64) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes "))
        .and_then(|v| v.split('-').next())
        .and_then(|start| start.trim().parse::<u64>().ok())
        == Some(from)
}

/// Hashes the first `len` bytes of `path`; answers how many it could read (fewer if the file is shorter).
async fn hash_prefix(file: &RepoFile, path: PathBuf, len: u64) -> (Hasher, u64) {
    let mut hasher = Hasher::new(file);
    if len == 0 {
        return (hasher, 0);
    }
    tokio::task::spawn_blocking(move || {
        let mut read = 0u64;
        if let Ok(mut handle) = std::fs::File::open(&path) {
            let mut buffer = vec![0u8; WRITE_BUFFER];
            while read < len {
                let want = usize::try_from((len - read).min(WRITE_BUFFER as u64)).unwrap_or(WRITE_BUFFER);
                match handle.read(&mut buffer[..want]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        hasher.update(&buffer[..n]);
                        read += n as u64;
                    }
                }
            }
        }
        (hasher, read)
    })
    .await
    .unwrap_or_else(|_| (Hasher::new(file), 0))
}

async fn remove(path: &Path) {
    let _ = tokio::fs::remove_file(path).await;
}

/// Puts the snapshot of `commit` in place once every blob is: assembled beside `snapshots/`, renamed in
/// whole, then `refs/<revision>` written (for a revision that is not the commit itself).
pub fn commit_snapshot(
    folder: &Path,
    revision: &str,
    commit: &str,
    files: &[RepoFile],
) -> std::io::Result<()> {
    let snapshot = folder.join("snapshots").join(commit);
    if !is_whole(&snapshot, files) {
        let assembly = folder.join(ASSEMBLY).join(commit);
        if assembly.exists() {
            std::fs::remove_dir_all(&assembly)?;
        }
        for file in files {
            let link = assembly.join(&file.path);
            if let Some(parent) = link.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // From snapshots/<commit>/<path>: one `..` per directory of the path, two more to the repo folder.
            let up = "../".repeat(file.path.matches('/').count() + 2);
            std::os::unix::fs::symlink(format!("{up}blobs/{}", file.etag()), &link)?;
        }
        std::fs::create_dir_all(folder.join("snapshots"))?;
        if snapshot.exists() {
            // Left by an earlier downloader, and not whole: nothing may resolve it.
            std::fs::remove_dir_all(&snapshot)?;
        }
        std::fs::rename(&assembly, &snapshot)?;
        let _ = std::fs::remove_dir(folder.join(ASSEMBLY));
    }
    if revision != commit {
        let reference = folder.join("refs").join(revision);
        if let Some(parent) = reference.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let temporary = folder
            .join("refs")
            .join(format!(".{}.tmp", revision.replace('/', "--")));
        std::fs::write(&temporary, commit)?;
        std::fs::rename(&temporary, &reference)?;
    }
    Ok(())
}

/// Whether every file of the listing resolves, through the snapshot, to a blob of the right size.
pub fn is_whole(snapshot: &Path, files: &[RepoFile]) -> bool {
    snapshot.is_dir()
        && files
            .iter()
            .all(|f| std::fs::metadata(snapshot.join(&f.path)).is_ok_and(|m| m.len() == f.size))
}
