//! The gRPC server Crossplane calls: both RunFunction packages, the standard health service, mutual TLS with
//! ALPN `h2` (grpc-go clients refuse a TLS server that does not negotiate it), and graceful shutdown.
//!
//! Connections are bounded so that no client can exhaust the process: at most `max_connections` are open (the
//! rest wait in the kernel's backlog, unaccepted), each must deliver its first bytes within the handshake
//! timeout, each carries at most `max_concurrent_streams` calls, and at most `max_concurrent_calls` compose at
//! once while the others wait, each for at most a quarter of its deadline before it hears the server is busy.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use prost::Message;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
};
use tonic::{
    Request, Response, Status,
    transport::{Certificate, Identity, Server, ServerTlsConfig, server::Connected},
};

use crate::{
    compose_pool::ComposePool,
    dispatch::run_function_here,
    limits::{CALL_TIMEOUT, Deadline},
    proto::{v1, v1beta1},
};

/// How the server listens.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub address: SocketAddr,
    /// Directory with `tls.crt`, `tls.key` and `ca.crt`; `None` serves plaintext.
    pub tls_certs_dir: Option<PathBuf>,
    /// Largest request accepted, in bytes.
    pub max_recv_message_size: usize,
    pub limits: ConnectionLimits,
    /// Requests smaller than this compose on the async worker that received them instead of hopping to a
    /// composing thread and back, which costs two thread wake-ups: a third of a small call's latency. Only safe
    /// where the runtime's workers have [`crate::limits::CALL_STACK_BYTES`] of stack ([`runtime`]); 0 never
    /// composes inline.
    pub compose_inline_below: usize,
}

/// Requests under this many encoded bytes compose inline on a [`runtime`] worker. A call this small composes in
/// well under a millisecond, so the worker is not held from other connections for longer than a TLS handshake.
/// It covers a settled deployment's reconcile in a fleet of 10,000 others (17 KB, 0.1 ms in process), the call
/// Crossplane makes most.
pub const COMPOSE_INLINE_BELOW: usize = 32 * 1024;

/// The runtime [`serve`] expects when [`ServeOptions::compose_inline_below`] is set: workers with a call's stack.
/// Their stacks are reserved address space, not memory in use.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(crate::limits::CALL_STACK_BYTES)
        .build()
}

/// Bounds on what clients may hold open.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once; more wait unaccepted.
    pub max_connections: usize,
    /// Calls in flight on one HTTP/2 connection (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_concurrent_streams: u32,
    /// Calls composing at once across all connections; the rest wait their turn, or hear the server is busy.
    pub max_concurrent_calls: usize,
    /// Time a new connection has to send its first bytes (the HTTP/2 preface or a TLS ClientHello) and finish a
    /// TLS handshake.
    pub handshake_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 128,
            max_concurrent_streams: 128,
            max_concurrent_calls: 16,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot read {}: {source}", path.display())]
    ReadCertificate { path: PathBuf, source: std::io::Error },
    #[error("{}: {reason}", path.display())]
    BadCertificate { path: PathBuf, reason: String },
    #[error("the certificates in {} do not work together: {reason}", dir.display())]
    TlsSetup { dir: PathBuf, reason: String },
    #[error("cannot configure TLS: {0}")]
    Tls(#[source] tonic::transport::Error),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the threads calls compose on: {0}")]
    Threads(#[source] std::io::Error),
    #[error("cannot serve on {address}: {source}")]
    Serve {
        address: SocketAddr,
        source: tonic::transport::Error,
    },
}

/// Serves v1 and v1beta1 RunFunction until SIGTERM or Ctrl-C, then lets in-flight calls finish.
pub async fn serve(options: ServeOptions) -> Result<(), ServeError> {
    let listener = TcpListener::bind(options.address)
        .await
        .map_err(|source| ServeError::Listen {
            address: options.address,
            source,
        })?;
    serve_on(listener, options).await
}

/// [`serve`] on a listener already bound (tests bind port 0 and read the address back).
pub async fn serve_on(listener: TcpListener, options: ServeOptions) -> Result<(), ServeError> {
    let limits = options.limits;
    let tls = match &options.tls_certs_dir {
        Some(dir) => Some(tls_config(dir)?.timeout(limits.handshake_timeout)),
        None => None,
    };
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<v1::function_runner_service_server::FunctionRunnerServiceServer<Runner>>()
        .await;
    health
        .set_serving::<v1beta1::function_runner_service_server::FunctionRunnerServiceServer<Runner>>()
        .await;

    let mut runner = Runner::new(limits.max_concurrent_calls).map_err(ServeError::Threads)?;
    runner.inline_below = options.compose_inline_below;
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    runner.inline_slots = Arc::new(Semaphore::new(workers.saturating_sub(1)));
    tokio::spawn(return_memory_when_idle(runner.clone()));
    let v1_service = v1::function_runner_service_server::FunctionRunnerServiceServer::new(runner.clone())
        .max_decoding_message_size(options.max_recv_message_size)
        .max_encoding_message_size(usize::MAX);
    let v1beta1_service = v1beta1::function_runner_service_server::FunctionRunnerServiceServer::new(runner)
        .max_decoding_message_size(options.max_recv_message_size)
        .max_encoding_message_size(usize::MAX);

    let mut builder = Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .max_concurrent_streams(limits.max_concurrent_streams)
        // Past Crossplane's own timeout nobody reads the answer; tonic drops the call, which cancels it.
        .timeout(CALL_TIMEOUT);
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).map_err(ServeError::Tls)?;
    }
    let address = listener.local_addr().unwrap_or(options.address);
    tracing::info!(%address, tls = options.tls_certs_dir.is_some(), "serving RunFunction");
    builder
        .layer(ResourceExhaustedLayer)
        .add_service(health_service)
        .add_service(v1_service)
        .add_service(v1beta1_service)
        .serve_with_incoming_shutdown(bounded_incoming(listener, limits), shutdown_signal())
        .await
        .map_err(|source| ServeError::Serve { address, source })?;
    tracing::info!("stopped");
    Ok(())
}

