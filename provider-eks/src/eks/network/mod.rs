//! `Network` <-> a VPC with a public and a private subnet per zone, an internet gateway, one NAT gateway with
//! its Elastic IP, and a public and a private route table. EC2 picks every ID, so each object carries the
//! ownership tag and a part tag (see `plan`), and Observe finds them all by tag: a crash anywhere in the
//! sequence leaves parts that the next Update finds and completes, never duplicates. Create and Update both run
//! [`NetworkClient::ensure`], which makes only what is missing. Delete goes in dependency order: NAT gateway
//! (and waits for it), Elastic IP, route tables, internet gateway, subnets, security group, VPC.

pub mod find;
pub mod group;
pub mod parts;
pub mod plan;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    AttributeBooleanValue, DomainType, NatGatewayState, ResourceType, Tag, TagSpecification,
};
use modelplane_eks_api::{Network, NetworkObservation, Subnet};

use self::parts::{Parts, SeenSubnet};
use self::plan::{
    DEFAULT_ROUTE, ELASTIC_IP, INTERNET_GATEWAY, NAT_GATEWAY, PART_TAG, PRIVATE_ROUTES, PUBLIC_ROUTES,
    PlannedSubnet, SECURITY_GROUP, subnets, validate,
};
use super::clients::AwsClients;
use super::errors::{adopted, classify, one_by_one};
use super::full_look;
use super::owned::{LastSeen, connector, owner, owner_tags};
use crate::managed::external::{ConnectionDetails, ExternalClient, ExternalError, Observation};

/// EC2's error code for an attachment or association that is there already.
const ALREADY_ASSOCIATED: &str = "Resource.AlreadyAssociated";

connector!(NetworkConnector, Network, NetworkClient, NetworkObservation, mr => &mr.spec.for_provider.region);

pub struct NetworkClient {
    clients: AwsClients,
    seen: LastSeen<Parts>,
}

impl NetworkClient {
    pub fn new(clients: AwsClients) -> Self {
        Self {
            clients,
            seen: LastSeen::default(),
        }
    }
}

fn tag_spec(
    mr: &Network,
    resource: ResourceType,
    part: &str,
    extra: &[(String, String)],
) -> TagSpecification {
    let mut tags = owner_tags(mr, &mr.spec.for_provider.tags);
    tags.push((PART_TAG.into(), part.into()));
    tags.push((
        "Name".into(),
        format!("{}-{part}", mr.metadata.name.as_deref().unwrap_or_default()),
    ));
    tags.extend(extra.iter().cloned());
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(
            tags.into_iter()
                .map(|(k, v)| Tag::builder().key(k).value(v).build())
                .collect(),
        ))
        .build()
}

/// The tags Kubernetes looks for on a cluster's subnets (load balancers find their subnets by role).
fn subnet_tags(mr: &Network, planned: &PlannedSubnet) -> Vec<(String, String)> {
    let mut tags = Vec::new();
    if let Some(cluster) = &mr.spec.for_provider.cluster_name {
        tags.push((format!("kubernetes.io/cluster/{cluster}"), "shared".into()));
    }
    let role = if planned.public {
        "kubernetes.io/role/elb"
    } else {
        "kubernetes.io/role/internal-elb"
    };
    tags.push((role.into(), "1".into()));
    tags
}

/// For the creates EC2 takes no idempotency token for (VPC, subnet, gateway, address, route table): no SDK
/// retry, since a retry after a lost answer makes a second object. The error ends the reconcile instead, and
/// the next one finds the first object by its tags.
fn without_retries() -> aws_sdk_ec2::config::Builder {
    aws_sdk_ec2::config::Builder::default().retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
}

fn enabled() -> AttributeBooleanValue {
    AttributeBooleanValue::builder().value(true).build()
}

