//! YAML manifests as JSON values, each remembering the file and position it came from, and the problems the
//! checker reports about them.

use std::{
    fmt,
    path::{Path, PathBuf},
};

use serde::Deserialize;
use serde_json::Value;

/// One object of a YAML stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub file: PathBuf,
    /// Position in the file's stream, counting from 0 and skipping empty documents.
    pub index: usize,
    pub value: Value,
}

impl Manifest {
    pub fn new(file: impl Into<PathBuf>, index: usize, value: Value) -> Self {
        Self {
            file: file.into(),
            index,
            value,
        }
    }

    pub fn api_version(&self) -> &str {
        self.str_at(&["apiVersion"])
    }

    pub fn kind(&self) -> &str {
        self.str_at(&["kind"])
    }

    pub fn name(&self) -> &str {
        self.str_at(&["metadata", "name"])
    }

    /// The API group of `apiVersion` (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version().rsplit_once('/').map_or("", |(group, _)| group)
    }

    pub fn is(&self, api_version: &str, kind: &str) -> bool {
        self.api_version() == api_version && self.kind() == kind
    }

    /// A string field, or "" when it is absent or not a string.
    pub fn str_at(&self, path: &[&str]) -> &str {
        path.iter()
            .try_fold(&self.value, |v, key| v.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `Kind/name`, the way kubectl names an object.
    pub fn object(&self) -> String {
        let kind = if self.kind().is_empty() {
            "<no kind>"
        } else {
            self.kind()
        };
        let name = if self.name().is_empty() {
            "<no name>"
        } else {
            self.name()
        };
        format!("{kind}/{name}")
    }

    /// A problem with this object at `field` (a dotted path; empty for the object as a whole).
    pub fn problem(&self, field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            file: format!("{}#{}", self.file.display(), self.index),
            object: self.object(),
            field: field.into(),
            message: message.into(),
            severity: Severity::Error,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Something that exists but would not install, compose or validate.
    Error,
    /// Something expected that does not exist yet; an error under `--strict`.
    Missing,
}

/// One finding: where, what, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    pub object: String,
    pub field: String,
    pub message: String,
    pub severity: Severity,
}

impl Problem {
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        Self {
            file: file.display().to_string(),
            object: String::new(),
            field: String::new(),
            message: message.into(),
            severity: Severity::Error,
        }
    }

    pub fn missing(mut self) -> Self {
        self.severity = Severity::Missing;
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if !self.object.is_empty() {
            write!(f, ": {}", self.object)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Parses a YAML stream. Empty documents (a stray `---`) are skipped; anything that is not a mapping is a problem.
pub fn parse_stream(file: &Path, text: &str) -> Result<Vec<Manifest>, Problem> {
    let mut out = Vec::new();
    for (position, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .map_err(|e| Problem::file(file, format!("document {position} is not valid YAML: {e}")))?;
        match value {
            Value::Null => {}
            Value::Object(_) => out.push(Manifest::new(file, out.len(), value)),
            other => {
                return Err(Problem::file(
                    file,
                    format!("document {position} is a {}, not an object", type_name(&other)),
                ));
            }
        }
    }
    Ok(out)
}

/// Reads every `*.yaml`/`*.yml` file under `dir` (recursively, in path order). A missing directory is empty.
pub fn load_dir(dir: &Path) -> (Vec<Manifest>, Vec<Problem>) {
    let mut manifests = Vec::new();
    let mut problems = Vec::new();
    for file in yaml_files(dir) {
        match std::fs::read_to_string(&file) {
            Ok(text) => match parse_stream(&file, &text) {
                Ok(found) => manifests.extend(found),
                Err(problem) => problems.push(problem),
            },
            Err(e) => problems.push(Problem::file(&file, format!("cannot read: {e}"))),
        }
    }
    (manifests, problems)
}

/// Reads one file that must exist.
pub fn load_file(file: &Path) -> Result<Vec<Manifest>, Problem> {
    let text = std::fs::read_to_string(file).map_err(|e| Problem::file(file, format!("cannot read: {e}")))?;
    parse_stream(file, &text)
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(yaml_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml") {
            files.push(path);
        }
    }
    files.sort();
    files
}

pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_skips_empty_documents_and_keeps_positions() {
        let docs = parse_stream(Path::new("a.yaml"), "---\nkind: A\n---\n---\nkind: B\n").unwrap();
        assert_eq!(docs.iter().map(Manifest::kind).collect::<Vec<_>>(), ["A", "B"]);
        assert_eq!(docs[1].index, 1);
    }

    #[test]
    fn a_scalar_document_is_a_problem_naming_the_file() {
        let err = parse_stream(Path::new("a.yaml"), "kind: A\n---\njust text\n").unwrap_err();
        assert_eq!(err.to_string(), "a.yaml: document 1 is a string, not an object");
    }

    #[test]
    fn broken_yaml_is_a_problem_naming_the_file() {
        let err = parse_stream(Path::new("b.yaml"), "kind: [A\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("b.yaml: document 0 is not valid YAML"),
            "{err}"
        );
    }
}
