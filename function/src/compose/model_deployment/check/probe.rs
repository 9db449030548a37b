//! A user's probe is passed through byte for byte, so it is checked here as the API server would check it:
//! a malformed one is the user's to fix, named by its field, rather than a workload the cluster rejects later.

use serde_json::Value;

use crate::compose::ComposeError;

/// A probe runs exactly one of these.
const HANDLERS: [&str; 4] = ["exec", "httpGet", "tcpSocket", "grpc"];
/// Counts and durations, with the least value each may take.
const NUMBERS: [(&str, i64); 6] = [
    ("initialDelaySeconds", 0),
    ("periodSeconds", 1),
    ("timeoutSeconds", 1),
    ("successThreshold", 1),
    ("failureThreshold", 1),
    ("terminationGracePeriodSeconds", 1),
];

pub fn validate(path: &str, probe: &Value) -> Result<(), ComposeError> {
    let err = |field: &str, why: String| ComposeError::new(format!("{path}{field}"), why);
    let Value::Object(probe) = probe else {
        return Err(err("", "a probe is an object".into()));
    };
    let handlers: Vec<&str> = HANDLERS
        .iter()
        .copied()
        .filter(|h| probe.contains_key(*h))
        .collect();
    let [handler] = handlers.as_slice() else {
        return Err(err(
            "",
            format!(
                "a probe sets exactly one of {}; found {}",
                HANDLERS.join(", "),
                handlers.len()
            ),
        ));
    };
    for (field, least) in NUMBERS {
        if let Some(value) = probe.get(field)
            && value
                .as_i64()
                .is_none_or(|n| n < least || n > i64::from(i32::MAX))
        {
            return Err(err(
                &format!(".{field}"),
                format!("must be an integer of at least {least}, not {value}"),
            ));
        }
    }
    let at = format!(".{handler}");
    let body = &probe[*handler];
    let Value::Object(body) = body else {
        return Err(err(&at, "must be an object".into()));
    };
    match *handler {
        "exec" => match body.get("command") {
            Some(Value::Array(command)) if !command.is_empty() && command.iter().all(Value::is_string) => {
                Ok(())
            }
            _ => Err(err(
                &format!("{at}.command"),
                "must be a non-empty list of strings".into(),
            )),
        },
        "grpc" => match body.get("port") {
            Some(port) if port.as_u64().is_some_and(|p| (1..=65535).contains(&p)) => Ok(()),
            _ => Err(err(
                &format!("{at}.port"),
                "must be a port number, 1 to 65535".into(),
            )),
        },
        _ => {
            let port_ok = match body.get("port") {
                Some(Value::Number(n)) => n.as_u64().is_some_and(|p| (1..=65535).contains(&p)),
                Some(Value::String(name)) => is_port_name(name),
                _ => false,
            };
            if !port_ok {
                return Err(err(
                    &format!("{at}.port"),
                    "must be a port number (1 to 65535) or a port name (IANA_SVC_NAME)".into(),
                ));
            }
            match body.get("path") {
                Some(path) if *handler == "httpGet" && !path.as_str().is_some_and(|p| p.starts_with('/')) => {
                    Err(err(
                        &format!("{at}.path"),
                        "must be a string starting with /".into(),
                    ))
                }
                _ => Ok(()),
            }
        }
    }
}

/// Kubernetes' IANA_SVC_NAME: at most 15 lower-case letters, digits and inner hyphens, with a letter.
fn is_port_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}
