//! Client-side AWS rate limits shared by the whole process: one token bucket per (account, region, API), so a
//! fleet of node groups cannot exceed what AWS allows however many reconciles run at once. Every AWS call goes
//! through it (the SDK's own retries too): an interceptor names the operation on the request, and the HTTP
//! connector takes a token before sending. A throttling answer halves the bucket's rate; successes win it back
//! slowly. Urgent work (creates, deletes, updates, anything not in steady state) is served before steady-state
//! describes, which wait while an urgent call is queued on the same bucket. A call whose turn would come too late
//! for the SDK's attempt timeout is not queued at all: it fails at once with [`Deferred`], and the reconciler
//! requeues the resource for when the bucket will have room, instead of a call that times out and flaps Synced.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextMut;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, Metadata};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

use crate::managed::{admission, urgency};

/// Carries the operation name from the interceptor to the connector; removed before the request leaves.
const OPERATION_HEADER: &str = "x-modelplane-operation";

/// A token bucket's size: `burst` tokens, refilled at `per_second`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

/// The rates per API family. AWS documents EC2's (non-mutating actions: bucket 100, refill 20/s, per API);
/// EKS publishes none, so its defaults are conservative. All are flags.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub eks: Rate,
    pub ec2_read: Rate,
    pub ec2_write: Rate,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            eks: Rate {
                per_second: 10.0,
                burst: 20.0,
            },
            ec2_read: Rate {
                per_second: 20.0,
                burst: 100.0,
            },
            ec2_write: Rate {
                per_second: 5.0,
                burst: 50.0,
            },
        }
    }
}

impl Limits {
    fn rate_for(&self, service: &str, operation: &str) -> Rate {
        let read = ["Describe", "List", "Get"]
            .iter()
            .any(|p| operation.starts_with(p));
        match (service.to_ascii_lowercase().contains("ec2"), read) {
            (true, true) => self.ec2_read,
            (true, false) => self.ec2_write,
            (false, _) => self.eks,
        }
    }
}

#[derive(Debug)]
struct BucketState {
    tokens: f64,
    refilled: Instant,
    /// The current refill rate: lowered by throttling answers, back up to `max` with successes.
    rate: f64,
    max: Rate,
    urgent_waiting: usize,
    steady_waiting: usize,
}

#[derive(Debug)]
pub struct Bucket {
    state: Mutex<BucketState>,
    /// Callers wait their turn here, first come first served (tokio's mutex is fair): only the head of each
    /// queue watches the clock, so thousands of waiting reconciles cost no CPU and none is passed over for good.
    urgent_turn: tokio::sync::Mutex<()>,
    steady_turn: tokio::sync::Mutex<()>,
}

/// Lowest rate a throttled bucket falls to: one call every ten seconds still probes for recovery.
const MIN_RATE: f64 = 0.1;

