//! A release's `node-images.yaml`: provider-specific, so kept as a parsed document that each
//! plug-in reads in its own way, plus the image-list form that container-image providers (the
//! `docker` plug-in) use.
//!
//! The image-list form, either a plain list:
//!
//! ```yaml
//! - kindest/node:v1.27.3
//! - registry.example.com/nodes/ubuntu-2204@sha256:<hex>
//! ```
//!
//! or a mapping with an `images` list whose entries are strings or objects with a `name`:
//!
//! ```yaml
//! apiVersion: nodeimages.clusterstack.x-k8s.io/v1alpha1   # optional
//! images:
//!   - kindest/node:v1.27.3
//!   - name: kindest/node:v1.27.3-extra
//! ```
//!
//! or the form the project's own sample stacks publish (`templates/*/node-images.yaml`), the list
//! under `nodeImages`, each entry a `name` with its `kubernetesVersion` (informational here):
//!
//! ```yaml
//! nodeImages:
//!   - name: kindest/node:v1.27.11
//!     kubernetesVersion: v1.27.11
//! ```

use serde_json::Value;

/// The asset name of a release's node-image list.
pub const NODE_IMAGES_FILE: &str = "node-images.yaml";

/// Why a `node-images.yaml` cannot be used. Names the file and the entry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodeImagesError {
    /// Not YAML.
    #[error("{file}: not valid YAML: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// The file could not be read.
    #[error("{file}: cannot read: {message}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        message: String,
    },
    /// YAML, but not in the image-list form.
    #[error("{file}: {message}")]
    Format {
        /// The file.
        file: String,
        /// What is wrong, naming the entry.
        message: String,
    },
}

/// The keys of the mapping form that hold the image list.
const LIST_KEYS: [&str; 2] = ["images", "nodeImages"];

/// A parsed `node-images.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeImagesFile {
    /// Where it came from (for messages), e.g. `docker-ferrol-1-27-v2/node-images.yaml`.
    pub file: String,
    /// The whole document, for plug-ins with their own format.
    pub document: Value,
}

impl NodeImagesFile {
    /// Parses the file's text; `file` names it in errors. Any YAML document is accepted here;
    /// [`NodeImagesFile::images`] checks the image-list form.
    pub fn parse(file: &str, text: &str) -> Result<Self, NodeImagesError> {
        let document: Value = serde_saphyr::from_str(text).map_err(|e| NodeImagesError::Syntax {
            file: file.to_string(),
            message: crate::release::yaml_error_without_content(&e),
        })?;
        Ok(Self { file: file.to_string(), document })
    }

