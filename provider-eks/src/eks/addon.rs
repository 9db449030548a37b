//! `Addon` <-> an EKS add-on. EKS names an add-on by (cluster, add-on name), both from the spec, so a lost
//! CreateAddon answer is found again by Describe and a repeat is refused by EKS as already existing. Version
//! and configuration change in place; the cluster or add-on name cannot, and a change to either is refused
//! naming the field (it would otherwise leave the old add-on behind).

use async_trait::async_trait;
use aws_sdk_eks::types::ResolveConflicts;
use modelplane_eks_api::{Addon, AddonObservation, AddonParameters};
use serde_json::json;

use super::clients::AwsClients;
use super::convert::{addon_phase, tags_to_set};
use super::errors::{
    IN_USE, NOT_FOUND, classify, created_on_cluster, found, gone_unless_held, health_issues,
};
use super::owned::{LastSeen, connector, owner_tags};
use super::request_token;
use crate::managed::external::{ConnectionDetails, ExternalClient, ExternalError, Observation};

connector!(AddonConnector, Addon, AddonClient, AddonObservation, mr => &mr.spec.for_provider.region);

pub struct AddonClient {
    clients: AwsClients,
    seen: LastSeen<SeenAddon>,
}

impl AddonClient {
    pub fn new(clients: AwsClients) -> Self {
        Self {
            clients,
            seen: LastSeen::default(),
        }
    }
}

/// The parts of an add-on the spec decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeenAddon {
    pub version: Option<String>,
    pub configuration: Option<String>,
    pub tags: std::collections::BTreeMap<String, String>,
}

/// Configuration values are JSON or YAML; two texts that parse to the same document are the same.
fn same_configuration(a: Option<&str>, b: Option<&str>) -> bool {
    let parse = |s: Option<&str>| -> Option<serde_json::Value> {
        let s = s.filter(|s| !s.trim().is_empty())?;
        serde_yaml::from_str(s).ok()
    };
    parse(a) == parse(b)
}

/// (version to set, configuration to set): what Update would send.
pub fn addon_drift(spec: &AddonParameters, seen: &SeenAddon) -> (Option<String>, Option<String>) {
    let version = spec
        .addon_version
        .clone()
        .filter(|v| seen.version.as_ref() != Some(v));
    let configuration = (!same_configuration(
        spec.configuration_values.as_deref(),
        seen.configuration.as_deref(),
    ))
    .then(|| spec.configuration_values.clone().unwrap_or_default());
    (version, configuration)
}

/// A spec EKS would reject, refused before any call with the field named.
pub fn validate(spec: &AddonParameters) -> Result<(), ExternalError> {
    let reject = |why: String| Err(ExternalError::Rejected(why));
    if spec.cluster_name.is_empty() {
        return reject("spec.forProvider.clusterName: required".into());
    }
    if spec.addon_name.is_empty() {
        return reject("spec.forProvider.addonName: required".into());
    }
    if let Some(values) = spec
        .configuration_values
        .as_deref()
        .filter(|v| !v.trim().is_empty())
    {
        match serde_yaml::from_str::<serde_json::Value>(values) {
            Ok(serde_json::Value::Object(_)) => {}
            Ok(_) => {
                return reject("spec.forProvider.configurationValues: must be a JSON or YAML object".into());
            }
            Err(e) => {
                return reject(format!(
                    "spec.forProvider.configurationValues: not JSON or YAML: {e}"
                ));
            }
        }
    }
    Ok(())
}

/// The (cluster, add-on) an add-on ARN names: `arn:aws:eks:<region>:<account>:addon/<cluster>/<addon>/<id>`.
fn arn_identity(arn: &str) -> Option<(&str, &str)> {
    let mut parts = arn.split(':').nth(5)?.split('/');
    let _ = parts.next()?;
    Some((parts.next()?, parts.next()?))
}

