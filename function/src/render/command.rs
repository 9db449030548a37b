//! The `render` command behind the binary's flags: load the inputs, run the handler in process or call a running
//! server, and print one pipeline step or the simulated reconciles to standard output.

use std::path::PathBuf;

use crate::{
    fleet_metrics,
    proto::v1::{RunFunctionRequest, RunFunctionResponse, Severity, function_runner_service_client},
    render::{self, Format, Inputs, Outcome, RenderError},
    run_function,
};

/// What the command line asked `render` for (the binary's flags, one field each).
pub struct Options {
    pub composite: PathBuf,
    pub required: Vec<PathBuf>,
    pub observed: Vec<PathBuf>,
    pub context: Option<PathBuf>,
    pub output: Format,
    pub function_address: Option<String>,
    pub until_ready: bool,
    pub stages: bool,
    pub fleet_metrics_url: Option<String>,
}

/// How a render ended; the binary turns it into its exit status.
pub enum Rendered {
    Composed,
    /// The function returned a FATAL result (exit 3, as Crossplane's render).
    Fatal,
    /// `--until-ready` stopped before the composite was Ready (exit 4).
    NotReady,
}

/// Renders as `options` say and prints the result on standard output.
pub async fn to_stdout(options: Options) -> Result<Rendered, RenderError> {
    let inputs = Inputs::load(
        &options.composite,
        &options.required,
        &options.observed,
        options.context.as_deref(),
    )?;
    let until_ready = options.until_ready || options.stages;
    if let Some(url) = &options.fleet_metrics_url {
        let poll = fleet_metrics::poll::Options {
            url: url.clone(),
            interval: std::time::Duration::from_secs(30),
        };
        poll.check().map_err(RenderError::Usage)?;
        fleet_metrics::publish(fleet_metrics::poll::once(url).await);
    }
    if until_ready && options.output == Format::Json {
        return Err(RenderError::Usage(
            "--until-ready prints YAML only: its header comment marks the output as simulated".into(),
        ));
    }
    match &options.function_address {
        None => {
            let call = |req| async move { Ok(run_function(req)) };
            if until_ready {
                until_ready_to_stdout(&inputs, options.stages, call).await
            } else {
                once_to_stdout(&inputs, options.output, call).await
            }
        }
        Some(address) => {
            let endpoint = if address.contains("://") {
                address.clone()
            } else {
                format!("http://{address}")
            };
            let remote = |reason: String| RenderError::Remote {
                address: address.clone(),
                reason,
            };
            let client = function_runner_service_client::FunctionRunnerServiceClient::connect(endpoint)
                .await
                .map_err(|e| remote(e.to_string()))?
                .max_decoding_message_size(usize::MAX);
            let call = |req: RunFunctionRequest| {
                let mut client = client.clone();
                async move {
                    client
                        .run_function(req)
                        .await
                        .map(|r| r.into_inner())
                        .map_err(|s| remote(s.to_string()))
                }
            };
            if until_ready {
                until_ready_to_stdout(&inputs, options.stages, call).await
            } else {
                once_to_stdout(&inputs, options.output, call).await
            }
        }
    }
}

/// What `crossplane render` prints: one pipeline step, its requirements answered.
async fn once_to_stdout<F, Fut>(inputs: &Inputs, format: Format, call: F) -> Result<Rendered, RenderError>
where
    F: FnMut(RunFunctionRequest) -> Fut,
    Fut: Future<Output = Result<RunFunctionResponse, RenderError>>,
{
    let rsp = render::run(inputs, call).await?;
    let documents = render::documents(inputs, &rsp)?;
    render::print(&documents, format, &mut std::io::stdout().lock())?;
    Ok(if is_fatal(&rsp) {
        Rendered::Fatal
    } else {
        Rendered::Composed
    })
}

async fn until_ready_to_stdout<F, Fut>(
    inputs: &Inputs,
    stages: bool,
    call: F,
) -> Result<Rendered, RenderError>
where
    F: FnMut(RunFunctionRequest) -> Fut,
    Fut: Future<Output = Result<RunFunctionResponse, RenderError>>,
{
    let simulation = render::run_until_ready(inputs, call).await?;
    render::print_simulation(&simulation, stages, &mut std::io::stdout().lock())?;
    match simulation.outcome {
        Outcome::Ready => Ok(Rendered::Composed),
        Outcome::Fatal => Ok(Rendered::Fatal),
        Outcome::Stuck | Outcome::Unsettled => {
            eprintln!(
                "render: not Ready after {} round(s) of simulated reconciles; still waiting for: {}",
                simulation.rounds.len(),
                simulation.waiting().join("; ")
            );
            Ok(Rendered::NotReady)
        }
    }
}

fn is_fatal(rsp: &RunFunctionResponse) -> bool {
    rsp.results.iter().any(|r| r.severity == Severity::Fatal as i32)
}
