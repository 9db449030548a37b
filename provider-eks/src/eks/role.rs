//! `Role` <-> an IAM role, its managed-policy attachments and its one inline policy. The role is named by the
//! external name (IAM names are chosen by the caller), so a Create whose answer was lost is found again by name;
//! attachments are made right after the role and, should a crash come between, by the next Update. Everything
//! on a role can be changed in place (the trust policy too), so no drift is refused.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use modelplane_eks_api::{Role, RoleObservation, RoleParameters};
use serde_json::{Value, json};

use super::clients::AwsClients;
use super::convert::{aws_tags, tags_to_set};
use super::errors::{NO_SUCH_ENTITY, adopted, classify, found, gone, gone_unless_held, one_by_one};
use super::external_name;
use super::owned::{IAM_REGION, LastSeen, connector, owner_tags};
use crate::managed::conditions::Readiness;
use crate::managed::external::{ConnectionDetails, ExternalClient, ExternalError, Observation};

/// The name of the role's one inline policy.
pub const INLINE_POLICY_NAME: &str = "modelplane";
/// IAM's limits on a role name (and what it may contain).
const MAX_ROLE_NAME: usize = 64;

connector!(RoleConnector, Role, RoleClient, RoleObservation, mr => IAM_REGION);

pub struct RoleClient {
    clients: AwsClients,
    /// What the last Observe saw, so Update needs no second round of reads.
    observed: LastSeen<ObservedRole>,
}

impl RoleClient {
    pub fn new(clients: AwsClients) -> Self {
        Self {
            clients,
            observed: LastSeen::default(),
        }
    }
}

/// The parts of a role the spec decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObservedRole {
    pub trust: Option<Value>,
    pub attached: BTreeSet<String>,
    pub inline: Option<Value>,
    pub tags: BTreeMap<String, String>,
}

/// What Update must do to bring a role to its spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleDrift {
    pub trust: Option<String>,
    pub attach: Vec<String>,
    pub detach: Vec<String>,
    /// Some(Some(doc)): put the inline policy; Some(None): delete it.
    pub inline: Option<Option<String>>,
    pub tags: BTreeMap<String, String>,
}

impl RoleDrift {
    pub fn is_empty(&self) -> bool {
        *self == RoleDrift::default()
    }
}

/// The trust policy that lets `service` assume the role. EKS Pod Identity also tags the session.
pub fn trust_policy(service: &str) -> Value {
    let actions: Vec<&str> = if service == "pods.eks.amazonaws.com" {
        vec!["sts:AssumeRole", "sts:TagSession"]
    } else {
        vec!["sts:AssumeRole"]
    };
    json!({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}],
    })
}

/// A spec IAM would reject, refused before any call with the field named.
pub fn validate(name: &str, spec: &RoleParameters) -> Result<(), ExternalError> {
    let reject = |why: String| Err(ExternalError::Rejected(why));
    let name_ok = |c: char| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c);
    if name.is_empty() || name.len() > MAX_ROLE_NAME || !name.chars().all(name_ok) {
        return reject(format!(
            "metadata.name: IAM role name {name:?} must be 1-{MAX_ROLE_NAME} characters of letters, digits and \
             +=,.@_- (set the crossplane.io/external-name annotation to choose another)"
        ));
    }
    let service_ok = |s: &str| {
        s.ends_with(".amazonaws.com")
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    };
    if !service_ok(&spec.assumed_by) {
        return reject(format!(
            "spec.forProvider.assumedBy: {:?} is not an AWS service principal (e.g. eks.amazonaws.com)",
            spec.assumed_by
        ));
    }
    for (i, arn) in spec.policy_arns.iter().enumerate() {
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let ok = parts.len() == 6
            && parts[0] == "arn"
            && parts[1].starts_with("aws")
            && parts[2] == "iam"
            && parts[5].starts_with("policy/");
        if !ok {
            return reject(format!(
                "spec.forProvider.policyArns[{i}]: {arn:?} is not an IAM policy ARN"
            ));
        }
    }
    if let Some(doc) = &spec.inline_policy {
        match serde_json::from_str::<Value>(doc) {
            Ok(Value::Object(_)) => {}
            Ok(_) => return reject("spec.forProvider.inlinePolicy: must be a JSON object".into()),
            Err(e) => return reject(format!("spec.forProvider.inlinePolicy: not JSON: {e}")),
        }
    }
    Ok(())
}

