//! The security group of a `FileSystem`: found by its ownership tag, made in the subnets' VPC, admitting NFS
//! from the spec's node security groups (or, when it names none, from the VPC's CIDR). The rule's sources are
//! read on every full Observe (a steady one skips them, see `full_look`), so a source added or revoked outside
//! the provider is put back.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    IpPermission, IpRange, ResourceType, SecurityGroup, TagSpecification, UserIdGroupPair,
};
use modelplane_eks_api::FileSystem;

use super::plan::creation_token;
use crate::eks::errors::{RULE_EXISTS, adopted, classify, gone, is_code};
use crate::eks::owned::{owned_by, owner, owner_tags};
use crate::managed::external::ExternalError;

const NFS_PORT: i32 = 2049;

/// Who the group admits on NFS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NfsSources {
    pub cidrs: Vec<String>,
    pub groups: Vec<String>,
}

impl NfsSources {
    fn of(group: &SecurityGroup) -> Self {
        let mut sources = Self::default();
        let nfs = group.ip_permissions().iter().filter(|p| {
            p.ip_protocol() == Some("tcp") && p.from_port() == Some(NFS_PORT) && p.to_port() == Some(NFS_PORT)
        });
        for permission in nfs {
            sources.cidrs.extend(
                permission
                    .ip_ranges()
                    .iter()
                    .filter_map(|r| r.cidr_ip().map(str::to_owned)),
            );
            sources.groups.extend(
                permission
                    .user_id_group_pairs()
                    .iter()
                    .filter_map(|g| g.group_id().map(str::to_owned)),
            );
        }
        sources.cidrs.sort();
        sources.groups.sort();
        sources
    }

    /// Whether these are the sources the spec asks for: exactly its groups, or (naming none) one CIDR, which
    /// is the VPC's as long as the subnets' VPC is unchanged (a subnet change is refused or re-planned by the
    /// mount targets, not here).
    pub fn as_wanted(&self, groups: &[String]) -> bool {
        let mut wanted = groups.to_vec();
        wanted.sort();
        wanted.dedup();
        if wanted.is_empty() {
            self.groups.is_empty() && self.cidrs.len() == 1
        } else {
            self.cidrs.is_empty() && self.groups == wanted
        }
    }
}

/// The security group this resource made, found by its ownership tag, with its NFS sources.
pub async fn find(
    ec2: &aws_sdk_ec2::Client,
    owner: &str,
) -> Result<Option<(String, NfsSources)>, ExternalError> {
    let out = ec2
        .describe_security_groups()
        .filters(owned_by(owner))
        .send()
        .await
        .map_err(|e| classify("cannot describe the EFS security group", &e))?;
    Ok(out
        .security_groups()
        .iter()
        .find_map(|g| Some((g.group_id()?.to_owned(), NfsSources::of(g)))))
}

/// The VPC and its CIDR, from the spec's subnets, which must share one VPC and sit in distinct zones.
async fn vpc_of(ec2: &aws_sdk_ec2::Client, subnet_ids: &[String]) -> Result<(String, String), ExternalError> {
    if subnet_ids.is_empty() {
        return Err(ExternalError::Rejected(
            "spec.forProvider.subnetIds: at least one subnet is required".into(),
        ));
    }
    let described = ec2
        .describe_subnets()
        .set_subnet_ids(Some(subnet_ids.to_vec()))
        .send()
        .await;
    let subnets = match described {
        Ok(out) => out.subnets.unwrap_or_default(),
        Err(e) if is_code(&e, "InvalidSubnetID.NotFound") || is_code(&e, "InvalidSubnetID.Malformed") => {
            return Err(ExternalError::Rejected(format!(
                "spec.forProvider.subnetIds: {}",
                classify("cannot describe subnets", &e)
            )));
        }
        Err(e) => return Err(classify("cannot describe the file system's subnets", &e)),
    };
    let mut zones: BTreeMap<String, String> = BTreeMap::new();
    let mut vpcs: Vec<String> = Vec::new();
    for s in &subnets {
        let (id, zone) = (
            s.subnet_id().unwrap_or_default(),
            s.availability_zone().unwrap_or_default(),
        );
        if let Some(other) = zones.insert(zone.to_owned(), id.to_owned()) {
            return Err(ExternalError::Rejected(format!(
                "spec.forProvider.subnetIds: {other} and {id} are both in {zone}; EFS allows one mount target per zone"
            )));
        }
        if let Some(vpc) = s.vpc_id()
            && !vpcs.iter().any(|v| v == vpc)
        {
            vpcs.push(vpc.to_owned());
        }
    }
    let [vpc] = vpcs.as_slice() else {
        return Err(ExternalError::Rejected(format!(
            "spec.forProvider.subnetIds: the subnets must share one VPC, found {}",
            vpcs.join(", ")
        )));
    };
    let out = ec2
        .describe_vpcs()
        .vpc_ids(vpc)
        .send()
        .await
        .map_err(|e| classify(&format!("cannot describe VPC {vpc}"), &e))?;
    let cidr = out
        .vpcs()
        .first()
        .and_then(|v| v.cidr_block())
        .ok_or_else(|| ExternalError::Transient(format!("VPC {vpc} has no CIDR block")))?;
    Ok((vpc.clone(), cidr.to_owned()))
}

