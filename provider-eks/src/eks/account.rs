//! Which AWS account a set of credentials acts in. AWS rate-limits per account and region, not per credential,
//! so every ProviderConfig of one account must share that account's buckets. A role ARN names the account
//! without a call; otherwise STS GetCallerIdentity is asked, once per set of credentials (the answer never
//! changes for them), and remembered by a hash of the credentials, never the credentials themselves.

use std::collections::HashMap;
use std::sync::Mutex;

use aws_config::SdkConfig;
use sha2::{Digest, Sha256};

/// The account of `arn:<partition>:iam::<account>:role/<name>` (or any IAM/STS ARN with an account field).
pub fn from_arn(arn: &str) -> Option<String> {
    let mut fields = arn.split(':');
    let (prefix, _partition, service, _region, account) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    let is_account = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    (prefix == "arn" && matches!(service, "iam" | "sts") && is_account).then(|| account.to_string())
}

/// A stable name for one set of credentials at one endpoint: the key under which its account is remembered.
pub fn fingerprint(endpoint: Option<&str>, credentials: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(endpoint.unwrap_or_default().as_bytes());
    hash.update([0]);
    hash.update(credentials.as_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Accounts already resolved, by credentials fingerprint.
#[derive(Debug, Default)]
pub struct Accounts {
    known: Mutex<HashMap<String, String>>,
}

impl Accounts {
    pub fn cached(&self, fingerprint: &str) -> Option<String> {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(fingerprint)
            .cloned()
    }

    fn remember(&self, fingerprint: &str, account: &str) {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fingerprint.to_string(), account.to_string());
    }

    /// The account of these credentials: from `role_arn` when given, else from STS through `sdk` (which must
    /// not be rate-limited by account yet). None when STS cannot say; the caller falls back to a narrower
    /// bucket and asks again with its next client.
    pub async fn resolve(
        &self,
        fingerprint: &str,
        role_arn: Option<&str>,
        sdk: &SdkConfig,
    ) -> Option<String> {
        if let Some(account) = self.cached(fingerprint) {
            return Some(account);
        }
        let account = match role_arn.and_then(from_arn) {
            Some(account) => account,
            None => {
                let sts = aws_sdk_sts::Client::new(sdk);
                match sts.get_caller_identity().send().await {
                    Ok(identity) => identity.account?,
                    Err(e) => {
                        tracing::warn!(error = %aws_sdk_sts::error::DisplayErrorContext(&e),
                            "cannot resolve the AWS account (STS GetCallerIdentity); rate limits are per ProviderConfig until it can");
                        return None;
                    }
                }
            }
        };
        self.remember(fingerprint, &account);
        Some(account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_arn_names_its_account() {
        assert_eq!(
            from_arn("arn:aws:iam::123456789012:role/provider").as_deref(),
            Some("123456789012")
        );
        assert_eq!(
            from_arn("arn:aws-cn:sts::210987654321:assumed-role/r/s").as_deref(),
            Some("210987654321")
        );
        assert_eq!(from_arn("arn:aws:eks:us-east-1:123456789012:cluster/x"), None);
        assert_eq!(from_arn("arn:aws:iam::12345:role/short"), None);
        assert_eq!(from_arn("not-an-arn"), None);
    }

    #[test]
    fn fingerprints_differ_by_credentials_and_endpoint_and_hide_them() {
        let a = fingerprint(None, "[default]\naws_secret_access_key = s1");
        assert_eq!(a, fingerprint(None, "[default]\naws_secret_access_key = s1"));
        assert_ne!(a, fingerprint(None, "[default]\naws_secret_access_key = s2"));
        assert_ne!(
            a,
            fingerprint(Some("http://x"), "[default]\naws_secret_access_key = s1")
        );
        assert!(!a.contains("s1"));
    }

    #[tokio::test]
    async fn a_role_arn_resolves_without_a_call_and_is_remembered() {
        let accounts = Accounts::default();
        // An SdkConfig with no HTTP client at all: any STS call would fail.
        let sdk = SdkConfig::builder().build();
        let account = accounts
            .resolve("fp", Some("arn:aws:iam::123456789012:role/p"), &sdk)
            .await;
        assert_eq!(account.as_deref(), Some("123456789012"));
        assert_eq!(accounts.cached("fp").as_deref(), Some("123456789012"));
        assert_eq!(accounts.cached("other"), None);
    }
}
