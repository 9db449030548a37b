//! What of a `Network` exists in EC2, what that means (missing parts, readiness, refused changes), and how it is
//! taken down in dependency order.

use super::plan::{PRIVATE_ROUTES, PUBLIC_ROUTES, PlannedSubnet};
use crate::eks::convert::Unchangeable;
use crate::eks::errors::{DEPENDENCY_VIOLATION, Meaning, answer, gone, gone_unless_held, one_by_one};
use crate::managed::conditions::Readiness;
use crate::managed::external::ExternalError;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeenSubnet {
    pub part: String,
    pub id: String,
    pub zone: String,
    pub cidr: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeenRouteTable {
    pub part: String,
    pub id: String,
    pub default_target: Option<String>,
    /// (association id, subnet id), the main association left out.
    pub associations: Vec<(String, String)>,
}

/// The network's parts found by their tags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parts {
    /// (id, CIDR).
    pub vpc: Option<(String, String)>,
    pub subnets: Vec<SeenSubnet>,
    /// (id, attached VPC).
    pub internet_gateway: Option<(String, Option<String>)>,
    pub elastic_ip: Option<String>,
    /// (id, state, failure message).
    pub nat_gateway: Option<(String, String, Option<String>)>,
    pub route_tables: Vec<SeenRouteTable>,
    /// (id, whether it admits its own members).
    pub security_group: Option<(String, bool)>,
}

/// What the parts say against the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub missing: Vec<String>,
    pub unchangeable: Unchangeable,
    pub readiness: Readiness,
    pub busy: bool,
}

impl Parts {
    pub fn state(&self, planned: &[PlannedSubnet]) -> State {
        let mut missing = Vec::new();
        let mut unchangeable = Vec::new();
        if let (Some((_, cidr)), Some(first)) = (&self.vpc, planned.first()) {
            // The plan's first subnet starts at the VPC's base address.
            let base = |c: &str| c.split('/').next().map(str::to_owned);
            if base(cidr) != base(&first.cidr) {
                unchangeable.push("spec.forProvider.cidrBlock".to_owned());
            }
        }
        for p in planned {
            match self.subnets.iter().find(|s| s.part == p.part) {
                None => missing.push(format!("subnet {}", p.part)),
                Some(s) if s.cidr != p.cidr => unchangeable.push("spec.forProvider.cidrBlock".to_owned()),
                Some(_) => {}
            }
        }
        if self
            .subnets
            .iter()
            .any(|s| !planned.iter().any(|p| p.part == s.part))
        {
            unchangeable.push("spec.forProvider.zones".to_owned());
        }
        unchangeable.dedup();
        let vpc = self.vpc.as_ref().map(|(id, _)| id);
        match &self.internet_gateway {
            None => missing.push("internet gateway".into()),
            Some((_, attached)) if attached.as_ref() != vpc => {
                missing.push("internet gateway attachment".into())
            }
            Some(_) => {}
        }
        if self.elastic_ip.is_none() {
            missing.push("Elastic IP".into());
        }
        let nat = self.nat_gateway.as_ref();
        match nat {
            None => missing.push("NAT gateway".into()),
            Some((_, state, _)) if state == "failed" => missing.push("NAT gateway (failed)".into()),
            Some(_) => {}
        }
        for (part, public, target) in [
            (
                PUBLIC_ROUTES,
                true,
                self.internet_gateway.as_ref().map(|(id, _)| id.clone()),
            ),
            (PRIVATE_ROUTES, false, nat.map(|(id, _, _)| id.clone())),
        ] {
            let Some(table) = self.route_tables.iter().find(|t| t.part == part) else {
                missing.push(format!("route table {part}"));
                continue;
            };
            if target.is_none() || table.default_target != target {
                missing.push(format!("default route of {part}"));
            }
            let unassociated = planned
                .iter()
                .filter(|p| p.public == public)
                .filter_map(|p| self.subnets.iter().find(|s| s.part == p.part))
                .any(|s| !table.associations.iter().any(|(_, subnet)| *subnet == s.id));
            if unassociated {
                missing.push(format!("subnet associations of {part}"));
            }
        }
        match &self.security_group {
            None => missing.push("security group".into()),
            Some((_, false)) => missing.push("security group rule".into()),
            Some(_) => {}
        }
        let nat_state = nat.map(|(_, state, _)| state.as_str()).unwrap_or_default();
        let busy = matches!(nat_state, "pending" | "deleting");
        let readiness = match (nat_state, missing.is_empty()) {
            ("deleting", _) => Readiness::Deleting,
            ("failed", _) => Readiness::Unavailable(format!(
                "NAT gateway failed: {}",
                nat.and_then(|(_, _, why)| why.clone()).unwrap_or_default()
            )),
            ("pending", _) => Readiness::Creating,
            (_, true) => Readiness::Available,
            (_, false) => Readiness::Unavailable(format!("not made yet: {}", missing.join(", "))),
        };
        State {
            missing,
            unchangeable: Unchangeable(unchangeable),
            readiness,
            busy,
        }
    }
}