/// Accepts connections only while fewer than `max_connections` are open, each under a handshake deadline.
fn bounded_incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<BoundedConnection>> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tokio::spawn(async move {
        loop {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors or a connection reset before accept: wait, then go on.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let connection = BoundedConnection {
                stream,
                _permit: permit,
                handshake: Some(Box::pin(tokio::time::sleep(limits.handshake_timeout))),
                received: 0,
            };
            if tx.send(Ok(connection)).await.is_err() {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// The HTTP/2 client preface is 24 bytes, and a TLS ClientHello is longer: a client that has sent fewer by the
/// handshake deadline is not a client.
const HANDSHAKE_BYTES: usize = 24;

/// A connection that holds one of the server's connection permits until closed, and fails its reads if its
/// first [`HANDSHAKE_BYTES`] do not arrive in time.
struct BoundedConnection {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    handshake: Option<Pin<Box<tokio::time::Sleep>>>,
    received: usize,
}

impl AsyncRead for BoundedConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if this.handshake.is_some() {
            this.received += buf.filled().len() - before;
            if this.received >= HANDSHAKE_BYTES {
                this.handshake = None;
            } else if polled.is_pending()
                && let Some(sleep) = this.handshake.as_mut()
                && sleep.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the client sent no HTTP/2 preface or TLS handshake in time",
                )));
            }
        }
        polled
    }
}

impl AsyncWrite for BoundedConnection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Connected for BoundedConnection {
    type ConnectInfo = <TcpStream as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

/// Server certificate and key (PKCS#1 or PKCS#8 PEM, as Crossplane writes them) and the CA every client
/// certificate must chain to. Clients without a certificate are refused. Each file is checked here, so a bad
/// one is named with its reason before the server starts rather than failing every handshake later.
fn tls_config(dir: &Path) -> Result<ServerTlsConfig, ServeError> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

    // rustls picks its crypto from crate features only when exactly one provider is compiled in. Built in one
    // workspace with the AWS SDK (aws-lc), both are, so name ours: ring, as tonic's `tls-ring` feature intends.
    // An error only means a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path)
            .map(|bytes| (path.clone(), bytes))
            .map_err(|source| ServeError::ReadCertificate { path, source })
    };
    let bad = |path: &Path, reason: String| ServeError::BadCertificate {
        path: path.to_owned(),
        reason,
    };
    let certificates = |path: &Path, pem: &[u8]| {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(path, format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(bad(path, "holds no PEM certificate".into()));
        }
        Ok(certs)
    };
    let (cert_path, cert_pem) = read("tls.crt")?;
    let (key_path, key_pem) = read("tls.key")?;
    let (ca_path, ca_pem) = read("ca.crt")?;
    let chain = certificates(&cert_path, &cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| bad(&key_path, format!("holds no usable PEM private key: {e}")))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in certificates(&ca_path, &ca_pem)? {
        roots
            .add(ca)
            .map_err(|e| bad(&ca_path, format!("is not a usable CA certificate: {e}")))?;
    }
    let setup = |reason: String| ServeError::TlsSetup {
        dir: dir.to_owned(),
        reason,
    };
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .map_err(|e| setup(format!("{}: {e}", ca_path.display())))?;
    rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| setup(format!("{} and {}: {e}", cert_path.display(), key_path.display())))?;
    Ok(ServerTlsConfig::new()
        .identity(Identity::from_pem(cert_pem, key_pem))
        .client_ca_root(Certificate::from_pem(ca_pem))
        .client_auth_optional(false))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down; finishing in-flight requests");
}

