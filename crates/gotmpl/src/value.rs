//! The values a Go template computes with, as Helm's templates see them.
//!
//! Go's `interface{}` values reduced to what charts meet: Helm reads values
//! files through JSON, so every number from a values file is a `float64`
//! ([`Value::Float`]); functions return `int` ([`Value::Int`]) or `int64`
//! ([`Value::Int64`]). Maps are shared and mutable (`set`, `unset`, `merge`
//! change the map in place, and every holder of it sees the change), with
//! keys kept sorted as Go sorts them when ranging, printing and encoding.
//! Lists are shared and immutable, as templates can't change them in place.
//!
//! Values live on the rendering thread (`Rc`); the parsed templates are the
//! part shared across threads.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

thread_local! {
    /// Go's nil slice, `[]interface{}(nil)` (what Sprig's `concat` of empty lists returns): a list
    /// of no items everywhere (`len`, `range`, `%v`, every list function), told from an empty list
    /// only where Go tells them apart (`toJson` and `toYaml` print `null`, `%#v`, `deepEqual`).
    /// One shared allocation per thread, recognised by address; values never leave their thread.
    static NIL_LIST: Rc<Vec<Value>> = Rc::new(Vec::new());
}

/// A Go map[string]interface{}: shared, mutable, keys sorted.
pub type Map = Rc<RefCell<BTreeMap<String, Value>>>;

/// A Go value.
#[derive(Clone, Default)]
pub enum Value {
    /// A nil interface: a missing map key, a nil result.
    #[default]
    Nil,
    Bool(bool),
    /// Go `int`: `len`, `atoi`, `int`, integer constants in a template.
    Int(i64),
    /// Go `int64`: Sprig's arithmetic (`add`, `sub`, `mul`, `max`, `int64`).
    Int64(i64),
    /// Go `float64`: every number read from YAML or JSON values.
    Float(f64),
    String(Rc<str>),
    /// `[]byte` (`.Files.GetBytes`, `b64dec` internals).
    Bytes(Rc<[u8]>),
    /// `[]interface{}` (and `[]string`, which behaves the same in templates).
    List(Rc<Vec<Value>>),
    Map(Map),
    /// A struct-like value with fields and methods: `.Release`, `.Chart`,
    /// `.Capabilities`, `.Files`, semver versions, certificates.
    Object(Rc<dyn Object>),
}

/// A struct-like value (Go struct or pointer to one) with fields and methods.
pub trait Object {
    /// The Go type name, as `typeOf` prints it (e.g. `*chart.Metadata`).
    fn type_name(&self) -> &str;
    /// A field, or a method without arguments (`.Chart.Name`,
    /// `.Capabilities.KubeVersion.Version`). `None`: no such field.
    fn field(&self, name: &str) -> Option<Value>;
    /// A method with arguments (`.Files.Get "x"`, `.Capabilities.APIVersions.Has "v1"`).
    /// `None`: no such method.
    fn call(&self, _method: &str, _args: &[Value]) -> Option<Result<Value, FuncError>> {
        None
    }
    /// How `%v` prints it (Go prints structs as `{field1 field2}`).
    fn go_string(&self) -> String;
    /// What an action prints when it ends in a field or variable holding this value, which Go
    /// can address: the `String()` of a type whose pointer is a `fmt.Stringer` (Helm's
    /// `KubeVersion`). Passed to a function, the value is a copy and prints as `%v`
    /// ([`Object::go_string`]). `None`: as `%v` everywhere.
    fn addressable_string(&self) -> Option<String> {
        None
    }
    /// The value as data for `toYaml`/`toJson` (a struct's exported fields).
    fn to_data(&self) -> Value {
        Value::Nil
    }
    /// For a struct: the keys of [`Object::to_data`] in its fields' order, which Go's
    /// `encoding/json` keeps (YAML sorts them). Empty: sorted, as a map's.
    fn json_field_order(&self) -> &[&'static str] {
        &[]
    }
    /// For a Go slice or map type with methods (Helm's `APIVersions`, `Files`):
    /// the elements, which `range`, `len` and `index` use.
    fn elements(&self) -> Option<Value> {
        None
    }
}

impl Value {
    pub fn str(s: impl Into<Rc<str>>) -> Self {
        Value::String(s.into())
    }

    pub fn list(items: Vec<Value>) -> Self {
        Value::List(Rc::new(items))
    }

    /// Go's nil slice `[]interface{}(nil)`: see [`Value::is_nil_list`].
    pub fn nil_list() -> Self {
        Value::List(NIL_LIST.with(Rc::clone))
    }

    /// Whether this is Go's nil slice (not an empty one): `toJson` prints it `null`.
    pub fn is_nil_list(&self) -> bool {
        matches!(self, Value::List(l) if l.is_empty() && NIL_LIST.with(|n| Rc::ptr_eq(n, l)))
    }

    pub fn map(entries: BTreeMap<String, Value>) -> Self {
        Value::Map(Rc::new(RefCell::new(entries)))
    }

