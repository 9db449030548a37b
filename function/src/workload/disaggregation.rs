//! Prefill/decode disaggregation (`serving.mode: PrefillDecode`) on a workload cluster, the same on both stacks.
//!
//! The replica's one InferencePool selects the serving pods of both engines (as it does every engine's); the
//! endpoint picker tells them apart by the `llm-d.ai/role` label and, for a request worth splitting, picks a
//! prefill pod and a decode pod. The request goes to the decode pod, where llm-d's disaggregation sidecar
//! listens on the serving port in front of the engine: it has the prefill pod compute the prompt's KV cache,
//! which NIXL moves to the decode engine, and then lets the decode engine generate. The engines' KV-transfer
//! flags (`--kv-transfer-config`) and a NIXL-capable image are the user's: Modelplane never rewrites a command.

use serde_json::{Map, Value};

use crate::wire::tree::{Tree, tree};

use super::{
    engine_flags, pod, replica_routing,
    well_known::{DEFAULT_DECODE_ENGINE_PORT, DISAGGREGATION_SIDECAR_IMAGE, SERVING_PORT},
};
use crate::api::model_deployment::Phase;

const SIDECAR_CONTAINER: &str = "pd-sidecar";
/// The engine flag naming its listening port (vLLM and SGLang spell it alike).
pub const PORT_FLAG: &str = "--port";
/// Each engine pod's NIXL side channel, where peers fetch the metadata of its KV cache before a transfer.
const NIXL_SIDE_CHANNEL_PORT: u16 = 5557;
/// Prompts whose uncached part is shorter than this are not worth a KV transfer: decode computes them itself.
const MIN_PREFILL_TOKENS: u32 = 16;

/// The role label's value for `phase`.
pub fn role(phase: Phase) -> &'static str {
    match phase {
        Phase::Prefill => "prefill",
        Phase::Decode => "decode",
    }
}

/// Env for every pod of both engines. The side channel must advertise the pod's own address: without it vLLM
/// advertises one peers cannot reach, and every split request fails. Each pod of a gang holds part of the KV
/// cache and answers for its own part, so workers get it too.
pub fn nixl_env() -> Vec<Tree> {
    vec![
        tree!({"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}),
        tree!({"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": NIXL_SIDE_CHANNEL_PORT.to_string()}),
    ]
}

/// The port a decode engine container listens on: its own `--port`, or [`DEFAULT_DECODE_ENGINE_PORT`]. A value
/// that is not a port is refused before composing (see the ModelDeployment validation); here it falls back.
pub fn decode_engine_port(container: &Map<String, Value>) -> u16 {
    engine_flags::value(container, PORT_FLAG)
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_DECODE_ENGINE_PORT)
}

/// The sidecar on the decode engine's serving pod: it takes the serving port and forwards to the engine on
/// `engine_port`.
pub fn sidecar(engine_port: u16) -> Tree {
    tree!({
        "name": SIDECAR_CONTAINER,
        "image": DISAGGREGATION_SIDECAR_IMAGE,
        "args": ["--secure-proxy=false", "--kv-connector=nixlv2", format!("--vllm-port={engine_port}")],
        "ports": [{"name": "http", "containerPort": SERVING_PORT, "protocol": "TCP"}],
        // The sidecar passes the health endpoint through to the engine, so it is ready when the engine is.
        "readinessProbe": pod::health_check(SERVING_PORT, 3),
    })
}

/// The picker's scheduling for a split pair. The profile handler runs the decode profile, asks the decider
/// whether the prompt's uncached part is long enough to be worth a prefill hop and, if so, runs the prefill
/// profile too and names the prefill pod in a header the sidecar reads. Each profile filters the pool's pods by
/// role, then scores them as Unified serving does ([`replica_routing::scoring_refs`]). Three settings must
/// be explicit or the picker silently never splits: the decider's token threshold (0 turns it off), the
/// prefix-cache producer the decider reads, and that producer's block size (auto-tuning leaves it at 0).
pub fn picker_config(block_size: u32) -> String {
    let profile = |name: &str, filter: &str| {
        format!(
            "- name: {name}\n  plugins:\n  - pluginRef: {filter}\n{}",
            replica_routing::scoring_refs()
        )
    };
    format!(
        "apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
{}- type: disagg-headers-handler
- type: prefill-filter
- type: decode-filter
- type: prefix-based-pd-decider
  parameters:
    nonCachedTokens: {MIN_PREFILL_TOKENS}
- type: disagg-profile-handler
  parameters:
    deciders:
      prefill: prefix-based-pd-decider
schedulingProfiles:
{}{}",
        replica_routing::scoring_plugins(block_size),
        profile("prefill", "prefill-filter"),
        profile("decode", "decode-filter"),
    )
}
