//! The credentials a cluster's Prometheus remote-writes the fleet's series with
//! (`spec.metrics.remoteWrite.basicAuth`): the named Secret in the control plane's Modelplane namespace is copied
//! into the cluster's monitoring namespace by provider-kubernetes reference ([`secret_copy`]), so the password
//! never passes through the function, and the Prometheus' values name the copy only once it holds the keys.
//! Until then nothing is written: prometheus-operator stops updating the Prometheus' configuration, scrapes and
//! all, while a Secret it names is missing, and a receiver that asks for credentials would refuse writes without.

use super::components::provider_config_name;
use crate::{
    api::inference_cluster::RemoteWrite,
    compose::{
        Output,
        remote::secret_copy::{self, CopyState},
        shared::CONTROL_NAMESPACE,
    },
    proto::v1::RunFunctionRequest,
    sdk::request,
    stack::{RemoteWriteTarget, components::KUBE_PROMETHEUS_STACK},
};

/// The copy on the cluster, beside the Prometheus that reads it.
pub const SECRET_NAME: &str = "modelplane-remote-write";
/// The ConfigMap that owns the copy there, so deleting the InferenceCluster deletes it.
const OWNER_NAME: &str = "modelplane-remote-write-owner";
/// The keys Prometheus' basic auth reads, as a `kubernetes.io/basic-auth` Secret names them.
pub const USERNAME_KEY: &str = "username";
pub const PASSWORD_KEY: &str = "password";

pub const OWNER_KEY: &str = "object-remote-write-owner";
pub const COPY_KEY: &str = "object-remote-write-credentials";

/// Composes the copy of the credentials, when the cluster names any, and says where its Prometheus writes: the
/// receiver with the copy once it is filled, the receiver alone without credentials, nothing while they are on
/// their way. Returns the keys composed, which belong with the monitoring component.
pub fn compose<'a>(
    out: &mut Output,
    req: &RunFunctionRequest,
    cluster: &str,
    remote_write: Option<&'a RemoteWrite>,
) -> (Option<RemoteWriteTarget<'a>>, Vec<String>) {
    let Some(remote_write) = remote_write else {
        return (None, Vec::new());
    };
    let url = remote_write.url.as_str();
    let Some(auth) = &remote_write.basic_auth else {
        return (
            Some(RemoteWriteTarget {
                url,
                basic_auth_secret: None,
            }),
            Vec::new(),
        );
    };
    let provider_config = provider_config_name(cluster);
    let namespace = KUBE_PROMETHEUS_STACK.namespace;
    let (owner_object, owner) = secret_copy::copy_owner(
        OWNER_NAME,
        namespace,
        &provider_config,
        request::observed_composed(req, OWNER_KEY),
    );
    let owner_object = owner_object.named(format!("{cluster}-remote-write-owner"), CONTROL_NAMESPACE);
    out.compose(OWNER_KEY, owner_object.build(), false);
    let source = auth.secret_ref.name.as_str();
    let references = [USERNAME_KEY, PASSWORD_KEY]
        .iter()
        .map(|key| secret_copy::reference(CONTROL_NAMESPACE, source, &format!("data.{key}")))
        .collect();
    let (copy, state) = secret_copy::secret_copy(
        SECRET_NAME,
        namespace,
        "Opaque",
        &provider_config,
        references,
        owner.as_ref(),
        request::observed_composed(req, COPY_KEY),
    );
    let copy = copy.named(format!("{cluster}-remote-write-credentials"), CONTROL_NAMESPACE);
    out.compose(COPY_KEY, copy.build(), false);
    if !url.starts_with("https://") {
        out.warnings.push(format!(
            "spec.metrics.remoteWrite.url is {url}: the basic auth password crosses the network in the clear \
             unless something below HTTP encrypts it"
        ));
    }
    let keys = vec![OWNER_KEY.to_owned(), COPY_KEY.to_owned()];
    if let Some(why) = state.waiting() {
        out.warnings.push(format!(
            "spec.metrics.remoteWrite: nothing is written to {url} until its credentials reach the cluster: \
             Secret {CONTROL_NAMESPACE}/{source}: {why}"
        ));
        return (None, keys);
    }
    debug_assert_eq!(state, CopyState::Filled);
    let target = RemoteWriteTarget {
        url,
        basic_auth_secret: Some(SECRET_NAME),
    };
    (Some(target), keys)
}
