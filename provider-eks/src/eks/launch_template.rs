//! The EC2 launch template a node pool needs for capacity blocks, EFA and its own security groups: EKS managed
//! node groups take those settings only through a launch template (and EFA wants a cluster placement group).

use aws_sdk_ec2::types::{
    CapacityReservationTarget, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplatePlacementRequest, MarketType, PlacementStrategy, RequestLaunchTemplateData, VolumeType,
};
use modelplane_eks_api::{CapacityType, NodePoolParameters};

use super::errors::{Meaning, adopted, answer, classify, found, gone_unless_held};
use crate::managed::external::ExternalError;

/// Root volume device of the EKS-optimised AMIs.
const ROOT_DEVICE: &str = "/dev/xvda";
/// EC2's error code for "no launch template of that name".
const TEMPLATE_NOT_FOUND: &str = "InvalidLaunchTemplateName.NotFoundException";

pub fn needed(pool: &NodePoolParameters) -> bool {
    pool.capacity_type == CapacityType::CapacityBlock
        || pool.efa_interfaces > 0
        || !pool.security_group_ids.is_empty()
}

/// The template body. With a launch template EKS refuses the node group's own `diskSize`, so the root volume
/// moves in here.
pub fn data(
    pool: &NodePoolParameters,
    placement_group: &str,
) -> Result<RequestLaunchTemplateData, ExternalError> {
    let mut data = RequestLaunchTemplateData::builder();
    if pool.capacity_type == CapacityType::CapacityBlock {
        let reservation = pool.capacity_reservation_id.clone().ok_or_else(|| {
            ExternalError::Rejected(
                "spec.forProvider.capacityReservationId: required for capacityType CAPACITY_BLOCK".into(),
            )
        })?;
        data = data
            .instance_market_options(
                LaunchTemplateInstanceMarketOptionsRequest::builder()
                    .market_type(MarketType::CapacityBlock)
                    .build(),
            )
            .capacity_reservation_specification(
                LaunchTemplateCapacityReservationSpecificationRequest::builder()
                    .capacity_reservation_target(
                        CapacityReservationTarget::builder()
                            .capacity_reservation_id(reservation)
                            .build(),
                    )
                    .build(),
            );
    }
    for card in 0..pool.efa_interfaces {
        let index = i32::try_from(card).unwrap_or(i32::MAX);
        data = data.network_interfaces(
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .interface_type("efa")
                .device_index(index.min(1))
                .network_card_index(index)
                .delete_on_termination(true)
                .set_groups((!pool.security_group_ids.is_empty()).then(|| pool.security_group_ids.clone()))
                .build(),
        );
    }
    // With network interfaces in the template, the groups go on each interface; EC2 refuses both.
    if pool.efa_interfaces == 0 && !pool.security_group_ids.is_empty() {
        data = data.set_security_group_ids(Some(pool.security_group_ids.clone()));
    }
    if pool.efa_interfaces > 0 {
        data = data.placement(
            LaunchTemplatePlacementRequest::builder()
                .group_name(placement_group)
                .build(),
        );
    }
    if let Some(size) = pool.disk_size {
        data = data.block_device_mappings(
            LaunchTemplateBlockDeviceMappingRequest::builder()
                .device_name(ROOT_DEVICE)
                .ebs(
                    LaunchTemplateEbsBlockDeviceRequest::builder()
                        .volume_size(i32::try_from(size).unwrap_or(i32::MAX))
                        .volume_type(VolumeType::Gp3)
                        .build(),
                )
                .build(),
        );
    }
    Ok(data.build())
}

/// Creates (or finds, after a lost answer) the placement group and launch template named `name`; returns the
/// template id.
pub async fn ensure(
    ec2: &aws_sdk_ec2::Client,
    name: &str,
    pool: &NodePoolParameters,
    token: &str,
) -> Result<String, ExternalError> {
    if pool.efa_interfaces > 0 {
        let created = ec2
            .create_placement_group()
            .group_name(name)
            .strategy(PlacementStrategy::Cluster)
            .send()
            .await;
        let what = format!("cannot create placement group {name}");
        adopted(created, "InvalidPlacementGroup.Duplicate", &what)?;
    }
    let created = ec2
        .create_launch_template()
        .launch_template_name(name)
        .launch_template_data(data(pool, name)?)
        .client_token(token)
        .send()
        .await;
    let what = format!("cannot create launch template {name}");
    if let Some(out) = adopted(created, "InvalidLaunchTemplateName.AlreadyExistsException", &what)? {
        return out
            .launch_template
            .and_then(|t| t.launch_template_id)
            .ok_or_else(|| ExternalError::Transient(format!("{what}: no id returned")));
    }
    let found = ec2
        .describe_launch_templates()
        .launch_template_names(name)
        .send()
        .await
        .map_err(|e| classify(&format!("cannot describe launch template {name}"), &e))?;
    found
        .launch_templates
        .unwrap_or_default()
        .into_iter()
        .find_map(|t| t.launch_template_id)
        .ok_or_else(|| ExternalError::Transient(format!("launch template {name} exists but has no id")))
}

