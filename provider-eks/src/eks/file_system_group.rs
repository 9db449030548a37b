//! The security group of a `FileSystem`: found by its ownership tag, made in the subnets' VPC, admitting the
//! VPC's CIDR on NFS.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, IpPermission, IpRange, ResourceType, TagSpecification};
use modelplane_eks_api::FileSystem;

use super::errors::{classify, is_code};
use super::file_system_plan::creation_token;
use super::owned::{OWNER_TAG, owner, owner_tags};
use crate::managed::external::ExternalError;

const NFS_PORT: i32 = 2049;

/// The security group this resource made, found by its ownership tag.
pub async fn find(ec2: &aws_sdk_ec2::Client, owner: &str) -> Result<Option<String>, ExternalError> {
    let out = ec2
        .describe_security_groups()
        .filters(
            Filter::builder()
                .name(format!("tag:{OWNER_TAG}"))
                .values(owner)
                .build(),
        )
        .send()
        .await
        .map_err(|e| classify("cannot describe the EFS security group", &e))?;
    Ok(out
        .security_groups()
        .iter()
        .find_map(|g| g.group_id().map(str::to_owned)))
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

/// Finds or makes the NFS security group, with its ingress rule from the VPC.
pub async fn ensure(ec2: &aws_sdk_ec2::Client, mr: &FileSystem) -> Result<String, ExternalError> {
    let owner = owner(mr);
    let (vpc, cidr) = vpc_of(ec2, &mr.spec.for_provider.subnet_ids).await?;
    let group = match find(ec2, &owner).await? {
        Some(id) => id,
        None => {
            let tags = owner_tags(mr, &mr.spec.for_provider.tags)
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
            created
                .group_id
                .ok_or_else(|| ExternalError::Transient("CreateSecurityGroup returned no id".into()))?
        }
    };
    let rule = IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(NFS_PORT)
        .to_port(NFS_PORT)
        .ip_ranges(
            IpRange::builder()
                .cidr_ip(&cidr)
                .description("NFS from the VPC")
                .build(),
        )
        .build();
    match ec2
        .authorize_security_group_ingress()
        .group_id(&group)
        .ip_permissions(rule)
        .send()
        .await
    {
        Ok(_) => {}
        Err(e) if is_code(&e, "InvalidPermission.Duplicate") => {}
        Err(e) => {
            return Err(classify(
                &format!("cannot open NFS on security group {group}"),
                &e,
            ));
        }
    }
    Ok(group)
}
