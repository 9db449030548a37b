//! A stock EKS InferenceCluster (the seed's, `spec.cluster.eks: {region}` only) end to end: the real
//! composition function composes it stage by stage from what is observed, the real provider binary reconciles
//! every managed resource it composes on the real kube-apiserver, against moto (EC2, IAM, EFS, EKS) with the EKS
//! add-on and pod-identity stand-in in front, through the fault proxy. It converges to an ACTIVE cluster with
//! its node groups, add-ons, pod identities, EFS file system and mount targets; deleting it in the order the
//! function's Usages impose leaves the AWS account exactly as it was, every kind listed
//! (`stock/inventory.rs`). The same with the provider killed right after the first Create-type call of each
//! kind (and started again): nothing is made twice; and right after the first Delete-type call of each kind:
//! nothing is left. And with 30% of all AWS calls throttled or failed.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

#[path = "stock/driver.rs"]
mod driver;
#[path = "stock/inventory.rs"]
mod inventory;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use driver::StockCluster;
use inventory::Inventory;
use support::world::World;

/// What the run made: no kind holds two resources of one identity, and everything the provider made carries
/// its ownership tag (else a crash could not find it again).
fn assert_made_once(made: &Inventory) {
    assert!(
        made.duplicates().is_empty(),
        "made twice: {:#?}",
        made.duplicates()
    );
    assert!(
        made.untagged().is_empty(),
        "made without the ownership tag: {:#?}",
        made.untagged()
    );
}

/// Deletes the cluster's managed resources as Crossplane would and checks that AWS holds exactly what it held
/// before the run.
async fn tear_down_to(world: &mut World, cluster: &mut StockCluster, baseline: &Inventory) -> Vec<String> {
    tear_down_with(world, cluster, baseline, |_| {}).await
}