/// The security groups version `version` of launch template `id` puts the nodes in: the instance's, or (with
/// EFA) those on its network interfaces. Sorted, without repeats.
pub async fn security_groups(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
    version: &str,
) -> Result<Vec<String>, ExternalError> {
    let out = ec2
        .describe_launch_template_versions()
        .launch_template_id(id)
        .versions(version)
        .send()
        .await
        .map_err(|e| {
            classify(
                &format!("cannot describe launch template {id} version {version}"),
                &e,
            )
        })?;
    let data = out
        .launch_template_versions()
        .first()
        .and_then(|v| v.launch_template_data())
        .ok_or_else(|| ExternalError::Transient(format!("launch template {id} has no version {version}")))?;
    let mut groups: Vec<String> = data
        .security_group_ids()
        .iter()
        .chain(data.network_interfaces().iter().flat_map(|n| n.groups()))
        .cloned()
        .collect();
    groups.sort();
    groups.dedup();
    Ok(groups)
}

/// Whether the launch template named `name` is still there (a deleted pool's leftover). It is deleted last,
/// so while it exists the placement group may too.
pub async fn leftover(ec2: &aws_sdk_ec2::Client, name: &str) -> Result<bool, ExternalError> {
    let templates = ec2
        .describe_launch_templates()
        .launch_template_names(name)
        .send()
        .await;
    let what = format!("cannot describe launch template {name}");
    let templates = found(templates, TEMPLATE_NOT_FOUND, &what)?;
    Ok(templates.is_some_and(|out| !out.launch_templates().is_empty()))
}

/// Deletes the placement group (EFA pools) and then the launch template named `name`, once the node group
/// that used them is gone.
pub async fn remove(
    ec2: &aws_sdk_ec2::Client,
    name: &str,
    pool: &NodePoolParameters,
) -> Result<(), ExternalError> {
    if pool.efa_interfaces > 0 {
        let deleted = ec2.delete_placement_group().group_name(name).send().await;
        let held = format!("placement group {name} still holds instances of the deleted node group");
        let codes = ["InvalidPlacementGroup.Unknown", "InvalidPlacementGroup.InUse"];
        gone_unless_held(
            deleted,
            codes,
            held,
            &format!("cannot delete placement group {name}"),
        )?;
    }
    let deleted = ec2
        .delete_launch_template()
        .launch_template_name(name)
        .send()
        .await;
    let gone = [TEMPLATE_NOT_FOUND, "InvalidLaunchTemplateId.NotFound"].map(|code| (code, Meaning::Settled));
    answer(deleted, &format!("cannot delete launch template {name}"), &gone).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> NodePoolParameters {
        NodePoolParameters {
            instance_types: vec!["p5en.48xlarge".into()],
            ..Default::default()
        }
    }

    #[test]
    fn an_on_demand_pool_without_efa_needs_no_launch_template() {
        assert!(!needed(&pool()));
    }

    #[test]
    fn a_capacity_block_pool_targets_its_reservation() {
        let p = NodePoolParameters {
            capacity_type: CapacityType::CapacityBlock,
            capacity_reservation_id: Some("cr-0123".into()),
            ..pool()
        };
        assert!(needed(&p));
        let d = data(&p, "pg").unwrap();
        assert_eq!(
            d.instance_market_options().and_then(|m| m.market_type()),
            Some(&MarketType::CapacityBlock)
        );
        let target = d
            .capacity_reservation_specification()
            .and_then(|c| c.capacity_reservation_target());
        assert_eq!(target.and_then(|t| t.capacity_reservation_id()), Some("cr-0123"));
        assert!(d.placement().is_none());
    }

    #[test]
    fn a_capacity_block_without_a_reservation_is_rejected_naming_the_field() {
        let p = NodePoolParameters {
            capacity_type: CapacityType::CapacityBlock,
            ..pool()
        };
        let err = data(&p, "pg").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("spec.forProvider.capacityReservationId"),
            "{err}"
        );
    }

    #[test]
    fn efa_interfaces_get_one_network_card_each_in_a_cluster_placement_group() {
        let p = NodePoolParameters {
            efa_interfaces: 4,
            disk_size: Some(500),
            ..pool()
        };
        let d = data(&p, "pool-a").unwrap();
        let cards: Vec<_> = d
            .network_interfaces()
            .iter()
            .map(|n| (n.interface_type(), n.device_index(), n.network_card_index()))
            .collect();
        assert_eq!(
            cards,
            vec![
                (Some("efa"), Some(0), Some(0)),
                (Some("efa"), Some(1), Some(1)),
                (Some("efa"), Some(1), Some(2)),
                (Some("efa"), Some(1), Some(3)),
            ]
        );
        assert_eq!(d.placement().and_then(|p| p.group_name()), Some("pool-a"));
        let root = &d.block_device_mappings()[0];
        assert_eq!(root.ebs().and_then(|e| e.volume_size()), Some(500));
    }

    #[test]
    fn security_groups_need_a_template_and_go_on_the_instance_or_on_each_efa_interface() {
        let plain = NodePoolParameters {
            security_group_ids: vec!["sg-1".into()],
            ..pool()
        };
        assert!(needed(&plain));
        let d = data(&plain, "pool-a").unwrap();
        assert_eq!(d.security_group_ids(), ["sg-1"]);
        let efa = NodePoolParameters {
            efa_interfaces: 2,
            ..plain
        };
        let d = data(&efa, "pool-a").unwrap();
        assert!(d.security_group_ids().is_empty());
        assert!(d.network_interfaces().iter().all(|n| n.groups() == ["sg-1"]));
    }
}