/// IAM returns policy documents URL-encoded.
fn decode_document(encoded: &str) -> Option<Value> {
    let text = percent_encoding::percent_decode_str(encoded).decode_utf8().ok()?;
    serde_json::from_str(&text).ok()
}

pub fn role_drift(spec: &RoleParameters, observed: &ObservedRole) -> RoleDrift {
    let trust = trust_policy(&spec.assumed_by);
    let wanted: BTreeSet<String> = spec.policy_arns.iter().cloned().collect();
    let inline_wanted = spec
        .inline_policy
        .as_deref()
        .and_then(|d| serde_json::from_str::<Value>(d).ok());
    let inline = match (&inline_wanted, &observed.inline) {
        (Some(want), Some(have)) if want == have => None,
        (Some(_), _) => spec.inline_policy.clone().map(Some),
        (None, Some(_)) => Some(None),
        (None, None) => None,
    };
    RoleDrift {
        trust: (observed.trust.as_ref() != Some(&trust)).then(|| trust.to_string()),
        attach: wanted.difference(&observed.attached).cloned().collect(),
        detach: observed.attached.difference(&wanted).cloned().collect(),
        inline,
        tags: tags_to_set(&spec.tags, &observed.tags),
    }
}

fn iam_tags(pairs: Vec<(String, String)>) -> Result<Vec<aws_sdk_iam::types::Tag>, ExternalError> {
    aws_tags(pairs, |k, v| {
        aws_sdk_iam::types::Tag::builder().key(k).value(v).build()
    })
}

impl RoleClient {
    async fn attached(&self, name: &str) -> Result<BTreeSet<String>, ExternalError> {
        let out = self
            .clients
            .iam
            .list_attached_role_policies()
            .role_name(name)
            .max_items(100)
            .send()
            .await
            .map_err(|e| classify(&format!("cannot list policies of IAM role {name}"), &e))?;
        Ok(out
            .attached_policies()
            .iter()
            .filter_map(|p| p.policy_arn().map(str::to_owned))
            .collect())
    }

    async fn inline(&self, name: &str) -> Result<Option<Value>, ExternalError> {
        let got = self
            .clients
            .iam
            .get_role_policy()
            .role_name(name)
            .policy_name(INLINE_POLICY_NAME)
            .send()
            .await;
        let got = found(
            got,
            NO_SUCH_ENTITY,
            &format!("cannot get inline policy of IAM role {name}"),
        )?;
        Ok(got.and_then(|out| decode_document(out.policy_document())))
    }

    async fn apply(&self, name: &str, drift: &RoleDrift) -> Result<(), ExternalError> {
        let iam = &self.clients.iam;
        if let Some(trust) = &drift.trust {
            iam.update_assume_role_policy()
                .role_name(name)
                .policy_document(trust)
                .send()
                .await
                .map_err(|e| classify(&format!("cannot update trust policy of IAM role {name}"), &e))?;
        }
        one_by_one(
            &drift.attach,
            None,
            |arn| format!("cannot attach {arn} to IAM role {name}"),
            |arn| iam.attach_role_policy().role_name(name).policy_arn(arn).send(),
        )
        .await?;
        self.detach(name, &drift.detach).await?;
        match &drift.inline {
            Some(Some(doc)) => {
                iam.put_role_policy()
                    .role_name(name)
                    .policy_name(INLINE_POLICY_NAME)
                    .policy_document(doc)
                    .send()
                    .await
                    .map_err(|e| classify(&format!("cannot put inline policy of IAM role {name}"), &e))?;
            }
            Some(None) => self.delete_inline(name, INLINE_POLICY_NAME).await?,
            None => {}
        }
        if !drift.tags.is_empty() {
            iam.tag_role()
                .role_name(name)
                .set_tags(Some(iam_tags(drift.tags.clone().into_iter().collect())?))
                .send()
                .await
                .map_err(|e| classify(&format!("cannot tag IAM role {name}"), &e))?;
        }
        Ok(())
    }

    async fn detach<'a>(
        &self,
        name: &str,
        arns: impl IntoIterator<Item = &'a String>,
    ) -> Result<(), ExternalError> {
        let iam = &self.clients.iam;
        one_by_one(
            arns,
            Some(NO_SUCH_ENTITY),
            |arn| format!("cannot detach {arn} from IAM role {name}"),
            |arn| iam.detach_role_policy().role_name(name).policy_arn(arn).send(),
        )
        .await
    }

    async fn delete_inline(&self, name: &str, policy: &str) -> Result<(), ExternalError> {
        let deleted = self
            .clients
            .iam
            .delete_role_policy()
            .role_name(name)
            .policy_name(policy)
            .send()
            .await;
        gone(
            deleted,
            NO_SUCH_ENTITY,
            &format!("cannot delete inline policy {policy} of IAM role {name}"),
        )
    }
}

