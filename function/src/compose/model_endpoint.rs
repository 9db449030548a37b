//! Checks a `ModelEndpoint` and marks it routable (its XRD has refused what a schema can state: the origin's
//! shape, the credential's method and Secret). It composes nothing: the ModelServices that select it put it
//! on their routes, on the fleet gateway's cluster. Its readiness is what they read, so an endpoint whose URL or
//! credential reference is unusable never takes traffic, and says why here rather than in every service.

use serde::Deserialize;

use super::{ComposeError, Output};
use crate::compose::conditions::{ConditionType, Reason};
use crate::{
    api::{
        ObjectMeta,
        routing::{ModelEndpointSpec, resolve_endpoint},
    },
    proto::v1::{RunFunctionRequest, Status},
    wire::RawStruct,
};

#[derive(Deserialize)]
struct ModelEndpoint {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: ModelEndpointSpec,
}

pub fn compose(_req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    let endpoint: ModelEndpoint = xr.parse()?;
    let (url, prefix) =
        resolve_endpoint(&endpoint.spec).map_err(|(field, why)| ComposeError::new(field, why))?;
    let mut out = Output::default();
    let scheme = if url.tls { "https" } else { "http" };
    out.condition(
        ConditionType::EndpointReady,
        Status::ConditionTrue,
        Reason::Valid,
        format!(
            "{}/{} routes to {scheme}://{}:{}{prefix}",
            endpoint.metadata.namespace.as_deref().unwrap_or_default(),
            endpoint.metadata.name,
            url.host,
            url.port
        ),
    );
    out.ready = Some(true);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::compose;
    use crate::compose::fixtures::{TEST_CA, request, run};

    fn endpoint(spec: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelEndpoint",
               "metadata": {"name": "together", "namespace": "ml-team"}, "spec": spec})
    }

    #[test]
    fn a_valid_external_endpoint_is_ready() {
        let out = run(
            compose,
            &request(endpoint(
                json!({"url": "https://api.together.xyz/", "rewritePath": "/"}),
            )),
        )
        .unwrap();
        assert_eq!(out.ready, Some(true));
        assert!(out.resources.is_empty());
        let private = json!({"origin": "https://gw.example.com",
                             "tls": {"serverName": "cluster-gateway.modelplane.internal", "caCertificate": TEST_CA}});
        assert_eq!(
            run(compose, &request(endpoint(private))).unwrap().ready,
            Some(true)
        );
    }

    #[test]
    fn bad_endpoints_are_fatal_naming_the_field() {
        for (spec, field) in [
            (json!({"url": "api.together.xyz"}), "spec.url"),
            (json!({"origin": "https://h:70000"}), "spec.origin"),
            (json!({"origin": "https://h/v1"}), "spec.origin"),
            (json!({}), "spec.origin"),
            (json!({"origin": "https://h", "url": "https://h/"}), "spec.origin"),
            (
                json!({"url": "https://h/", "rewritePath": "v1"}),
                "spec.rewritePath",
            ),
            (
                json!({"origin": "https://h", "api": {"prefix": "v1"}}),
                "spec.api.prefix",
            ),
            (
                json!({"origin": "https://h", "credential": {"method": "APIKey"}}),
                "spec.credential.apiKey.secretRef.name",
            ),
            (
                json!({"origin": "https://h", "credential": {"method": "OAuth"}}),
                "spec.credential.method",
            ),
            (
                json!({"origin": "http://h", "tls": {"serverName": "h", "caCertificate": TEST_CA}}),
                "spec.tls",
            ),
            (
                json!({"origin": "https://h", "tls": {"serverName": "10.0.0.1", "caCertificate": TEST_CA}}),
                "spec.tls.serverName",
            ),
            (
                json!({"origin": "https://h", "tls": {"serverName": "h", "caCertificate": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}}),
                "spec.tls.caCertificate",
            ),
            (
                json!({"origin": "https://h", "tls": {"serverName": "h", "caCertificate": format!("{TEST_CA}{TEST_CA}")}}),
                "spec.tls.caCertificate",
            ),
        ] {
            let err = run(compose, &request(endpoint(spec.clone()))).unwrap_err();
            assert_eq!(err.path, field, "{spec}: {err}");
        }
    }
}