fn nfs(ranges: Vec<IpRange>, groups: Vec<UserIdGroupPair>) -> IpPermission {
    IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(NFS_PORT)
        .to_port(NFS_PORT)
        .set_ip_ranges((!ranges.is_empty()).then_some(ranges))
        .set_user_id_group_pairs((!groups.is_empty()).then_some(groups))
        .build()
}

fn permission(cidrs: &[String], groups: &[String], why: &str) -> IpPermission {
    nfs(
        cidrs
            .iter()
            .map(|c| IpRange::builder().cidr_ip(c).description(why).build())
            .collect(),
        // No description on group sources: a revoke must name a source exactly as it was authorized, and
        // the revoke of a stale source does not know what text it was given.
        groups
            .iter()
            .map(|g| UserIdGroupPair::builder().group_id(g).build())
            .collect(),
    )
}

/// Finds or makes the NFS security group and makes its NFS rule admit exactly what the spec asks for:
/// missing sources are authorized first, stale ones revoked after, so the nodes never lose access midway.
pub async fn ensure(
    ec2: &aws_sdk_ec2::Client,
    mr: &FileSystem,
    seen: Option<(String, NfsSources)>,
) -> Result<String, ExternalError> {
    let owner = owner(mr);
    let spec = &mr.spec.for_provider;
    let (vpc, cidr) = vpc_of(ec2, &spec.subnet_ids).await?;
    let seen = match seen {
        Some(seen) => Some(seen),
        None => find(ec2, &owner).await?,
    };
    let (group, current) = match seen {
        Some(seen) => seen,
        None => {
            let tags = owner_tags(mr, &spec.tags)
                .into_iter()
                .map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build())
                .collect();
            let created = ec2
                .create_security_group()
                .group_name(creation_token(&owner))
                .description("NFS to the EFS mount targets of a Modelplane cluster")
                .vpc_id(&vpc)
                .tag_specifications(
                    TagSpecification::builder()
                        .resource_type(ResourceType::SecurityGroup)
                        .set_tags(Some(tags))
                        .build(),
                )
                .send()
                .await
                .map_err(|e| classify("cannot create the EFS security group", &e))?;
            let id = created
                .group_id
                .ok_or_else(|| ExternalError::Transient("CreateSecurityGroup returned no id".into()))?;
            (id, NfsSources::default())
        }
    };
    let mut wanted = NfsSources {
        cidrs: Vec::new(),
        groups: spec.nfs_security_group_ids.clone(),
    };
    wanted.groups.sort();
    wanted.groups.dedup();
    if wanted.groups.is_empty() {
        wanted.cidrs.push(cidr);
    }
    let missing = |want: &[String], have: &[String]| -> Vec<String> {
        want.iter().filter(|w| !have.contains(w)).cloned().collect()
    };
    let (add_cidrs, add_groups) = (
        missing(&wanted.cidrs, &current.cidrs),
        missing(&wanted.groups, &current.groups),
    );
    if !(add_cidrs.is_empty() && add_groups.is_empty()) {
        let authorized = ec2
            .authorize_security_group_ingress()
            .group_id(&group)
            .ip_permissions(permission(
                &add_cidrs,
                &add_groups,
                "NFS from the cluster's nodes",
            ))
            .send()
            .await;
        if let Err(e) = &authorized
            && is_code(e, "InvalidGroup.NotFound")
        {
            return Err(ExternalError::Rejected(format!(
                "spec.forProvider.nfsSecurityGroupIds: {}",
                classify("a security group does not exist", e)
            )));
        }
        adopted(
            authorized,
            RULE_EXISTS,
            &format!("cannot open NFS on security group {group}"),
        )?;
    }
    let (stale_cidrs, stale_groups) = (
        missing(&current.cidrs, &wanted.cidrs),
        missing(&current.groups, &wanted.groups),
    );
    if !(stale_cidrs.is_empty() && stale_groups.is_empty()) {
        let revoked = ec2
            .revoke_security_group_ingress()
            .group_id(&group)
            .ip_permissions(nfs(
                stale_cidrs
                    .iter()
                    .map(|c| IpRange::builder().cidr_ip(c).build())
                    .collect(),
                stale_groups
                    .iter()
                    .map(|g| UserIdGroupPair::builder().group_id(g).build())
                    .collect(),
            ))
            .send()
            .await;
        let what = format!("cannot close NFS on security group {group}");
        gone(revoked, "InvalidPermission.NotFound", &what)?;
    }
    Ok(group)
}
