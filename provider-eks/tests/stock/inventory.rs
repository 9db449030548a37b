//! Everything in the AWS account that moto (and the EKS stand-in) holds, listed kind by kind straight from moto,
//! so a test can say what a run made, whether anything was made twice, and whether a teardown left anything.
//!
//! Each resource is recorded under its kind with its ID and an identity: what makes it "the same thing" for the
//! provider (its ownership and part tags, its name where AWS makes names unique, its parent and position). Two
//! resources of one kind with one identity are a duplicate. A resource the provider made without its ownership
//! tag could not be found again after a crash, so it is reported as untagged.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::Tag;

use crate::support::world::World;

/// The ownership tag provider-eks puts on what it makes (`eks::owned::OWNER_TAG`).
const OWNER_TAG: &str = "modelplane.ai/managed-resource";
const PART_TAG: &str = "modelplane.ai/network-part";
/// moto's ID for the AWS account.
const ACCOUNT: &str = "123456789012";

/// kind -> resource ID -> identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    pub kinds: BTreeMap<&'static str, BTreeMap<String, String>>,
}

impl Inventory {
    fn add(&mut self, kind: &'static str, id: impl Into<String>, identity: impl Into<String>) {
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

fn tag<'a>(tags: &'a [Tag], key: &str) -> Option<&'a str> {
    tags.iter().find(|t| t.key() == Some(key)).and_then(|t| t.value())
}

/// Ownership and part tags, or "untagged".
fn tagged_identity(tags: &[Tag]) -> String {
    match tag(tags, OWNER_TAG) {
        Some(owner) => format!(
            "{owner} {} {}",
            tag(tags, PART_TAG).unwrap_or_default(),
            tag(tags, "Name").unwrap_or_default()
        ),
        None => "untagged".into(),
    }
}

/// Lists every kind. Panics naming the call that failed: a listing that fails proves nothing.
pub async fn take(world: &World) -> Inventory {
    let mut inv = Inventory::default();
    ec2(world, &mut inv).await;
    iam(world, &mut inv).await;
    efs(world, &mut inv).await;
    eks(world, &mut inv).await;
    inv
}

async fn ec2(world: &World, inv: &mut Inventory) {
    let ec2 = world.ec2();
    let vpcs = ec2.describe_vpcs().send().await.expect("DescribeVpcs");
    for v in vpcs.vpcs() {
        let identity = if v.is_default() == Some(true) {
            "default".to_string()
        } else {
            tagged_identity(v.tags())
        };
        inv.add("vpc", v.vpc_id().unwrap_or_default(), identity);
    }
    let subnets = ec2.describe_subnets().send().await.expect("DescribeSubnets");
    for s in subnets.subnets() {
        let identity = if s.default_for_az() == Some(true) {
            format!("default {}", s.availability_zone().unwrap_or_default())
        } else {
            tagged_identity(s.tags())
        };
        inv.add("subnet", s.subnet_id().unwrap_or_default(), identity);
    }
    let gateways = ec2
        .describe_internet_gateways()
        .send()
        .await
        .expect("DescribeInternetGateways");
    for g in gateways.internet_gateways() {
        let default_vpc = g.attachments().iter().any(|a| {
            vpcs.vpcs()
                .iter()
                .any(|v| v.is_default() == Some(true) && v.vpc_id() == a.vpc_id())
        });
        let identity = if default_vpc {
            "default".to_string()
        } else {
            tagged_identity(g.tags())
        };
        inv.add(
            "internet gateway",
            g.internet_gateway_id().unwrap_or_default(),
            identity,
        );
    }
    let nats = ec2
        .describe_nat_gateways()
        .send()
        .await
        .expect("DescribeNatGateways");
    for n in nats.nat_gateways() {
        let state = n.state().map(|s| s.as_str()).unwrap_or_default();
        if state != "deleted" {
            inv.add(
                "NAT gateway",
                n.nat_gateway_id().unwrap_or_default(),
                tagged_identity(n.tags()),
            );
        }
    }
    let addresses = ec2.describe_addresses().send().await.expect("DescribeAddresses");
    for a in addresses.addresses() {
        inv.add(
            "elastic IP",
            a.allocation_id().unwrap_or_default(),
            tagged_identity(a.tags()),
        );
    }
    let tables = ec2
        .describe_route_tables()
        .send()
        .await
        .expect("DescribeRouteTables");
    for t in tables.route_tables() {
        let main = t.associations().iter().any(|a| a.main() == Some(true));
        let identity = if main {
            format!("main of {}", t.vpc_id().unwrap_or_default())
        } else {
            tagged_identity(t.tags())
        };
        inv.add("route table", t.route_table_id().unwrap_or_default(), identity);
    }
    let groups = ec2
        .describe_security_groups()
        .send()
        .await
        .expect("DescribeSecurityGroups");
    for g in groups.security_groups() {
        // EC2 makes a group name unique within its VPC; the VPC's own group is named "default".
        let identity = format!(
            "{} in {}",
            g.group_name().unwrap_or_default(),
            g.vpc_id().unwrap_or_default()
        );
        inv.add("security group", g.group_id().unwrap_or_default(), identity);
    }
    let acls = ec2
        .describe_network_acls()
        .send()
        .await
        .expect("DescribeNetworkAcls");
    // moto keeps a VPC's default network ACL after DeleteVpc and a NAT gateway's interface after
    // DeleteNatGateway (and lets the subnet go while it holds one); AWS removes both with their owner. Listed
    // only while the VPC and the subnet they live in exist.
    let live_vpcs: BTreeSet<&str> = vpcs.vpcs().iter().filter_map(|v| v.vpc_id()).collect();
    let live_subnets: BTreeSet<&str> = subnets.subnets().iter().filter_map(|s| s.subnet_id()).collect();
    let acls = acls
        .network_acls()
        .iter()
        .filter(|a| a.vpc_id().is_some_and(|v| live_vpcs.contains(v)));
    for a in acls {
        let identity = if a.is_default() == Some(true) {
            format!("default of {}", a.vpc_id().unwrap_or_default())
        } else {
            tagged_identity(a.tags())
        };
        inv.add("network ACL", a.network_acl_id().unwrap_or_default(), identity);
    }
    let interfaces = ec2
        .describe_network_interfaces()
        .send()
        .await
        .expect("DescribeNetworkInterfaces");
    let interfaces = interfaces
        .network_interfaces()
        .iter()
        .filter(|i| i.subnet_id().is_some_and(|s| live_subnets.contains(s)));
    for i in interfaces {
        // Made by the services that use them (EFS mount targets, NAT gateways): one per subnet and user.
        let identity = format!(
            "{} in {}",
            i.description().unwrap_or_default(),
            i.subnet_id().unwrap_or_default()
        );
        inv.add(
            "network interface",
            i.network_interface_id().unwrap_or_default(),
            identity,
        );
    }
    let templates = ec2
        .describe_launch_templates()
        .send()
        .await
        .expect("DescribeLaunchTemplates");
    for t in templates.launch_templates() {
        inv.add(
            "launch template",
            t.launch_template_id().unwrap_or_default(),
            t.launch_template_name().unwrap_or_default(),
        );
    }
    // Placement groups (made for EFA pools only, none in a stock cluster) are not listed: moto does not
    // implement DescribePlacementGroups.
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

/// The account's IAM ARN prefix, for checks on role ARNs.
pub fn role_arn(name: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:role/{name}")
}
