//! A minimal Kubernetes API stand-in for the fleet benchmark, in-process and fast enough for thousands of
//! managed resources (kmock, single-threaded Python, saturates at about 200): get, list, watch (with replay from
//! a resourceVersion), create, JSON merge patch (object and status), delete with finalizers, resourceVersion
//! preconditions and generation bumps on spec changes. No validation, selectors, pagination or discovery.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// (resource path "group/version/plural", namespace or "", name)
type Key = (String, String, String);

struct Event {
    resource: String,
    namespace: String,
    line: Arc<String>,
}

#[derive(Default)]
struct Store {
    objects: HashMap<Key, Value>,
    version: u64,
    history: Vec<(u64, Arc<Event>)>,
}

struct Shared {
    store: Mutex<Store>,
    events: broadcast::Sender<(u64, Arc<Event>)>,
}

pub struct FastKube {
    pub port: u16,
}

impl FastKube {
    pub async fn start() -> Self {
        let (events, _) = broadcast::channel(1 << 16);
        let shared = Arc::new(Shared {
            store: Mutex::default(),
            events,
        });
        let app = Router::new().fallback(handle).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// The parts of a request path: resource, namespace, name, subresource.
fn parse(path: &str) -> Option<(String, String, Option<String>, Option<String>)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group_version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => (format!("/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (ns.to_string(), rest),
        _ => (String::new(), rest),
    };
    let plural = rest.first()?;
    Some((
        format!("{group_version}/{plural}"),
        namespace,
        rest.get(1).map(|s| s.to_string()),
        rest.get(2).map(|s| s.to_string()),
    ))
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    respond(code, &body)
}

fn respond(code: u16, body: &Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .unwrap()
        .to_string()
}

impl Store {
    /// Stamps a new resourceVersion, stores or removes the object, and records the watch event.
    fn commit(&mut self, shared: &Shared, key: &Key, kind: &str, mut object: Value) -> Value {
        self.version += 1;
        object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        if kind == "DELETED" {
            self.objects.remove(key);
        } else {
            self.objects.insert(key.clone(), object.clone());
        }
        let event = Arc::new(Event {
            resource: key.0.clone(),
            namespace: key.1.clone(),
            line: Arc::new(format!("{}\n", json!({ "type": kind, "object": object }))),
        });
        self.history.push((self.version, event.clone()));
        if self.history.len() > 200_000 {
            self.history.drain(..100_000);
        }
        let _ = shared.events.send((self.version, event));
        object
    }
}

async fn handle(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, body: Bytes) -> Response {
    let Some((resource, namespace, name, sub)) = parse(uri.path()) else {
        return status(404, "NotFound", "unknown path");
    };
    let query: BTreeMap<String, String> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|p| p.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match (method, name) {
        (Method::GET, None) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            let since: u64 = query
                .get("resourceVersion")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            watch(&shared, resource, namespace, since)
        }
        (Method::GET, None) => {
            let store = shared.store.lock().unwrap();
            let items: Vec<&Value> = store
                .objects
                .iter()
                .filter(|(k, _)| k.0 == resource && (namespace.is_empty() || k.1 == namespace))
                .map(|(_, v)| v)
                .collect();
            respond(
                200,
                &json!({ "apiVersion": "v1", "kind": "List", "items": items,
                         "metadata": { "resourceVersion": store.version.to_string() } }),
            )
        }
        (Method::GET, Some(name)) => {
            let store = shared.store.lock().unwrap();
            match store.objects.get(&(resource, namespace, name.clone())) {
                Some(o) => respond(200, o),
                None => status(404, "NotFound", &format!("{name} not found")),
            }
        }
        (Method::POST, None) => {
            let mut object = body;
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let key = (resource, namespace.clone(), name.clone());
            let mut store = shared.store.lock().unwrap();
            if store.objects.contains_key(&key) {
                return status(409, "AlreadyExists", &format!("{name} already exists"));
            }
            let meta = &mut object["metadata"];
            meta["uid"] = json!(format!("uid-{}-{}", store.version, name));
            meta["generation"] = json!(1);
            meta["creationTimestamp"] = json!(now());
            if !namespace.is_empty() {
                meta["namespace"] = json!(namespace);
            }
            let stored = store.commit(&shared, &key, "ADDED", object);
            respond(201, &stored)
        }
        (Method::PATCH, Some(name)) => {
            let key = (resource, namespace, name.clone());
            let mut store = shared.store.lock().unwrap();
            let Some(current) = store.objects.get(&key).cloned() else {
                return status(404, "NotFound", &format!("{name} not found"));
            };
            let wanted_version = body["metadata"]["resourceVersion"].as_str().map(str::to_string);
            if wanted_version
                .is_some_and(|v| Some(v.as_str()) != current["metadata"]["resourceVersion"].as_str())
            {
                return status(409, "Conflict", "the object has been modified");
            }
            let mut patch = body;
            if let Some(p) = patch.as_object_mut() {
                p.get_mut("metadata")
                    .and_then(Value::as_object_mut)
                    .map(|m| m.remove("resourceVersion"));
                // The status subresource takes only status; the object itself never does.
                if sub.as_deref() == Some("status") {
                    p.retain(|k, _| k == "status");
                } else {
                    p.remove("status");
                }
            }
            let mut updated = current.clone();
            merge(&mut updated, &patch);
            if updated.get("spec") != current.get("spec") {
                let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
                updated["metadata"]["generation"] = json!(generation + 1);
            }
            let finalizers_empty = updated["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
            let deleting = !updated["metadata"]["deletionTimestamp"].is_null();
            let kind = if deleting && finalizers_empty {
                "DELETED"
            } else {
                "MODIFIED"
            };
            let stored = store.commit(&shared, &key, kind, updated);
            respond(200, &stored)
        }
        (Method::DELETE, Some(name)) => {
            let key = (resource, namespace, name.clone());
            let mut store = shared.store.lock().unwrap();
            let Some(mut current) = store.objects.get(&key).cloned() else {
                return status(404, "NotFound", &format!("{name} not found"));
            };
            let has_finalizers = current["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if has_finalizers {
                if current["metadata"]["deletionTimestamp"].is_null() {
                    current["metadata"]["deletionTimestamp"] = json!(now());
                    let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
                    current["metadata"]["generation"] = json!(generation + 1);
                    current = store.commit(&shared, &key, "MODIFIED", current);
                }
                respond(200, &current)
            } else {
                let stored = store.commit(&shared, &key, "DELETED", current);
                respond(200, &stored)
            }
        }
        _ => status(405, "MethodNotAllowed", "not supported by this stand-in"),
    }
}

/// Events after `since` for one resource (and namespace), replayed from history, then live.
fn watch(shared: &Shared, resource: String, namespace: String, since: u64) -> Response {
    let (backlog, receiver) = {
        let store = shared.store.lock().unwrap();
        let backlog: Vec<Arc<String>> = store
            .history
            .iter()
            .filter(|(v, e)| {
                *v > since && e.resource == resource && (namespace.is_empty() || e.namespace == namespace)
            })
            .map(|(_, e)| e.line.clone())
            .collect();
        (backlog, shared.events.subscribe())
    };
    let live = futures::stream::unfold(receiver, move |mut rx| {
        let (resource, namespace) = (resource.clone(), namespace.clone());
        async move {
            loop {
                match rx.recv().await {
                    Ok((v, e))
                        if v > since
                            && e.resource == resource
                            && (namespace.is_empty() || e.namespace == namespace) =>
                    {
                        return Some((Ok::<_, std::io::Error>(Bytes::from(e.line.to_string())), rx));
                    }
                    Ok(_) => continue,
                    // A lagging watcher is closed: the client lists again, as with a real API server.
                    Err(_) => return None,
                }
            }
        }
    });
    let replay = futures::stream::iter(
        backlog
            .into_iter()
            .map(|l| Ok::<_, std::io::Error>(Bytes::from(l.to_string()))),
    );
    use futures::StreamExt;
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from_stream(replay.chain(live)))
        .unwrap()
}
