//! The Hugging Face Hub's HTTP API, as far as staging needs it: a revision's file listing and a file's bytes.
//!
//! `GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true` answers the commit the revision points at
//! and, per file (`siblings`), its path, size, git blob id and, for LFS files, the SHA-256 and size of the real
//! content. `GET {endpoint}/{repo}/resolve/{commit}/{path}` answers the file's bytes (after redirects to the
//! Hub's storage) and honours `Range`. The Hub names why it refused in `X-Error-Code` and `X-Error-Message`.

use std::time::Duration;

use reqwest::{Response, StatusCode, header};
use serde::Deserialize;

use super::{Failure, progress::Progress};

/// What one file of the revision is, from the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoFile {
    /// Path inside the repo, `/`-separated.
    pub path: String,
    /// Size of the content (for an LFS file, of the real content, not of its pointer).
    pub size: u64,
    pub digest: Digest,
}

/// How a file's content is checked, and the name of its blob in the cache (as huggingface_hub names it: the
/// ETag the Hub serves, which is the SHA-256 for LFS files and the git blob id for the others).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Digest {
    /// An LFS file: the SHA-256 of its content, lower-case hex.
    Sha256(String),
    /// A file kept in git itself: its blob id, the SHA-1 of `blob {size}\0` and the content.
    GitBlob(String),
}

impl RepoFile {
    /// The blob's file name under `blobs/`.
    pub fn etag(&self) -> &str {
        match &self.digest {
            Digest::Sha256(hex) | Digest::GitBlob(hex) => hex,
        }
    }
}

/// A revision, resolved.
#[derive(Debug)]
pub struct Listing {
    /// The commit the revision points at.
    pub commit: String,
    pub files: Vec<RepoFile>,
}

#[derive(Deserialize)]
struct ModelInfo {
    sha: Option<String>,
    #[serde(default)]
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
    #[serde(rename = "blobId")]
    blob_id: Option<String>,
    size: Option<u64>,
    lfs: Option<Lfs>,
}

#[derive(Deserialize)]
struct Lfs {
    sha256: String,
    size: u64,
}

/// A client of one repo on one Hub endpoint.
pub struct Hub {
    client: reqwest::Client,
    endpoint: String,
    repo: String,
    token: Option<String>,
}

/// Waiting longer than this between two attempts only delays the next one.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// A connection that sends nothing for this long is cut and the file resumed.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

