//! A fast AWS stand-in for the fleet benchmark only: moto (one Python process) cannot serve thousands of node
//! groups, and the correctness suites keep using moto. In-process, it speaks exactly the calls the provider
//! makes: EKS REST-JSON (clusters, node groups, updates, tags, lists), EC2's query calls of the NodePool path
//! (DescribeSubnets, CreateLaunchTemplate, DescribeLaunchTemplates, CreatePlacementGroup) and STS
//! GetCallerIdentity. Resources go CREATING -> ACTIVE and DELETING -> gone after set delays; requests are
//! validated where EKS rejects them for good (unsupported version, max size below 1); every API has a token
//! bucket per account like AWS's, and a request beyond it gets a throttling answer. Every call is counted, by
//! operation and by resource.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

pub const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const VERSIONS: [&str; 4] = ["1.31", "1.32", "1.33", "1.34"];

/// How fast AWS changes state, and how many calls per second each API allows.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    pub create_takes: Duration,
    pub delete_takes: Duration,
    /// Per (account, API): refill per second and burst.
    pub rate: f64,
    pub burst: f64,
}

struct Resource {
    body: Value,
    created: Instant,
    deleting: Option<Instant>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Default)]
struct Store {
    clusters: HashMap<String, Resource>,
    groups: HashMap<(String, String), Resource>,
    templates: HashMap<String, String>,
    buckets: HashMap<String, Bucket>,
    /// Calls by operation, and throttling answers by operation.
    calls: BTreeMap<String, u64>,
    throttled: BTreeMap<String, u64>,
    /// Calls by "Operation target" (target: the cluster or "cluster/nodegroup" the call names).
    by_target: HashMap<String, u64>,
    /// Describe calls answered (not throttled), by target: what the provider has actually looked at.
    described: HashMap<String, u64>,
    unsupported: Vec<String>,
}

struct Shared {
    store: Mutex<Store>,
    behaviour: Behaviour,
}

#[derive(Clone)]
pub struct FastEks {
    pub port: u16,
    shared: Arc<Shared>,
}

impl FastEks {
    pub async fn start(behaviour: Behaviour) -> Self {
        let shared = Arc::new(Shared {
            store: Mutex::default(),
            behaviour,
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { port, shared }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.shared.store.lock().unwrap()
    }

    /// Every call so far (throttled ones included).
    pub fn total_calls(&self) -> u64 {
        self.store().calls.values().sum()
    }

    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.store().calls.clone()
    }

    pub fn throttled(&self) -> u64 {
        self.store().throttled.values().sum()
    }

    pub fn throttled_by_operation(&self) -> BTreeMap<String, u64> {
        self.store().throttled.clone()
    }

    /// Calls of `operation` that named `target` ("cluster" or "cluster/nodegroup").
    pub fn calls_for(&self, operation: &str, target: &str) -> u64 {
        self.store()
            .by_target
            .get(&format!("{operation} {target}"))
            .copied()
            .unwrap_or(0)
    }

    /// Describe calls so far (DescribeCluster and DescribeNodegroup).
    pub fn describes(&self) -> u64 {
        let calls = self.calls();
        calls.get("DescribeCluster").copied().unwrap_or(0)
            + calls.get("DescribeNodegroup").copied().unwrap_or(0)
    }

    /// Answered Describe calls by target ("cluster" or "cluster/nodegroup").
    pub fn described(&self) -> HashMap<String, u64> {
        self.store().described.clone()
    }

    /// Drift made outside Kubernetes: the node group loses its labels, as if someone edited it in the console.
    pub fn drop_labels(&self, cluster: &str, group: &str) {
        if let Some(r) = self
            .store()
            .groups
            .get_mut(&(cluster.to_string(), group.to_string()))
        {
            r.body["labels"] = json!({});
        }
    }

    /// Requests this stand-in does not speak: any is a gap in the benchmark.
    pub fn unsupported(&self) -> Vec<String> {
        self.store().unsupported.clone()
    }
}

fn epoch() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn answer(status: StatusCode, content_type: &str, error: Option<&str>, body: String) -> Response {
    let mut response = Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("x-amzn-requestid", "fasteks");
    if let Some(code) = error {
        response = response.header("x-amzn-errortype", code);
    }
    response.body(Body::from(body)).unwrap()
}

fn ok(body: Value) -> Response {
    answer(StatusCode::OK, "application/json", None, body.to_string())
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    answer(
        status,
        "application/json",
        Some(code),
        json!({ "message": message }).to_string(),
    )
}

fn xml(body: String) -> Response {
    answer(StatusCode::OK, "text/xml", None, body)
}

fn ec2_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = format!(
        "<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>fasteks</RequestID></Response>"
    );
    answer(status, "text/xml", None, body)
}

