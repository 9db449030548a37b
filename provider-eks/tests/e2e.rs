//! The real binary against kmock (Kubernetes API, over HTTP, with watches) and moto (AWS) behind our fault
//! proxy: activation, create, scale, delete, faults, a crash right after CreateCluster, and no leaked secrets.

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_credential_types::Credentials as AwsCredentials;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use modelplane_eks_api::*;
use serde_json::json;
use support::proxy::{Fault, FaultProxy};
use support::{MOTO_CREDENTIALS, Peer};

const NS: &str = "team-a";
const REGION: &str = "us-east-1";
const SECRET_KEY: &str = "moto-secret-never-logged";
/// Generous: the CI machine compiles other crates while these tests run.
const CONVERGE: Duration = Duration::from_secs(180);

struct World {
    moto: Peer,
    _kmock: Peer,
    proxy: FaultProxy,
    kube: kube::Client,
    dir: PathBuf,
    provider: Option<Child>,
    metrics_port: u16,
    starts: usize,
}

impl World {
    async fn start() -> Option<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let moto = support::start_moto()?;
        let kmock = support::start_kmock()?;
        let proxy = FaultProxy::start(moto.port).await;
        let config = kube::Config::new(kmock.url().parse().unwrap());
        let kube = kube::Client::try_from(config).unwrap();
        let dir = std::env::temp_dir().join(format!("provider-eks-e2e-{}-{}", std::process::id(), kmock.port));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
            "clusters": [{ "name": "kmock", "cluster": { "server": kmock.url() } }],
            "users": [{ "name": "kmock", "user": {} }],
            "contexts": [{ "name": "kmock", "context": { "cluster": "kmock", "user": "kmock" } }],
        });
        std::fs::write(dir.join("kubeconfig"), serde_json::to_string(&kubeconfig).unwrap()).unwrap();
        let world = World {
            moto,
            _kmock: kmock,
            proxy,
            kube,
            dir,
            provider: None,
            metrics_port: support::free_port(),
            starts: 0,
        };
        world.seed().await;
        Some(world)
    }

    /// The credentials Secret, a ProviderConfig pointing at the proxy, and our two MRDs, Inactive.
    async fn seed(&self) {
        let secret = Secret {
            metadata: ObjectMeta { name: Some("aws".into()), namespace: Some(NS.into()), ..Default::default() },
            data: Some(BTreeMap::from([("credentials".to_string(), ByteString(MOTO_CREDENTIALS.into()))])),
            ..Default::default()
        };
        Api::<Secret>::namespaced(self.kube.clone(), NS).create(&PostParams::default(), &secret).await.unwrap();
        let mut pc = ProviderConfig::new(
            "default",
            ProviderConfigSpec {
                credentials: Credentials {
                    source: CredentialsSource::Secret,
                    secret_ref: Some(SecretKeySelector {
                        name: "aws".into(),
                        namespace: None,
                        key: "credentials".into(),
                    }),
                    role_arn: None,
                },
                endpoint: Some(self.proxy.url()),
            },
        );
        pc.metadata.namespace = Some(NS.into());
        Api::<ProviderConfig>::namespaced(self.kube.clone(), NS).create(&PostParams::default(), &pc).await.unwrap();
        for plural in ["clusters", "nodepools"] {
            let mut mrd = DynamicObject::new(&format!("{plural}.eks.m.modelplane.ai"), &mrd_resource());
            mrd.data = json!({ "spec": { "state": "Inactive" } });
            self.mrds().create(&PostParams::default(), &mrd).await.unwrap();
        }
    }

    fn mrds(&self) -> Api<DynamicObject> {
        Api::all_with(self.kube.clone(), &mrd_resource())
    }

    fn clusters(&self) -> Api<Cluster> {
        Api::namespaced(self.kube.clone(), NS)
    }

    fn pools(&self) -> Api<NodePool> {
        Api::namespaced(self.kube.clone(), NS)
    }

    fn log(&self) -> String {
        (0..self.starts)
            .map(|i| std::fs::read_to_string(self.dir.join(format!("provider-{i}.log"))).unwrap_or_default())
            .collect()
    }

    fn start_provider(&mut self) {
        let log = std::fs::File::create(self.dir.join(format!("provider-{}.log", self.starts))).unwrap();
        self.starts += 1;
        let child = Command::new(env!("CARGO_BIN_EXE_modelplane-provider-eks"))
            .args(["--metrics-address", &format!("127.0.0.1:{}", self.metrics_port)])
            .args(["--poll-interval-seconds", "2", "--busy-interval-seconds", "1", "--debug"])
            .env("KUBECONFIG", self.dir.join("kubeconfig"))
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        self.provider = Some(child);
    }

    fn kill_provider(&mut self) {
        if let Some(mut child) = self.provider.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn metrics(&self) -> Option<String> {
        std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        Some(support::http("GET", &format!("http://127.0.0.1:{}/metrics", self.metrics_port), "").1)
    }

    async fn activate(&self) {
        for plural in ["clusters", "nodepools"] {
            let patch = Patch::Merge(json!({ "spec": { "state": "Active" } }));
            self.mrds().patch(&format!("{plural}.eks.m.modelplane.ai"), &PatchParams::default(), &patch).await.unwrap();
        }
    }

    fn eks(&self) -> aws_sdk_eks::Client {
        let config = aws_sdk_eks::Config::builder()
            .behavior_version(aws_sdk_eks::config::BehaviorVersion::latest())
            .region(aws_sdk_eks::config::Region::new(REGION))
            .credentials_provider(AwsCredentials::new("testing", "testing", None, None, "test"))
            .endpoint_url(self.moto.url())
            .build();
        aws_sdk_eks::Client::from_conf(config)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.kill_provider();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn mrd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.crossplane.io", "v1alpha1", "ManagedResourceDefinition"),
        "managedresourcedefinitions",
    )
}

