//! Request builders for composer tests.

use serde_json::{Value, json};

use crate::{
    compose::{Output, inference_cluster::class_requirement},
    proto::v1::{Resource, Resources, RunFunctionRequest},
    render::RequestBuilder,
    wire::RawStruct,
};

/// A CA certificate for tests: the one `render --until-ready` publishes (`tests/fixtures/tls/cluster-gateway-ca.pem`,
/// whose key was never kept).
pub const TEST_CA: &str = crate::render::simulate::SIMULATED_CA;

/// `InferenceCluster.status.gateway` of a cluster whose gateway answers at `address`, has published its CA and
/// requires the fleet's client certificate: what replicas there need to be published.
pub fn reachable_gateway(address: &str) -> Value {
    json!({"address": address, "serverName": crate::workload::cluster_gateway::tls::SERVER_NAME, "caCertificate": TEST_CA,
           "admits": "FleetGateways"})
}

/// The UID of the remote ConfigMap that owns a composite's Secret copies, in tests.
pub const OWNER_UID: &str = "6f1c2a4e-0b7d-4c1e-9a53-2f8d7e61b0aa";

/// A copy owner's Object as provider-kubernetes reports the remote ConfigMap `name` once it exists.
pub fn observed_owner(name: &str) -> Value {
    json!({"status": {
        "conditions": [{"type": "Ready", "status": "True"}],
        "atProvider": {"manifest": {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": name, "uid": OWNER_UID}}},
    }})
}

/// What provider-kubernetes (with `--sanitize-secrets`) reports of a remote Secret copy owned by
/// [`observed_owner`]'s ConfigMap `owner`.
pub fn sanitized_owned_secret(owner: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "data": {"redacted": null}, "metadata": {
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": OWNER_UID}]}})
}

/// A request observing `xr`, as Crossplane sends it on the first call of a step.
pub fn request(xr: Value) -> RunFunctionRequest {
    crate::render::RequestBuilder::new(&xr).build()
}

pub fn resource(object: &Value) -> Resource {
    Resource {
        resource: RawStruct::from_value(object),
        ..Default::default()
    }
}

/// Answers requirement `name` with `objects`, as Crossplane does on the next call.
pub fn with_required(mut req: RunFunctionRequest, name: &str, objects: &[Value]) -> RunFunctionRequest {
    req.required_resources.insert(
        name.to_owned(),
        Resources {
            items: objects.iter().map(resource).collect(),
        },
    );
    req
}

/// Adds an observed composed resource under `key`.
pub fn with_observed(mut req: RunFunctionRequest, key: &str, object: &Value) -> RunFunctionRequest {
    if let Some(observed) = req.observed.as_mut() {
        observed.resources.insert(key.to_owned(), resource(object));
    }
    req
}

/// Runs a composer on a request as `dispatch` does: the composite is checked against its XRD first, so a test of
/// bad input sees the same error a user would.
pub fn run(
    compose: super::ComposeFn,
    req: &RunFunctionRequest,
) -> Result<super::Output, super::ComposeError> {
    let xr = crate::sdk::request::observed_composite(req)
        .cloned()
        .unwrap_or_default();
    crate::validate::object_on_the_wire(&xr)?;
    compose(req, &xr)
}

/// An InferenceCluster as other composers read it among their required resources: Ready, with the status its
/// own composer reports. Chained: `cluster("b").stack("Dynamo").cache_storage_class("efs").build()`.
pub struct ClusterFixture(Value);

/// A Standard cluster named `name`, reachable through the provider config `<name>-pc`.
pub fn cluster(name: &str) -> ClusterFixture {
    ClusterFixture(json!({
        "apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": name},
        "status": {"providerConfigName": format!("{name}-pc"), "stack": "Standard"},
    }))
}

impl ClusterFixture {
    pub fn stack(mut self, stack: &str) -> Self {
        self.0["status"]["stack"] = json!(stack);
        self
    }

    /// The provider config that reaches the cluster; empty for one not reachable yet.
    pub fn provider_config(mut self, name: &str) -> Self {
        self.0["status"]["providerConfigName"] = json!(name);
        self
    }

    pub fn cache_storage_class(mut self, storage_class: &str) -> Self {
        self.0["status"]["cacheStorageClass"] = json!(storage_class);
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }

    pub fn build(self) -> Value {
        self.0
    }
}

/// A cluster composer's request: `xr` with the `observed` composed resources, and each of `classes` answering
/// its own requirement, as Crossplane sends it once the classes are fetched.
pub fn cluster_request(xr: &Value, classes: &[Value], observed: &[(String, Value)]) -> RequestBuilder {
    let mut req = RequestBuilder::new(xr);
    for (key, object) in observed {
        req = req.observed(key, object);
    }
    for class in classes {
        let name = class["metadata"]["name"].as_str().unwrap_or_default();
        req = req.required(&class_requirement(name), std::slice::from_ref(class));
    }
    req
}

/// Every resource `out` composes, observed as `observe` says its provider reports it.
pub fn observe_all(out: &Output, observe: impl Fn(&Value) -> Value) -> Vec<(String, Value)> {
    out.resources
        .iter()
        .map(|(k, c)| (k.clone(), observe(&Value::Object(c.object.to_map()))))
        .collect()
}

/// `object` as an upjet provider reports it once Ready, with `at_provider` observed.
pub fn ready_at_provider(object: &Value, at_provider: Value) -> Value {
    let mut observed = object.clone();
    observed["status"] = json!({"atProvider": at_provider,
                                "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]});
    observed
}

/// Turns the observed `key` (Ready, as [`ready_at_provider`] or [`observe_all`] made it) not Ready.
pub fn not_ready(observed: &mut [(String, Value)], key: &str) {
    let (_, object) = observed.iter_mut().find(|(k, _)| k == key).unwrap();
    object["status"]["conditions"][0]["status"] = json!("False");
}

/// Every output from `first` on, each the next `step` of the one before (typically: compose again with all of it
/// observed Ready), until a step composes nothing new; that last output is the final element.
pub fn stages(first: Output, step: impl Fn(&Output) -> Output) -> Vec<Output> {
    let mut outs = vec![first];
    for _ in 0..12 {
        let last = outs.last().unwrap();
        let next = step(last);
        let settled = next.resources.len() == last.resources.len();
        outs.push(next);
        if settled {
            return outs;
        }
    }
    panic!("the stages did not settle");
}