/// The operation and its target from the request line and body, as AWS routes them.
fn route(method: &Method, path: &str, form: &HashMap<String, String>) -> (String, String) {
    if let Some(action) = form.get("Action") {
        return (action.clone(), String::new());
    }
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let op = match (method.as_str(), parts.as_slice()) {
        ("POST", ["clusters"]) => "CreateCluster",
        ("GET", ["clusters"]) => "ListClusters",
        ("GET", ["clusters", _]) => "DescribeCluster",
        ("DELETE", ["clusters", _]) => "DeleteCluster",
        ("POST", ["clusters", _, "updates"]) => "UpdateClusterVersion",
        ("POST", ["clusters", _, "update-config"]) => "UpdateClusterConfig",
        ("POST", ["tags", ..]) => "TagResource",
        ("GET", ["clusters", _, "node-groups"]) => "ListNodegroups",
        ("POST", ["clusters", _, "node-groups"]) => "CreateNodegroup",
        ("GET", ["clusters", _, "node-groups", _]) => "DescribeNodegroup",
        ("DELETE", ["clusters", _, "node-groups", _]) => "DeleteNodegroup",
        ("POST", ["clusters", _, "node-groups", _, "update-config"]) => "UpdateNodegroupConfig",
        _ => "Unsupported",
    };
    let target = match parts.as_slice() {
        ["clusters", c, "node-groups", g, ..] => format!("{c}/{g}"),
        ["clusters", c, ..] => c.to_string(),
        _ => String::new(),
    };
    (op.to_string(), target)
}

fn form(body: &[u8]) -> HashMap<String, String> {
    let text = String::from_utf8_lossy(body);
    if !text.contains("Action=") {
        return HashMap::new();
    }
    text.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// Percent-decoding of a form value.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

async fn handle(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, body: Bytes) -> Response {
    let form = form(&body);
    let (op, mut target) = route(&method, uri.path(), &form);
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // Creates name their resource in the body, not the path.
    match op.as_str() {
        "CreateNodegroup" => {
            target = format!("{target}/{}", json["nodegroupName"].as_str().unwrap_or_default())
        }
        "CreateCluster" => target = json["name"].as_str().unwrap_or_default().to_string(),
        _ => {}
    }
    let mut store = shared.store.lock().unwrap();
    *store.calls.entry(op.clone()).or_default() += 1;
    *store.by_target.entry(format!("{op} {target}")).or_default() += 1;
    if op == "Unsupported" {
        store.unsupported.push(format!("{method} {}", uri.path()));
        return error(
            StatusCode::BAD_REQUEST,
            "UnknownOperationException",
            "not served by the stand-in",
        );
    }
    // One account (every credential maps to it), one region: a bucket per API.
    let b = shared.behaviour;
    let now = Instant::now();
    let bucket = store.buckets.entry(op.clone()).or_insert(Bucket {
        tokens: b.burst,
        at: now,
    });
    bucket.tokens = (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * b.rate).min(b.burst);
    bucket.at = now;
    if bucket.tokens < 1.0 {
        *store.throttled.entry(op.clone()).or_default() += 1;
        return match form.contains_key("Action") {
            true => ec2_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "RequestLimitExceeded",
                "Request limit exceeded.",
            ),
            false => error(
                StatusCode::TOO_MANY_REQUESTS,
                "ThrottlingException",
                "Rate exceeded",
            ),
        };
    }
    bucket.tokens -= 1.0;
    if op.starts_with("Describe") && !target.is_empty() {
        *store.described.entry(target.clone()).or_default() += 1;
    }
    let parts: Vec<String> = uri
        .path()
        .trim_matches('/')
        .split('/')
        .map(str::to_string)
        .collect();
    store.settle(&b, now);
    match op.as_str() {
        "GetCallerIdentity" => xml(format!(
            "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><GetCallerIdentityResult>\
             <Arn>arn:aws:iam::{ACCOUNT}:user/bench</Arn><UserId>AIDABENCH</UserId><Account>{ACCOUNT}</Account>\
             </GetCallerIdentityResult><ResponseMetadata><RequestId>fasteks</RequestId></ResponseMetadata>\
             </GetCallerIdentityResponse>"
        )),
        "DescribeSubnets" => describe_subnets(&form),
        "CreateLaunchTemplate" => store.create_launch_template(&form),
        "DescribeLaunchTemplates" => store.describe_launch_templates(&form),
        "CreatePlacementGroup" => xml(
            "<CreatePlacementGroupResponse><requestId>fasteks</requestId><return>true</return></CreatePlacementGroupResponse>"
                .into(),
        ),
        "CreateCluster" => store.create_cluster(json, now),
        "ListClusters" => ok(json!({ "clusters": store.clusters.keys().collect::<Vec<_>>() })),
        "DescribeCluster" => store.describe_cluster(&parts[1], &b, now),
        "DeleteCluster" => store.delete_cluster(&parts[1], &b, now),
        "UpdateClusterVersion" | "UpdateClusterConfig" => store.update_cluster(&parts[1], &json, &b, now),
        "TagResource" => ok(json!({})),
        "ListNodegroups" => {
            let names: Vec<&String> = store
                .groups
                .keys()
                .filter(|(c, _)| *c == parts[1])
                .map(|(_, g)| g)
                .collect();
            ok(json!({ "nodegroups": names }))
        }
        "CreateNodegroup" => store.create_nodegroup(&parts[1], json, &b, now),
        "DescribeNodegroup" => store.describe_nodegroup(&parts[1], &parts[3], &b, now),
        "DeleteNodegroup" => store.delete_nodegroup(&parts[1], &parts[3], &b, now),
        "UpdateNodegroupConfig" => store.update_nodegroup(&parts[1], &parts[3], &json),
        other => {
            store.unsupported.push(other.to_string());
            error(StatusCode::BAD_REQUEST, "UnknownOperationException", other)
        }
    }
}

