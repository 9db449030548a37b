use modelplane_eks_api::NetworkParameters;

use super::*;
use crate::eks::network::plan::subnets;

fn planned() -> Vec<PlannedSubnet> {
    subnets(&NetworkParameters {
        region: "us-east-1".into(),
        cidr_block: "10.0.0.0/16".into(),
        zones: vec!["us-east-1a".into(), "us-east-1b".into()],
        ..Default::default()
    })
}

fn complete() -> Parts {
    let subnets: Vec<SeenSubnet> = planned()
        .iter()
        .enumerate()
        .map(|(i, p)| SeenSubnet {
            part: p.part.clone(),
            id: format!("subnet-{i}"),
            zone: p.zone.clone(),
            cidr: p.cidr.clone(),
        })
        .collect();
    let table = |part: &str, target: &str, ids: &[usize]| SeenRouteTable {
        part: part.into(),
        id: format!("rtb-{part}"),
        default_target: Some(target.into()),
        associations: ids
            .iter()
            .map(|i| (format!("rtbassoc-{i}"), format!("subnet-{i}")))
            .collect(),
    };
    Parts {
        vpc: Some(("vpc-1".into(), "10.0.0.0/16".into())),
        subnets,
        internet_gateway: Some(("igw-1".into(), Some("vpc-1".into()))),
        elastic_ip: Some("eipalloc-1".into()),
        nat_gateway: Some(("nat-1".into(), "available".into(), None)),
        route_tables: vec![
            table(PUBLIC_ROUTES, "igw-1", &[0, 1]),
            table(PRIVATE_ROUTES, "nat-1", &[2, 3]),
        ],
        security_group: Some(("sg-1".into(), true)),
    }
}

#[test]
fn a_complete_network_is_ready_and_in_sync() {
    let state = complete().state(&planned());
    assert_eq!(state.missing, Vec::<String>::new());
    assert_eq!(state.readiness, Readiness::Available);
    assert!(!state.busy && state.unchangeable.is_empty());
}

#[test]
fn a_pending_nat_gateway_is_creating_and_its_route_missing() {
    let mut parts = complete();
    parts.nat_gateway = Some(("nat-1".into(), "pending".into(), None));
    parts.route_tables[1].default_target = None;
    let state = parts.state(&planned());
    assert_eq!(state.readiness, Readiness::Creating);
    assert!(state.busy);
    assert_eq!(state.missing, vec![format!("default route of {PRIVATE_ROUTES}")]);
}

#[test]
fn a_changed_cidr_or_zone_list_is_refused_by_field() {
    let parts = complete();
    let other = subnets(&NetworkParameters {
        region: "us-east-1".into(),
        cidr_block: "10.9.0.0/16".into(),
        zones: vec!["us-east-1a".into(), "us-east-1c".into()],
        ..Default::default()
    });
    let state = parts.state(&other);
    assert_eq!(
        state.unchangeable.0,
        vec![
            "spec.forProvider.cidrBlock".to_string(),
            "spec.forProvider.zones".to_string()
        ]
    );
}
