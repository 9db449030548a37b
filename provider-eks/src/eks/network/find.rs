//! Finding a `Network`'s parts in EC2 by their ownership and part tags: every part in full (seven describes),
//! or, for a steady network, only whether the set of its parts is still the recorded one (one call).

use std::collections::BTreeSet;
use std::future::Future;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{Filter, NatGatewayState, Tag};
use modelplane_eks_api::{Network, NetworkObservation};

use super::parts::{Parts, SeenRouteTable, SeenSubnet};
use super::plan::{DEFAULT_ROUTE, PART_TAG};
use crate::eks::errors::{Sent, classify};
use crate::eks::full_look;
use crate::eks::owned::{OWNER_TAG, owned_by, owner};
use crate::managed::external::{ExternalError, Observation};

fn tag_value<'a>(tags: &'a [Tag], key: &str) -> Option<&'a str> {
    tags.iter().find(|t| t.key() == Some(key)).and_then(|t| t.value())
}

/// The IDs of every EC2 object carrying this resource's ownership tag, in one DescribeTags call: enough to
/// tell, in a steady state, that no part went missing and none was added.
pub async fn owned_ids(ec2: &aws_sdk_ec2::Client, owner: &str) -> Result<BTreeSet<String>, ExternalError> {
    let out = ec2
        .describe_tags()
        .filters(Filter::builder().name("key").values(OWNER_TAG).build())
        .filters(Filter::builder().name("value").values(owner).build())
        .send()
        .await
        .map_err(|e| classify("cannot describe the network's tags", &e))?;
    Ok(out
        .tags()
        .iter()
        .filter_map(|t| t.resource_id().map(str::to_owned))
        .collect())
}

/// A steady network (see [`full_look`]) is checked with one call instead of seven: the IDs carrying its
/// ownership tag must be exactly the ones recorded. Any difference (a part made outside the provider; on EC2,
/// whose tags go with their resource, a part deleted) or any other state falls back to the full describe. What
/// one call cannot see (a route, attachment or rule changed inside a part that still exists) is seen at the
/// next full describe: after a spec change, a restart, any other change, or at the latest
/// [`full_look::FULL_LOOK_EVERY`] after the last one.
pub async fn unchanged(
    ec2: &aws_sdk_ec2::Client,
    mr: &Network,
) -> Result<Option<Observation<NetworkObservation>>, ExternalError> {
    let owner = owner(mr);
    let Some(recorded) = mr.status.as_ref().map(|s| &s.at_provider) else {
        return Ok(None);
    };
    let Some(expected) = recorded_ids(recorded) else {
        return Ok(None);
    };
    if !full_look::NETWORK.may_skip(mr, &owner) {
        return Ok(None);
    }
    let found = owned_ids(ec2, &owner).await?;
    Ok((found == expected).then(|| Observation::available(recorded.clone())))
}

/// Every ID a complete network records, or None while a part is missing from the record.
fn recorded_ids(at: &NetworkObservation) -> Option<BTreeSet<String>> {
    let singles = [
        at.vpc_id.as_ref()?,
        at.internet_gateway_id.as_ref()?,
        at.nat_gateway_id.as_ref()?,
        at.elastic_ip_allocation_id.as_ref()?,
        at.security_group_id.as_ref()?,
    ];
    if at.public_subnets.is_empty() || at.private_subnets.is_empty() || at.route_table_ids.is_empty() {
        return None;
    }
    let subnets = at.public_subnets.iter().chain(&at.private_subnets).map(|s| &s.id);
    Some(
        singles
            .into_iter()
            .chain(subnets)
            .chain(&at.route_table_ids)
            .cloned()
            .collect(),
    )
}

/// The answer of one describe of the network's `part`, a failure classified as such.
async fn described<T, E: ProvideErrorMetadata>(
    part: &str,
    call: impl Future<Output = Sent<T, E>>,
) -> Result<T, ExternalError> {
    call.await
        .map_err(|e| classify(&format!("cannot describe the network's {part}"), &e))
}