async fn tear_down_with(
    world: &mut World,
    cluster: &mut StockCluster,
    baseline: &Inventory,
    between: impl FnMut(&mut World),
) -> Vec<String> {
    let events = cluster.delete_with(world, between).await;
    let after = inventory::take(world).await;
    let left = after.since(baseline);
    assert!(
        left.is_empty(),
        "left in AWS after deleting: {left:#?}\nprovider log:\n{}",
        world.log()
    );
    let gone = baseline.since(&after);
    assert!(gone.is_empty(), "deleted what the run did not make: {gone:#?}");
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_inference_cluster_comes_up_in_stages_and_deleting_it_leaves_nothing_in_aws() {
    let mut world = World::start_with_eks_standin().await;
    let baseline = inventory::take(&world).await;
    driver::start_provider(&mut world);
    let mut cluster = StockCluster::example();
    cluster.converge(&mut world).await;
    let name = cluster.name().to_owned();

    // The stages, as the function composed them from what it observed.
    let first_seen = |key: &str| {
        cluster
            .stages
            .iter()
            .position(|s| s.contains(key))
            .unwrap_or_else(|| panic!("{key} was never composed: {:?}", cluster.stages))
    };
    let policy = first_seen("activation-policy");
    assert!(
        !cluster.stages[policy].iter().any(|k| k.starts_with("eks-")),
        "provider-eks objects composed with the activation policy: {:?}",
        cluster.stages[policy]
    );
    let network = first_seen("eks-network");
    assert!(policy < network);
    assert_eq!(first_seen("eks-role-cluster"), network);
    let control_plane = first_seen("eks-cluster");
    assert!(network < control_plane);
    assert!(network < first_seen("eks-filesystem"));
    for key in [
        "eks-nodepool-system",
        "eks-nodepool-gpu",
        "eks-addon-vpc-cni",
        "eks-podidentity-efs-csi",
    ] {
        assert!(control_plane < first_seen(key), "{key} before the cluster");
    }

    // What AWS holds.
    let eks = world.eks();
    let described = eks
        .describe_cluster()
        .name(&name)
        .send()
        .await
        .unwrap()
        .cluster
        .unwrap();
    assert_eq!(described.status.unwrap().as_str(), "ACTIVE");
    let network_status = &cluster.observed("eks-network").unwrap()["status"]["atProvider"];
    let private: BTreeSet<String> = network_status["privateSubnets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(private.len(), 2, "{network_status}");
    let cluster_subnets: BTreeSet<String> = described
        .resources_vpc_config
        .unwrap()
        .subnet_ids
        .unwrap_or_default()
        .into_iter()
        .collect();
    assert_eq!(
        cluster_subnets, private,
        "the cluster is on the network's private subnets"
    );
    let groups: BTreeSet<String> = eks
        .list_nodegroups()
        .cluster_name(&name)
        .send()
        .await
        .unwrap()
        .nodegroups
        .unwrap_or_default()
        .into_iter()
        .collect();
    assert_eq!(
        groups,
        BTreeSet::from([format!("{name}-gpu"), format!("{name}-system")])
    );
    for group in &groups {
        let g = eks
            .describe_nodegroup()
            .cluster_name(&name)
            .nodegroup_name(group)
            .send()
            .await
            .unwrap()
            .nodegroup
            .unwrap();
        assert_eq!(g.status.unwrap().as_str(), "ACTIVE", "{group}");
    }
    let addons: BTreeSet<String> = eks
        .list_addons()
        .cluster_name(&name)
        .send()
        .await
        .unwrap()
        .addons
        .unwrap_or_default()
        .into_iter()
        .collect();
    let wanted = [
        "aws-efs-csi-driver",
        "coredns",
        "eks-pod-identity-agent",
        "kube-proxy",
        "vpc-cni",
    ];
    assert_eq!(
        addons,
        wanted.iter().map(|a| (*a).to_owned()).collect::<BTreeSet<_>>()
    );
    let associations = eks
        .list_pod_identity_associations()
        .cluster_name(&name)
        .send()
        .await
        .unwrap()
        .associations
        .unwrap_or_default();
    let accounts: BTreeSet<String> = associations
        .iter()
        .map(|a| a.service_account.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        accounts,
        BTreeSet::from([
            "cluster-autoscaler".to_owned(),
            "efs-csi-controller-sa".to_owned()
        ])
    );
    let efs = world.efs();
    let systems = efs.describe_file_systems().send().await.unwrap();
    let [fs] = systems.file_systems() else {
        panic!("one file system wanted: {systems:?}");
    };
    assert_eq!(fs.life_cycle_state().as_str(), "available");
    let targets = efs
        .describe_mount_targets()
        .file_system_id(fs.file_system_id())
        .send()
        .await
        .unwrap();
    let target_subnets: BTreeSet<String> = targets
        .mount_targets()
        .iter()
        .map(|t| t.subnet_id().to_owned())
        .collect();
    assert_eq!(target_subnets, private, "a mount target in each private subnet");
    assert_eq!(
        cluster.observed("eks-filesystem").unwrap()["status"]["atProvider"]["fileSystemId"],
        fs.file_system_id()
    );

    let made = inventory::take(&world).await.since(&baseline);
    assert_made_once(&made);
    eprintln!("a stock cluster made: {}", made.summary());

    // The check sees a second VPC carrying the first one's tags: what a Create repeated after a crash makes.
    let ec2 = world.ec2();
    let vpc_id = network_status["vpcId"].as_str().unwrap();
    let tags = ec2.describe_vpcs().vpc_ids(vpc_id).send().await.unwrap().vpcs()[0]
        .tags()
        .to_vec();
    let twin = ec2
        .create_vpc()
        .cidr_block("10.1.0.0/16")
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Vpc)
                .set_tags(Some(tags))
                .build(),
        )
        .send()
        .await
        .unwrap()
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    let with_twin = inventory::take(&world).await.since(&baseline);
    assert_eq!(with_twin.duplicates().len(), 1, "{:?}", with_twin.duplicates());
    ec2.delete_vpc().vpc_id(twin).send().await.unwrap();

    let calls_before_delete = world.proxy.requests().len();
    let events = tear_down_to(&mut world, &mut cluster, &baseline).await;

    // A role is stripped of its policies when its delete starts: the node role's must wait until the node
    // groups are gone from AWS (their MRs lose the finalizer only then), and the cluster role's until the
    // cluster is.
    let at = |event: &str| {
        events
            .iter()
            .position(|e| e == event)
            .unwrap_or_else(|| panic!("no {event}: {events:?}"))
    };
    for (user, used) in [
        ("eks-nodepool-gpu", "eks-role-node"),
        ("eks-nodepool-system", "eks-role-node"),
        ("eks-cluster", "eks-role-cluster"),
        ("eks-podidentity-efs-csi", "eks-role-efs-csi"),
        ("eks-podidentity-autoscaler", "eks-role-autoscaler"),
        ("eks-cluster", "eks-network"),
        ("eks-filesystem", "eks-network"),
    ] {
        assert!(
            at(&format!("gone {user}")) < at(&format!("delete {used}")),
            "{used} deleted before {user} was gone: {events:?}"
        );
    }

    // AWS saw the deletes in the order the Usages hold: what hangs off the cluster, the cluster, then its
    // network and roles; the mount targets before the subnets they sit in.
    let deletes: Vec<String> = world.proxy.requests()[calls_before_delete..]
        .iter()
        .filter(|r| r.starts_with("DELETE ") || r.starts_with("EC2 Delete"))
        .cloned()
        .collect();
    let first = |what: &dyn Fn(&str) -> bool| {
        deletes
            .iter()
            .position(|r| what(r))
            .unwrap_or_else(|| panic!("a delete is missing: {deletes:?}"))
    };
    let last = |what: &dyn Fn(&str) -> bool| deletes.iter().rposition(|r| what(r)).unwrap();
    let cluster_path = format!("DELETE /clusters/{name}");
    let control_plane = first(&|r| r == cluster_path);
    let hanging_off = last(&|r| {
        ["/node-groups/", "/addons/", "/pod-identity-associations/"]
            .iter()
            .any(|part| r.starts_with(&cluster_path) && r.contains(part))
    });
    assert!(hanging_off < control_plane, "{deletes:?}");
    assert!(control_plane < first(&|r| r == "EC2 DeleteVpc"), "{deletes:?}");
    let mount_targets = last(&|r| r.starts_with("DELETE /2015-02-01/mount-targets/"));
    assert!(mount_targets < first(&|r| r == "EC2 DeleteSubnet"), "{deletes:?}");
}

