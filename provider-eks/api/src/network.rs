//! `Network`: everything an EKS cluster needs from EC2 networking, as one resource: a VPC, a public and a
//! private subnet in each zone, an internet gateway, one NAT gateway (in the first zone's public subnet) with
//! its Elastic IP, the public and private route tables with their default routes, and the cluster's security
//! group (admitting all traffic between its own members: the control plane's interfaces and the nodes, which
//! EFA requires too). One object instead of
//! upstream's dozen, because none of the parts is useful alone and they are created and deleted together.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::managed::{ResourceSpec, ResourceStatus};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "Network",
    namespaced,
    derive = "Default",
    status = "NetworkStatus",
    category = "crossplane",
    category = "managed",
    category = "eks",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"VPC","type":"string","jsonPath":".status.atProvider.vpcId"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    pub for_provider: NetworkParameters,
    #[serde(flatten)]
    pub resource: ResourceSpec,
}

pub type NetworkStatus = ResourceStatus<NetworkObservation>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkParameters {
    pub region: String,
    /// The VPC's IPv4 CIDR, /16 to /28. Each zone gets two equal subnets carved from it.
    pub cidr_block: String,
    /// Availability zones of `region`, at least two (EKS places its control plane in two or more).
    #[schemars(length(min = 2, max = 6))]
    pub zones: Vec<String>,
    /// The EKS cluster the subnets serve: they are tagged `kubernetes.io/cluster/<name>: shared`, and public and
    /// private subnets carry the load-balancer role tags, so Kubernetes Services find them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// The network as EC2 reports it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkObservation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr_block: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub public_subnets: Vec<Subnet>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_subnets: Vec<Subnet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internet_gateway_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat_gateway_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_ip_allocation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_table_ids: Vec<String>,
    /// The security group the control plane and the nodes share; give it to the Cluster, the NodePools and the
    /// FileSystem (which admits NFS from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    pub zone: String,
    pub id: String,
    pub cidr_block: String,
}

impl NetworkObservation {
    /// Every subnet, public first: what an EKS control plane is given.
    pub fn subnet_ids(&self) -> Vec<String> {
        self.public_subnets
            .iter()
            .chain(&self.private_subnets)
            .map(|s| s.id.clone())
            .collect()
    }
}
