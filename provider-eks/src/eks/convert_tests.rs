use modelplane_eks_api::TaintEffect;

use super::*;

#[test]
fn every_eks_cluster_status_maps_to_a_ready_reason() {
    let cases = [
        ("CREATING", Readiness::Creating, true),
        ("PENDING", Readiness::Creating, true),
        ("ACTIVE", Readiness::Available, false),
        ("UPDATING", Readiness::Available, true),
        ("DELETING", Readiness::Deleting, true),
        (
            "FAILED",
            Readiness::Unavailable("EKS cluster status is FAILED".into()),
            false,
        ),
    ];
    for (status, readiness, busy) in cases {
        assert_eq!(cluster_phase(status), Phase { readiness, busy }, "{status}");
    }
}

#[test]
fn every_node_group_status_maps_to_a_ready_reason() {
    let cases = [
        ("CREATING", Readiness::Creating, true),
        ("ACTIVE", Readiness::Available, false),
        ("UPDATING", Readiness::Available, true),
        ("DELETING", Readiness::Deleting, true),
        (
            "CREATE_FAILED",
            Readiness::Unavailable("EKS node group status is CREATE_FAILED".into()),
            false,
        ),
        (
            "DELETE_FAILED",
            Readiness::Unavailable("EKS node group status is DELETE_FAILED".into()),
            false,
        ),
    ];
    for (status, readiness, busy) in cases {
        assert_eq!(
            nodegroup_phase(status, &[]),
            Phase { readiness, busy },
            "{status}"
        );
    }
}

#[test]
fn a_degraded_node_group_says_why() {
    let p = nodegroup_phase(
        "DEGRADED",
        &["InsufficientFreeAddresses: subnet-1 is full".into()],
    );
    assert_eq!(
        p.readiness,
        Readiness::Unavailable(
            "EKS node group status is DEGRADED: InsufficientFreeAddresses: subnet-1 is full".into()
        )
    );
}

fn cluster(version: &str) -> ClusterParameters {
    ClusterParameters {
        region: "us-east-1".into(),
        version: version.into(),
        role_arn: "arn:aws:iam::123456789012:role/eks".into(),
        endpoint_public_access: true,
        tags: [("team".to_string(), "ml".to_string())].into(),
        ..Default::default()
    }
}

fn running(version: &str) -> ObservedCluster {
    ObservedCluster {
        version: Some(version.into()),
        endpoint_public_access: true,
        endpoint_private_access: false,
        tags: [
            ("team".to_string(), "ml".to_string()),
            ("aws:owner".to_string(), "x".to_string()),
        ]
        .into(),
        ..Default::default()
    }
}

#[test]
fn a_matching_cluster_has_no_drift_and_foreign_tags_are_left_alone() {
    assert!(cluster_drift(&cluster("1.34"), &running("1.34")).is_empty());
}

#[test]
fn a_version_upgrade_goes_one_minor_version_at_a_time() {
    assert_eq!(
        cluster_drift(&cluster("1.34"), &running("1.32"))
            .version
            .as_deref(),
        Some("1.33")
    );
    assert_eq!(
        cluster_drift(&cluster("1.33"), &running("1.32"))
            .version
            .as_deref(),
        Some("1.33")
    );
}

#[test]
fn an_older_desired_version_is_not_drift_because_eks_cannot_downgrade() {
    assert!(cluster_drift(&cluster("1.31"), &running("1.34")).is_empty());
}

#[test]
fn endpoint_access_and_changed_tags_are_drift() {
    let mut desired = cluster("1.34");
    desired.endpoint_private_access = true;
    desired.tags.insert("team".into(), "platform".into());
    let drift = cluster_drift(&desired, &running("1.34"));
    assert_eq!(drift.endpoint_access, Some((true, true)));
    assert_eq!(drift.tags, [("team".to_string(), "platform".to_string())].into());
}

fn pool() -> NodePoolParameters {
    NodePoolParameters {
        scaling: Scaling {
            min_size: 1,
            max_size: 4,
            desired_size: 2,
        },
        labels: [("modelplane.ai/pool".to_string(), "h200".to_string())].into(),
        taints: vec![Taint {
            key: "nvidia.com/gpu".into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        }],
        ..Default::default()
    }
}

