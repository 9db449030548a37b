//! The fleet benchmark's world: the real binary against two in-process stand-ins that keep up with thousands of
//! managed resources, `FastKube` (Kubernetes) and `FastEks` (AWS). Several ProviderConfigs share one set of
//! credentials, so one AWS account: AWS limits that account as a whole, and so must the provider.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use modelplane_eks_api::*;
use serde_json::json;

use super::fasteks::{Behaviour, FastEks};
use super::fastkube::FastKube;
use super::seed::mrd_resource;
use super::world::{NS, crd_status};

pub struct Fleet {
    pub aws: FastEks,
    _kube_server: FastKube,
    pub kube: kube::Client,
    pub dir: PathBuf,
    provider: Option<Child>,
    starts: usize,
    metrics_port: u16,
}

/// The name of the `i`th ProviderConfig.
pub fn provider_config(i: usize) -> String {
    format!("account-a-{i}")
}

impl Fleet {
    pub async fn start(behaviour: Behaviour, provider_configs: usize) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let aws = FastEks::start(behaviour).await;
        let server = FastKube::start().await;
        let kube = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "provider-eks-fleet-{}-{}",
            std::process::id(),
            server.port
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "fastkube",
            "clusters": [{ "name": "fastkube", "cluster": { "server": server.url() } }],
            "users": [{ "name": "fastkube", "user": {} }],
            "contexts": [{ "name": "fastkube", "context": { "cluster": "fastkube", "user": "fastkube" } }],
        });
        std::fs::write(dir.join("kubeconfig"), kubeconfig.to_string()).unwrap();
        let fleet = Self {
            aws,
            _kube_server: server,
            kube,
            dir,
            provider: None,
            starts: 0,
            metrics_port: super::free_port(),
        };
        fleet.seed(provider_configs).await;
        fleet
    }

    async fn seed(&self, provider_configs: usize) {
        let pp = PostParams::default();
        let secret = super::credentials_secret(NS);
        Api::<Secret>::namespaced(self.kube.clone(), NS)
            .create(&pp, &secret)
            .await
            .unwrap();
        for i in 0..provider_configs {
            let mut pc = ProviderConfig::new(
                &provider_config(i),
                ProviderConfigSpec {
                    credentials: super::secret_credentials(),
                    endpoint: Some(self.aws.url()),
                },
            );
            pc.metadata.namespace = Some(NS.into());
            Api::<ProviderConfig>::namespaced(self.kube.clone(), NS)
                .create(&pp, &pc)
                .await
                .unwrap();
        }
        let mrds = Api::<DynamicObject>::all_with(self.kube.clone(), &mrd_resource());
        for plural in ["clusters", "nodepools"] {
            let mut mrd = DynamicObject::new(&format!("{plural}.eks.m.modelplane.ai"), &mrd_resource());
            mrd.data = json!({ "spec": { "state": "Inactive" } });
            mrds.create(&pp, &mrd).await.unwrap();
        }
        for mut crd in modelplane_provider_eks::crds::all() {
            crd.status = Some(crd_status(true));
            Api::all(self.kube.clone()).create(&pp, &crd).await.unwrap();
        }
    }

    pub async fn activate(&self) {
        let mrds = Api::<DynamicObject>::all_with(self.kube.clone(), &mrd_resource());
        for plural in ["clusters", "nodepools"] {
            let patch = Patch::Merge(json!({ "spec": { "state": "Active" } }));
            mrds.patch(
                &format!("{plural}.eks.m.modelplane.ai"),
                &PatchParams::default(),
                &patch,
            )
            .await
            .unwrap();
        }
    }

    pub fn clusters(&self) -> Api<Cluster> {
        Api::namespaced(self.kube.clone(), NS)
    }

    pub fn pools(&self) -> Api<NodePool> {
        Api::namespaced(self.kube.clone(), NS)
    }

    pub fn start_provider(&mut self, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("provider-{}.log", self.starts))).unwrap();
        self.starts += 1;
        let binary = env!("CARGO_BIN_EXE_modelplane-provider-eks");
        // A profiler in front of the binary, e.g. `heaptrack -o provider`: see docs/benchmarks.md.
        let wrapper = std::env::var("BENCH_PROVIDER_WRAPPER").unwrap_or_default();
        let mut command = match wrapper.split_whitespace().collect::<Vec<_>>().split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        // Its own process group, so a wrapper's child goes down with it.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
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

    pub fn provider_pid(&self) -> Option<u32> {
        self.provider.as_ref().map(Child::id)
    }

    pub fn kill_provider(&mut self) {
        if let Some(mut child) = self.provider.take() {
            // A profiler wrapping the provider is interrupted as a user would stop it, so it writes its data.
            let signal = match std::env::var_os("BENCH_PROVIDER_WRAPPER") {
                Some(_) => libc::SIGINT,
                None => libc::SIGKILL,
            };
            // SAFETY: kill(2) with the negated id of the process group the child leads; no memory is shared.
            unsafe { libc::kill(-(child.id() as i32), signal) };
            let _ = child.wait();
        }
    }

    /// The provider's /metrics text.
    pub fn metrics(&self) -> String {
        super::http(
            "GET",
            &format!("http://127.0.0.1:{}/metrics", self.metrics_port),
            "",
        )
        .1
    }

    /// Failed reconciles of the running process by error class (deferred, transient, rejected, waiting,
    /// kubernetes), summed over kinds, from its /metrics.
    pub fn reconcile_errors(&self) -> BTreeMap<String, u64> {
        let mut classes = BTreeMap::new();
        for line in self.metrics().lines() {
            let Some(rest) = line.strip_prefix("modelplane_provider_eks_reconcile_errors_total{") else {
                continue;
            };
            let class = rest
                .split("error=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("unknown");
            let count: u64 = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0) as u64;
            *classes.entry(class.to_string()).or_default() += count;
        }
        classes
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(
            self.dir
                .join(format!("provider-{}.log", self.starts.saturating_sub(1))),
        )
        .unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.kill_provider();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