impl NetworkClient {
    /// Makes whatever part of the network is missing, in dependency order.
    async fn ensure(&self, mr: &Network, parts: &Parts) -> Result<(), ExternalError> {
        let spec = &mr.spec.for_provider;
        validate(spec)?;
        let ec2 = &self.clients.ec2;
        let planned = subnets(spec);
        let vpc = match &parts.vpc {
            Some((id, _)) => id.clone(),
            None => {
                let out = ec2
                    .create_vpc()
                    .cidr_block(&spec.cidr_block)
                    .tag_specifications(tag_spec(mr, ResourceType::Vpc, "vpc", &[]))
                    .customize()
                    .config_override(without_retries())
                    .send()
                    .await
                    .map_err(|e| classify("cannot create VPC", &e))?;
                let id = out.vpc().and_then(|v| v.vpc_id()).unwrap_or_default().to_owned();
                // EKS nodes need DNS names inside the VPC; EC2 sets one attribute per call.
                ec2.modify_vpc_attribute()
                    .vpc_id(&id)
                    .enable_dns_support(enabled())
                    .send()
                    .await
                    .map_err(|e| classify(&format!("cannot enable DNS on VPC {id}"), &e))?;
                ec2.modify_vpc_attribute()
                    .vpc_id(&id)
                    .enable_dns_hostnames(enabled())
                    .send()
                    .await
                    .map_err(|e| classify(&format!("cannot enable DNS host names on VPC {id}"), &e))?;
                id
            }
        };
        match &parts.security_group {
            Some((_, true)) => {}
            Some((id, false)) => group::admit_itself(ec2, id).await?,
            None => {
                let name = format!(
                    "{}-{SECURITY_GROUP}",
                    mr.metadata.name.as_deref().unwrap_or_default()
                );
                let tags = tag_spec(mr, ResourceType::SecurityGroup, SECURITY_GROUP, &[]);
                let id = group::create(ec2, &vpc, &name, tags).await?;
                group::admit_itself(ec2, &id).await?;
            }
        }
        let mut subnet_ids: Vec<(PlannedSubnet, String)> = Vec::new();
        for p in &planned {
            let id = match parts.subnets.iter().find(|s| s.part == p.part) {
                Some(seen) => seen.id.clone(),
                None => {
                    let out = ec2
                        .create_subnet()
                        .vpc_id(&vpc)
                        .cidr_block(&p.cidr)
                        .availability_zone(&p.zone)
                        .tag_specifications(tag_spec(mr, ResourceType::Subnet, &p.part, &subnet_tags(mr, p)))
                        .customize()
                        .config_override(without_retries())
                        .send()
                        .await
                        .map_err(|e| {
                            classify(&format!("cannot create subnet {} in {}", p.cidr, p.zone), &e)
                        })?;
                    let id = out
                        .subnet()
                        .and_then(|s| s.subnet_id())
                        .unwrap_or_default()
                        .to_owned();
                    if p.public {
                        ec2.modify_subnet_attribute()
                            .subnet_id(&id)
                            .map_public_ip_on_launch(enabled())
                            .send()
                            .await
                            .map_err(|e| classify(&format!("cannot make subnet {id} public"), &e))?;
                    }
                    id
                }
            };
            subnet_ids.push((p.clone(), id));
        }
        let gateway = match &parts.internet_gateway {
            Some((id, _)) => id.clone(),
            None => {
                let out = ec2
                    .create_internet_gateway()
                    .tag_specifications(tag_spec(mr, ResourceType::InternetGateway, INTERNET_GATEWAY, &[]))
                    .customize()
                    .config_override(without_retries())
                    .send()
                    .await
                    .map_err(|e| classify("cannot create internet gateway", &e))?;
                out.internet_gateway()
                    .and_then(|g| g.internet_gateway_id())
                    .unwrap_or_default()
                    .to_owned()
            }
        };
        if parts.internet_gateway.as_ref().and_then(|(_, v)| v.as_ref()) != Some(&vpc) {
            let attached = ec2
                .attach_internet_gateway()
                .internet_gateway_id(&gateway)
                .vpc_id(&vpc)
                .send()
                .await;
            adopted(
                attached,
                ALREADY_ASSOCIATED,
                &format!("cannot attach internet gateway {gateway}"),
            )?;
        }
        let allocation = match &parts.elastic_ip {
            Some(id) => id.clone(),
            None => {
                let out = ec2
                    .allocate_address()
                    .domain(DomainType::Vpc)
                    .tag_specifications(tag_spec(mr, ResourceType::ElasticIp, ELASTIC_IP, &[]))
                    .customize()
                    .config_override(without_retries())
                    .send()
                    .await
                    .map_err(|e| classify("cannot allocate the NAT gateway's Elastic IP", &e))?;
                out.allocation_id().unwrap_or_default().to_owned()
            }
        };
        let first_public = subnet_ids
            .iter()
            .find(|(p, _)| p.public)
            .map(|(_, id)| id.clone())
            .unwrap_or_default();
        let nat = match &parts.nat_gateway {
            Some((id, state, _)) if state == "failed" => {
                // A failed NAT gateway never recovers: delete it; the next Update makes a new one.
                ec2.delete_nat_gateway()
                    .nat_gateway_id(id)
                    .send()
                    .await
                    .map_err(|e| classify(&format!("cannot delete failed NAT gateway {id}"), &e))?;
                None
            }
            Some((id, state, _)) => Some((id.clone(), state == "available")),
            None => {
                let created = ec2
                    .create_nat_gateway()
                    .subnet_id(&first_public)
                    .allocation_id(&allocation)
                    .client_token(super::owned::token(mr, NAT_GATEWAY))
                    .tag_specifications(tag_spec(mr, ResourceType::Natgateway, NAT_GATEWAY, &[]))
                    .send()
                    .await
                    .map_err(|e| classify("cannot create NAT gateway", &e))?;
                let gateway = created.nat_gateway();
                gateway.and_then(|g| g.nat_gateway_id()).map(|id| {
                    (
                        id.to_owned(),
                        gateway.and_then(|g| g.state()) == Some(&NatGatewayState::Available),
                    )
                })
            }
        };
        let public: Vec<String> = subnet_ids
            .iter()
            .filter(|(p, _)| p.public)
            .map(|(_, id)| id.clone())
            .collect();
        let private: Vec<String> = subnet_ids
            .iter()
            .filter(|(p, _)| !p.public)
            .map(|(_, id)| id.clone())
            .collect();
        self.ensure_routes(
            mr,
            parts,
            &vpc,
            PUBLIC_ROUTES,
            Some(Target::Gateway(gateway)),
            &public,
        )
        .await?;
        // Routes may point only at an available NAT gateway; until then the table waits without one.
        let nat_target = nat.and_then(|(id, available)| available.then_some(Target::Nat(id)));
        self.ensure_routes(mr, parts, &vpc, PRIVATE_ROUTES, nat_target, &private)
            .await
    }
}