async fn wait_for<F, Fut>(what: &str, world: &World, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + CONVERGE;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}\nprovider log:\n{}", world.log());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions.iter().any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
}

fn cluster(name: &str) -> Cluster {
    let mut c = Cluster::new(
        name,
        ClusterSpec {
            for_provider: ClusterParameters {
                region: REGION.into(),
                version: "1.34".into(),
                role_arn: "arn:aws:iam::123456789012:role/eks-cluster".into(),
                networking: Networking { subnet_ids: vec!["subnet-a".into(), "subnet-b".into()], vpc: None },
                endpoint_public_access: true,
                ..Default::default()
            },
            provider_config_ref: ProviderConfigReference { kind: "ProviderConfig".into(), name: "default".into() },
            management_policies: vec![ManagementPolicy::All],
            write_connection_secret_to_ref: Some(SecretReference { name: format!("{name}-kubeconfig") }),
        },
    );
    c.metadata.namespace = Some(NS.into());
    c
}

fn pool(name: &str, cluster: &str) -> NodePool {
    let mut p = NodePool::new(
        name,
        NodePoolSpec {
            for_provider: NodePoolParameters {
                region: REGION.into(),
                cluster_ref: LocalReference { name: cluster.into() },
                node_role_arn: "arn:aws:iam::123456789012:role/eks-node".into(),
                instance_types: vec!["p5.48xlarge".into()],
                scaling: Scaling { min_size: 1, max_size: 4, desired_size: 2 },
                labels: [("modelplane.ai/pool".to_string(), name.to_string())].into(),
                ..Default::default()
            },
            provider_config_ref: ProviderConfigReference { kind: "ProviderConfig".into(), name: "default".into() },
            management_policies: vec![ManagementPolicy::All],
            write_connection_secret_to_ref: None,
        },
    );
    p.metadata.namespace = Some(NS.into());
    p
}

async fn cluster_ready(world: &World, name: &str) -> bool {
    let Ok(c) = world.clusters().get(name).await else { return false };
    let conditions = c.status.map(|s| s.conditions).unwrap_or_default();
    is_true(&conditions, "Ready") && is_true(&conditions, "Synced")
}

