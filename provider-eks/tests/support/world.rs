//! A whole provider world for the end-to-end tests and the benchmark: moto behind the fault proxy, kmock,
//! the seeded ProviderConfig and MRDs, and the real binary as a child process.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_credential_types::Credentials as AwsCredentials;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionStatus,
};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams};
use modelplane_eks_api::*;
use serde_json::json;

use super::fastkube::FastKube;
use super::proxy::FaultProxy;
use super::{MOTO_CREDENTIALS, Peer};

pub const NS: &str = "team-a";
pub const REGION: &str = "us-east-1";
pub const SECRET_KEY: &str = "moto-secret-never-logged";
/// Generous: the CI machine compiles other crates while these tests run.
pub const CONVERGE: Duration = Duration::from_secs(180);

pub struct World {
    pub moto: Peer,
    /// The Kubernetes stand-in: kmock, or (for the fleet benchmark) the in-process `FastKube`.
    pub _kmock: Option<Peer>,
    pub _fastkube: Option<FastKube>,
    pub proxy: FaultProxy,
    pub kube: kube::Client,
    pub dir: PathBuf,
    pub provider: Option<Child>,
    pub metrics_port: u16,
    pub starts: usize,
}

impl World {
    /// A world whose CRDs are Established, as on a cluster where Crossplane installed the package.
    pub async fn start() -> Option<Self> {
        Self::start_with(true).await
    }

    /// `crds_established: false` leaves the managed kinds' CRDs not yet served (see `establish_crds`).
    pub async fn start_with(crds_established: bool) -> Option<Self> {
        let kmock = super::start_kmock()?;
        Self::start_on(Some(kmock), None, crds_established).await
    }

    /// A world on the in-process `FastKube` instead of kmock, for thousands of managed resources.
    pub async fn start_fast() -> Option<Self> {
        let fast = FastKube::start().await;
        Self::start_on(None, Some(fast), true).await
    }

    async fn start_on(kmock: Option<Peer>, fast: Option<FastKube>, crds_established: bool) -> Option<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let moto = super::start_moto()?;
        let proxy = FaultProxy::start(moto.port).await;
        let (url, port) = match (&kmock, &fast) {
            (Some(k), _) => (k.url(), k.port),
            (None, Some(f)) => (f.url(), f.port),
            (None, None) => panic!("a world needs a Kubernetes stand-in"),
        };
        let config = kube::Config::new(url.parse().unwrap());
        let kube = kube::Client::try_from(config).unwrap();
        let dir = std::env::temp_dir().join(format!("provider-eks-e2e-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
            "clusters": [{ "name": "kmock", "cluster": { "server": url } }],
            "users": [{ "name": "kmock", "user": {} }],
            "contexts": [{ "name": "kmock", "context": { "cluster": "kmock", "user": "kmock" } }],
        });
        std::fs::write(
            dir.join("kubeconfig"),
            serde_json::to_string(&kubeconfig).unwrap(),
        )
        .unwrap();
        let world = World {
            moto,
            _kmock: kmock,
            _fastkube: fast,
            proxy,
            kube,
            dir,
            provider: None,
            metrics_port: super::free_port(),
            starts: 0,
        };
        world.seed().await;
        world.seed_crds(crds_established).await;
        Some(world)
    }

    /// The credentials Secret, a ProviderConfig pointing at the proxy, and our two MRDs, Inactive.
    pub async fn seed(&self) {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("aws".into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                "credentials".to_string(),
                ByteString(MOTO_CREDENTIALS.into()),
            )])),
            ..Default::default()
        };
        Api::<Secret>::namespaced(self.kube.clone(), NS)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
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
        Api::<ProviderConfig>::namespaced(self.kube.clone(), NS)
            .create(&PostParams::default(), &pc)
            .await
            .unwrap();
        for plural in ["clusters", "nodepools"] {
            let mut mrd = DynamicObject::new(&format!("{plural}.eks.m.modelplane.ai"), &mrd_resource());
            mrd.data = json!({ "spec": { "state": "Inactive" } });
            self.mrds().create(&PostParams::default(), &mrd).await.unwrap();
        }
    }

    /// The provider's CRDs, with `Established` as given (Crossplane creates them after the MRD turns Active;
    /// the API server serves a kind only once its CRD is Established).
    pub async fn seed_crds(&self, established: bool) {
        for mut crd in modelplane_provider_eks::crds::all() {
            crd.status = Some(crd_status(established));
            self.crds().create(&PostParams::default(), &crd).await.unwrap();
        }
    }

    pub async fn establish_crds(&self) {
        for crd in modelplane_provider_eks::crds::all() {
            let name = crd.metadata.name.clone().unwrap();
            let patch = Patch::Merge(json!({ "status": crd_status(true) }));
            self.crds()
                .patch_status(&name, &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
    }

    pub fn crds(&self) -> Api<CustomResourceDefinition> {
        Api::all(self.kube.clone())
    }

    pub fn mrds(&self) -> Api<DynamicObject> {
        Api::all_with(self.kube.clone(), &mrd_resource())
    }

    pub fn clusters(&self) -> Api<Cluster> {
        Api::namespaced(self.kube.clone(), NS)
    }

    pub fn pools(&self) -> Api<NodePool> {
        Api::namespaced(self.kube.clone(), NS)
    }

    pub fn log(&self) -> String {
        (0..self.starts)
            .map(|i| std::fs::read_to_string(self.dir.join(format!("provider-{i}.log"))).unwrap_or_default())
            .collect()
    }

    pub fn start_provider(&mut self) {
        self.start_provider_with(&[
            "--poll-interval-seconds",
            "2",
            "--busy-interval-seconds",
            "1",
            "--debug",
        ]);
    }

    pub fn provider_pid(&self) -> Option<u32> {
        self.provider.as_ref().map(Child::id)
    }

    pub fn start_provider_with(&mut self, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("provider-{}.log", self.starts))).unwrap();
        self.starts += 1;
        let child = Command::new(env!("CARGO_BIN_EXE_modelplane-provider-eks"))
            .args(["--metrics-address", &format!("127.0.0.1:{}", self.metrics_port)])
            .args(args)
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

    pub fn kill_provider(&mut self) {
        if let Some(mut child) = self.provider.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn metrics(&self) -> Option<String> {
        std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        Some(
            super::http(
                "GET",
                &format!("http://127.0.0.1:{}/metrics", self.metrics_port),
                "",
            )
            .1,
        )
    }

    pub async fn activate(&self) {
        for plural in ["clusters", "nodepools"] {
            let patch = Patch::Merge(json!({ "spec": { "state": "Active" } }));
            self.mrds()
                .patch(
                    &format!("{plural}.eks.m.modelplane.ai"),
                    &PatchParams::default(),
                    &patch,
                )
                .await
                .unwrap();
        }
    }

    pub fn eks(&self) -> aws_sdk_eks::Client {
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

pub fn crd_status(established: bool) -> CustomResourceDefinitionStatus {
    let status = if established { "True" } else { "False" };
    serde_json::from_value(json!({
        "conditions": [{ "type": "Established", "status": status, "reason": "InitialNamesAccepted" }],
        "acceptedNames": { "kind": "", "plural": "" },
    }))
    .unwrap()
}

pub fn mrd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "apiextensions.crossplane.io",
            "v1alpha1",
            "ManagedResourceDefinition",
        ),
        "managedresourcedefinitions",
    )
}

