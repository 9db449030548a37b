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