fn status_of(r: &Resource, b: &Behaviour, now: Instant) -> &'static str {
    match r.deleting {
        Some(_) => "DELETING",
        None if now.duration_since(r.created) >= b.create_takes => "ACTIVE",
        None => "CREATING",
    }
}

fn with_status(r: &Resource, b: &Behaviour, now: Instant) -> Value {
    let mut body = r.body.clone();
    body["status"] = status_of(r, b, now).into();
    body
}

fn update_answer() -> Response {
    ok(json!({ "update": {
        "id": format!("{:x}", epoch().to_bits()), "status": "InProgress", "type": "ConfigUpdate",
        "params": [], "createdAt": epoch(), "errors": []
    }}))
}

fn describe_subnets(form: &HashMap<String, String>) -> Response {
    let items: String = form
        .iter()
        .filter(|(k, _)| k.starts_with("SubnetId."))
        .map(|(_, id)| {
            // subnet-a -> us-east-1a: the letter after the dash names the zone.
            let zone = format!("{REGION}{}", id.chars().last().unwrap_or('a'));
            format!(
                "<item><subnetId>{id}</subnetId><availabilityZone>{zone}</availabilityZone><vpcId>vpc-bench</vpcId><state>available</state></item>"
            )
        })
        .collect();
    xml(format!(
        "<DescribeSubnetsResponse><requestId>fasteks</requestId><subnetSet>{items}</subnetSet></DescribeSubnetsResponse>"
    ))
}

fn template_xml(name: &str, id: &str) -> String {
    format!(
        "<launchTemplateId>{id}</launchTemplateId><launchTemplateName>{name}</launchTemplateName><defaultVersionNumber>1</defaultVersionNumber><latestVersionNumber>1</latestVersionNumber>"
    )
}

impl Store {
    /// Finishes deletions whose time has come.
    fn settle(&mut self, b: &Behaviour, now: Instant) {
        let gone = |r: &Resource| {
            r.deleting
                .is_some_and(|t| now.duration_since(t) >= b.delete_takes)
        };
        self.clusters.retain(|_, r| !gone(r));
        self.groups.retain(|_, r| !gone(r));
    }

    fn create_launch_template(&mut self, form: &HashMap<String, String>) -> Response {
        let name = form.get("LaunchTemplateName").cloned().unwrap_or_default();
        if self.templates.contains_key(&name) {
            return ec2_error(
                StatusCode::BAD_REQUEST,
                "InvalidLaunchTemplateName.AlreadyExistsException",
                "Launch template name already in use.",
            );
        }
        let id = format!("lt-{:017x}", self.templates.len() + 1);
        self.templates.insert(name.clone(), id.clone());
        xml(format!(
            "<CreateLaunchTemplateResponse><requestId>fasteks</requestId><launchTemplate>{}</launchTemplate></CreateLaunchTemplateResponse>",
            template_xml(&name, &id)
        ))
    }

