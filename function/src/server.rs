//! The gRPC server Crossplane calls: both RunFunction packages, the standard health service, mutual TLS with
//! ALPN `h2` (grpc-go clients refuse a TLS server that does not negotiate it), and graceful shutdown.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use prost::Message;
use tonic::{
    Request, Response, Status,
    transport::{Certificate, Identity, Server, ServerTlsConfig},
};

use crate::{
    dispatch::run_function,
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
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot read {path}: {source}")]
    ReadCertificate { path: PathBuf, source: std::io::Error },
    #[error("cannot configure TLS: {0}")]
    Tls(#[source] tonic::transport::Error),
    #[error("cannot serve on {address}: {source}")]
    Serve {
        address: SocketAddr,
        source: tonic::transport::Error,
    },
}

/// Serves v1 and v1beta1 RunFunction until SIGTERM or Ctrl-C, then lets in-flight calls finish.
pub async fn serve(options: ServeOptions) -> Result<(), ServeError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<v1::function_runner_service_server::FunctionRunnerServiceServer<Runner>>()
        .await;
    health
        .set_serving::<v1beta1::function_runner_service_server::FunctionRunnerServiceServer<Runner>>()
        .await;

    let v1_service = v1::function_runner_service_server::FunctionRunnerServiceServer::new(Runner)
        .max_decoding_message_size(options.max_recv_message_size)
        .max_encoding_message_size(usize::MAX);
    let v1beta1_service = v1beta1::function_runner_service_server::FunctionRunnerServiceServer::new(Runner)
        .max_decoding_message_size(options.max_recv_message_size)
        .max_encoding_message_size(usize::MAX);

    let mut builder = Server::builder().http2_keepalive_interval(Some(Duration::from_secs(30)));
    if let Some(dir) = &options.tls_certs_dir {
        builder = builder.tls_config(tls_config(dir)?).map_err(ServeError::Tls)?;
    }
    tracing::info!(address = %options.address, tls = options.tls_certs_dir.is_some(), "serving RunFunction");
    builder
        .add_service(health_service)
        .add_service(v1_service)
        .add_service(v1beta1_service)
        .serve_with_shutdown(options.address, shutdown_signal())
        .await
        .map_err(|source| ServeError::Serve {
            address: options.address,
            source,
        })?;
    tracing::info!("stopped");
    Ok(())
}

/// Server certificate and key (PKCS#1 or PKCS#8 PEM, as Crossplane writes them) and the CA every client
/// certificate must chain to. Clients without a certificate are refused.
fn tls_config(dir: &std::path::Path) -> Result<ServerTlsConfig, ServeError> {
    // rustls picks its crypto from crate features only when exactly one provider is compiled in. Built in one
    // workspace with the AWS SDK (aws-lc), both are, so name ours: ring, as tonic's `tls-ring` feature intends.
    // An error only means a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| ServeError::ReadCertificate { path, source })
    };
    Ok(ServerTlsConfig::new()
        .identity(Identity::from_pem(read("tls.crt")?, read("tls.key")?))
        .client_ca_root(Certificate::from_pem(read("ca.crt")?))
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

/// The RunFunction service for both packages.
#[derive(Debug, Clone, Copy, Default)]
pub struct Runner;

fn tag_of(req: &v1::RunFunctionRequest) -> &str {
    req.meta.as_ref().map_or("", |meta| meta.tag.as_str())
}

fn run_logged(req: v1::RunFunctionRequest) -> v1::RunFunctionResponse {
    let span = tracing::info_span!("RunFunction", tag = %tag_of(&req));
    let _entered = span.enter();
    let rsp = run_function(req);
    tracing::debug!(results = rsp.results.len(), "responded");
    rsp
}

#[tonic::async_trait]
impl v1::function_runner_service_server::FunctionRunnerService for Runner {
    async fn run_function(
        &self,
        request: Request<v1::RunFunctionRequest>,
    ) -> Result<Response<v1::RunFunctionResponse>, Status> {
        Ok(Response::new(run_logged(request.into_inner())))
    }
}

/// v1beta1 is v1 under another package name, so a byte round trip converts losslessly.
#[tonic::async_trait]
impl v1beta1::function_runner_service_server::FunctionRunnerService for Runner {
    async fn run_function(
        &self,
        request: Request<v1beta1::RunFunctionRequest>,
    ) -> Result<Response<v1beta1::RunFunctionResponse>, Status> {
        let req = reencode::<_, v1::RunFunctionRequest>(&request.into_inner())?;
        let rsp = run_logged(req);
        Ok(Response::new(reencode(&rsp)?))
    }
}

fn reencode<From: Message, To: Message + Default>(message: &From) -> Result<To, Status> {
    To::decode(message.encode_to_vec().as_slice())
        .map_err(|e| Status::internal(format!("cannot convert between v1 and v1beta1: {e}")))
}
