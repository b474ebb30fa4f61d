//! YAML as Helm reads and writes it: `sigs.k8s.io/yaml` over go-yaml v2.
//!
//! - [`value_to_yaml`]: `yaml.Marshal` — the value goes through Go's JSON
//!   (so whole floats become integers, keys are strings), is read back by
//!   go-yaml v2 and printed by its emitter: keys in v2's "natural" order,
//!   sequences under a key not indented, strings quoted when they would read
//!   back as something else (`"true"`, `"1.0"`, `"2024-01-01"`, `""`), `'...'`
//!   when plain style can't hold them, literal `|` blocks for multi-line
//!   strings, long lines folded at 80 columns.
//! - [`yaml_to_value`]: `yaml.Unmarshal` into `interface{}` — YAML 1.1
//!   scalars (`y`/`yes`/`on`/`off` are booleans, `0777` octal, `1_000`),
//!   then JSON, so every number is a `float64` and every key a string;
//!   timestamps stay strings; `<<` merge keys; the first document only.
//!   [`yaml_to_json`]: the same, straight into JSON (a rendered manifest);
//!   [`yaml_head`]: only its `apiVersion`, `kind` and `metadata`, the rest checked but not built.

mod emitter;
mod fast;
mod head;
mod read;
mod resolve;
mod write;

pub use head::yaml_head;
pub use read::{yaml_to_json, yaml_to_value};
pub use write::{marshal, pretty, value_to_yaml};

#[cfg(test)]
mod tests;
