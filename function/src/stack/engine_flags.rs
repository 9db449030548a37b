//! Reading an engine's flags. The command line is the user's: composers read a flag to match what the engine
//! will do (its port, its KV block size, the model name it answers to), never to change it.

use serde_json::{Map, Value};

/// The words of a container's command and args, as a shell would split them.
fn words(container: &Map<String, Value>) -> Vec<&str> {
    ["command", "args"]
        .iter()
        .filter_map(|field| container.get(*field)?.as_array())
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(str::split_whitespace)
        .collect()
}

/// Whether the command line holds `flag`, alone or with a value.
pub fn has(container: &Map<String, Value>, flag: &str) -> bool {
    words(container).iter().any(|w| {
        w.strip_prefix(flag)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
    })
}

/// Which engine a container runs, when its image, its executable or the module it runs (`-m <module>`) says so
/// plainly; `None` when they do not. Arguments are not read: a model name may contain any engine's name.
pub fn engine(container: &Map<String, Value>) -> Option<Engine> {
    let image = container.get("image").and_then(Value::as_str).unwrap_or_default();
    let words = words(container);
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
    let words = words(container);
    words.iter().enumerate().find_map(|(i, word)| {
        let value = match word.strip_prefix(flag)? {
            "" => *words.get(i + 1)?,
            rest => rest.strip_prefix('=')?,
        };
        let value = value.trim_matches(['"', '\'']);
        (!value.is_empty() && !value.starts_with('-')).then(|| value.to_owned())
    })
}