enum Target {
    Gateway(String),
    Nat(String),
}

#[async_trait]
impl ExternalClient<Network> for NetworkClient {
    type AtProvider = NetworkObservation;

    async fn observe(&self, mr: &Network) -> Result<Observation<NetworkObservation>, ExternalError> {
        if let Some(steady) = find::unchanged(&self.clients.ec2, mr).await? {
            return Ok(steady);
        }
        let parts = find::find(&self.clients.ec2, &owner(mr)).await?;
        full_look::NETWORK.looked(&owner(mr));
        let deleting = mr.metadata.deletion_timestamp.is_some();
        let leftovers = parts.internet_gateway.is_some() || parts.elastic_ip.is_some();
        if parts.vpc.is_none() && !(deleting && leftovers) {
            full_look::NETWORK.forget(&owner(mr));
            return Ok(Observation::missing());
        }
        let spec = &mr.spec.for_provider;
        let planned = if validate(spec).is_ok() {
            subnets(spec)
        } else {
            Vec::new()
        };
        let state = parts.state(&planned);
        let subnet = |s: &SeenSubnet| Subnet {
            zone: s.zone.clone(),
            id: s.id.clone(),
            cidr_block: s.cidr.clone(),
        };
        let in_order = |public: bool| -> Vec<Subnet> {
            planned
                .iter()
                .filter(|p| p.public == public)
                .filter_map(|p| parts.subnets.iter().find(|s| s.part == p.part).map(subnet))
                .collect()
        };
        let at_provider = NetworkObservation {
            vpc_id: parts.vpc.as_ref().map(|(id, _)| id.clone()),
            cidr_block: parts.vpc.as_ref().map(|(_, cidr)| cidr.clone()),
            public_subnets: in_order(true),
            private_subnets: in_order(false),
            internet_gateway_id: parts.internet_gateway.as_ref().map(|(id, _)| id.clone()),
            nat_gateway_id: parts.nat_gateway.as_ref().map(|(id, _, _)| id.clone()),
            elastic_ip_allocation_id: parts.elastic_ip.clone(),
            route_table_ids: parts.route_tables.iter().map(|t| t.id.clone()).collect(),
            security_group_id: parts.security_group.as_ref().map(|(id, _)| id.clone()),
        };
        self.seen.keep(parts);
        Ok(Observation {
            exists: true,
            up_to_date: state.missing.is_empty() && state.unchangeable.is_empty(),
            readiness: state.readiness,
            busy: state.busy,
            late_initialized: None,
            at_provider,
            connection_details: ConnectionDetails::new(),
        })
    }

