//! A whole provider world for the end-to-end tests and the benchmarks: moto behind the fault proxy, a
//! Kubernetes API (the real kube-apiserver, or kmock / the in-process `FastKube` where a test needs a stand-in),
//! the seeded ProviderConfig and MRDs, and the real binary as a child process.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use aws_credential_types::Credentials as AwsCredentials;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionStatus,
};
use kube::Api;
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use modelplane_eks_api::*;
use serde_json::json;

use super::apiserver::{self, Exclusive};
use super::fastkube::FastKube;
use super::proxy::FaultProxy;
use super::seed;
use super::{MOTO_CREDENTIALS, Peer};

pub use super::objects::*;

/// The namespace of the stand-in worlds (a real-server world makes one of its own, see `World::ns`).
pub const NS: &str = "team-a";
pub const REGION: &str = "us-east-1";
pub const SECRET_KEY: &str = "moto-secret-never-logged";
/// Generous: the CI machine compiles other crates while these tests run.
pub const CONVERGE: Duration = Duration::from_secs(180);

pub struct World {
    pub moto: Peer,
    /// The Kubernetes stand-in, when not the real API server.
    pub _kmock: Option<Peer>,
    pub _fastkube: Option<FastKube>,
    /// Held while this world uses the shared real API server.
    _exclusive: Option<Exclusive>,
    pub proxy: FaultProxy,
    pub kube: kube::Client,
    /// Where this world's objects live.
    pub ns: String,
    pub dir: PathBuf,
    kubeconfig: PathBuf,
    pub provider: Option<Child>,
    pub metrics_port: u16,
    pub starts: usize,
    /// The test's own keys once moto checks IAM (`enforce_iam`); moto's open default before.
    admin: Option<AwsCredentials>,
}

impl World {
    /// A world on the real kube-apiserver, its CRDs installed and served as on a cluster where Crossplane
    /// installed the package.
    pub async fn start() -> Self {
        Self::start_real(true).await
    }

    /// A real-server world whose Cluster and NodePool CRDs are not there yet (see `install_managed_crds`).
    pub async fn start_without_managed_crds() -> Self {
        Self::start_real(false).await
    }

    /// A world on kmock, for what the real server cannot do: kmock bumps resourceVersion on every write, even
    /// one that changes nothing (the stress that exposed the rejected-Create loop of issue #15).
    pub async fn start_on_kmock() -> Self {
        install_crypto();
        let kmock = super::start_kmock();
        let url = kmock.url();
        let kube = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        let dir = world_dir(kmock.port);
        let kubeconfig = dir.join("kubeconfig");
        write_plain_kubeconfig(&kubeconfig, &url);
        seed::stand_in_crds(&kube).await;
        Self::assemble(
            super::start_moto(),
            kube,
            NS.into(),
            dir,
            kubeconfig,
            Some(kmock),
            None,
            None,
        )
        .await
    }

    /// A world on the in-process `FastKube` instead of a real server, for thousands of managed resources.
    pub async fn start_fast() -> Self {
        install_crypto();
        let fast = FastKube::start().await;
        let url = fast.url();
        let kube = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        let dir = world_dir(fast.port);
        let kubeconfig = dir.join("kubeconfig");
        write_plain_kubeconfig(&kubeconfig, &url);
        seed::stand_in_crds(&kube).await;
        Self::assemble(
            super::start_moto(),
            kube,
            NS.into(),
            dir,
            kubeconfig,
            None,
            Some(fast),
            None,
        )
        .await
    }

    /// A real-server world whose AWS is moto with the EKS add-on and pod-identity stand-in in front
    /// (`tests/eks_standin.py`) and AWS's managed IAM policies loaded, and whose `ClusterProviderConfig` `default` (what a stock InferenceCluster's
    /// managed resources name) points at the proxy too.
    pub async fn start_with_eks_standin() -> Self {
        let world = Self::start_real_on(
            true,
            super::standin::start_moto_with_eks_standin_and_aws_managed_policies(),
        )
        .await;
        world.seed_cluster_provider_config().await;
        world
    }

    async fn start_real(with_managed_crds: bool) -> Self {
        Self::start_real_on(with_managed_crds, super::start_moto()).await
    }

