//! The EC2 kinds of the inventory: the network's parts, security groups, network ACLs and interfaces, launch
//! templates.

use std::collections::BTreeSet;

use aws_sdk_ec2::types::Tag;

use super::{Inventory, OWNER_TAG, PART_TAG};
use crate::support::world::World;

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

pub async fn list(world: &World, inv: &mut Inventory) {
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