    async fn create(&self, mr: &Network) -> Result<ConnectionDetails, ExternalError> {
        validate(&mr.spec.for_provider)?;
        // Parts of an earlier attempt whose answer was lost are found and kept.
        let parts = find::find(&self.clients.ec2, &owner(mr)).await?;
        self.ensure(mr, &parts).await?;
        Ok(ConnectionDetails::new())
    }

    async fn update(&self, mr: &Network, _: &NetworkObservation) -> Result<(), ExternalError> {
        let parts = self.seen.get().unwrap_or_default();
        validate(&mr.spec.for_provider)?;
        let state = parts.state(&subnets(&mr.spec.for_provider));
        // A new CIDR or zone list re-carves every subnet: nothing of it can be made beside the old ones.
        if let Some(why) = state.unchangeable.refusal(&format!("network {}", owner(mr))) {
            return Err(ExternalError::Rejected(why));
        }
        self.ensure(mr, &parts).await
    }

    async fn delete(&self, mr: &Network) -> Result<(), ExternalError> {
        let parts = find::find(&self.clients.ec2, &owner(mr)).await?;
        parts::delete(&self.clients.ec2, &parts).await
    }
}

impl NetworkClient {
    /// One route table: made if missing, its default route pointing at `target`, associated with `subnets`.
    async fn ensure_routes(
        &self,
        mr: &Network,
        parts: &Parts,
        vpc: &str,
        part: &str,
        target: Option<Target>,
        subnets: &[String],
    ) -> Result<(), ExternalError> {
        let ec2 = &self.clients.ec2;
        let seen = parts.route_tables.iter().find(|t| t.part == part);
        let table = match seen {
            Some(t) => t.id.clone(),
            None => {
                let out = ec2
                    .create_route_table()
                    .vpc_id(vpc)
                    .tag_specifications(tag_spec(mr, ResourceType::RouteTable, part, &[]))
                    .customize()
                    .config_override(without_retries())
                    .send()
                    .await
                    .map_err(|e| classify(&format!("cannot create route table {part}"), &e))?;
                out.route_table()
                    .and_then(|t| t.route_table_id())
                    .unwrap_or_default()
                    .to_owned()
            }
        };
        if let Some(target) = target {
            let wanted = match &target {
                Target::Gateway(id) | Target::Nat(id) => id.clone(),
            };
            let current = seen.and_then(|t| t.default_target.clone());
            if current.is_none() {
                let request = ec2
                    .create_route()
                    .route_table_id(&table)
                    .destination_cidr_block(DEFAULT_ROUTE);
                let request = match &target {
                    Target::Gateway(id) => request.gateway_id(id),
                    Target::Nat(id) => request.nat_gateway_id(id),
                };
                let what = format!("cannot route {part} to {wanted}");
                adopted(request.send().await, "RouteAlreadyExists", &what)?;
            } else if current.as_deref() != Some(wanted.as_str()) {
                let request = ec2
                    .replace_route()
                    .route_table_id(&table)
                    .destination_cidr_block(DEFAULT_ROUTE);
                let request = match &target {
                    Target::Gateway(id) => request.gateway_id(id),
                    Target::Nat(id) => request.nat_gateway_id(id),
                };
                request
                    .send()
                    .await
                    .map_err(|e| classify(&format!("cannot re-route {part} to {wanted}"), &e))?;
            }
        }
        let unassociated: Vec<&String> = subnets
            .iter()
            .filter(|subnet| !seen.is_some_and(|t| t.associations.iter().any(|(_, s)| s == *subnet)))
            .collect();
        one_by_one(
            unassociated,
            Some(ALREADY_ASSOCIATED),
            |subnet| format!("cannot associate {subnet} with {part}"),
            |subnet| {
                ec2.associate_route_table()
                    .route_table_id(&table)
                    .subnet_id(subnet)
                    .send()
            },
        )
        .await
    }
}