/// Deletes what is there, in dependency order. Returns after asking EC2 to delete the NAT gateway (it takes a
/// while; Observe reports it busy meanwhile) and says Waiting while something outside the network (a cluster's
/// or a file system's network interfaces) still holds a subnet or the VPC.
pub async fn delete(ec2: &aws_sdk_ec2::Client, parts: &Parts) -> Result<(), ExternalError> {
    if let Some((id, state, _)) = &parts.nat_gateway {
        if state != "deleting" {
            let deleted = ec2.delete_nat_gateway().nat_gateway_id(id).send().await;
            gone(
                deleted,
                "NatGatewayNotFound",
                &format!("cannot delete NAT gateway {id}"),
            )?;
        }
        return Ok(());
    }
    if let Some(allocation) = &parts.elastic_ip {
        let released = ec2.release_address().allocation_id(allocation).send().await;
        let held = || {
            Meaning::Wait(format!(
                "Elastic IP {allocation} is still held by the NAT gateway being deleted"
            ))
        };
        let meanings = [
            ("InvalidAllocationID.NotFound", Meaning::Settled),
            ("InvalidIPAddress.InUse", held()),
            ("AuthFailure", held()),
        ];
        answer(
            released,
            &format!("cannot release Elastic IP {allocation}"),
            &meanings,
        )?;
    }
    for table in &parts.route_tables {
        let associations: Vec<&String> = table
            .associations
            .iter()
            .map(|(association, _)| association)
            .collect();
        one_by_one(
            associations,
            Some("InvalidAssociationID.NotFound"),
            |association| format!("cannot disassociate {association}"),
            |association| ec2.disassociate_route_table().association_id(association).send(),
        )
        .await?;
        let deleted = ec2.delete_route_table().route_table_id(&table.id).send().await;
        gone(
            deleted,
            "InvalidRouteTableID.NotFound",
            &format!("cannot delete route table {}", table.id),
        )?;
    }
    if let Some((gateway, attached)) = &parts.internet_gateway {
        if let Some(vpc) = attached {
            let detached = ec2
                .detach_internet_gateway()
                .internet_gateway_id(gateway)
                .vpc_id(vpc)
                .send()
                .await;
            gone(
                detached,
                "Gateway.NotAttached",
                &format!("cannot detach internet gateway {gateway}"),
            )?;
        }
        let deleted = ec2
            .delete_internet_gateway()
            .internet_gateway_id(gateway)
            .send()
            .await;
        let what = format!("cannot delete internet gateway {gateway}");
        gone(deleted, "InvalidInternetGatewayID.NotFound", &what)?;
    }
    for subnet in &parts.subnets {
        let deleted = ec2.delete_subnet().subnet_id(&subnet.id).send().await;
        let held = format!(
            "subnet {} still has network interfaces (a cluster, node group or mount target not deleted yet)",
            subnet.id
        );
        let codes = ["InvalidSubnetID.NotFound", DEPENDENCY_VIOLATION];
        gone_unless_held(
            deleted,
            codes,
            held,
            &format!("cannot delete subnet {}", subnet.id),
        )?;
    }
    if let Some((group, _)) = &parts.security_group {
        super::group::delete(ec2, group).await?;
    }
    if let Some((vpc, _)) = &parts.vpc {
        let deleted = ec2.delete_vpc().vpc_id(vpc).send().await;
        let held =
            format!("VPC {vpc} still holds objects made outside this network (security groups, interfaces)");
        let codes = ["InvalidVpcID.NotFound", DEPENDENCY_VIOLATION];
        gone_unless_held(deleted, codes, held, &format!("cannot delete VPC {vpc}"))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "parts_tests.rs"]
mod tests;
