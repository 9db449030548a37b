//! Modelplane's Crossplane composition function.
//!
//! One function serves every Modelplane composite kind: `InferenceClass`, `InferenceCluster`,
//! `InferenceGateway`, `ModelCache`, `ModelDeployment`, `ModelEndpoint` and `ModelService` (the table is
//! [`compose::COMPOSERS`]). The binary (`src/main.rs`) serves it to Crossplane (`serve`) and runs it offline
//! (`render`) and runs the `standby` server; the server, `render`, the tests and the benchmarks call the same
//! [`run_function`].
//!
//! Desired state is a complete server-side-apply intent, not a patch: whatever a response leaves out of
//! `desired` is deleted when the pipeline ends. So every response starts from the request's desired state
//! ([`sdk::response::to`]), adds what this function owns, and passes everything else through untouched.
//!
//! Layout:
//! - [`dispatch`]: the RunFunction body; reads the composite's kind, checks it against its XRD ([`validate`])
//!   and runs its composer.
//! - [`compose`]: one pure composer per XR kind: typed input in, desired objects out. No I/O, no clock; the one
//!   input from outside the request, the fleet's last metrics sample ([`fleet_metrics`]), is read at the
//!   ModelDeployment composer's entry and handed in.
//! - [`fleet_metrics`]: that sample, and the background poll of the fleet's Prometheus that refreshes it.
//! - [`api`]: typed views of the composites (and of the InferenceCluster status the scheduler reads), decoded
//!   from the request.
//! - [`schedule`]: the fleet scheduler, which places every replica on a cluster and each engine on a pool.
//! - [`stack`]: the Standard and Dynamo serving stacks behind one trait, and the version-locked component table.
//! - [`workload`]: what runs on a workload cluster the same way on both stacks: engine pods, flags and metrics,
//!   disaggregation, a replica's routing, the cluster gateway with its TLS, and the names other software knows.
//! - [`error`]: the error composers, the scheduler and the stacks report bad input with.
//! - [`sdk`]: request readers and response writers named as in Crossplane's function SDKs.
//! - [`wire`]: `google.protobuf.Struct` kept as bytes and decoded straight into typed views; [`proto`]: the
//!   messages and services generated from `proto/`.
//! - [`limits`]: what one call may cost, its deadline and its stack; [`cel`]: DRA CEL selectors under a budget.
//! - [`server`]: the tonic server Crossplane talks to, composing on [`compose_pool`]'s long-lived threads;
//!   [`render`]: the same handler offline, and `--until-ready`'s simulated reconciles.
//! - [`standby`]: the `standby` server an InferenceGateway runs, answering for scaled-to-zero deployments.
//! - [`memory`]: the mimalloc allocator; each binary declares it as its global allocator (the library does
//!   not, so the tests crate and the fuzz targets keep their own).
//!
//! Imports run one way, types below behaviour: [`error`], [`api`], [`wire`] and [`limits`] import none of the
//! layers above them; [`validate`], [`cel`], [`schedule`], [`stack`], [`workload`] and [`fleet_metrics`] import types only; [`compose`] uses all of
//! those, and [`dispatch`], [`server`] and [`render`] sit on top (tests build requests with `render`'s builder).
//! Vocabulary several composers share is in `compose::shared` and `compose::conditions`, not in one composer
//! that the others reach into.

pub mod api;
pub mod cel;
pub mod compose;
pub mod compose_pool;
pub mod dispatch;
pub mod error;
pub mod fleet_metrics;
pub mod limits;
pub mod memory;
pub mod pod_report;
pub mod proto;
pub mod render;
pub mod schedule;
pub mod sdk;
pub mod server;
pub mod stack;
pub mod stage;
pub mod standby;
pub mod validate;
pub mod wire;
pub mod workload;

pub use dispatch::run_function;