fn group() -> ObservedNodeGroup {
    ObservedNodeGroup {
        scaling: Some(Scaling {
            min_size: 1,
            max_size: 4,
            desired_size: 2,
        }),
        labels: pool().labels,
        taints: pool().taints,
        ami_type: Some("AL2023_x86_64_NVIDIA".into()),
        disk_size: Some(20),
        ..Default::default()
    }
}

#[test]
fn a_matching_node_group_has_no_drift() {
    assert!(nodegroup_drift(&pool(), &group(), None).is_empty());
}

#[test]
fn scaling_labels_and_taints_drift_is_corrected_in_both_directions() {
    let mut observed = group();
    observed.scaling = Some(Scaling {
        min_size: 2,
        max_size: 4,
        desired_size: 2,
    });
    observed.labels.insert("stale".into(), "x".into());
    observed.taints = vec![Taint {
        key: "old".into(),
        value: "1".into(),
        effect: TaintEffect::NoExecute,
    }];
    let drift = nodegroup_drift(&pool(), &observed, None);
    assert_eq!(drift.scaling, Some(pool().scaling));
    assert_eq!(drift.labels_remove, vec!["stale".to_string()]);
    assert_eq!(drift.taints_set, pool().taints);
    assert_eq!(drift.taints_remove, observed.taints);
}

#[test]
fn the_autoscaler_owns_the_desired_size_inside_the_spec_range() {
    // The autoscaler grew the pool to 4 of at most 4: nothing to correct.
    let mut observed = group();
    observed.scaling = Some(Scaling {
        min_size: 1,
        max_size: 4,
        desired_size: 4,
    });
    assert_eq!(nodegroup_drift(&pool(), &observed, None).scaling, None);
    // The spec lowers the maximum to 3: the range is applied and the size brought inside it, not reset to 2.
    let mut lower = pool();
    lower.scaling.max_size = 3;
    assert_eq!(
        nodegroup_drift(&lower, &observed, None).scaling,
        Some(Scaling {
            min_size: 1,
            max_size: 3,
            desired_size: 3
        })
    );
    // A pool that does not autoscale follows its node count exactly.
    let mut fixed = pool();
    fixed.scaling = Scaling {
        min_size: 2,
        max_size: 2,
        desired_size: 2,
    };
    observed.scaling = Some(Scaling {
        min_size: 2,
        max_size: 2,
        desired_size: 1,
    });
    assert_eq!(
        nodegroup_drift(&fixed, &observed, None).scaling,
        Some(fixed.scaling)
    );
}

#[test]
fn a_changed_spec_applies_its_own_size_once_inside_the_range() {
    let autoscaled = Scaling {
        min_size: 1,
        max_size: 4,
        desired_size: 4,
    };
    // The spec now asks for 3: applied.
    let mut spec = pool().scaling;
    spec.desired_size = 3;
    assert_eq!(
        requested_size(&spec, Some(&autoscaled)),
        Some(Scaling {
            desired_size: 3,
            ..spec
        })
    );
    // A size past the range is brought inside it; a size already running asks for nothing.
    spec.desired_size = 9;
    let small = Scaling {
        desired_size: 2,
        ..autoscaled
    };
    assert_eq!(
        requested_size(&spec, Some(&small)).map(|s| s.desired_size),
        Some(4)
    );
    spec.desired_size = 4;
    assert_eq!(requested_size(&spec, Some(&autoscaled)), None);
}

#[test]
fn a_taint_whose_value_changed_is_set_not_removed() {
    let mut observed = group();
    observed.taints[0].value = "old".into();
    let drift = nodegroup_drift(&pool(), &observed, None);
    assert_eq!(drift.taints_set, pool().taints);
    assert!(drift.taints_remove.is_empty());
}

