//! Everything in the AWS account that moto (and the EKS stand-in) holds, listed kind by kind straight from moto,
//! so a test can say what a run made, whether anything was made twice, and whether a teardown left anything.
//!
//! Each resource is recorded under its kind with its ID and an identity: what makes it "the same thing" for the
//! provider (its ownership and part tags, its name where AWS makes names unique, its parent and position). Two
//! resources of one kind with one identity are a duplicate. A resource the provider made without its ownership
//! tag could not be found again after a crash, so it is reported as untagged.

#![allow(dead_code)]

use std::collections::BTreeMap;

use crate::support::world::World;

#[path = "inventory_ec2.rs"]
mod ec2;

/// The ownership tag provider-eks puts on what it makes (`eks::owned::OWNER_TAG`).
pub const OWNER_TAG: &str = "modelplane.ai/managed-resource";
/// The tag naming which part of a Network an EC2 object is (`eks::network::plan::PART_TAG`).
pub const PART_TAG: &str = "modelplane.ai/network-part";

/// kind -> resource ID -> identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    pub kinds: BTreeMap<&'static str, BTreeMap<String, String>>,
}

impl Inventory {
    pub fn add(&mut self, kind: &'static str, id: impl Into<String>, identity: impl Into<String>) {
        self.kinds
            .entry(kind)
            .or_default()
            .insert(id.into(), identity.into());
    }

    /// What is here and not in `baseline`.
    pub fn since(&self, baseline: &Inventory) -> Inventory {
        let mut new = Inventory::default();
        for (kind, items) in &self.kinds {
            for (id, identity) in items {
                let known = baseline.kinds.get(kind).is_some_and(|b| b.contains_key(id));
                if !known {
                    new.add(kind, id.clone(), identity.clone());
                }
            }
        }
        new
    }

    pub fn count(&self, kind: &str) -> usize {
        self.kinds.get(kind).map_or(0, BTreeMap::len)
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.values().all(BTreeMap::is_empty)
    }

    /// Per kind, the identities held by more than one resource.
    pub fn duplicates(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (kind, items) in &self.kinds {
            let mut by_identity: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (id, identity) in items {
                by_identity.entry(identity).or_default().push(id);
            }
            for (identity, ids) in by_identity {
                if ids.len() > 1 {
                    found.push(format!("{kind} {identity}: {ids:?}"));
                }
            }
        }
        found
    }

    /// The resources recorded as made without the ownership tag.
    pub fn untagged(&self) -> Vec<String> {
        self.kinds
            .iter()
            .flat_map(|(kind, items)| {
                items
                    .iter()
                    .filter(|(_, identity)| identity.starts_with("untagged"))
                    .map(move |(id, identity)| format!("{kind} {id} ({identity})"))
            })
            .collect()
    }

    /// One line per kind: `kind: n`.
    pub fn summary(&self) -> String {
        self.kinds
            .iter()
            .filter(|(_, items)| !items.is_empty())
            .map(|(kind, items)| format!("{kind}: {}", items.len()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Lists every kind. Panics naming the call that failed: a listing that fails proves nothing.
pub async fn take(world: &World) -> Inventory {
    let mut inv = Inventory::default();
    ec2::list(world, &mut inv).await;
    iam(world, &mut inv).await;
    efs(world, &mut inv).await;
    eks(world, &mut inv).await;
    inv
}

async fn iam(world: &World, inv: &mut Inventory) {
    let iam = world.iam();
    let roles = iam.list_roles().max_items(1000).send().await.expect("ListRoles");
    for r in roles.roles() {
        let name = r.role_name();
        inv.add("IAM role", r.arn(), name);
        let attached = iam
            .list_attached_role_policies()
            .role_name(name)
            .send()
            .await
            .expect("ListAttachedRolePolicies");
        for p in attached.attached_policies() {
            let id = format!("{name} {}", p.policy_arn().unwrap_or_default());
            inv.add("IAM role policy attachment", id.clone(), id);
        }
        let inline = iam
            .list_role_policies()
            .role_name(name)
            .send()
            .await
            .expect("ListRolePolicies");
        for p in inline.policy_names() {
            let id = format!("{name} {p}");
            inv.add("IAM inline role policy", id.clone(), id);
        }
    }
    let profiles = iam
        .list_instance_profiles()
        .max_items(1000)
        .send()
        .await
        .expect("ListInstanceProfiles");
    for p in profiles.instance_profiles() {
        inv.add("IAM instance profile", p.arn(), p.instance_profile_name());
    }
    let policies = iam
        .list_policies()
        .scope(aws_sdk_iam::types::PolicyScopeType::Local)
        .max_items(1000)
        .send()
        .await
        .expect("ListPolicies");
    for p in policies.policies() {
        inv.add(
            "IAM policy",
            p.arn().unwrap_or_default(),
            p.policy_name().unwrap_or_default(),
        );
    }
}

async fn efs(world: &World, inv: &mut Inventory) {
    let efs = world.efs();
    let systems = efs
        .describe_file_systems()
        .send()
        .await
        .expect("DescribeFileSystems");
    for fs in systems.file_systems() {
        let id = fs.file_system_id();
        let owner = fs
            .tags()
            .iter()
            .find(|t| t.key() == OWNER_TAG)
            .map(|t| t.value().to_owned());
        inv.add(
            "EFS file system",
            id,
            owner.unwrap_or_else(|| format!("untagged, token {}", fs.creation_token())),
        );
        let targets = efs
            .describe_mount_targets()
            .file_system_id(id)
            .send()
            .await
            .expect("DescribeMountTargets");
        for t in targets.mount_targets() {
            inv.add(
                "EFS mount target",
                t.mount_target_id(),
                format!("{id} in {}", t.subnet_id()),
            );
        }
    }
}

async fn eks(world: &World, inv: &mut Inventory) {
    let eks = world.eks();
    let clusters = eks.list_clusters().send().await.expect("ListClusters");
    for cluster in clusters.clusters() {
        inv.add("EKS cluster", cluster.clone(), cluster.clone());
        let groups = eks
            .list_nodegroups()
            .cluster_name(cluster)
            .send()
            .await
            .expect("ListNodegroups");
        for g in groups.nodegroups() {
            let id = format!("{cluster}/{g}");
            inv.add("EKS node group", id.clone(), id);
        }
    }
    // The stand-in's own listing: it holds add-ons and associations of clusters that are gone too.
    let (status, body) = crate::support::http("GET", &format!("{}/standin/state", world.moto.url()), "");
    assert_eq!(status, 200, "the EKS stand-in's state: {body}");
    let state: serde_json::Value = serde_json::from_str(&body).expect("the stand-in's state is JSON");
    for addon in state["addons"].as_array().into_iter().flatten() {
        let id = addon
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join("/");
        inv.add("EKS add-on", id.clone(), id);
    }
    for association in state["associations"].as_array().into_iter().flatten() {
        let parts: Vec<&str> = association
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        // EKS allows one association per service account of a cluster.
        let identity = parts.iter().take(4).copied().collect::<Vec<_>>().join("/");
        inv.add(
            "EKS pod identity association",
            parts.last().copied().unwrap_or_default(),
            identity,
        );
    }
}