/// Every part this resource owns, by tag.
pub async fn find(ec2: &aws_sdk_ec2::Client, owner: &str) -> Result<Parts, ExternalError> {
    let vpcs = described("VPC", ec2.describe_vpcs().filters(owned_by(owner)).send()).await?;
    let mut parts = Parts {
        vpc: vpcs
            .vpcs()
            .iter()
            .find_map(|v| Some((v.vpc_id()?.to_owned(), v.cidr_block()?.to_owned()))),
        ..Parts::default()
    };
    let subnets = described("subnets", ec2.describe_subnets().filters(owned_by(owner)).send()).await?;
    parts.subnets = subnets
        .subnets()
        .iter()
        .filter_map(|s| {
            Some(SeenSubnet {
                part: tag_value(s.tags(), PART_TAG)?.to_owned(),
                id: s.subnet_id()?.to_owned(),
                zone: s.availability_zone()?.to_owned(),
                cidr: s.cidr_block()?.to_owned(),
            })
        })
        .collect();
    let gateways = described(
        "internet gateway",
        ec2.describe_internet_gateways().filters(owned_by(owner)).send(),
    )
    .await?;
    parts.internet_gateway = gateways.internet_gateways().iter().find_map(|g| {
        let attached = g.attachments().iter().find_map(|a| a.vpc_id().map(str::to_owned));
        Some((g.internet_gateway_id()?.to_owned(), attached))
    });
    let addresses = described(
        "Elastic IP",
        ec2.describe_addresses().filters(owned_by(owner)).send(),
    )
    .await?;
    parts.elastic_ip = addresses
        .addresses()
        .iter()
        .find_map(|a| a.allocation_id().map(str::to_owned));
    let Some((vpc, _)) = &parts.vpc else {
        return Ok(parts);
    };
    // NAT gateways are looked up by VPC (not every EC2 implementation filters them by tag), then by tag.
    let gateways = described(
        "NAT gateway",
        ec2.describe_nat_gateways()
            .filter(Filter::builder().name("vpc-id").values(vpc).build())
            .send(),
    )
    .await?;
    parts.nat_gateway = gateways
        .nat_gateways()
        .iter()
        .filter(|n| tag_value(n.tags(), OWNER_TAG) == Some(owner))
        .filter(|n| n.state() != Some(&NatGatewayState::Deleted))
        .find_map(|n| {
            let state = n.state().map(|s| s.as_str().to_owned()).unwrap_or_default();
            Some((
                n.nat_gateway_id()?.to_owned(),
                state,
                n.failure_message().map(str::to_owned),
            ))
        });
    let tables = described(
        "route tables",
        ec2.describe_route_tables().filters(owned_by(owner)).send(),
    )
    .await?;
    parts.route_tables = tables
        .route_tables()
        .iter()
        .filter_map(|t| {
            let default = t
                .routes()
                .iter()
                .find(|r| r.destination_cidr_block() == Some(DEFAULT_ROUTE));
            Some(SeenRouteTable {
                part: tag_value(t.tags(), PART_TAG)?.to_owned(),
                id: t.route_table_id()?.to_owned(),
                default_target: default
                    .and_then(|r| r.gateway_id().or(r.nat_gateway_id()))
                    .map(str::to_owned),
                associations: t
                    .associations()
                    .iter()
                    .filter(|a| a.main() != Some(true))
                    .filter_map(|a| {
                        Some((
                            a.route_table_association_id()?.to_owned(),
                            a.subnet_id()?.to_owned(),
                        ))
                    })
                    .collect(),
            })
        })
        .collect();
    let groups = described(
        "security group",
        ec2.describe_security_groups().filters(owned_by(owner)).send(),
    )
    .await?;
    parts.security_group = groups
        .security_groups()
        .iter()
        .find_map(|g| Some((g.group_id()?.to_owned(), super::group::admits_itself(g))));
    Ok(parts)
}
