//! A composition function that returns what it was given (`response::to`), served by function-sdk-rust's own
//! runtime with its standard flags (`--insecure --address ... --metrics-address ""`). Its cost is the SDK's:
//! decoding the request into prost's `Struct` tree, copying desired state and context, encoding the response.

use std::process::ExitCode;

use clap::Parser;
use function_sdk_rust::{
    Args,
    proto::v1::{
        RunFunctionRequest, RunFunctionResponse, function_runner_service_server::FunctionRunnerService,
    },
    response, serve,
};
use tonic::{Request, Response, Status};

struct Noop;

#[tonic::async_trait]
impl FunctionRunnerService for Noop {
    async fn run_function(
        &self,
        request: Request<RunFunctionRequest>,
    ) -> Result<Response<RunFunctionResponse>, Status> {
        Ok(Response::new(response::to(
            request.get_ref(),
            response::DEFAULT_TTL,
        )))
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match serve(Noop, &args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("noop-rust: {e}");
            ExitCode::FAILURE
        }
    }
}
