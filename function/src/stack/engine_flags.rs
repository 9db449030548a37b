//! Reading an engine's flags. The command line is the user's: composers read a flag to match what the engine
//! will do (its port, its KV block size, the model name it answers to), never to change it.

use serde_json::{Map, Value};

/// The value of `flag` (`--flag=value` or `--flag value`) in a container's command and args, as the user wrote
/// them (a shell command line is split on whitespace). Read only, never rewritten.
pub fn value(container: &Map<String, Value>, flag: &str) -> Option<String> {
    let words: Vec<&str> = ["command", "args"]
        .iter()
        .filter_map(|field| container.get(*field)?.as_array())
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(str::split_whitespace)
        .collect();
    words.iter().enumerate().find_map(|(i, word)| {
        let value = match word.strip_prefix(flag)? {
            "" => *words.get(i + 1)?,
            rest => rest.strip_prefix('=')?,
        };
        let value = value.trim_matches(['"', '\'']);
        (!value.is_empty() && !value.starts_with('-')).then(|| value.to_owned())
    })
}