pub async fn wait_for<F, Fut>(what: &str, world: &World, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + CONVERGE;
    // A check that hangs (a stand-in that stopped answering) counts as "not yet", so the deadline still holds.
    while !tokio::time::timeout(Duration::from_secs(10), check())
        .await
        .unwrap_or(false)
    {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\nprovider log:\n{}",
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
}

pub fn cluster(name: &str) -> Cluster {
    let mut c = Cluster::new(
        name,
        ClusterSpec {
            for_provider: ClusterParameters {
                region: REGION.into(),
                version: "1.34".into(),
                role_arn: "arn:aws:iam::123456789012:role/eks-cluster".into(),
                networking: Networking {
                    subnet_ids: vec!["subnet-a".into(), "subnet-b".into()],
                    vpc: None,
                },
                endpoint_public_access: true,
                ..Default::default()
            },
            provider_config_ref: ProviderConfigReference {
                kind: "ProviderConfig".into(),
                name: "default".into(),
            },
            management_policies: vec![ManagementPolicy::All],
            write_connection_secret_to_ref: Some(SecretReference {
                name: format!("{name}-kubeconfig"),
            }),
        },
    );
    c.metadata.namespace = Some(NS.into());
    c
}

pub fn pool(name: &str, cluster: &str) -> NodePool {
    let mut p = NodePool::new(
        name,
        NodePoolSpec {
            for_provider: NodePoolParameters {
                region: REGION.into(),
                cluster_ref: LocalReference { name: cluster.into() },
                node_role_arn: "arn:aws:iam::123456789012:role/eks-node".into(),
                instance_types: vec!["p5.48xlarge".into()],
                scaling: Scaling {
                    min_size: 1,
                    max_size: 4,
                    desired_size: 2,
                },
                labels: [("modelplane.ai/pool".to_string(), name.to_string())].into(),
                ..Default::default()
            },
            provider_config_ref: ProviderConfigReference {
                kind: "ProviderConfig".into(),
                name: "default".into(),
            },
            management_policies: vec![ManagementPolicy::All],
            write_connection_secret_to_ref: None,
        },
    );
    p.metadata.namespace = Some(NS.into());
    p
}

pub async fn cluster_ready(world: &World, name: &str) -> bool {
    let Ok(c) = world.clusters().get(name).await else {
        return false;
    };
    let conditions = c.status.map(|s| s.conditions).unwrap_or_default();
    is_true(&conditions, "Ready") && is_true(&conditions, "Synced")
}

pub async fn pool_ready(world: &World, name: &str) -> bool {
    let Ok(p) = world.pools().get(name).await else {
        return false;
    };
    let conditions = p.status.map(|s| s.conditions).unwrap_or_default();
    is_true(&conditions, "Ready") && is_true(&conditions, "Synced")
}
