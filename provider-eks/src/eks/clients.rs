//! AWS clients for a managed resource, built from its ProviderConfig or ClusterProviderConfig and cached per
//! config version and region, so steady-state reconciles reuse one connection pool and credential cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;

use aws_config::profile::ProfileFileCredentialsProvider;
use aws_config::timeout::TimeoutConfig;
use aws_config::web_identity_token::{StaticConfiguration, WebIdentityTokenCredentialsProvider};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_runtime::env_config::file::{EnvConfigFileKind, EnvConfigFiles};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};
use modelplane_eks_api::{
    ClusterProviderConfig, CredentialsSource, ProviderConfig, ProviderConfigReference, ProviderConfigSpec,
};

use super::account::{self, Accounts};
use super::throttle::{Limits, NameOperation, Throttle};
use crate::managed::external::ExternalError;

/// Where Kubernetes projects the service-account token that web identity exchanges for AWS credentials.
const WEB_IDENTITY_TOKEN_FILE: &str = "/var/run/secrets/eks.amazonaws.com/serviceaccount/token";
const SESSION_NAME: &str = "modelplane-provider-eks";
/// One AWS call may not hold a reconcile longer than this: a hung connection becomes a retryable error instead
/// of a controller worker stuck forever. The SDK's own retries (with backoff) happen inside the overall limit.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// What a call is allowed beside its wait for a token within one attempt.
const CALL_MARGIN: Duration = Duration::from_secs(2);
const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The SDK's default HTTPS stack (hyper 1, rustls with aws-lc), as the service clients would build it.
fn default_https_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
        .build_https()
}

#[derive(Clone, Debug)]
pub struct AwsClients {
    pub eks: aws_sdk_eks::Client,
    pub ec2: aws_sdk_ec2::Client,
    pub iam: aws_sdk_iam::Client,
    pub efs: aws_sdk_efs::Client,
    pub sdk: SdkConfig,
    /// The AWS account whose rate-limit buckets these clients share (or, while STS cannot say, the config's name).
    pub account: String,
    /// Subnet id -> availability zone, learned from EC2 DescribeSubnets; never changes for a subnet.
    pub subnet_zones: Arc<Mutex<HashMap<String, String>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    kind: String,
    namespace: String,
    name: String,
    resource_version: String,
    region: String,
}

/// Resolves ProviderConfigs and keeps one [`AwsClients`] per (config version, region).
pub struct ClientCache {
    kube: kube::Client,
    /// One cell per key, filled once: when a fleet activates, thousands of reconciles ask for the same clients
    /// in the same instant, and without it each would build its own (an SDK config, an HTTPS stack, an STS
    /// call) before the first was cached. The first caller builds; the others wait for it.
    clients: Mutex<HashMap<CacheKey, Arc<OnceCell<AwsClients>>>>,
    /// Every AWS call of the process goes through these shared rate limits.
    throttle: Arc<Throttle>,
    accounts: Accounts,
}

impl ClientCache {
    /// A cache whose AWS calls use the default rate limits.
    pub fn new(kube: kube::Client) -> Self {
        Self::with_limits(kube, Limits::default())
    }

    pub fn with_limits(kube: kube::Client, limits: Limits) -> Self {
        Self {
            kube,
            clients: Mutex::default(),
            // A call queued past the attempt timeout, less what the call itself takes, would only time out.
            throttle: Arc::new(Throttle::new(limits, ATTEMPT_TIMEOUT.saturating_sub(CALL_MARGIN))),
            accounts: Accounts::default(),
        }
    }

    /// The rate limits every client of this cache shares.
    pub fn throttle(&self) -> &Arc<Throttle> {
        &self.throttle
    }

    pub fn kube(&self) -> &kube::Client {
        &self.kube
    }

    pub async fn clients(
        &self,
        reference: &ProviderConfigReference,
        namespace: &str,
        region: &str,
    ) -> Result<AwsClients, ExternalError> {
        let (spec, resource_version, config_namespace) = self.provider_config(reference, namespace).await?;
        let key = CacheKey {
            kind: reference.kind.clone(),
            namespace: config_namespace.clone().unwrap_or_default(),
            name: reference.name.clone(),
            resource_version,
            region: region.to_string(),
        };
        let cell = {
            let mut cache = self.clients.lock().unwrap_or_else(|p| p.into_inner());
            if !cache.contains_key(&key) {
                // Older versions of the same config are dead entries now.
                cache.retain(|k, _| {
                    !(k.kind == key.kind && k.namespace == key.namespace && k.name == key.name)
                });
            }
            cache.entry(key.clone()).or_default().clone()
        };
        // A failed build leaves the cell empty: the next caller tries again.
        cell.get_or_try_init(|| self.build(&spec, config_namespace.as_deref(), &key))
            .await
            .cloned()
    }