#[async_trait]
impl ExternalClient<Role> for RoleClient {
    type AtProvider = RoleObservation;

    async fn observe(&self, mr: &Role) -> Result<Observation<RoleObservation>, ExternalError> {
        let name = external_name(mr);
        let got = self.clients.iam.get_role().role_name(&name).send().await;
        let got = found(got, NO_SUCH_ENTITY, &format!("cannot get IAM role {name}"))?;
        let Some(role) = got.and_then(|out| out.role) else {
            return Ok(Observation::missing());
        };
        let observed = ObservedRole {
            trust: role.assume_role_policy_document().and_then(decode_document),
            attached: self.attached(&name).await?,
            inline: self.inline(&name).await?,
            tags: role
                .tags()
                .iter()
                .map(|t| (t.key().to_owned(), t.value().to_owned()))
                .collect(),
        };
        let drift = role_drift(&mr.spec.for_provider, &observed);
        let readiness = if drift.attach.is_empty() {
            Readiness::Available
        } else {
            Readiness::Unavailable(format!("policies not attached yet: {}", drift.attach.join(", ")))
        };
        let at_provider = RoleObservation {
            arn: Some(role.arn().to_owned()),
            role_id: Some(role.role_id().to_owned()),
            attached_policy_arns: observed.attached.iter().cloned().collect(),
        };
        self.observed.keep(observed);
        Ok(Observation {
            up_to_date: drift.is_empty(),
            readiness,
            ..Observation::available(at_provider)
        })
    }

    async fn create(&self, mr: &Role) -> Result<ConnectionDetails, ExternalError> {
        let name = external_name(mr);
        let spec = &mr.spec.for_provider;
        validate(&name, spec)?;
        let created = self
            .clients
            .iam
            .create_role()
            .role_name(&name)
            .assume_role_policy_document(trust_policy(&spec.assumed_by).to_string())
            .set_tags(Some(iam_tags(owner_tags(mr, &spec.tags))?))
            .send()
            .await;
        // Made by an earlier attempt whose answer was lost: finish it below.
        adopted(
            created,
            "EntityAlreadyExists",
            &format!("cannot create IAM role {name}"),
        )?;
        let everything = RoleDrift {
            attach: spec.policy_arns.clone(),
            inline: spec.inline_policy.clone().map(Some),
            ..RoleDrift::default()
        };
        self.apply(&name, &everything).await?;
        Ok(ConnectionDetails::new())
    }

    async fn update(&self, mr: &Role, _: &RoleObservation) -> Result<(), ExternalError> {
        let name = external_name(mr);
        validate(&name, &mr.spec.for_provider)?;
        let observed = self.observed.get().unwrap_or_default();
        self.apply(&name, &role_drift(&mr.spec.for_provider, &observed))
            .await
    }

    async fn delete(&self, mr: &Role) -> Result<(), ExternalError> {
        let name = external_name(mr);
        let iam = &self.clients.iam;
        // IAM deletes a role only once nothing is attached to it.
        let attached = match self.attached(&name).await {
            Ok(a) => a,
            Err(ExternalError::Rejected(m)) if m.contains(NO_SUCH_ENTITY) => return Ok(()),
            Err(e) => return Err(e),
        };
        self.detach(&name, &attached).await?;
        let inline = iam
            .list_role_policies()
            .role_name(&name)
            .max_items(100)
            .send()
            .await
            .map_err(|e| classify(&format!("cannot list inline policies of IAM role {name}"), &e))?;
        for policy in inline.policy_names() {
            self.delete_inline(&name, policy).await?;
        }
        let deleted = iam.delete_role().role_name(&name).send().await;
        // An instance profile (EKS makes one per node group) or a session still holds it.
        let held = format!("IAM role {name} is still in use (an instance profile or a node group holds it)");
        gone_unless_held(
            deleted,
            [NO_SUCH_ENTITY, "DeleteConflict"],
            held,
            &format!("cannot delete IAM role {name}"),
        )
    }
}

#[cfg(test)]
#[path = "role_tests.rs"]
mod tests;