impl Bucket {
    fn new(max: Rate) -> Self {
        Self {
            state: Mutex::new(BucketState {
                tokens: max.burst,
                refilled: Instant::now(),
                rate: max.per_second,
                max,
                urgent_waiting: 0,
                steady_waiting: 0,
            }),
            urgent_turn: tokio::sync::Mutex::new(()),
            steady_turn: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BucketState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a token now, or says how long to wait before trying again.
    fn try_take(&self, urgent: bool) -> Result<(), Duration> {
        let mut s = self.lock();
        let now = Instant::now();
        let elapsed = now.duration_since(s.refilled).as_secs_f64();
        s.tokens = (s.tokens + elapsed * s.rate).min(s.max.burst);
        s.refilled = now;
        let blocked_by_urgent = !urgent && s.urgent_waiting > 0;
        if s.tokens >= 1.0 && !blocked_by_urgent {
            s.tokens -= 1.0;
            return Ok(());
        }
        let missing = (1.0 - s.tokens).max(0.0);
        let wait = if blocked_by_urgent {
            // Look again once the urgent callers have had their turn.
            1.0 / s.rate
        } else {
            missing / s.rate
        };
        Err(Duration::from_secs_f64(wait.clamp(0.001, 10.0)))
    }

    /// How long a caller arriving now would wait for its token: every caller queued ahead of it (for a
    /// steady-state caller, urgent ones too) takes one first.
    pub fn expected_wait(&self, urgent: bool) -> Duration {
        let s = self.lock();
        let elapsed = Instant::now().duration_since(s.refilled).as_secs_f64();
        let tokens = (s.tokens + elapsed * s.rate).min(s.max.burst);
        let ahead = s.urgent_waiting + if urgent { 0 } else { s.steady_waiting };
        let needed = ahead as f64 + 1.0 - tokens;
        Duration::from_secs_f64((needed / s.rate).clamp(0.0, 3600.0))
    }

    pub async fn acquire(&self, urgent: bool) {
        // Counted from the start, so steady-state callers yield to urgent ones still in the queue.
        let _queued = InQueue::enter(self, urgent);
        let _turn = match urgent {
            true => self.urgent_turn.lock().await,
            false => self.steady_turn.lock().await,
        };
        while let Err(wait) = self.try_take(urgent) {
            tokio::time::sleep(wait).await;
        }
    }

    /// AWS said slow down: halve the rate and start from an empty bucket.
    pub fn throttled(&self) {
        let mut s = self.lock();
        s.rate = (s.rate / 2.0).max(MIN_RATE);
        s.tokens = 0.0;
    }

    /// A call went through: win back a little of the rate.
    pub fn succeeded(&self) {
        let mut s = self.lock();
        if s.rate < s.max.per_second {
            s.rate = (s.rate + s.max.per_second / 20.0).min(s.max.per_second);
        }
    }

    pub fn rate(&self) -> f64 {
        self.lock().rate
    }
}

/// Counts a caller as queued until it leaves, by taking a token or by being dropped (its call timed out): a
/// leaked count would hold steady-state callers back for good.
struct InQueue<'a> {
    bucket: &'a Bucket,
    urgent: bool,
}

impl<'a> InQueue<'a> {
    fn enter(bucket: &'a Bucket, urgent: bool) -> Self {
        let mut s = bucket.lock();
        match urgent {
            true => s.urgent_waiting += 1,
            false => s.steady_waiting += 1,
        }
        Self { bucket, urgent }
    }
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        let mut s = self.bucket.lock();
        match self.urgent {
            true => s.urgent_waiting = s.urgent_waiting.saturating_sub(1),
            false => s.steady_waiting = s.steady_waiting.saturating_sub(1),
        }
    }
}

/// A call not sent because its turn at the rate limit would come after `max_wait`: try again after the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("AWS calls to this API are rate-limited: this one would wait {0:?}, past the attempt timeout")]
pub struct Deferred(pub Duration);

/// The Deferred a failed SDK call carries somewhere in its chain of causes, if any.
pub fn deferred(err: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(Deferred(wait)) = e.downcast_ref::<Deferred>() {
            return Some(*wait);
        }
        cause = e.source();
    }
    None
}

/// Every bucket of the process, by (account, region, service:operation).
#[derive(Debug)]
pub struct Throttle {
    limits: Limits,
    buckets: Mutex<HashMap<(String, String, String), Arc<Bucket>>>,
    /// The longest a call may wait for its token; one that would wait longer is [`Deferred`].
    max_wait: Duration,
}

impl Throttle {
    pub fn new(limits: Limits, max_wait: Duration) -> Self {
        Self {
            limits,
            buckets: Mutex::default(),
            max_wait,
        }
    }

    pub fn bucket(&self, account: &str, region: &str, service: &str, operation: &str) -> Arc<Bucket> {
        let key = (
            account.to_string(),
            region.to_string(),
            format!("{service}:{operation}"),
        );
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        buckets
            .entry(key)
            .or_insert_with(|| Arc::new(Bucket::new(self.limits.rate_for(service, operation))))
            .clone()
    }

    /// The (account, region, API) of every bucket made so far.
    pub fn keys(&self) -> Vec<(String, String, String)> {
        let buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let mut keys: Vec<_> = buckets.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// The HTTP client for one (account, region): `inner` behind this throttle.
    pub fn client(
        self: &Arc<Self>,
        inner: SharedHttpClient,
        account: &str,
        region: &str,
    ) -> SharedHttpClient {
        SharedHttpClient::new(ThrottledClient {
            inner,
            throttle: self.clone(),
            account: account.to_string(),
            region: region.to_string(),
        })
    }
}

/// Writes the operation name where the connector can read it.
#[derive(Debug)]
pub struct NameOperation;

impl Intercept for NameOperation {
    fn name(&self) -> &'static str {
        "NameOperation"
    }