/// The Create-type calls a stock cluster makes (every one of them: each kind of AWS object, attachment and
/// association of the seven provider-eks kinds; none of its pools needs a launch template).
const CREATE_KINDS: [&str; 20] = [
    "CreateRole",
    "AttachRolePolicy",
    "PutRolePolicy",
    "CreateVpc",
    "CreateSubnet",
    "CreateInternetGateway",
    "AttachInternetGateway",
    "AllocateAddress",
    "CreateNatGateway",
    "CreateRouteTable",
    "CreateRoute",
    "AssociateRouteTable",
    "CreateSecurityGroup",
    "AuthorizeSecurityGroupIngress",
    "POST /2015-02-01/file-systems",
    "POST /2015-02-01/mount-targets",
    "POST /clusters",
    "POST /clusters/*/node-groups",
    "POST /clusters/*/addons",
    "POST /clusters/*/pod-identity-associations",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_killed_right_after_each_kind_of_create_or_delete_makes_nothing_twice_and_leaves_nothing()
{
    let mut world = World::start_with_eks_standin().await;
    let baseline = inventory::take(&world).await;
    let pid = Arc::new(AtomicU32::new(0));
    let mut killed = world.proxy.crash_after_each_new_create(pid.clone());
    driver::start_provider(&mut world);
    pid.store(world.provider_pid().unwrap(), Ordering::SeqCst);
    let mut crashes = Vec::new();
    let mut cluster = StockCluster::example();
    cluster
        .converge_with(&mut world, |world| {
            restart_after_kills(world, &mut killed, &pid, &mut crashes)
        })
        .await;
    world.proxy.stop_crashing();
    for kind in CREATE_KINDS {
        assert!(
            crashes.iter().any(|c| c == kind),
            "never killed after {kind}: {crashes:?}"
        );
    }
    eprintln!("killed after {} kinds of Create: {crashes:?}", crashes.len());

    let made = inventory::take(&world).await.since(&baseline);
    assert_made_once(&made);

    // And killed right after the first Delete-type call of each kind: the teardown still leaves nothing.
    let mut killed = world.proxy.crash_after_each_new_delete(pid.clone());
    let mut crashes = Vec::new();
    tear_down_with(&mut world, &mut cluster, &baseline, |world| {
        restart_after_kills(world, &mut killed, &pid, &mut crashes)
    })
    .await;
    for kind in DELETE_KINDS {
        assert!(
            crashes.iter().any(|c| c == kind),
            "never killed after {kind}: {crashes:?}"
        );
    }
    eprintln!("killed after {} kinds of Delete: {crashes:?}", crashes.len());
}

/// The Delete-type calls a stock cluster's teardown makes (every one of them).
const DELETE_KINDS: [&str; 18] = [
    "DELETE /clusters/*/addons/*",
    "DELETE /clusters/*/node-groups/*",
    "DELETE /clusters/*/pod-identity-associations/*",
    "DELETE /clusters/*",
    "DELETE /2015-02-01/mount-targets/*",
    "DELETE /2015-02-01/file-systems/*",
    "DeleteSecurityGroup",
    "DetachRolePolicy",
    "DeleteRolePolicy",
    "DeleteRole",
    "DeleteNatGateway",
    "ReleaseAddress",
    "DisassociateRouteTable",
    "DeleteRouteTable",
    "DetachInternetGateway",
    "DeleteInternetGateway",
    "DeleteSubnet",
    "DeleteVpc",
];

/// Starts the provider again for each kill the proxy reports, and keeps the PID it kills current.
fn restart_after_kills(
    world: &mut World,
    killed: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    pid: &AtomicU32,
    crashes: &mut Vec<String>,
) {
    while let Ok(kind) = killed.try_recv() {
        crashes.push(kind);
        world.kill_provider();
        driver::start_provider(world);
        pid.store(world.provider_pid().unwrap(), Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_and_server_errors_on_30_percent_of_calls_still_converge_and_tear_down() {
    let mut world = World::start_with_eks_standin().await;
    let baseline = inventory::take(&world).await;
    world.proxy.fail_at_random(0.3, 10);
    driver::start_provider(&mut world);
    let mut cluster = StockCluster::example();
    cluster.converge(&mut world).await;
    let made = inventory::take(&world).await.since(&baseline);
    assert_made_once(&made);
    tear_down_to(&mut world, &mut cluster, &baseline).await;
    let (calls, faulted) = (world.proxy.requests().len(), world.proxy.faulted());
    let share = faulted as f64 / calls as f64;
    assert!(
        (0.2..0.4).contains(&share),
        "{faulted} of {calls} AWS calls faulted, not about 30%"
    );
}