    fn describe_launch_templates(&self, form: &HashMap<String, String>) -> Response {
        let items: String = form
            .iter()
            .filter(|(k, _)| k.starts_with("LaunchTemplateName."))
            .filter_map(|(_, name)| {
                Some(format!(
                    "<item>{}</item>",
                    template_xml(name, self.templates.get(name)?)
                ))
            })
            .collect();
        xml(format!(
            "<DescribeLaunchTemplatesResponse><requestId>fasteks</requestId><launchTemplates>{items}</launchTemplates></DescribeLaunchTemplatesResponse>"
        ))
    }

    fn create_cluster(&mut self, req: Value, now: Instant) -> Response {
        let name = req["name"].as_str().unwrap_or_default().to_string();
        let version = req["version"].as_str().unwrap_or("1.34").to_string();
        if !VERSIONS.contains(&version.as_str()) {
            return error(
                StatusCode::BAD_REQUEST,
                "InvalidParameterException",
                &format!("unsupported Kubernetes version {version}"),
            );
        }
        if self.clusters.contains_key(&name) {
            return error(
                StatusCode::CONFLICT,
                "ResourceInUseException",
                &format!("Cluster already exists with name: {name}"),
            );
        }
        let vpc = &req["resourcesVpcConfig"];
        let body = json!({
            "name": name,
            "arn": format!("arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{name}"),
            "createdAt": epoch(),
            "version": version,
            "endpoint": format!("https://{name}.bench.eks.local"),
            "roleArn": req["roleArn"],
            "resourcesVpcConfig": {
                "subnetIds": vpc["subnetIds"],
                "securityGroupIds": [],
                "clusterSecurityGroupId": "sg-bench",
                "vpcId": "vpc-bench",
                "endpointPublicAccess": vpc["endpointPublicAccess"].as_bool().unwrap_or(true),
                "endpointPrivateAccess": vpc["endpointPrivateAccess"].as_bool().unwrap_or(false),
                "publicAccessCidrs": ["0.0.0.0/0"],
            },
            "identity": { "oidc": { "issuer": format!("https://oidc.eks.{REGION}.amazonaws.com/id/{name}") } },
            "certificateAuthority": { "data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmJlbmNoCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K" },
            "platformVersion": "eks.1",
            "tags": req.get("tags").cloned().unwrap_or_else(|| json!({})),
        });
        let resource = Resource {
            body,
            created: now,
            deleting: None,
        };
        let mut answer = resource.body.clone();
        answer["status"] = "CREATING".into();
        self.clusters.insert(name, resource);
        ok(json!({ "cluster": answer }))
    }

    fn describe_cluster(&self, name: &str, b: &Behaviour, now: Instant) -> Response {
        match self.clusters.get(name) {
            Some(r) => ok(json!({ "cluster": with_status(r, b, now) })),
            None => not_found(&format!("No cluster found for name: {name}.")),
        }
    }

    fn delete_cluster(&mut self, name: &str, b: &Behaviour, now: Instant) -> Response {
        if self.groups.keys().any(|(c, _)| c == name) {
            return error(
                StatusCode::CONFLICT,
                "ResourceInUseException",
                "Cluster has nodegroups attached",
            );
        }
        match self.clusters.get_mut(name) {
            Some(r) => {
                r.deleting.get_or_insert(now);
                ok(json!({ "cluster": with_status(r, b, now) }))
            }
            None => not_found(&format!("No cluster found for name: {name}.")),
        }
    }

    fn update_cluster(&mut self, name: &str, req: &Value, b: &Behaviour, now: Instant) -> Response {
        let Some(r) = self.clusters.get_mut(name) else {
            return not_found(&format!("No cluster found for name: {name}."));
        };
        if status_of(r, b, now) != "ACTIVE" {
            return error(
                StatusCode::CONFLICT,
                "ResourceInUseException",
                "Cluster is not ACTIVE",
            );
        }
        if let Some(v) = req["version"].as_str() {
            r.body["version"] = v.into();
        }
        for field in ["endpointPublicAccess", "endpointPrivateAccess"] {
            if let Some(v) = req["resourcesVpcConfig"][field].as_bool() {
                r.body["resourcesVpcConfig"][field] = v.into();
            }
        }
        update_answer()
    }