impl Hub {
    /// `endpoint` without a trailing slash; proxies come from `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY`.
    pub fn new(endpoint: &str, repo: &str, token: Option<String>) -> Result<Self, Failure> {
        let builder = || {
            reqwest::Client::builder()
                .user_agent(concat!("modelplane-stage/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(CONNECT_TIMEOUT)
                .read_timeout(READ_TIMEOUT)
        };
        // The system's CA certificates (SSL_CERT_FILE or SSL_CERT_DIR name others, for a mirror with a CA of its
        // own). An image without any can still reach a plain-http mirror; https then fails naming the issuer.
        let client = builder().build().or_else(|e| {
            tracing::warn!(error = %chain(&e), "no CA certificates found: only plain http endpoints will answer");
            builder().tls_certs_only([]).build()
        });
        let client =
            client.map_err(|e| Failure::Permanent(format!("cannot build the HTTP client: {}", chain(&e))))?;
        Ok(Self {
            client,
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            repo: repo.to_owned(),
            token: token.filter(|t| !t.trim().is_empty()),
        })
    }

    pub fn repo(&self) -> &str {
        &self.repo
    }

    fn get(&self, url: String) -> reqwest::RequestBuilder {
        let request = self.client.get(url);
        // reqwest drops Authorization when a redirect leaves the Hub's host, as huggingface_hub does.
        match &self.token {
            Some(token) => request.bearer_auth(token.trim()),
            None => request,
        }
    }

    /// The files of `revision` and the commit it points at: one attempt.
    pub async fn list(&self, revision: &str) -> Result<Listing, Failure> {
        let what = format!("listing revision {revision:?}");
        let url = format!(
            "{}/api/models/{}/revision/{}?blobs=true",
            self.endpoint,
            self.repo,
            encode(revision, false)
        );
        let response = self
            .get(url)
            .send()
            .await
            .map_err(|e| self.unreachable(&what, &e))?;
        let response = self.check(response, &what, true)?;
        let body = response.bytes().await.map_err(|e| self.unreachable(&what, &e))?;
        let info: ModelInfo = serde_json::from_slice(&body).map_err(|e| Failure::Transient {
            message: format!(
                "{}: {what}: the Hub's answer is not a model listing: {e}",
                self.repo
            ),
            retry_after: None,
        })?;
        let commit = info
            .sha
            .filter(|sha| is_commit(sha))
            .ok_or_else(|| Failure::Permanent(format!("{}: {what}: the Hub named no commit", self.repo)))?;
        let files = info
            .siblings
            .into_iter()
            .map(|s| self.file(s, &what))
            .collect::<Result<_, _>>()?;
        Ok(Listing { commit, files })
    }

    fn file(&self, sibling: Sibling, what: &str) -> Result<RepoFile, Failure> {
        let path = sibling.rfilename;
        if !is_safe_path(&path) {
            return Err(Failure::Permanent(format!(
                "{}: {what}: refusing file path {path:?} (absolute, empty or with `..`)",
                self.repo
            )));
        }
        let missing = |field: &str| Failure::Permanent(format!("{}: {what}: {path}: no {field}", self.repo));
        let (size, digest) = match sibling.lfs {
            Some(lfs) if is_hex(&lfs.sha256, 64) => {
                (lfs.size, Digest::Sha256(lfs.sha256.to_ascii_lowercase()))
            }
            Some(_) => return Err(missing("LFS sha256 of 64 hex digits")),
            None => {
                let blob = sibling
                    .blob_id
                    .filter(|b| is_hex(b, 40))
                    .ok_or_else(|| missing("blobId"))?;
                (
                    sibling.size.ok_or_else(|| missing("size"))?,
                    Digest::GitBlob(blob.to_ascii_lowercase()),
                )
            }
        };
        Ok(RepoFile { path, size, digest })
    }

    /// The bytes of `file` at `commit` from byte `from` on: one attempt. The answer is `206 Partial Content`
    /// when the Hub resumed, `200` when it sent the whole file.
    pub async fn fetch(&self, commit: &str, file: &RepoFile, from: u64) -> Result<Response, Failure> {
        let what = format!("file {}", file.path);
        let url = format!(
            "{}/{}/resolve/{commit}/{}",
            self.endpoint,
            self.repo,
            encode(&file.path, true)
        );
        let mut request = self.get(url);
        if from > 0 {
            request = request.header(header::RANGE, format!("bytes={from}-"));
        }
        let response = request.send().await.map_err(|e| self.unreachable(&what, &e))?;
        if response.status() == StatusCode::RANGE_NOT_SATISFIABLE {
            return Ok(response);
        }
        self.check(response, &what, false)
    }

    fn unreachable(&self, what: &str, error: &reqwest::Error) -> Failure {
        Failure::Transient {
            message: format!("{}: {what}: {}", self.repo, chain(error)),
            retry_after: None,
        }
    }

    /// A success passes; 401, 403 and 404 are final, 429 and 5xx worth another attempt.
    fn check(&self, response: Response, what: &str, listing: bool) -> Result<Response, Failure> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let said = [header("x-error-code"), header("x-error-message")]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": ");
        let answer = match said.is_empty() {
            true => format!("the Hub answered {status}"),
            false => format!("the Hub answered {status} ({said})"),
        };
        let message = format!("{}: {what}: {answer}", self.repo);
        let hint = match (status.as_u16(), listing) {
            (401, _) => {
                "; a gated or private repo needs a token (spec.huggingFace.authSecret), and a token the Hub \
                         refuses must be replaced"
            }
            (403, _) => "; the token has no access to this repo (accept its terms on the Hub)",
            (404, true) => "; check spec.huggingFace.repo and spec.huggingFace.revision",
            (404, false) => "; the file is gone from the revision's commit",
            _ => "",
        };
        if matches!(status.as_u16(), 429 | 408) || status.is_server_error() {
            let retry_after = header(header::RETRY_AFTER.as_str())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            return Err(Failure::Transient { message, retry_after });
        }
        Err(Failure::Permanent(format!("{message}{hint}")))
    }
}

/// The error and its sources, as one line: reqwest's own text alone often says only "error sending request".
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Percent-encodes a revision (every `/` too: `refs/pr/1` is one path segment) or a file path (`/` kept).
fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(byte as char),
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `revision` is a full commit id (the only revision that never moves).
pub fn is_commit(revision: &str) -> bool {
    is_hex(revision, 40)
}

/// A relative path with no empty, `.` or `..` component, that stays inside the snapshot.
pub fn is_safe_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Records `failure` as the last error and sleeps before the next attempt: the Hub's `Retry-After` where it
/// sent one, else `backoff` doubled per attempt; never more than `max`.
pub async fn pause(progress: &Progress, failure: &Failure, attempt: u32, backoff: Duration, max: Duration) {
    progress.set_last_error(failure.message());
    let wait = match failure {
        Failure::Transient {
            retry_after: Some(after),
            ..
        } => *after,
        _ => backoff.saturating_mul(1 << attempt.min(16)),
    };
    tokio::time::sleep(wait.min(max)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_one_path_segment_and_file_paths_keep_their_slashes() {
        assert_eq!(encode("refs/pr/1", false), "refs%2Fpr%2F1");
        assert_eq!(
            encode("sub dir/model.safetensors", true),
            "sub%20dir/model.safetensors"
        );
    }

    #[test]
    fn paths_that_leave_the_snapshot_are_refused() {
        for bad in ["", "/etc/passwd", "a/../../b", "./a", "a//b", "..", "a\\b"] {
            assert!(!is_safe_path(bad), "{bad:?}");
        }
        assert!(is_safe_path("onnx/model.onnx"));
    }

    #[test]
    fn only_a_full_hex_id_is_a_commit() {
        assert!(is_commit("0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_commit("main"));
        assert!(!is_commit("0123456"));
    }
}
