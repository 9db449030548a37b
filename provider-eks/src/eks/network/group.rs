//! The security group of a `Network`: one group the EKS control plane's interfaces, the nodes and (as the
//! source of its NFS rule) the EFS mount targets' group refer to. It admits all traffic between its own
//! members, which is what nodes and control plane need between each other and what EFA requires; egress is
//! EC2's default (everything). Found like every part of the network, by its ownership and part tags.

use aws_sdk_ec2::types::{IpPermission, SecurityGroup, UserIdGroupPair};

use crate::eks::errors::{RULE_EXISTS, adopted, classify, is_code};
use crate::eks::owned::delete_security_group;
use crate::managed::external::ExternalError;

/// Every protocol, in EC2's spelling.
const ALL_PROTOCOLS: &str = "-1";

/// Whether `group` admits all traffic from its own members.
pub fn admits_itself(group: &SecurityGroup) -> bool {
    let Some(id) = group.group_id() else {
        return false;
    };
    group.ip_permissions().iter().any(|p| {
        p.ip_protocol() == Some(ALL_PROTOCOLS)
            && p.user_id_group_pairs().iter().any(|g| g.group_id() == Some(id))
    })
}

/// Makes the group in `vpc` (its name is unique in a VPC, so a lost answer is found by the next Observe's tag
/// search rather than made twice: a second create fails with a duplicate name).
pub async fn create(
    ec2: &aws_sdk_ec2::Client,
    vpc: &str,
    name: &str,
    tags: aws_sdk_ec2::types::TagSpecification,
) -> Result<String, ExternalError> {
    let created = ec2
        .create_security_group()
        .group_name(name)
        .description("Modelplane cluster: control plane and nodes, all traffic between members")
        .vpc_id(vpc)
        .tag_specifications(tags)
        .send()
        .await;
    match created {
        Ok(out) => out
            .group_id
            .ok_or_else(|| ExternalError::Transient("CreateSecurityGroup returned no id".into())),
        Err(e) if is_code(&e, "InvalidGroup.Duplicate") => Err(ExternalError::Transient(format!(
            "security group {name} exists in {vpc} but was not found by its tags yet; looking again"
        ))),
        Err(e) => Err(classify("cannot create the cluster security group", &e)),
    }
}

/// Lets the group's members reach each other on every protocol and port.
pub async fn admit_itself(ec2: &aws_sdk_ec2::Client, group: &str) -> Result<(), ExternalError> {
    let rule = IpPermission::builder()
        .ip_protocol(ALL_PROTOCOLS)
        .user_id_group_pairs(
            UserIdGroupPair::builder()
                .group_id(group)
                .description("members of the cluster")
                .build(),
        )
        .build();
    let authorized = ec2
        .authorize_security_group_ingress()
        .group_id(group)
        .ip_permissions(rule)
        .send()
        .await;
    let what = format!("cannot open security group {group} to itself");
    adopted(authorized, RULE_EXISTS, &what).map(drop)
}

/// Deletes the group; Waiting while an interface (a node, the control plane) or another group's rule (the
/// EFS group's) still refers to it.
pub async fn delete(ec2: &aws_sdk_ec2::Client, group: &str) -> Result<(), ExternalError> {
    let held = format!(
        "security group {group} is still used (a cluster's or node's interfaces, or the file system's NFS rule)"
    );
    delete_security_group(ec2, group, held).await
}