    /// Reads and parses a file, e.g. `FetchedRelease::asset_path(NODE_IMAGES_FILE)` of the cache.
    pub fn read(path: &std::path::Path) -> Result<Self, NodeImagesError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| NodeImagesError::Io { file: file.clone(), message: e.to_string() })?;
        Self::parse(&file, &text)
    }

    /// The image references of the image-list form, in file order, duplicates removed.
    pub fn images(&self) -> Result<Vec<String>, NodeImagesError> {
        let err = |message: String| NodeImagesError::Format { file: self.file.clone(), message };
        let list = match &self.document {
            Value::Array(list) => list,
            Value::Object(map) => {
                let keys = LIST_KEYS.iter().filter_map(|k| map.get(*k).map(|v| (*k, v))).collect::<Vec<_>>();
                match keys.as_slice() {
                    [(_, Value::Array(list))] => list,
                    [(key, other)] => return Err(err(format!("`{key}` must be a list, not {}", kind(other)))),
                    [] => {
                        return Err(err(
                            "expected a list of images or a mapping with an `images` or `nodeImages` list".into(),
                        ));
                    }
                    _ => return Err(err("set one of `images` and `nodeImages`, not both".into())),
                }
            }
            Value::Null => return Ok(Vec::new()),
            other => return Err(err(format!("expected a list of images, not {}", kind(other)))),
        };
        let mut out: Vec<String> = Vec::with_capacity(list.len());
        for (i, entry) in list.iter().enumerate() {
            let name = match entry {
                Value::String(s) => s.trim(),
                Value::Object(m) => match m.get("name") {
                    Some(Value::String(s)) => s.trim(),
                    _ => return Err(err(format!("entry {}: an object entry needs a string `name`", i + 1))),
                },
                other => return Err(err(format!("entry {}: expected an image name, not {}", i + 1, kind(other)))),
            };
            if name.is_empty() {
                return Err(err(format!("entry {}: the image name is empty", i + 1)));
            }
            if !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
        }
        Ok(out)
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn images(text: &str) -> Result<Vec<String>, NodeImagesError> {
        NodeImagesFile::parse("node-images.yaml", text)?.images()
    }

    #[test]
    fn simple_list_form() {
        assert_eq!(images("- kindest/node:v1.27.3\n- ubuntu\n").unwrap(), ["kindest/node:v1.27.3", "ubuntu"]);
    }

    #[test]
    fn mapping_form_with_strings_and_objects_and_duplicates() {
        let text =
            "apiVersion: nodeimages.clusterstack.x-k8s.io/v1alpha1\nimages:\n  - a/b:1\n  - name: c/d:2\n  - a/b:1\n";
        assert_eq!(images(text).unwrap(), ["a/b:1", "c/d:2"]);
    }

    #[test]
    fn the_samples_own_format_is_read() {
        // The files the sample stacks publish, read as they are, not a copy of their format.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for (file, image) in [
            ("templates/docker-ferrol-1-27/node-images.yaml", "kindest/node:v1.27.11"),
            ("releases/docker-ferrol-1-27-v3/node-images.yaml", "kindest/node:v1.27.11"),
            ("tests/fixtures/helm-stack/node-images.yaml", "kindest/node:v1.30.10"),
        ] {
            let f = NodeImagesFile::read(&root.join(file)).unwrap();
            assert_eq!(f.images().unwrap(), [image], "{file}");
        }
        let e = images("nodeImages:\n  - kubernetesVersion: v1.27.3\n").unwrap_err();
        assert!(e.to_string().contains("entry 1: an object entry needs a string `name`"), "{e}");
        let e = images("nodeImages: {}\n").unwrap_err();
        assert!(e.to_string().contains("`nodeImages` must be a list, not a mapping"), "{e}");
        let e = images("images: []\nnodeImages: []\n").unwrap_err();
        assert!(e.to_string().contains("not both"), "{e}");
    }

    #[test]
    fn empty_file_has_no_images() {
        assert_eq!(images("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn errors_name_the_file_and_entry() {
        let e = images("images:\n  - a\n  - 3\n").unwrap_err();
        assert_eq!(e.to_string(), "node-images.yaml: entry 2: expected an image name, not a number");
        let e = images("images: a\n").unwrap_err();
        assert!(e.to_string().contains("`images` must be a list"), "{e}");
        let e = images("openStackNodeImages: []\n").unwrap_err();
        assert!(
            e.to_string().contains("expected a list of images or a mapping with an `images` or `nodeImages`"),
            "{e}"
        );
        let e = images("- {url: x}\n").unwrap_err();
        assert!(e.to_string().contains("entry 1: an object entry needs a string `name`"), "{e}");
        assert!(matches!(NodeImagesFile::parse("f", "a: [\n"), Err(NodeImagesError::Syntax { .. })));
    }

    #[test]
    fn read_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(NODE_IMAGES_FILE);
        std::fs::write(&path, "- a:1\n").unwrap();
        let f = NodeImagesFile::read(&path).unwrap();
        assert_eq!((f.file.as_str(), f.images().unwrap()), (path.display().to_string().as_str(), vec!["a:1".into()]));
        let e = NodeImagesFile::read(&dir.path().join("missing.yaml")).unwrap_err();
        assert!(e.to_string().contains("missing.yaml: cannot read"), "{e}");
    }

    #[test]
    fn other_formats_stay_readable_as_a_document() {
        let f = NodeImagesFile::parse("f", "openStackNodeImages:\n  - url: https://x/img.qcow2\n").unwrap();
        assert_eq!(f.document["openStackNodeImages"][0]["url"], "https://x/img.qcow2");
    }
}
