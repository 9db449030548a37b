//! Drives RunFunction with request bytes encoded once, up front. A pass-through codec hands them to tonic as they
//! are and hands the response back undecoded, so the only protobuf work measured is the server's.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::{Buf, BufMut, Bytes};
use tonic::{
    Request, Status,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    codegen::http::uri::PathAndQuery,
    transport::{Channel, Endpoint},
};

const RUN_FUNCTION: &str = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction";
/// Responses are small for these requests; the limit only has to stay out of the way.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Sends and receives message bytes without looking at them.
#[derive(Debug, Clone, Copy, Default)]
struct PassThrough;

impl Codec for PassThrough {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = PassThrough;
    type Decoder = PassThrough;

    fn encoder(&mut self) -> Self::Encoder {
        PassThrough
    }

    fn decoder(&mut self) -> Self::Decoder {
        PassThrough
    }
}

impl Encoder for PassThrough {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for PassThrough {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// One HTTP/2 connection to a function; clones share it, as Crossplane's client does.
pub async fn connect(port: u16) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?
        .tcp_nodelay(true)
        .connect()
        .await
}

/// One caller on a shared connection.
pub struct Caller {
    grpc: tonic::client::Grpc<Channel>,
}

impl Caller {
    pub fn new(channel: &Channel) -> Self {
        let grpc = tonic::client::Grpc::new(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Self { grpc }
    }

    /// Calls RunFunction once and returns the encoded response.
    pub async fn call(&mut self, request: &Bytes) -> Result<Bytes, Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| Status::unavailable(format!("connection not ready: {e}")))?;
        let path = PathAndQuery::from_static(RUN_FUNCTION);
        let response = self
            .grpc
            .unary(Request::new(request.clone()), path, PassThrough)
            .await?;
        Ok(response.into_inner())
    }
}

/// How much load to apply: stop after `calls` calls or once `time_limit` has passed, whichever comes first.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub concurrency: usize,
    pub calls: usize,
    pub time_limit: Duration,
}

/// What one measurement saw.
#[derive(Debug, Default)]
pub struct Sample {
    /// Latency of every successful call, sorted.
    pub latencies: Vec<Duration>,
    pub errors: usize,
    pub first_error: Option<String>,
    pub wall: Duration,
}

impl Sample {
    pub fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.latencies.len() as f64).ceil() as usize;
        self.latencies[rank.clamp(1, self.latencies.len()) - 1]
    }

    pub fn throughput(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64().max(f64::EPSILON)
    }
}

/// Runs `load.concurrency` callers over one connection until the call budget or the time limit is spent.
pub async fn measure(channel: &Channel, request: &Bytes, load: Load) -> Sample {
    let issued = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + load.time_limit;
    let callers: Vec<_> = (0..load.concurrency)
        .map(|_| {
            let (mut caller, request, issued) = (Caller::new(channel), request.clone(), issued.clone());
            tokio::spawn(async move {
                let mut sample = Sample::default();
                while issued.fetch_add(1, Ordering::Relaxed) < load.calls && Instant::now() < deadline {
                    let sent = Instant::now();
                    match caller.call(&request).await {
                        Ok(_) => sample.latencies.push(sent.elapsed()),
                        Err(status) => {
                            sample.errors += 1;
                            sample.first_error.get_or_insert_with(|| status.to_string());
                        }
                    }
                }
                sample
            })
        })
        .collect();
    let mut total = Sample::default();
    for caller in callers {
        match caller.await {
            Ok(sample) => {
                total.latencies.extend(sample.latencies);
                total.errors += sample.errors;
                if total.first_error.is_none() {
                    total.first_error = sample.first_error;
                }
            }
            Err(e) => {
                total.errors += 1;
                total
                    .first_error
                    .get_or_insert_with(|| format!("caller task failed: {e}"));
            }
        }
    }
    total.wall = start.elapsed();
    total.latencies.sort_unstable();
    total
}