    async fn start_real_on(with_managed_crds: bool, moto: Peer) -> Self {
        install_crypto();
        let server = apiserver::shared();
        let exclusive = tokio::task::block_in_place(|| server.exclusive());
        let kube = server.client().await;
        seed::reset_real(&kube, with_managed_crds).await;
        let ns = unique_namespace();
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(kube.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        let dir = std::env::temp_dir().join(format!("provider-eks-e2e-{ns}"));
        std::fs::create_dir_all(&dir).unwrap();
        Self::assemble(
            moto,
            kube,
            ns,
            dir,
            server.kubeconfig.clone(),
            None,
            None,
            Some(exclusive),
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn assemble(
        moto: Peer,
        kube: kube::Client,
        ns: String,
        dir: PathBuf,
        kubeconfig: PathBuf,
        kmock: Option<Peer>,
        fast: Option<FastKube>,
        exclusive: Option<Exclusive>,
    ) -> Self {
        let proxy = FaultProxy::start(moto.port).await;
        let world = World {
            moto,
            _kmock: kmock,
            _fastkube: fast,
            _exclusive: exclusive,
            proxy,
            kube,
            ns,
            dir,
            kubeconfig,
            provider: None,
            metrics_port: super::free_port(),
            starts: 0,
            admin: None,
        };
        world.seed().await;
        world
    }

    /// The credentials Secret and a ProviderConfig pointing at the proxy, in this world's namespace.
    async fn seed(&self) {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("aws".into()),
                namespace: Some(self.ns.clone()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                "credentials".to_string(),
                ByteString(MOTO_CREDENTIALS.into()),
            )])),
            ..Default::default()
        };
        Api::<Secret>::namespaced(self.kube.clone(), &self.ns)
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
        pc.metadata.namespace = Some(self.ns.clone());
        Api::<ProviderConfig>::namespaced(self.kube.clone(), &self.ns)
            .create(&PostParams::default(), &pc)
            .await
            .unwrap();
    }

    /// The cluster-scoped `default` ClusterProviderConfig, pointing at this world's proxy with this world's
    /// credentials Secret (replacing one an earlier world left).
    async fn seed_cluster_provider_config(&self) {
        let api: Api<ClusterProviderConfig> = Api::all(self.kube.clone());
        // An earlier world's provider is gone and cannot release a finalizer it put there.
        let unfinalize = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
        let _ = api.patch("default", &PatchParams::default(), &unfinalize).await;
        let _ = api.delete("default", &Default::default()).await;
        let mut credentials = super::secret_credentials();
        if let Some(secret) = credentials.secret_ref.as_mut() {
            secret.namespace = Some(self.ns.clone());
        }
        let pc = ClusterProviderConfig::new(
            "default",
            ClusterProviderConfigSpec {
                spec: ProviderConfigSpec {
                    credentials,
                    endpoint: Some(self.proxy.url()),
                },
            },
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while let Err(e) = api.create(&PostParams::default(), &pc).await {
            // The old one may still be going.
            assert!(
                std::time::Instant::now() < deadline,
                "cannot create ClusterProviderConfig default: {e}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Turns the named ManagedResourceDefinitions Active, as Crossplane does for a ManagedResourceActivationPolicy
    /// that lists them.
    pub async fn activate_mrds(&self, names: &[String]) {
        for name in names {
            let patch = Patch::Merge(json!({ "spec": { "state": "Active" } }));
            self.mrds()
                .patch(name, &PatchParams::default(), &patch)
                .await
                .unwrap_or_else(|e| panic!("cannot activate ManagedResourceDefinition {name}: {e}"));
        }
    }

    /// Creates the Cluster and NodePool CRDs, as Crossplane does once their MRDs are Active.
    pub async fn install_managed_crds(&self) {
        seed::install_managed_crds(&self.kube).await;
    }

    pub fn crds(&self) -> Api<CustomResourceDefinition> {
        Api::all(self.kube.clone())
    }

    pub fn mrds(&self) -> Api<DynamicObject> {
        seed::mrds(&self.kube)
    }

    pub fn clusters(&self) -> Api<Cluster> {
        Api::namespaced(self.kube.clone(), &self.ns)
    }

    pub fn pools(&self) -> Api<NodePool> {
        Api::namespaced(self.kube.clone(), &self.ns)
    }

    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.kube.clone(), &self.ns)
    }

    /// A Cluster of this world (see `cluster_in`).
    pub fn cluster(&self, name: &str) -> Cluster {
        cluster_in(&self.ns, name)
    }

    pub fn pool(&self, name: &str, cluster: &str) -> NodePool {
        pool_in(&self.ns, name, cluster)
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
            .env("KUBECONFIG", &self.kubeconfig)
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

    /// The provider with error backoffs of `backoff` seconds, doubling up to `max_backoff`.
    pub fn start_provider_with_backoff(&mut self, backoff: u64, max_backoff: u64) {
        let (backoff, max_backoff) = (backoff.to_string(), max_backoff.to_string());
        self.start_provider_with(&[
            "--poll-interval-seconds",
            "2",
            "--busy-interval-seconds",
            "1",
            "--backoff-seconds",
            &backoff,
            "--max-backoff-seconds",
            &max_backoff,
            "--debug",
        ]);
    }

    /// The set-up most tests share: a Cluster and one of its NodePools created, the MRDs activated, and both
    /// Ready and Synced. The provider must be started first (each test picks its flags).
    pub async fn ready_cluster_and_pool(&self, cluster: &str, pool: &str) {
        let pp = PostParams::default();
        self.clusters().create(&pp, &self.cluster(cluster)).await.unwrap();
        self.pools().create(&pp, &self.pool(pool, cluster)).await.unwrap();
        self.activate().await;
        wait_for(&format!("Cluster {cluster} Ready and Synced"), self, || {
            cluster_ready(self, cluster)
        })
        .await;
        wait_for(&format!("NodePool {pool} Ready and Synced"), self, || {
            pool_ready(self, pool)
        })
        .await;
    }

    pub fn eks(&self) -> aws_sdk_eks::Client {
        aws_sdk_eks::Client::new(&self.sdk_config())
    }

    pub fn ec2(&self) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::new(&self.sdk_config())
    }

    pub fn iam(&self) -> aws_sdk_iam::Client {
        aws_sdk_iam::Client::new(&self.sdk_config())
    }

    pub fn efs(&self) -> aws_sdk_efs::Client {
        aws_sdk_efs::Client::new(&self.sdk_config())
    }

    /// From now on moto checks every AWS call as IAM would: the provider calls as an IAM user holding exactly
    /// `policy` (its credentials Secret is rewritten to that user's keys), the test as an administrator. Returns
    /// the provider's secret access key, which no log or status may show.
    pub async fn enforce_iam(&mut self, policy: &str) -> String {
        let (provider_key, provider_secret) = self.iam_user("modelplane-provider", policy).await;
        let everything =
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
        let (admin_key, admin_secret) = self.iam_user("e2e-admin", everything).await;
        let credentials = format!(
            "[default]\naws_access_key_id = {provider_key}\naws_secret_access_key = {provider_secret}\n"
        );
        let patch = json!({ "data": { "credentials": ByteString(credentials.into_bytes()) } });
        self.secrets()
            .patch("aws", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
        self.admin = Some(AwsCredentials::new(
            admin_key,
            admin_secret,
            None,
            None,
            "e2e-admin",
        ));
        // moto's switch: it checks every request after the first N, and N = 0 from here on.
        let (status, body) = super::http("POST", &format!("{}/moto-api/reset-auth", self.moto.url()), "0");
        assert_eq!(status, 200, "moto did not turn IAM checks on: {body}");
        provider_secret
    }

    /// An IAM user with `policy` inline and an access key; its (key id, secret).
    async fn iam_user(&self, name: &str, policy: &str) -> (String, String) {
        let iam = self.iam();
        iam.create_user().user_name(name).send().await.unwrap();
        iam.put_user_policy()
            .user_name(name)
            .policy_name("granted")
            .policy_document(policy)
            .send()
            .await
            .unwrap();
        let key = iam
            .create_access_key()
            .user_name(name)
            .send()
            .await
            .unwrap()
            .access_key
            .unwrap();
        (key.access_key_id, key.secret_access_key)
    }

    /// Straight to moto (not through the proxy), so checks are neither faulted nor counted.
    fn sdk_config(&self) -> aws_config::SdkConfig {
        let credentials = self
            .admin
            .clone()
            .unwrap_or_else(|| AwsCredentials::new("testing", "testing", None, None, "test"));
        aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(REGION))
            .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::new(
                credentials,
            ))
            .endpoint_url(self.moto.url())
            .build()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.kill_provider();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// kube (ring) and the AWS SDK (aws-lc-rs) both link a rustls provider; rustls needs one chosen.
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The status of a CRD the stand-ins serve: Established or not.
pub fn crd_status(established: bool) -> CustomResourceDefinitionStatus {
    let status = if established { "True" } else { "False" };
    serde_json::from_value(json!({
        "conditions": [{ "type": "Established", "status": status, "reason": "InitialNamesAccepted" }],
        "acceptedNames": { "kind": "", "plural": "" },
    }))
    .unwrap()
}

fn world_dir(port: u16) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("provider-eks-e2e-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_plain_kubeconfig(path: &std::path::Path, url: &str) {
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "stand-in",
        "clusters": [{ "name": "stand-in", "cluster": { "server": url } }],
        "users": [{ "name": "stand-in", "user": {} }],
        "contexts": [{ "name": "stand-in", "context": { "cluster": "stand-in", "user": "stand-in" } }],
    });
    std::fs::write(path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();
}

/// A fresh namespace named after the running test (libtest names the test's thread after it), so a leftover
/// of a failed test is easy to trace and never mistaken for this one's.
fn unique_namespace() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let test = std::thread::current()
        .name()
        .unwrap_or("test")
        .rsplit("::")
        .next()
        .unwrap_or("test")
        .replace('_', "-");
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = format!("-{}-{n}", std::process::id());
    let keep = 63 - suffix.len();
    let test: String = test.chars().take(keep).collect();
    format!("{}{suffix}", test.trim_end_matches('-'))
}