/// grpc-go answers a request over its size limit with RESOURCE_EXHAUSTED; tonic says OUT_OF_RANGE. Crossplane
/// is a grpc-go client, so say what it expects.
#[derive(Debug, Clone, Copy)]
struct ResourceExhaustedLayer;

impl<S> tower::Layer<S> for ResourceExhaustedLayer {
    type Service = ResourceExhausted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ResourceExhausted(inner)
    }
}

#[derive(Debug, Clone)]
struct ResourceExhausted<S>(S);

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, Req, B> tower::Service<Req> for ResourceExhausted<S>
where
    S: tower::Service<Req, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let call = self.0.call(request);
        Box::pin(async move {
            let mut rsp = call.await?;
            let headers = rsp.headers_mut();
            let too_large = headers.get("grpc-status").is_some_and(|s| s == "11")
                && headers
                    .get("grpc-message")
                    .and_then(|m| m.to_str().ok())
                    // grpc-message is percent-encoded.
                    .is_some_and(|m| m.replace("%20", " ").contains("decoded message length too large"));
            if too_large {
                headers.insert("grpc-status", http::HeaderValue::from_static("8"));
            }
            Ok(rsp)
        })
    }
}

/// The RunFunction service for both packages.
#[derive(Debug, Clone)]
pub struct Runner {
    calls: Arc<Semaphore>,
    max_calls: usize,
    /// Calls finished since memory was last handed back.
    finished: Arc<std::sync::atomic::AtomicUsize>,
    /// Where calls compose: one big-stack thread per call slot.
    pool: ComposePool,
    /// Smaller requests compose on the async worker itself ([`ServeOptions::compose_inline_below`]), while one
    /// of [`Runner::inline_slots`] is free.
    inline_below: usize,
    /// Workers that may compose at once: all but one, so however slow a call is (up to its deadline), one worker
    /// always serves the other connections. A call that finds none free hops to its composing thread.
    inline_slots: Arc<Semaphore>,
}

impl Runner {
    /// A runner for at most `max_concurrent_calls` calls at once, with a composing thread for each.
    pub fn new(max_concurrent_calls: usize) -> std::io::Result<Self> {
        let max_calls = max_concurrent_calls.max(1);
        Ok(Self {
            calls: Arc::new(Semaphore::new(max_calls)),
            max_calls,
            finished: Arc::default(),
            pool: ComposePool::new(max_calls)?,
            inline_below: 0,
            inline_slots: Arc::new(Semaphore::new(0)),
        })
    }

    fn idle(&self) -> bool {
        self.calls.available_permits() == self.max_calls
    }
}

/// The composing threads hand back the pages their calls freed once they idle (`compose_pool`); this returns
/// what calls on the async workers freed, and the pages already freed to the allocator's shared arenas, once no
/// call is running.
async fn return_memory_when_idle(runner: Runner) {
    use std::sync::atomic::Ordering;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        if runner.idle() && runner.finished.swap(0, Ordering::Relaxed) > 0 {
            let _ = tokio::task::spawn_blocking(crate::memory::return_free_memory).await;
        }
    }
}

/// The share of a call's time it may wait for a call slot. Past it every slot has been taken for that long, so
/// the backlog is deeper than the server can work through in time: the caller hears at once that the server is
/// busy (Crossplane requeues the composite with its per-object backoff) rather than waiting out its deadline, and
/// the calls already composing keep their time.
const QUEUE_SHARE: f64 = 0.25;

/// UNAVAILABLE is gRPC's code for "retry later, with backoff"; the message says what to change if it persists.
fn busy(max_calls: usize) -> Status {
    Status::unavailable(format!(
        "busy: all {max_calls} call slots stayed taken for a quarter of the call's deadline; the call was not \
         started and can be retried. If this persists, give the function more CPU or raise MAX_CONCURRENT_CALLS"
    ))
}