#[test]
fn open_ami_type_and_disk_size_are_late_initialized_once() {
    assert_eq!(
        nodegroup_late_init(&pool(), &group()),
        Some(json!({"amiType": "AL2023_x86_64_NVIDIA", "diskSize": 20}))
    );
    let mut filled = pool();
    filled.ami_type = Some("AL2023_x86_64_NVIDIA".into());
    filled.disk_size = Some(20);
    assert_eq!(nodegroup_late_init(&filled, &group()), None);
}

#[test]
fn fields_fixed_at_creation_are_named_not_silently_accepted() {
    let mut desired = pool();
    desired.instance_types = vec!["p5.48xlarge".into()];
    desired.node_role_arn = "arn:aws:iam::1:role/nodes".into();
    let observed = ObservedNodeGroup {
        instance_types: vec!["p4d.24xlarge".into()],
        capacity_type: Some("ON_DEMAND".into()),
        node_role: Some("arn:aws:iam::1:role/nodes".into()),
        subnets: vec!["subnet-a".into()],
        ..group()
    };
    let drift = nodegroup_drift(&desired, &observed, Some(&["subnet-b".to_string()]));
    assert!(drift.is_empty(), "nothing Update could change");
    assert!(!drift.up_to_date());
    assert_eq!(
        drift.unchangeable.0,
        vec!["spec.forProvider.instanceTypes", "spec.forProvider.zones"]
    );
    let message = drift.unchangeable.refusal("EKS node group h200").unwrap();
    assert!(
        message.contains("spec.forProvider.instanceTypes, spec.forProvider.zones"),
        "{message}"
    );
    // Same types in another order, unknown subnets: nothing to refuse.
    let reordered = ObservedNodeGroup {
        instance_types: vec!["p5.48xlarge".into()],
        ..observed
    };
    assert!(nodegroup_drift(&desired, &reordered, None).up_to_date());
}

#[test]
fn a_pools_security_groups_are_compared_with_its_launch_template_when_looked_at() {
    let mut desired = pool();
    desired.security_group_ids = vec!["sg-b".into(), "sg-a".into()];
    let held = |groups: &[&str]| ObservedNodeGroup {
        security_group_ids: Some(groups.iter().map(|g| g.to_string()).collect()),
        ..group()
    };
    assert!(nodegroup_drift(&desired, &held(&["sg-a", "sg-b"]), None).up_to_date());
    for other in [held(&["sg-a"]), held(&[]), held(&["sg-a", "sg-b", "sg-c"])] {
        let drift = nodegroup_drift(&desired, &other, None);
        assert_eq!(
            drift.unchangeable.0,
            vec!["spec.forProvider.securityGroupIds"],
            "{other:?}"
        );
    }
    // Not looked at this time (a steady pool between full looks): not compared.
    assert!(nodegroup_drift(&desired, &group(), None).up_to_date());
}

#[test]
fn a_cluster_refuses_a_downgrade_a_new_role_new_subnets_and_new_security_groups() {
    let mut desired = cluster("1.33");
    desired.networking.subnet_ids = vec!["subnet-c".into(), "subnet-d".into()];
    desired.networking.security_group_ids = vec!["sg-new".into()];
    let observed = ObservedCluster {
        role_arn: Some("arn:aws:iam::123456789012:role/other".into()),
        subnet_ids: vec!["subnet-a".into(), "subnet-b".into()],
        ..running("1.34")
    };
    let drift = cluster_drift(&desired, &observed);
    assert_eq!(drift.version, None);
    assert_eq!(
        drift.unchangeable.0,
        vec![
            "spec.forProvider.version",
            "spec.forProvider.roleArn",
            "spec.forProvider.networking.subnetIds",
            "spec.forProvider.networking.securityGroupIds"
        ]
    );
}

#[test]
fn a_region_change_is_refused_once_the_resource_exists() {
    let arn = "arn:aws:eks:us-east-1:123456789012:cluster/demo";
    assert_eq!(region_change(Some(arn), "us-east-1"), None);
    assert!(
        region_change(Some(arn), "eu-west-1")
            .unwrap()
            .contains("spec.forProvider.region")
    );
    assert_eq!(region_change(None, "eu-west-1"), None);
}
