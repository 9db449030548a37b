//! The Cluster's connection secret: a kubeconfig with the endpoint, the CA and an EKS bearer token, which is a
//! presigned STS GetCallerIdentity URL (what `aws eks get-token` prints). provider-kubernetes and provider-helm
//! read the `kubeconfig` key.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign};
use aws_sigv4::sign::v4;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::json;

use crate::managed::external::{ConnectionDetails, ExternalError};

/// EKS accepts a token for 15 minutes after its signing time.
const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Tokens are signed at the start of a 5-minute window, so every reconcile inside the window produces the same
/// secret (no write) and a fresh token lands at least 10 minutes before the old one expires.
const TOKEN_WINDOW: Duration = Duration::from_secs(5 * 60);
/// The header that binds a token to one cluster.
const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
const TOKEN_PREFIX: &str = "k8s-aws-v1.";

fn window_start(now: SystemTime) -> SystemTime {
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    UNIX_EPOCH + Duration::from_secs(secs - secs % TOKEN_WINDOW.as_secs())
}

/// Signs the token for `cluster` in `region` with the ProviderConfig's credentials.
pub async fn token(
    sdk: &aws_config::SdkConfig,
    cluster: &str,
    region: &str,
    now: SystemTime,
) -> Result<(String, SystemTime), ExternalError> {
    let provider = sdk.credentials_provider().ok_or_else(|| {
        ExternalError::Rejected("cannot sign EKS token: no AWS credentials configured".into())
    })?;
    let credentials = provider
        .provide_credentials()
        .await
        .map_err(|e| ExternalError::Transient(format!("cannot load AWS credentials: {e}")))?;
    let identity: aws_smithy_runtime_api::client::identity::Identity = credentials.into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(60));
    let signed_at = window_start(now);
    let params: aws_sigv4::http_request::SigningParams<'_> = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(signed_at)
        .settings(settings)
        .build()
        .map_err(|e| ExternalError::Rejected(format!("cannot sign EKS token: {e}")))?
        .into();
    let url = format!("https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15");
    let request = SignableRequest::new(
        "GET",
        url.as_str(),
        [(CLUSTER_ID_HEADER, cluster)].into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| ExternalError::Rejected(format!("cannot sign EKS token: {e}")))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| ExternalError::Rejected(format!("cannot sign EKS token: {e}")))?
        .into_parts();
    let mut presigned = url;
    for (name, value) in instructions.params() {
        presigned.push('&');
        presigned.push_str(name);
        presigned.push('=');
        presigned.push_str(&urlencode(value));
    }
    let token = format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(presigned));
    Ok((token, signed_at + TOKEN_LIFETIME))
}

fn urlencode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The connection details: `kubeconfig`, plus `endpoint`, `clusterCA` (PEM) and `token` on their own.
/// `ca_data` is base64 PEM, exactly as EKS returns it and as kubeconfig wants it.
pub fn connection_details(
    cluster: &str,
    endpoint: &str,
    ca_data: &str,
    token: &str,
    expires: SystemTime,
) -> ConnectionDetails {
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": cluster, "cluster": { "server": endpoint, "certificate-authority-data": ca_data } }],
        "users": [{ "name": cluster, "user": { "token": token } }],
        "contexts": [{ "name": cluster, "context": { "cluster": cluster, "user": cluster } }],
        "current-context": cluster,
    });
    let expires_at = k8s_openapi::jiff::Timestamp::try_from(expires)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let mut details = ConnectionDetails::new();
    details.insert(
        "kubeconfig".into(),
        serde_yaml::to_string(&kubeconfig)
            .unwrap_or_default()
            .into_bytes(),
    );
    details.insert("endpoint".into(), endpoint.as_bytes().to_vec());
    details.insert("clusterCA".into(), STANDARD.decode(ca_data).unwrap_or_default());
    details.insert("token".into(), token.as_bytes().to_vec());
    details.insert("tokenExpiration".into(), expires_at.into_bytes());
    details
}

#[cfg(test)]
mod tests {
    use aws_credential_types::Credentials;
    use aws_credential_types::provider::SharedCredentialsProvider;

    use super::*;

    fn sdk() -> aws_config::SdkConfig {
        aws_config::SdkConfig::builder()
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "AKIDEXAMPLE",
                "very-secret-key",
                None,
                None,
                "test",
            )))
            .build()
    }

    fn decode(token: &str) -> String {
        let raw = token.strip_prefix(TOKEN_PREFIX).unwrap();
        String::from_utf8(URL_SAFE_NO_PAD.decode(raw).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn the_token_is_a_presigned_get_caller_identity_bound_to_the_cluster() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_123);
        let (token, expires) = token(&sdk(), "demo", "eu-west-1", now).await.unwrap();
        let url = decode(&token);
        assert!(url.starts_with(
            "https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"
        ));
        assert!(url.contains("X-Amz-Credential=AKIDEXAMPLE%2F"), "{url}");
        assert!(url.contains("X-Amz-SignedHeaders=host%3Bx-k8s-aws-id"), "{url}");
        assert!(url.contains("X-Amz-Expires=60"), "{url}");
        assert!(!url.contains("very-secret-key"));
        assert_eq!(expires, window_start(now) + TOKEN_LIFETIME);
    }

    #[tokio::test]
    async fn tokens_are_stable_within_a_window_and_renewed_after_it() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let a = token(&sdk(), "demo", "us-east-1", t0).await.unwrap().0;
        let b = token(&sdk(), "demo", "us-east-1", t0 + Duration::from_secs(200))
            .await
            .unwrap()
            .0;
        let c = token(&sdk(), "demo", "us-east-1", t0 + TOKEN_WINDOW)
            .await
            .unwrap()
            .0;
        let other = token(&sdk(), "other", "us-east-1", t0).await.unwrap().0;
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, other);
    }

    #[test]
    fn the_kubeconfig_names_endpoint_ca_and_token() {
        let ca = STANDARD.encode("-----BEGIN CERTIFICATE-----\n");
        let details = connection_details(
            "demo",
            "https://x.eks.amazonaws.com",
            &ca,
            "k8s-aws-v1.abc",
            UNIX_EPOCH,
        );
        let kubeconfig: serde_json::Value = serde_yaml::from_slice(&details["kubeconfig"]).unwrap();
        assert_eq!(
            kubeconfig["clusters"][0]["cluster"]["server"],
            "https://x.eks.amazonaws.com"
        );
        assert_eq!(
            kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"],
            ca.as_str()
        );
        assert_eq!(kubeconfig["users"][0]["user"]["token"], "k8s-aws-v1.abc");
        assert_eq!(kubeconfig["current-context"], "demo");
        assert_eq!(details["clusterCA"], b"-----BEGIN CERTIFICATE-----\n");
    }
}