/// A recorded add-on that the spec now places elsewhere.
fn identity_change(mr: &Addon) -> Option<String> {
    let arn = mr.status.as_ref()?.at_provider.arn.as_deref()?;
    let (cluster, addon) = arn_identity(arn)?;
    let spec = &mr.spec.for_provider;
    if cluster != spec.cluster_name {
        return Some(format!(
            "spec.forProvider.clusterName: cannot move add-on {addon} from cluster {cluster} to {}; create a new \
             Addon and delete this one",
            spec.cluster_name
        ));
    }
    (addon != spec.addon_name).then(|| {
        format!(
            "spec.forProvider.addonName: cannot rename add-on {addon} to {}; create a new Addon and delete this one",
            spec.addon_name
        )
    })
}

#[async_trait]
impl ExternalClient<Addon> for AddonClient {
    type AtProvider = AddonObservation;

    async fn observe(&self, mr: &Addon) -> Result<Observation<AddonObservation>, ExternalError> {
        if let Some(why) = identity_change(mr) {
            return Err(ExternalError::Rejected(why));
        }
        let spec = &mr.spec.for_provider;
        let described = self
            .clients
            .eks
            .describe_addon()
            .cluster_name(&spec.cluster_name)
            .addon_name(&spec.addon_name)
            .send()
            .await;
        // No add-on, or no cluster (then no add-on either).
        let described = found(
            described,
            NOT_FOUND,
            &format!("cannot describe EKS add-on {}", spec.addon_name),
        )?;
        let Some(addon) = described.and_then(|out| out.addon) else {
            return Ok(Observation::missing());
        };
        let status = addon.status().map(|s| s.as_str().to_owned()).unwrap_or_default();
        let issues = health_issues(
            addon
                .health()
                .map(|h| h.issues())
                .unwrap_or_default()
                .iter()
                .map(|i| (i.code().map(|c| c.as_str()), i.message())),
        );
        let seen = SeenAddon {
            version: addon.addon_version().map(str::to_owned),
            configuration: addon.configuration_values().map(str::to_owned),
            tags: addon.tags().cloned().unwrap_or_default().into_iter().collect(),
        };
        let (version, configuration) = addon_drift(spec, &seen);
        let tags_differ = !tags_to_set(&spec.tags, &seen.tags).is_empty();
        let phase = addon_phase(&status, &issues);
        // EKS picked the version the spec left open: record it, so later upgrades are the spec's decision.
        let late_initialized = match (&spec.addon_version, &seen.version) {
            (None, Some(v)) => Some(json!({ "addonVersion": v })),
            _ => None,
        };
        self.seen.keep(seen.clone());
        Ok(Observation {
            exists: true,
            up_to_date: version.is_none() && configuration.is_none() && !tags_differ,
            readiness: phase.readiness,
            busy: phase.busy,
            late_initialized,
            at_provider: AddonObservation {
                arn: addon.addon_arn().map(str::to_owned),
                status: Some(status),
                addon_version: seen.version,
            },
            connection_details: ConnectionDetails::new(),
        })
    }

    async fn create(&self, mr: &Addon) -> Result<ConnectionDetails, ExternalError> {
        let spec = &mr.spec.for_provider;
        validate(spec)?;
        let created = self
            .clients
            .eks
            .create_addon()
            .cluster_name(&spec.cluster_name)
            .addon_name(&spec.addon_name)
            .set_addon_version(spec.addon_version.clone())
            .set_configuration_values(spec.configuration_values.clone())
            .resolve_conflicts(ResolveConflicts::Overwrite)
            .set_tags(Some(owner_tags(mr, &spec.tags).into_iter().collect()))
            .client_request_token(request_token(mr))
            .send()
            .await;
        let fields = format!(
            "spec.forProvider (addonName {:?}, addonVersion {:?})",
            spec.addon_name,
            spec.addon_version.as_deref().unwrap_or("default")
        );
        let what = format!("EKS add-on {}", spec.addon_name);
        created_on_cluster(created, &spec.cluster_name, &fields, &what)?;
        Ok(ConnectionDetails::new())
    }

