//! Reading an engine's flags. The command line is the user's: composers read a flag to match what the engine
//! will do (its port, its KV block size, the model name it answers to), never to change it.

use serde_json::{Map, Value};

/// The words of a container's command and args, as a shell would split them; read as they are needed, since a
/// command line is read for one flag at a time and most lookups stop early.
fn words(container: &Map<String, Value>) -> impl Iterator<Item = &str> {
    ["command", "args"]
        .into_iter()
        .filter_map(|field| container.get(field)?.as_array())
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(str::split_whitespace)
}

/// Whether any string of the command line contains `flag`: when none does (as for most flags on most command
/// lines), one substring search per string answers without splitting it into words.
fn mentions(container: &Map<String, Value>, flag: &str) -> bool {
    ["command", "args"]
        .into_iter()
        .filter_map(|field| container.get(field)?.as_array())
        .flatten()
        .filter_map(Value::as_str)
        .any(|s| s.contains(flag))
}

/// Whether the command line holds `flag`, alone or with a value.
pub fn has(container: &Map<String, Value>, flag: &str) -> bool {
    mentions(container, flag)
        && words(container).any(|w| {
            w.strip_prefix(flag)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
        })
}

/// Which engine a container runs, when its image, its executable or the module it runs (`-m <module>`) says so
/// plainly; `None` when they do not. Arguments are not read: a model name may contain any engine's name.
pub fn engine(container: &Map<String, Value>) -> Option<Engine> {
    let image = container.get("image").and_then(Value::as_str).unwrap_or_default();
    let words: Vec<&str> = words(container).collect();
    let executable = container
        .get("command")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(Value::as_str)
        .unwrap_or_default();
    let module = words.windows(2).find(|w| w[0] == "-m").map_or("", |w| w[1]);
    let said = |needles: &[&str]| {
        [image, executable, module]
            .iter()
            .any(|place| needles.iter().any(|n| place.contains(n)))
    };
    if said(&["trtllm", "tensorrt-llm", "tensorrt_llm", "tensorrtllm"]) {
        Some(Engine::TensorRtLlm)
    } else if said(&["sglang"]) {
        Some(Engine::Sglang)
    } else if said(&["vllm"]) {
        Some(Engine::Vllm)
    } else {
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Vllm,
    Sglang,
    TensorRtLlm,
}

/// The value of `flag` (`--flag=value` or `--flag value`) in a container's command and args, as the user wrote
/// them (a shell command line is split on whitespace). Read only, never rewritten.
pub fn value(container: &Map<String, Value>, flag: &str) -> Option<String> {
    if !mentions(container, flag) {
        return None;
    }
    let mut words = words(container).peekable();
    while let Some(word) = words.next() {
        let value = match word.strip_prefix(flag) {
            // The next word is the value, and is still read as a word of its own after this.
            Some("") => words.peek().copied(),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        };
        let value = value.map(|v| v.trim_matches(['"', '\'']));
        if let Some(value) = value.filter(|v| !v.is_empty() && !v.starts_with('-')) {
            return Some(value.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn container(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_flag_takes_the_word_after_it_or_what_follows_its_equals_sign() {
        let c = container(json!({
            "command": ["/bin/sh", "-c", "exec vllm serve m --port=9000 --block-size 32"],
            "args": ["--served-model-name", "'qwen'", "--headless"],
        }));
        assert_eq!(value(&c, "--port").as_deref(), Some("9000"));
        assert_eq!(value(&c, "--block-size").as_deref(), Some("32"));
        assert_eq!(value(&c, "--served-model-name").as_deref(), Some("qwen"));
        // A flag alone, or followed by another flag, has no value; a longer flag is not this one.
        assert_eq!(value(&c, "--headless"), None);
        assert_eq!(value(&c, "--block"), None);
        assert!(has(&c, "--headless") && !has(&c, "--block"));
        // The word after a flag that had none is still read as a flag.
        let c = container(json!({"args": ["--port", "--port", "8000"]}));
        assert_eq!(value(&c, "--port").as_deref(), Some("8000"));
        assert_eq!(value(&container(json!({"args": ["--port"]})), "--port"), None);
    }
}
