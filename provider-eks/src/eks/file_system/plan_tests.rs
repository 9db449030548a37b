use super::*;

fn mt(subnet: &str, state: &str) -> MountTarget {
    MountTarget {
        subnet_id: subnet.into(),
        mount_target_id: format!("fsmt-{subnet}"),
        life_cycle_state: state.into(),
    }
}

#[test]
fn mount_targets_follow_the_subnets() {
    let wanted = vec!["a".to_string(), "b".to_string()];
    let (create, delete) = mount_target_plan(&wanted, &[mt("a", "available"), mt("c", "available")]);
    assert_eq!(create, vec!["b".to_string()]);
    assert_eq!(delete, vec!["fsmt-c".to_string()]);
}

#[test]
fn ready_only_with_every_mount_target_available() {
    let wanted = vec!["a".to_string(), "b".to_string()];
    let (r, busy) = file_system_phase("available", &[mt("a", "available"), mt("b", "creating")], &wanted);
    assert!(matches!(r, Readiness::Unavailable(m) if m.contains('b')));
    assert!(busy);
    let (r, busy) = file_system_phase(
        "available",
        &[mt("a", "available"), mt("b", "available")],
        &wanted,
    );
    assert_eq!((r, busy), (Readiness::Available, false));
    assert_eq!(
        file_system_phase("creating", &[], &wanted),
        (Readiness::Creating, true)
    );
}

#[test]
fn the_creation_token_is_stable_short_and_per_resource() {
    let a = creation_token("team-a/demo");
    assert_eq!(a, creation_token("team-a/demo"));
    assert_ne!(a, creation_token("team-b/demo"));
    assert!(a.len() <= 64);
}

fn described(state: LifeCycleState, mount_targets: i32, tags: &[(&str, &str)]) -> FileSystemDescription {
    FileSystemDescription::builder()
        .owner_id("123456789012")
        .creation_token("modelplane-x")
        .file_system_id("fs-1")
        .creation_time(aws_sdk_efs::primitives::DateTime::from_secs(0))
        .life_cycle_state(state)
        .number_of_mount_targets(mount_targets)
        .size_in_bytes(aws_sdk_efs::types::FileSystemSize::builder().value(0).build())
        .performance_mode(aws_sdk_efs::types::PerformanceMode::GeneralPurpose)
        .throughput_mode(EfsThroughput::Elastic)
        .set_tags(Some(
            efs_tags(tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap(),
        ))
        .build()
        .unwrap()
}

#[test]
fn a_steady_poll_stands_in_only_for_a_file_system_as_recorded() {
    let spec = FileSystemParameters {
        subnet_ids: vec!["a".into(), "b".into()],
        tags: [("team".to_string(), "a".to_string())].into(),
        ..Default::default()
    };
    let recorded = FileSystemObservation {
        file_system_id: Some("fs-1".into()),
        life_cycle_state: Some("available".into()),
        security_group_id: Some("sg-1".into()),
        mount_targets: vec![mt("a", "available"), mt("b", "available")],
    };
    let tags = [("team", "a"), ("other", "kept")];
    assert!(as_recorded(
        &spec,
        &recorded,
        &described(LifeCycleState::Available, 2, &tags)
    ));
    // A mount target deleted outside the provider shows in the count.
    assert!(!as_recorded(
        &spec,
        &recorded,
        &described(LifeCycleState::Available, 1, &tags)
    ));
    assert!(!as_recorded(
        &spec,
        &recorded,
        &described(LifeCycleState::Updating, 2, &tags)
    ));
    assert!(!as_recorded(
        &spec,
        &recorded,
        &described(LifeCycleState::Available, 2, &[("team", "b")])
    ));
    let bursting = FileSystemParameters {
        throughput_mode: ThroughputMode::Bursting,
        ..spec.clone()
    };
    assert!(!as_recorded(
        &bursting,
        &recorded,
        &described(LifeCycleState::Available, 2, &tags)
    ));
    let another_subnet = FileSystemParameters {
        subnet_ids: vec!["a".into(), "c".into()],
        ..spec.clone()
    };
    assert!(!as_recorded(
        &another_subnet,
        &recorded,
        &described(LifeCycleState::Available, 2, &tags)
    ));
}