    async fn update(&self, mr: &Addon, observed: &AddonObservation) -> Result<(), ExternalError> {
        let spec = &mr.spec.for_provider;
        validate(spec)?;
        let seen = self.seen.get().unwrap_or_default();
        let (version, configuration) = addon_drift(spec, &seen);
        let eks = &self.clients.eks;
        if version.is_some() || configuration.is_some() {
            eks.update_addon()
                .cluster_name(&spec.cluster_name)
                .addon_name(&spec.addon_name)
                .set_addon_version(version)
                .set_configuration_values(configuration)
                .resolve_conflicts(ResolveConflicts::Overwrite)
                .client_request_token(request_token(mr))
                .send()
                .await
                .map_err(|e| classify(&format!("cannot update EKS add-on {}", spec.addon_name), &e))?;
        }
        let tags = tags_to_set(&spec.tags, &seen.tags);
        if let (false, Some(arn)) = (tags.is_empty(), &observed.arn) {
            eks.tag_resource()
                .resource_arn(arn)
                .set_tags(Some(tags.into_iter().collect()))
                .send()
                .await
                .map_err(|e| classify(&format!("cannot tag EKS add-on {}", spec.addon_name), &e))?;
        }
        Ok(())
    }

    async fn delete(&self, mr: &Addon) -> Result<(), ExternalError> {
        let spec = &mr.spec.for_provider;
        let deleted = self
            .clients
            .eks
            .delete_addon()
            .cluster_name(&spec.cluster_name)
            .addon_name(&spec.addon_name)
            .send()
            .await;
        let busy = format!("EKS add-on {} is busy", spec.addon_name);
        let what = format!("cannot delete EKS add-on {}", spec.addon_name);
        gone_unless_held(deleted, [NOT_FOUND, IN_USE], busy, &what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> AddonParameters {
        AddonParameters {
            region: "us-east-1".into(),
            cluster_name: "demo".into(),
            addon_name: "coredns".into(),
            ..Default::default()
        }
    }

    #[test]
    fn an_open_version_is_not_drift_and_configuration_compares_as_documents() {
        let seen = SeenAddon {
            version: Some("v1.12.3-eksbuild.1".into()),
            configuration: Some("{\"replicaCount\": 3}".into()),
            ..Default::default()
        };
        let wanted = AddonParameters {
            configuration_values: Some("replicaCount: 3".into()),
            ..spec()
        };
        assert_eq!(addon_drift(&wanted, &seen), (None, None));
        let pinned = AddonParameters {
            addon_version: Some("v1.12.4-eksbuild.1".into()),
            ..spec()
        };
        assert_eq!(
            addon_drift(&pinned, &seen).0.as_deref(),
            Some("v1.12.4-eksbuild.1")
        );
        assert_eq!(addon_drift(&spec(), &seen).1.as_deref(), Some(""));
    }

    #[test]
    fn a_moved_addon_is_refused_naming_the_field() {
        let mut mr = Addon::new("a", Default::default());
        mr.spec.for_provider = AddonParameters {
            cluster_name: "other".into(),
            ..spec()
        };
        mr.status = Some(Default::default());
        if let Some(s) = mr.status.as_mut() {
            s.at_provider.arn = Some("arn:aws:eks:us-east-1:123456789012:addon/demo/coredns/abc".into());
        }
        let why = identity_change(&mr).unwrap();
        assert!(why.starts_with("spec.forProvider.clusterName"), "{why}");
    }

    #[test]
    fn configuration_that_is_not_a_document_is_refused() {
        let bad = AddonParameters {
            configuration_values: Some("[1, 2".into()),
            ..spec()
        };
        let err = validate(&bad).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("spec.forProvider.configurationValues"),
            "{err}"
        );
    }
}
