//! The names other software knows Modelplane's objects by on a workload cluster: the ports engines and servers
//! listen on, the pod labels selectors and controllers read, the namespaces Modelplane owns, and the images it runs
//! that are not a component's chart. One place, because each is read by more than the module that writes it, and
//! a change to one is a change to what every cluster already runs.

// --- Ports ----------------------------------------------------------------------------------------------------

/// Port the Service forwards to: the engine's OpenAI-compatible server.
pub const SERVING_PORT: u16 = 8000;
/// Where the decode engine listens when its flags do not say: the disaggregation sidecar has the serving port.
pub const DEFAULT_DECODE_ENGINE_PORT: u16 = 8001;
/// The ModelExpress server's gRPC port, which clients reach through `MX_SERVER_ADDRESS`.
pub const MODEL_EXPRESS_GRPC_PORT: u16 = 8001;

// --- Pod labels -----------------------------------------------------------------------------------------------

/// Labels the serving pods (Standalone and Leader), selected by the Service.
pub const SERVING_LABEL: &str = "modelplane.ai/serving";
/// Labels the serving pods of every engine of a replica, selected by the replica's InferencePool. Only the
/// leader of a gang serves: its workers hold the rest of the model and answer no requests.
pub const INFERENCE_POOL_LABEL: &str = "modelplane.ai/inference-pool";
/// Labels every pod of a workload, selected by its Deployment.
pub const WORKLOAD_LABEL: &str = "modelplane.ai/workload";
/// The pod label the endpoint picker's prefill and decode filters read.
pub const ROLE_LABEL: &str = "llm-d.ai/role";

// --- Namespaces -----------------------------------------------------------------------------------------------

/// Namespace of the cluster gateway (and of the fleet gateway, on the cluster that runs one).
pub const GATEWAY_NAMESPACE: &str = "modelplane-system";
/// Namespace of the Dynamo stack's ModelExpress server.
pub const MODEL_EXPRESS_NAMESPACE: &str = "modelexpress-system";

// --- Images that are not a component's chart --------------------------------------------------------------------

/// The endpoint picker each replica's InferencePool calls (llm-d's, prefix-cache and queue-depth aware). Not a
/// component (every replica runs its own), but pinned with the gateway it plugs into.
pub const ENDPOINT_PICKER_IMAGE: &str = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0";
/// llm-d's disaggregation sidecar, from the same router release as the endpoint picker: the two speak one
/// protocol (the prefill host header).
pub const DISAGGREGATION_SIDECAR_IMAGE: &str = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0";
/// The ModelExpress server, tagged with [`super::model_express::VERSION`].
pub const MODEL_EXPRESS_IMAGE: &str = "nvcr.io/nvidia/ai-dynamo/modelexpress-server";

// --- The standby server -----------------------------------------------------------------------------------------

/// The Service (in [`GATEWAY_NAMESPACE`], on every fleet gateway's cluster) of the server that answers for
/// deployments scaled to zero (`modelplane-function standby`): their standby ModelEndpoints point at it.
pub const STANDBY_SERVICE: &str = "modelplane-standby";
pub const STANDBY_PORT: u16 = 8080;
/// The function's own image, whose binary also serves `standby`, reports pods (`report-pods`) and runs a
/// ModelCache's downloads (`stage`): one release with the function composing it.
pub const FUNCTION_IMAGE: &str = concat!(
    "ghcr.io/modelplaneai/function-modelplane:v",
    env!("CARGO_PKG_VERSION")
);