async fn pool_ready(world: &World, name: &str) -> bool {
    let Ok(p) = world.pools().get(name).await else { return false };
    let conditions = p.status.map(|s| s.conditions).unwrap_or_default();
    is_true(&conditions, "Ready") && is_true(&conditions, "Synced")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activated_provider_creates_scales_and_deletes_a_cluster_and_pool_in_order() {
    let Some(mut world) = World::start().await else { return };
    world.start_provider();
    let pp = PostParams::default();
    world.clusters().create(&pp, &cluster("demo")).await.unwrap();
    world.pools().create(&pp, &pool("h200", "demo")).await.unwrap();

    // Before activation: the process serves metrics, runs no controller and makes no AWS call.
    wait_for("the metrics endpoint", &world, || async { world.metrics().is_some() }).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(world.metrics().unwrap().contains("modelplane_provider_eks_active_controllers 0"));
    assert_eq!(world.proxy.requests(), Vec::<String>::new(), "AWS was called before activation");
    let untouched = world.clusters().get("demo").await.unwrap();
    assert!(untouched.status.is_none() && untouched.finalizers().is_empty());

    world.activate().await;
    wait_for("Cluster demo Ready and Synced", &world, || cluster_ready(&world, "demo")).await;
    wait_for("NodePool h200 Ready and Synced", &world, || pool_ready(&world, "h200")).await;

    let eks = world.eks();
    let described = eks.describe_cluster().name("demo").send().await.unwrap().cluster.unwrap();
    assert_eq!(described.version.as_deref(), Some("1.34"));
    let group = eks.describe_nodegroup().cluster_name("demo").nodegroup_name("h200").send().await.unwrap();
    let group = group.nodegroup.unwrap();
    assert_eq!(group.scaling_config.as_ref().and_then(|s| s.desired_size), Some(2));
    assert_eq!(group.labels.unwrap()["modelplane.ai/pool"], "h200");

    let c = world.clusters().get("demo").await.unwrap();
    assert_eq!(c.annotations()["crossplane.io/external-name"], "demo");
    assert!(c.finalizers().contains(&"finalizer.managedresource.crossplane.io".to_string()));
    let secret = Api::<Secret>::namespaced(world.kube.clone(), NS).get("demo-kubeconfig").await.unwrap();
    let kubeconfig: serde_json::Value = serde_yaml::from_slice(&secret.data.unwrap()["kubeconfig"].0).unwrap();
    assert_eq!(kubeconfig["clusters"][0]["cluster"]["server"].as_str(), described.endpoint.as_deref());

    let scale = Patch::Merge(json!({ "spec": { "forProvider": { "scaling": { "desiredSize": 3 } } } }));
    world.pools().patch("h200", &PatchParams::default(), &scale).await.unwrap();
    wait_for("desired size 3 in moto", &world, || async {
        let g = eks.describe_nodegroup().cluster_name("demo").nodegroup_name("h200").send().await;
        g.ok().and_then(|g| g.nodegroup?.scaling_config?.desired_size) == Some(3)
    })
    .await;

    // Deleting both at once: the cluster waits until its node group is gone.
    world.clusters().delete("demo", &DeleteParams::default()).await.unwrap();
    world.pools().delete("h200", &DeleteParams::default()).await.unwrap();
    wait_for("both managed resources gone", &world, || async {
        world.clusters().get_opt("demo").await.unwrap().is_none()
            && world.pools().get_opt("h200").await.unwrap().is_none()
    })
    .await;
    assert!(eks.list_clusters().send().await.unwrap().clusters.unwrap_or_default().is_empty());
    let requests = world.proxy.requests();
    let group_deleted = requests.iter().position(|r| r == "DELETE /clusters/demo/node-groups/h200").unwrap();
    let cluster_deleted = requests.iter().position(|r| r == "DELETE /clusters/demo").unwrap();
    assert!(group_deleted < cluster_deleted, "{requests:?}");
    assert!(!world.log().contains(SECRET_KEY), "the secret access key appeared in the provider log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_server_errors_and_slow_answers_converge_to_one_cluster() {
    let Some(mut world) = World::start().await else { return };
    world.proxy.inject(
        "",
        &[
            Fault::Throttle,
            Fault::ServerError,
            Fault::Throttle,
            Fault::Slow(Duration::from_secs(2)),
            Fault::ServerError,
            Fault::Hang,
            Fault::Throttle,
            Fault::ServerError,
        ],
    );
    world.start_provider();
    world.clusters().create(&PostParams::default(), &cluster("flaky")).await.unwrap();
    world.activate().await;
    wait_for("Cluster flaky Ready despite faults", &world, || cluster_ready(&world, "flaky")).await;
    let clusters = world.eks().list_clusters().send().await.unwrap().clusters.unwrap_or_default();
    assert_eq!(clusters, vec!["flaky".to_string()]);
    assert!(!world.log().contains(SECRET_KEY), "the secret access key appeared in the provider log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_killed_right_after_create_cluster_adopts_the_cluster_on_restart() {
    let Some(mut world) = World::start().await else { return };
    // CreateCluster reaches moto, but its answer never comes back.
    world.proxy.inject("POST /clusters", &[Fault::Lost]);
    world.start_provider();
    world.clusters().create(&PostParams::default(), &cluster("crash")).await.unwrap();
    world.activate().await;
    let eks = world.eks();
    wait_for("CreateCluster to reach moto", &world, || async {
        eks.describe_cluster().name("crash").send().await.is_ok()
    })
    .await;
    world.kill_provider();

    world.start_provider();
    wait_for("Cluster crash Ready after restart", &world, || cluster_ready(&world, "crash")).await;
    let clusters = eks.list_clusters().send().await.unwrap().clusters.unwrap_or_default();
    assert_eq!(clusters, vec!["crash".to_string()]);
}
