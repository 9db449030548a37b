//! Crossplane's and its providers' vocabulary, said once: the API versions and annotations composers write, and
//! the provider-helm `Release` envelope every chart is installed through. The provider-kubernetes `Object`
//! envelope is [`super::remote`]'s.

use crate::compose::shared::CONTROL_NAMESPACE;
use crate::wire::tree::{Fields, Tree, fields, tree};

/// The annotation that names a managed resource in its provider's API, where that name is not the resource's own.
pub const EXTERNAL_NAME: &str = "crossplane.io/external-name";

/// [`EXTERNAL_NAME`] as a JSON pointer from the resource's root.
pub const EXTERNAL_NAME_POINTER: &str = "/metadata/annotations/crossplane.io~1external-name";

/// provider-helm's namespaced API (`Release`, `ClusterProviderConfig`).
pub const HELM_API_VERSION: &str = "helm.m.crossplane.io/v1beta1";

/// Crossplane's deletion-ordering API (`Usage`).
pub const USAGE_API_VERSION: &str = "protection.crossplane.io/v1beta1";

/// A chart a provider-helm `Release` installs.
pub struct Chart<'a> {
    pub name: &'a str,
    pub repository: &'a str,
    pub version: &'a str,
}

/// A provider-helm `Release` of `chart` into `namespace` on `cluster`, through the cluster's
/// `ClusterProviderConfig` (`provider_config`). The composed Release is `<cluster>-<release>` in
/// [`CONTROL_NAMESPACE`], so releases of many clusters never collide; the Helm release on the cluster keeps the
/// name `release`.
pub fn release(
    cluster: &str,
    release: &str,
    provider_config: &str,
    chart: Chart,
    namespace: &str,
    values: Tree,
) -> Fields {
    fields!({
        "apiVersion": HELM_API_VERSION, "kind": "Release",
        "metadata": {
            "name": format!("{cluster}-{release}"),
            "namespace": CONTROL_NAMESPACE,
            "annotations": {EXTERNAL_NAME: release},
        },
        "spec": {
            "forProvider": {
                "chart": {"name": chart.name, "repository": chart.repository, "version": chart.version},
                "namespace": namespace,
                "values": values,
            },
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": provider_config},
        },
    })
}

/// A Crossplane `Usage` named `name` in [`CONTROL_NAMESPACE`]: while it exists, the API server refuses to delete
/// `of`, and `replayDeletion` retries that deletion as soon as `by` is gone. `of` and `by` are
/// [`resource_ref`]s.
pub fn usage(name: String, of: Tree, by: Tree, reason: String) -> Fields {
    fields!({
        "apiVersion": USAGE_API_VERSION, "kind": "Usage",
        "metadata": {"name": name, "namespace": CONTROL_NAMESPACE},
        "spec": {"of": of, "by": by, "replayDeletion": true, "reason": reason},
    })
}

/// A Usage's reference to a composed resource in the Usage's own namespace.
pub fn resource_ref(api_version: Tree, kind: Tree, name: Tree) -> Tree {
    tree!({"apiVersion": api_version, "kind": kind, "resourceRef": {"name": name}})
}

/// A namespaced managed resource (`<group>.m.<provider>`) named `name` in [`CONTROL_NAMESPACE`], built in one go
/// as [`super::remote::Object`] is: `ManagedResource::new(..)`, what this one says beyond its `forProvider`, then
/// [`ManagedResource::build`].
#[must_use]
pub struct ManagedResource {
    api_version: Tree,
    kind: Tree,
    name: Tree,
    provider_config: Tree,
    for_provider: Tree,
    init_provider: Option<Tree>,
    policies: Option<Tree>,
    external_name: Option<Tree>,
    connection_secret: Option<Tree>,
}

impl ManagedResource {
    /// `kind` of `api_version` named `name`, authenticated by the provider config `provider_config` (a
    /// `providerConfigRef`: its kind and name), creating what `for_provider` says.
    pub fn new(api_version: &str, kind: &str, name: &str, provider_config: Tree, for_provider: Tree) -> Self {
        Self {
            api_version: Tree::from(api_version),
            kind: Tree::from(kind),
            name: Tree::from(name),
            provider_config,
            for_provider,
            init_provider: None,
            policies: None,
            external_name: None,
            connection_secret: None,
        }
    }

    /// Fields set only when the resource is created, and left to the cloud after (`spec.initProvider`).
    pub fn init_provider(mut self, init_provider: Tree) -> Self {
        self.init_provider = Some(init_provider);
        self
    }

    /// What the provider may do to the external resource (`spec.managementPolicies`).
    pub fn management_policies(mut self, policies: Tree) -> Self {
        self.policies = Some(policies);
        self
    }

    /// The name in the provider's API, where it is not the resource's own ([`EXTERNAL_NAME`]).
    pub fn external_name(mut self, name: impl Into<Tree>) -> Self {
        self.external_name = Some(name.into());
        self
    }

    /// The connection details (a kubeconfig, a key) written to the Secret `secret` in the resource's namespace.
    pub fn connection_secret(mut self, secret: impl Into<Tree>) -> Self {
        self.connection_secret = Some(secret.into());
        self
    }

    pub fn build(self) -> Fields {
        let mut metadata = fields!({"name": self.name, "namespace": CONTROL_NAMESPACE});
        if let Some(name) = self.external_name {
            metadata.insert("annotations", tree!({EXTERNAL_NAME: name}));
        }
        let mut spec = fields!({"forProvider": self.for_provider, "providerConfigRef": self.provider_config});
        if let Some(init_provider) = self.init_provider {
            spec.insert("initProvider", init_provider);
        }
        if let Some(policies) = self.policies {
            spec.insert("managementPolicies", policies);
        }
        if let Some(secret) = self.connection_secret {
            spec.insert("writeConnectionSecretToRef", tree!({"name": secret}));
        }
        fields!({"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata, "spec": spec})
    }
}