    fn modify_before_transmit(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(metadata) = cfg.load::<Metadata>() {
            let value = format!("{}:{}", metadata.service(), metadata.name());
            context
                .request_mut()
                .headers_mut()
                .insert(OPERATION_HEADER, value);
        }
        Ok(())
    }
}

#[derive(Debug)]
struct ThrottledClient {
    inner: SharedHttpClient,
    throttle: Arc<Throttle>,
    account: String,
    region: String,
}

impl HttpClient for ThrottledClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(ThrottledConnector {
            inner: self.inner.http_connector(settings, components),
            throttle: self.throttle.clone(),
            account: self.account.clone(),
            region: self.region.clone(),
        })
    }
}

#[derive(Debug)]
struct ThrottledConnector {
    inner: SharedHttpConnector,
    throttle: Arc<Throttle>,
    account: String,
    region: String,
}

/// A throttling answer: 429, or an EKS/EC2 error code that says so (EC2 answers 503 RequestLimitExceeded).
fn is_throttling(status: u16, error_type: Option<&str>) -> bool {
    let code = error_type.unwrap_or_default();
    status == 429
        || status == 503
        || ["Throttling", "TooManyRequests", "RequestLimitExceeded"]
            .iter()
            .any(|c| code.contains(c))
}

impl HttpConnector for ThrottledConnector {
    fn call(&self, mut request: HttpRequest) -> HttpConnectorFuture {
        // From here the reconcile waits for a token, not for an admission slot: the next one may go in.
        admission::leave();
        let urgent = urgency::is_urgent();
        let operation = request
            .headers_mut()
            .remove(OPERATION_HEADER)
            .unwrap_or_else(|| "unknown:unknown".into());
        let (service, name) = operation.split_once(':').unwrap_or(("unknown", "unknown"));
        let bucket = self.throttle.bucket(&self.account, &self.region, service, name);
        let inner = self.inner.clone();
        let wait = bucket.expected_wait(urgent);
        if wait > self.throttle.max_wait {
            // No retry kind: the SDK gives up at once, and the reconciler requeues the resource after `wait`.
            let deferred = ConnectorError::other(Box::new(Deferred(wait)), None);
            return HttpConnectorFuture::ready(Err(deferred));
        }
        HttpConnectorFuture::new(async move {
            bucket.acquire(urgent).await;
            let response = inner.call(request).await?;
            let error_type = response.headers().get("x-amzn-errortype");
            if is_throttling(response.status().as_u16(), error_type) {
                bucket.throttled();
            } else {
                bucket.succeeded();
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_lets_its_burst_through_then_waits_for_its_rate() {
        let bucket = Bucket::new(Rate {
            per_second: 2.0,
            burst: 3.0,
        });
        for _ in 0..3 {
            assert!(bucket.try_take(true).is_ok());
        }
        let wait = bucket.try_take(true).unwrap_err();
        assert!(wait <= Duration::from_millis(500), "{wait:?}");
    }

    #[test]
    fn the_expected_wait_counts_every_caller_queued_ahead() {
        let bucket = Bucket::new(Rate {
            per_second: 1.0,
            burst: 1.0,
        });
        assert_eq!(bucket.expected_wait(false), Duration::ZERO);
        assert!(bucket.try_take(false).is_ok());
        let _steady: Vec<InQueue> = (0..9).map(|_| InQueue::enter(&bucket, false)).collect();
        // Nine steady callers ahead and an empty bucket: the tenth token comes in about ten seconds.
        let steady = bucket.expected_wait(false);
        assert!(steady > Duration::from_secs(9), "{steady:?}");
        // An urgent caller goes before them all.
        assert!(bucket.expected_wait(true) <= Duration::from_secs(1));
    }

    #[test]
    fn a_deferred_call_is_found_in_its_chain_of_causes() {
        let wait = Duration::from_secs(12);
        let error = ConnectorError::other(Box::new(Deferred(wait)), None);
        assert_eq!(deferred(&error), Some(wait));
        assert_eq!(deferred(&std::io::Error::other("no")), None);
    }

    #[test]
    fn throttling_halves_the_rate_and_successes_win_it_back() {
        let bucket = Bucket::new(Rate {
            per_second: 10.0,
            burst: 10.0,
        });
        bucket.throttled();
        assert_eq!(bucket.rate(), 5.0);
        bucket.throttled();
        assert_eq!(bucket.rate(), 2.5);
        for _ in 0..20 {
            bucket.succeeded();
        }
        assert_eq!(bucket.rate(), 10.0);
    }

    #[test]
    fn steady_state_describes_wait_while_urgent_work_is_queued() {
        let bucket = Bucket::new(Rate {
            per_second: 1.0,
            burst: 5.0,
        });
        bucket.lock().urgent_waiting = 1;
        assert!(bucket.try_take(false).is_err());
        assert!(bucket.try_take(true).is_ok());
    }

    #[tokio::test]
    async fn an_urgent_caller_that_gives_up_stops_holding_others_back() {
        let bucket = Bucket::new(Rate {
            per_second: 0.1,
            burst: 1.0,
        });
        assert!(bucket.try_take(true).is_ok());
        let gave_up = tokio::time::timeout(Duration::from_millis(50), bucket.acquire(true)).await;
        assert!(gave_up.is_err());
        assert_eq!(bucket.lock().urgent_waiting, 0);
    }

    #[tokio::test]
    async fn waiting_callers_are_served_in_arrival_order() {
        let bucket = Arc::new(Bucket::new(Rate {
            per_second: 200.0,
            burst: 1.0,
        }));
        let served = Arc::new(Mutex::new(Vec::new()));
        let callers: Vec<_> = (0..5)
            .map(|i| {
                let (bucket, served) = (bucket.clone(), served.clone());
                tokio::spawn(async move {
                    bucket.acquire(true).await;
                    served.lock().unwrap().push(i);
                })
            })
            .collect();
        for caller in callers {
            caller.await.unwrap();
        }
        assert_eq!(*served.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn an_urgent_caller_overtakes_steady_ones_already_waiting() {
        let bucket = Arc::new(Bucket::new(Rate {
            per_second: 20.0,
            burst: 1.0,
        }));
        assert!(bucket.try_take(true).is_ok());
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut callers = Vec::new();
        for (name, urgent) in [("steady", false), ("urgent", true)] {
            let (bucket, served) = (bucket.clone(), served.clone());
            callers.push(tokio::spawn(async move {
                bucket.acquire(urgent).await;
                served.lock().unwrap().push(name);
            }));
            tokio::task::yield_now().await;
        }
        for caller in callers {
            caller.await.unwrap();
        }
        assert_eq!(*served.lock().unwrap(), vec!["urgent", "steady"]);
    }

    #[test]
    fn buckets_are_per_account_region_and_api() {
        let throttle = Throttle::new(Limits::default(), Duration::from_secs(8));
        let a = throttle.bucket("123456789012", "us-east-1", "eks", "DescribeNodegroup");
        // Two ProviderConfigs of one account resolve to the same account id, so to the same bucket.
        let same = throttle.bucket("123456789012", "us-east-1", "eks", "DescribeNodegroup");
        assert!(Arc::ptr_eq(&a, &same));
        for other in [
            throttle.bucket("210987654321", "us-east-1", "eks", "DescribeNodegroup"),
            throttle.bucket("123456789012", "eu-west-1", "eks", "DescribeNodegroup"),
            throttle.bucket("123456789012", "us-east-1", "eks", "DescribeCluster"),
        ] {
            assert!(!Arc::ptr_eq(&a, &other));
        }
    }

    #[test]
    fn throttling_answers_are_recognised() {
        assert!(is_throttling(429, None));
        assert!(is_throttling(400, Some("ThrottlingException")));
        assert!(is_throttling(503, Some("RequestLimitExceeded")));
        assert!(!is_throttling(400, Some("InvalidParameterException")));
    }

    #[test]
    fn ec2_reads_writes_and_eks_calls_get_their_own_rates() {
        let limits = Limits::default();
        assert_eq!(limits.rate_for("ec2", "DescribeSubnets"), limits.ec2_read);
        assert_eq!(limits.rate_for("ec2", "CreateLaunchTemplate"), limits.ec2_write);
        assert_eq!(limits.rate_for("eks", "CreateNodegroup"), limits.eks);
    }
}