    async fn build(
        &self,
        spec: &ProviderConfigSpec,
        config_namespace: Option<&str>,
        key: &CacheKey,
    ) -> Result<AwsClients, ExternalError> {
        let region = key.region.as_str();
        let (sdk, credentials) = self.sdk_config(spec, config_namespace, region).await?;
        // AWS limits per account and region: every ProviderConfig of one account shares its buckets.
        let fingerprint = account::fingerprint(spec.endpoint.as_deref(), &credentials);
        let account = self
            .accounts
            .resolve(&fingerprint, spec.credentials.role_arn.as_deref(), &sdk)
            .await
            .unwrap_or_else(|| format!("{}/{}/{}", key.kind, key.namespace, key.name));
        // The loader leaves the HTTP client unset (each service client would pick its default), so the default
        // is made here: without one, calls would bypass the buckets.
        let inner = sdk.http_client().unwrap_or_else(default_https_client);
        let sdk = sdk
            .to_builder()
            .http_client(self.throttle.client(inner, &account, region))
            .build();
        let eks = aws_sdk_eks::config::Builder::from(&sdk)
            .interceptor(NameOperation)
            .build();
        let ec2 = aws_sdk_ec2::config::Builder::from(&sdk)
            .interceptor(NameOperation)
            .build();
        let iam = aws_sdk_iam::config::Builder::from(&sdk)
            .interceptor(NameOperation)
            .build();
        let efs = aws_sdk_efs::config::Builder::from(&sdk)
            .interceptor(NameOperation)
            .build();
        Ok(AwsClients {
            eks: aws_sdk_eks::Client::from_conf(eks),
            ec2: aws_sdk_ec2::Client::from_conf(ec2),
            iam: aws_sdk_iam::Client::from_conf(iam),
            efs: aws_sdk_efs::Client::from_conf(efs),
            sdk,
            account,
            subnet_zones: Arc::default(),
        })
    }

    async fn provider_config(
        &self,
        reference: &ProviderConfigReference,
        namespace: &str,
    ) -> Result<(ProviderConfigSpec, String, Option<String>), ExternalError> {
        let missing = |e: kube::Error| {
            ExternalError::Waiting(format!("cannot get {} {}: {e}", reference.kind, reference.name))
        };
        match reference.kind.as_str() {
            "ProviderConfig" => {
                let pc = Api::<ProviderConfig>::namespaced(self.kube.clone(), namespace)
                    .get(&reference.name)
                    .await
                    .map_err(missing)?;
                Ok((
                    pc.spec.clone(),
                    pc.resource_version().unwrap_or_default(),
                    Some(namespace.to_string()),
                ))
            }
            "ClusterProviderConfig" => {
                let pc = Api::<ClusterProviderConfig>::all(self.kube.clone())
                    .get(&reference.name)
                    .await
                    .map_err(missing)?;
                Ok((
                    pc.spec.spec.clone(),
                    pc.resource_version().unwrap_or_default(),
                    None,
                ))
            }
            other => Err(ExternalError::Rejected(format!(
                "spec.providerConfigRef.kind: {other:?} is neither ProviderConfig nor ClusterProviderConfig"
            ))),
        }
    }

    async fn sdk_config(
        &self,
        spec: &ProviderConfigSpec,
        config_namespace: Option<&str>,
        region: &str,
    ) -> Result<(SdkConfig, String), ExternalError> {
        let timeouts = TimeoutConfig::builder()
            .operation_attempt_timeout(ATTEMPT_TIMEOUT)
            .operation_timeout(OPERATION_TIMEOUT)
            .build();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(region.to_string()))
            .timeout_config(timeouts);
        if let Some(endpoint) = &spec.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        // What identifies the credentials (hashed before use, never logged).
        let credentials;
        match spec.credentials.source {
            CredentialsSource::Default => credentials = "default".to_string(),
            CredentialsSource::Secret => {
                let contents = self.credentials_secret(spec, config_namespace).await?;
                credentials = contents.clone();
                let files = EnvConfigFiles::builder()
                    .with_contents(EnvConfigFileKind::Credentials, contents)
                    .build();
                let provider = ProfileFileCredentialsProvider::builder()
                    .profile_files(files)
                    .build();
                loader = loader.credentials_provider(provider);
            }
            CredentialsSource::WebIdentity => {
                let role_arn = spec.credentials.role_arn.clone().ok_or_else(|| {
                    ExternalError::Rejected(
                        "spec.credentials.roleArn: required for source WebIdentity".into(),
                    )
                })?;
                credentials = format!("web-identity {role_arn}");
                let provider = WebIdentityTokenCredentialsProvider::builder()
                    .static_configuration(StaticConfiguration {
                        web_identity_token_file: WEB_IDENTITY_TOKEN_FILE.into(),
                        role_arn,
                        session_name: SESSION_NAME.into(),
                    })
                    .build();
                loader = loader.credentials_provider(provider);
            }
        }
        Ok((loader.load().await, credentials))
    }

    /// Reads the shared-credentials INI text. Never logged: it holds the secret access key.
    async fn credentials_secret(
        &self,
        spec: &ProviderConfigSpec,
        config_namespace: Option<&str>,
    ) -> Result<String, ExternalError> {
        let selector = spec.credentials.secret_ref.as_ref().ok_or_else(|| {
            ExternalError::Rejected("spec.credentials.secretRef: required for source Secret".into())
        })?;
        let namespace = selector
            .namespace
            .as_deref()
            .or(config_namespace)
            .ok_or_else(|| {
                ExternalError::Rejected(
                    "spec.credentials.secretRef.namespace: required in a ClusterProviderConfig".into(),
                )
            })?;
        let secret = Api::<Secret>::namespaced(self.kube.clone(), namespace)
            .get(&selector.name)
            .await
            .map_err(|e| {
                ExternalError::Waiting(format!("cannot get credentials secret {}: {e}", selector.name))
            })?;
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&selector.key))
            .ok_or_else(|| {
                ExternalError::Rejected(format!(
                    "credentials secret {} has no key {}",
                    selector.name, selector.key
                ))
            })?;
        String::from_utf8(bytes.0.clone()).map_err(|_| {
            ExternalError::Rejected(format!(
                "credentials secret {} key {} is not UTF-8",
                selector.name, selector.key
            ))
        })
    }
}