fn tag_of(req: &v1::RunFunctionRequest) -> &str {
    req.meta.as_ref().map_or("", |meta| meta.tag.as_str())
}

impl Runner {
    /// Runs the call off the async workers, on its own thread under a deadline, once a call slot is free (or
    /// answers [`busy`] if none comes free in time). If tonic drops this future (the client went away, or its `grpc-timeout` or ours passed) the call is
    /// cancelled and stops at its next check.
    async fn run_logged(
        &self,
        req: v1::RunFunctionRequest,
        client_timeout: Option<Duration>,
    ) -> Result<v1::RunFunctionResponse, Status> {
        let span = tracing::info_span!("RunFunction", tag = %crate::limits::cut(tag_of(&req), 256));
        // Stop composing a little before the caller stops waiting, so it reads a FATAL that says why rather than
        // DEADLINE_EXCEEDED.
        let timeout = client_timeout.unwrap_or(CALL_TIMEOUT).min(CALL_TIMEOUT);
        let deadline = Deadline::after(timeout.mul_f64(0.9));
        // The slot goes with the work, not with this future: a cancelled call keeps it until it has stopped.
        let slot = match tokio::time::timeout(
            timeout.mul_f64(QUEUE_SHARE),
            self.calls.clone().acquire_owned(),
        )
        .await
        {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) => return Err(Status::unavailable("the server is shutting down")),
            Err(_) => {
                tracing::debug!(parent: &span, "busy: no call slot came free");
                return Err(busy(self.max_calls));
            }
        };
        if self.inline_below > 0
            && req.encoded_len() < self.inline_below
            && let Ok(_worker) = self.inline_slots.try_acquire()
        {
            let rsp = span.in_scope(|| run_function_here(req, deadline));
            drop(slot);
            self.finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(rsp);
        }
        let cancel = deadline.cancel_on_drop();
        let (done, answer) = tokio::sync::oneshot::channel();
        let queued = self.pool.run(move || {
            let _slot = slot;
            let _entered = span.enter();
            let rsp = run_function_here(req, deadline);
            tracing::debug!(results = rsp.results.len(), "responded");
            let _ = done.send(rsp);
        });
        let rsp = if queued {
            answer
                .await
                .map_err(|_| Status::internal("the call's thread failed before it answered"))
        } else {
            Err(Status::internal("no composing thread is left"))
        };
        cancel.disarm();
        self.finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rsp
    }
}

#[tonic::async_trait]
impl v1::function_runner_service_server::FunctionRunnerService for Runner {
    async fn run_function(
        &self,
        request: Request<v1::RunFunctionRequest>,
    ) -> Result<Response<v1::RunFunctionResponse>, Status> {
        let timeout = grpc_timeout(request.metadata());
        Ok(Response::new(
            self.run_logged(request.into_inner(), timeout).await?,
        ))
    }
}

/// v1beta1 is v1 under another package name, so a byte round trip converts losslessly.
#[tonic::async_trait]
impl v1beta1::function_runner_service_server::FunctionRunnerService for Runner {
    async fn run_function(
        &self,
        request: Request<v1beta1::RunFunctionRequest>,
    ) -> Result<Response<v1beta1::RunFunctionResponse>, Status> {
        let timeout = grpc_timeout(request.metadata());
        let req = reencode::<_, v1::RunFunctionRequest>(&request.into_inner())?;
        let rsp = self.run_logged(req, timeout).await?;
        Ok(Response::new(reencode(&rsp)?))
    }
}

/// The caller's deadline from its `grpc-timeout` header (`<digits><unit>`, unit one of H M S m u n).
fn grpc_timeout(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

fn reencode<From: Message, To: Message + Default>(message: &From) -> Result<To, Status> {
    To::decode(message.encode_to_vec().as_slice())
        .map_err(|e| Status::internal(format!("cannot convert between v1 and v1beta1: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit() {
        let parse = |value: &str| {
            let mut metadata = tonic::metadata::MetadataMap::new();
            metadata.insert("grpc-timeout", value.parse().unwrap());
            grpc_timeout(&metadata)
        };
        assert_eq!(parse("10S"), Some(Duration::from_secs(10)));
        assert_eq!(parse("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse("1500m"), Some(Duration::from_millis(1500)));
        assert_eq!(parse("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse("x"), None);
        assert_eq!(parse("10"), None);
        assert_eq!(grpc_timeout(&tonic::metadata::MetadataMap::new()), None);
    }
}
