//! Go `text/template` with the Sprig library and Helm's functions, in Rust:
//! the engine that renders Helm charts as `helm template` does.
//!
//! - `value`: Go values as templates see them (`Value`, `Object`).
//! - `func`: the function interface (`Func`, `Signature`, `Host`, `FuncMap`).

pub mod func;
pub mod value;

pub use func::{Func, FuncMap, Host, Param, Signature};
pub use value::{FuncError, Map, Object, Value};
pub mod goyaml;
pub mod helmfuncs;
pub mod sprig;

pub use goyaml::{value_to_yaml, yaml_to_value};
pub use helmfuncs::helm_func_map;