    fn create_nodegroup(&mut self, cluster: &str, req: Value, b: &Behaviour, now: Instant) -> Response {
        let Some(c) = self.clusters.get(cluster) else {
            return not_found(&format!("No cluster found for name: {cluster}."));
        };
        if status_of(c, b, now) != "ACTIVE" {
            return error(
                StatusCode::BAD_REQUEST,
                "InvalidRequestException",
                &format!("Cluster '{cluster}' is not in ACTIVE status"),
            );
        }
        let name = req["nodegroupName"].as_str().unwrap_or_default().to_string();
        let scaling = &req["scalingConfig"];
        if scaling["maxSize"].as_i64().unwrap_or(0) < 1 {
            return error(
                StatusCode::BAD_REQUEST,
                "InvalidParameterException",
                "Maxsize can't be lower than 1",
            );
        }
        let key = (cluster.to_string(), name.clone());
        if self.groups.contains_key(&key) {
            return error(
                StatusCode::CONFLICT,
                "ResourceInUseException",
                &format!("NodeGroup already exists with name {name} and cluster name {cluster}"),
            );
        }
        let disk = if req.get("launchTemplate").is_some() {
            Value::Null
        } else {
            req["diskSize"].as_i64().unwrap_or(20).into()
        };
        let body = json!({
            "nodegroupName": name,
            "nodegroupArn": format!("arn:aws:eks:{REGION}:{ACCOUNT}:nodegroup/{cluster}/{name}/bench"),
            "clusterName": cluster,
            "version": c.body["version"],
            "releaseVersion": "bench",
            "createdAt": epoch(),
            "modifiedAt": epoch(),
            "capacityType": req["capacityType"].as_str().unwrap_or("ON_DEMAND"),
            "scalingConfig": scaling,
            "instanceTypes": req.get("instanceTypes").cloned().unwrap_or_else(|| json!(["t3.medium"])),
            "subnets": req["subnets"],
            "amiType": req["amiType"].as_str().unwrap_or("AL2023_x86_64_STANDARD"),
            "nodeRole": req["nodeRole"],
            "labels": req.get("labels").cloned().unwrap_or_else(|| json!({})),
            "taints": req.get("taints").cloned().unwrap_or_else(|| json!([])),
            "diskSize": disk,
            "launchTemplate": req.get("launchTemplate").cloned().unwrap_or(Value::Null),
            "health": { "issues": [] },
            "tags": req.get("tags").cloned().unwrap_or_else(|| json!({})),
        });
        let resource = Resource {
            body,
            created: now,
            deleting: None,
        };
        let mut answer = resource.body.clone();
        answer["status"] = "CREATING".into();
        self.groups.insert(key, resource);
        ok(json!({ "nodegroup": answer }))
    }

    fn describe_nodegroup(&self, cluster: &str, name: &str, b: &Behaviour, now: Instant) -> Response {
        match self.groups.get(&(cluster.to_string(), name.to_string())) {
            Some(r) => ok(json!({ "nodegroup": with_status(r, b, now) })),
            None => not_found(&format!("No node group found for name: {name}.")),
        }
    }

    fn delete_nodegroup(&mut self, cluster: &str, name: &str, b: &Behaviour, now: Instant) -> Response {
        match self.groups.get_mut(&(cluster.to_string(), name.to_string())) {
            Some(r) => {
                r.deleting.get_or_insert(now);
                ok(json!({ "nodegroup": with_status(r, b, now) }))
            }
            None => not_found(&format!("No node group found for name: {name}.")),
        }
    }

    fn update_nodegroup(&mut self, cluster: &str, name: &str, req: &Value) -> Response {
        let Some(r) = self.groups.get_mut(&(cluster.to_string(), name.to_string())) else {
            return not_found(&format!("No node group found for name: {name}."));
        };
        if req["scalingConfig"].is_object() {
            r.body["scalingConfig"] = req["scalingConfig"].clone();
        }
        if let Some(set) = req["labels"]["addOrUpdateLabels"].as_object() {
            for (k, v) in set {
                r.body["labels"][k] = v.clone();
            }
        }
        if let (Some(remove), Some(labels)) = (
            req["labels"]["removeLabels"].as_array(),
            r.body["labels"].as_object_mut(),
        ) {
            for k in remove.iter().filter_map(Value::as_str) {
                labels.remove(k);
            }
        }
        let mut taints: Vec<Value> = r.body["taints"].as_array().cloned().unwrap_or_default();
        let same = |a: &Value, b: &Value| a["key"] == b["key"] && a["effect"] == b["effect"];
        for t in req["taints"]["removeTaints"].as_array().into_iter().flatten() {
            taints.retain(|x| !same(x, t));
        }
        for t in req["taints"]["addOrUpdateTaints"]
            .as_array()
            .into_iter()
            .flatten()
        {
            taints.retain(|x| !same(x, t));
            taints.push(t.clone());
        }
        r.body["taints"] = taints.into();
        r.body["modifiedAt"] = epoch().into();
        update_answer()
    }
}

fn not_found(message: &str) -> Response {
    error(StatusCode::NOT_FOUND, "ResourceNotFoundException", message)
}
