//! The pure half of `Network`: checking the spec, carving the VPC CIDR into subnets, and naming each part, so
//! the EC2 client only finds and makes what this plan lists.

use std::net::Ipv4Addr;

use modelplane_eks_api::NetworkParameters;

use crate::managed::external::ExternalError;

/// Tag key naming which part of the network an EC2 object is (`public-us-east-1a`, `nat`, ...).
pub const PART_TAG: &str = "modelplane.ai/network-part";
/// Every default route of the network.
pub const DEFAULT_ROUTE: &str = "0.0.0.0/0";
pub const PUBLIC_ROUTES: &str = "routes-public";
pub const PRIVATE_ROUTES: &str = "routes-private";
pub const INTERNET_GATEWAY: &str = "internet-gateway";
pub const NAT_GATEWAY: &str = "nat-gateway";
pub const ELASTIC_IP: &str = "nat-ip";
pub const SECURITY_GROUP: &str = "security-group";
/// AWS's smallest subnet.
const SMALLEST_SUBNET: u8 = 28;

/// One subnet the network needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedSubnet {
    pub part: String,
    pub zone: String,
    pub cidr: String,
    pub public: bool,
}

fn parse_cidr(cidr: &str) -> Option<(u32, u8)> {
    let (address, prefix) = cidr.split_once('/')?;
    let address: Ipv4Addr = address.parse().ok()?;
    let prefix: u8 = prefix.parse().ok()?;
    (prefix <= 32).then_some((u32::from(address), prefix))
}

/// Checks the spec the way EC2 would, naming the field of the first problem.
pub fn validate(spec: &NetworkParameters) -> Result<(), ExternalError> {
    let reject = |why: String| Err(ExternalError::Rejected(why));
    let Some((address, prefix)) = parse_cidr(&spec.cidr_block) else {
        return reject(format!(
            "spec.forProvider.cidrBlock: {:?} is not an IPv4 CIDR block",
            spec.cidr_block
        ));
    };
    if !(16..=SMALLEST_SUBNET).contains(&prefix) {
        return reject(format!(
            "spec.forProvider.cidrBlock: a VPC's prefix must be /16 to /28, not /{prefix}"
        ));
    }
    let host_bits = 32 - u32::from(prefix);
    if address & ((1u32 << host_bits) - 1) != 0 {
        return reject(format!(
            "spec.forProvider.cidrBlock: {} has bits set past its /{prefix} prefix",
            spec.cidr_block
        ));
    }
    if spec.zones.len() < 2 {
        return reject(
            "spec.forProvider.zones: at least two zones are needed (EKS spans two or more)".into(),
        );
    }
    for (i, zone) in spec.zones.iter().enumerate() {
        let suffix = zone.strip_prefix(spec.region.as_str()).unwrap_or_default();
        let ok = !suffix.is_empty() && suffix.len() <= 2 && suffix.chars().all(|c| c.is_ascii_lowercase());
        if !ok {
            return reject(format!(
                "spec.forProvider.zones[{i}]: {zone:?} is not a zone of region {:?}",
                spec.region
            ));
        }
        if spec.zones[..i].contains(zone) {
            return reject(format!("spec.forProvider.zones[{i}]: {zone} is listed twice"));
        }
    }
    if subnet_prefix(prefix, spec.zones.len()) > SMALLEST_SUBNET {
        return reject(format!(
            "spec.forProvider.cidrBlock: /{prefix} is too small for two subnets in each of {} zones",
            spec.zones.len()
        ));
    }
    Ok(())
}

/// The prefix of each of the 2 x `zones` equal subnets.
fn subnet_prefix(vpc_prefix: u8, zones: usize) -> u8 {
    let slots = (2 * zones).next_power_of_two();
    vpc_prefix.saturating_add(u8::try_from(slots.trailing_zeros()).unwrap_or(u8::MAX))
}

/// A public and a private subnet per zone, public ones first, carved in order from the VPC CIDR. Call only
/// after [`validate`].
pub fn subnets(spec: &NetworkParameters) -> Vec<PlannedSubnet> {
    let Some((base, prefix)) = parse_cidr(&spec.cidr_block) else {
        return Vec::new();
    };
    let sub = subnet_prefix(prefix, spec.zones.len());
    let size = 1u64 << (32 - u32::from(sub));
    let kinds = [("public", true), ("private", false)];
    kinds
        .iter()
        .flat_map(|(kind, public)| spec.zones.iter().map(move |zone| (*kind, *public, zone)))
        .enumerate()
        .map(|(i, (kind, public, zone))| {
            let start = u64::from(base) + size * i as u64;
            let address = Ipv4Addr::from(u32::try_from(start).unwrap_or(u32::MAX));
            PlannedSubnet {
                part: format!("{kind}-{zone}"),
                zone: zone.clone(),
                cidr: format!("{address}/{sub}"),
                public,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cidr: &str, zones: &[&str]) -> NetworkParameters {
        NetworkParameters {
            region: "us-east-1".into(),
            cidr_block: cidr.into(),
            zones: zones.iter().map(|z| z.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn two_zones_get_four_quarter_subnets_public_first() {
        let planned = subnets(&spec("10.0.0.0/16", &["us-east-1a", "us-east-1b"]));
        let got: Vec<(&str, &str)> = planned
            .iter()
            .map(|s| (s.part.as_str(), s.cidr.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("public-us-east-1a", "10.0.0.0/18"),
                ("public-us-east-1b", "10.0.64.0/18"),
                ("private-us-east-1a", "10.0.128.0/18"),
                ("private-us-east-1b", "10.0.192.0/18"),
            ]
        );
    }

    #[test]
    fn three_zones_round_up_to_eight_slots() {
        let planned = subnets(&spec("10.0.0.0/16", &["us-east-1a", "us-east-1b", "us-east-1c"]));
        assert_eq!(planned.len(), 6);
        assert!(planned.iter().all(|s| s.cidr.ends_with("/19")));
        assert_eq!(planned[5].cidr, "10.0.160.0/19");
    }

    #[test]
    fn impossible_shapes_are_refused_naming_the_field() {
        let cases = [
            (
                spec("10.0.0.0", &["us-east-1a", "us-east-1b"]),
                "spec.forProvider.cidrBlock",
            ),
            (
                spec("10.0.0.0/8", &["us-east-1a", "us-east-1b"]),
                "spec.forProvider.cidrBlock",
            ),
            (
                spec("10.0.0.1/16", &["us-east-1a", "us-east-1b"]),
                "spec.forProvider.cidrBlock",
            ),
            (
                spec("10.0.0.0/27", &["us-east-1a", "us-east-1b"]),
                "spec.forProvider.cidrBlock",
            ),
            (spec("10.0.0.0/16", &["us-east-1a"]), "spec.forProvider.zones"),
            (
                spec("10.0.0.0/16", &["us-east-1a", "eu-west-1b"]),
                "spec.forProvider.zones[1]",
            ),
            (
                spec("10.0.0.0/16", &["us-east-1a", "us-east-1a"]),
                "spec.forProvider.zones[1]",
            ),
        ];
        for (s, field) in cases {
            let err = validate(&s).unwrap_err();
            assert!(err.to_string().starts_with(field), "{field}: {err}");
        }
        assert_eq!(
            validate(&spec("10.0.0.0/16", &["us-east-1a", "us-east-1b"])),
            Ok(())
        );
    }
}
