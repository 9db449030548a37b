//! Reads the manifests `render` is given: one file, or every `.yaml`/`.yml`/`.json` file in a directory,
//! each a stream of YAML documents.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::RenderError;

/// Every object in the files and directories given, in path order.
pub fn read_objects(paths: &[PathBuf]) -> Result<Vec<Value>, RenderError> {
    let mut objects = Vec::new();
    for path in paths {
        for file in files_in(path)? {
            objects.extend(read_file(&file)?);
        }
    }
    Ok(objects)
}

/// The single object in `path`.
pub fn read_one(path: &Path) -> Result<Value, RenderError> {
    let mut objects = read_file(path)?;
    match objects.len() {
        1 => Ok(objects.remove(0)),
        n => Err(RenderError::Input {
            path: path.to_owned(),
            reason: format!("expected one object, found {n}"),
        }),
    }
}

fn files_in(path: &Path) -> Result<Vec<PathBuf>, RenderError> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let entries = std::fs::read_dir(path).map_err(|e| RenderError::io(path, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let file = entry.map_err(|e| RenderError::io(path, e))?.path();
        let manifest = file
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml" || ext == "json");
        if file.is_file() && manifest {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}

fn read_file(path: &Path) -> Result<Vec<Value>, RenderError> {
    let text = std::fs::read_to_string(path).map_err(|e| RenderError::io(path, e))?;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = Value::deserialize(document).map_err(|e| RenderError::Input {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        match value {
            Value::Null => {}
            Value::Object(_) => objects.push(value),
            _ => {
                return Err(RenderError::Input {
                    path: path.to_owned(),
                    reason: "every document must be a Kubernetes object".into(),
                });
            }
        }
    }
    Ok(objects)
}