    pub fn empty_map() -> Self {
        Value::map(BTreeMap::new())
    }

    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// Go template truthiness (`if`, `with`, `and`, `or`, `not`): false,
    /// 0, nil, and empty strings, lists and maps are false. Structs are true.
    pub fn is_true(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) | Value::Int64(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::String(s) => !s.is_empty(),
            Value::Bytes(b) => !b.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.borrow().is_empty(),
            // A map or slice type with methods is true when it has elements.
            Value::Object(o) => o.elements().is_none_or(|e| e.is_true()),
        }
    }

    /// Sprig's `empty` (the negation of truthiness for every kind here).
    pub fn is_empty(&self) -> bool {
        !self.is_true()
    }

    /// Go's `reflect.Kind` name, as Sprig's `kindOf` prints it
    /// (`invalid` for nil).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "invalid",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Int64(_) => "int64",
            Value::Float(_) => "float64",
            Value::String(_) => "string",
            Value::Bytes(_) | Value::List(_) => "slice",
            Value::Map(_) => "map",
            Value::Object(_) => "ptr",
        }
    }

    /// Go's type name, as Sprig's `typeOf` prints it (`<nil>` for nil).
    pub fn type_name(&self) -> String {
        match self {
            Value::Nil => "<nil>".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) => "int".into(),
            Value::Int64(_) => "int64".into(),
            Value::Float(_) => "float64".into(),
            Value::String(_) => "string".into(),
            Value::Bytes(_) => "[]uint8".into(),
            Value::List(_) => "[]interface {}".into(),
            Value::Map(_) => "map[string]interface {}".into(),
            Value::Object(o) => o.type_name().to_string(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value of JSON data, numbers as `float64` as Helm reads values.
    pub fn from_json(json: &serde_json::Value) -> Self {
        match json {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(0.0)),
            serde_json::Value::String(s) => Value::str(s.as_str()),
            serde_json::Value::Array(items) => Value::list(items.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(entries) => {
                Value::map(entries.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect())
            }
        }
    }

    /// JSON data of the value, as Go's `encoding/json` would write it
    /// (whole floats as integers, bytes as base64, objects through `to_data`).
    pub fn to_json(&self) -> serde_json::Value {
        use base64::Engine as _;
        match self {
            Value::Nil => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) | Value::Int64(i) => serde_json::Value::from(*i),
            Value::Float(f) => {
                if f.fract() == 0.0 && f.abs() < 1e15 {
                    serde_json::Value::from(*f as i64)
                } else {
                    serde_json::Number::from_f64(*f).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
                }
            }
            Value::String(s) => serde_json::Value::String(s.to_string()),
            Value::Bytes(b) => serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
            Value::List(items) => serde_json::Value::Array(items.iter().map(Value::to_json).collect()),
            Value::Map(m) => {
                serde_json::Value::Object(m.borrow().iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            Value::Object(o) => o.to_data().to_json(),
        }
    }

    /// Whether the value holds itself: a map reachable from itself (`set $d
    /// "self" $d`). Walking such a value never ends, so every encoder and
    /// copier asks first. Shared parts are visited once (a list of the same
    /// map twice, 60 levels deep, is not 2^60 visits).
    pub fn holds_itself(&self) -> bool {
        fn walk(
            v: &Value,
            path: &mut std::collections::HashSet<*const ()>,
            done: &mut std::collections::HashSet<*const ()>,
        ) -> bool {
            let (ptr, children): (*const (), Vec<Value>) = match v {
                Value::List(items) if !items.is_empty() => (Rc::as_ptr(items) as *const (), items.to_vec()),
                Value::Map(m) => (Rc::as_ptr(m) as *const (), m.borrow().values().cloned().collect()),
                _ => return false,
            };
            if done.contains(&ptr) {
                return false;
            }
            if !path.insert(ptr) {
                return true;
            }
            let cyclic = crate::exec::grow(|| children.iter().any(|c| walk(c, path, done)));
            path.remove(&ptr);
            done.insert(ptr);
            cyclic
        }
        walk(self, &mut Default::default(), &mut Default::default())
    }

    /// A deep copy: maps and lists are copied, not shared (Sprig's `deepCopy`).
    /// The caller checks [`Value::holds_itself`] first.
    pub fn deep_copy(&self) -> Value {
        match self {
            Value::List(items) => Value::list(items.iter().map(Value::deep_copy).collect()),
            Value::Map(m) => Value::map(m.borrow().iter().map(|(k, v)| (k.clone(), v.deep_copy())).collect()),
            other => other.clone(),
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("Nil"),
            Value::Bool(b) => write!(f, "Bool({b})"),
            Value::Int(i) => write!(f, "Int({i})"),
            Value::Int64(i) => write!(f, "Int64({i})"),
            Value::Float(x) => write!(f, "Float({x})"),
            Value::String(s) => write!(f, "String({s:?})"),
            Value::Bytes(b) => write!(f, "Bytes({b:?})"),
            Value::List(l) => f.debug_list().entries(l.iter()).finish(),
            Value::Map(m) => f.debug_map().entries(m.borrow().iter()).finish(),
            Value::Object(o) => write!(f, "Object({})", o.type_name()),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::str(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::str(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// Why a function call failed. The engine adds the template, line and
/// function name; the message says what was wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum FuncError {
    /// A failed call, e.g. `wrong type for value; expected int; got string`.
    Message(String),
    /// `fail "msg"` and `required "msg" x`: the author's own message, shown as is.
    Fail(String),
    /// A work, output or recursion limit was reached inside the call
    /// (`include`, `tpl`): stops the whole render.
    Limit(String),
}

impl FuncError {
    pub fn msg(message: impl Into<String>) -> Self {
        FuncError::Message(message.into())
    }
}

impl fmt::Display for FuncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FuncError::Message(m) | FuncError::Fail(m) | FuncError::Limit(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for FuncError {}
