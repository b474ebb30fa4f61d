//! The minijinja environment of one bundle: a loader confined to the bundle's
//! `templates/` directory, the Helm-like filters, fuel and output limits.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path};
use std::sync::Arc;

use base64::Engine as _;
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior, Value};

use super::{RenderError, RenderLimits, TEMPLATES_DIR};

/// A template file as found in the bundle: its text, or why it may not be used.
type Entry = Result<Arc<str>, String>;

/// The templates of one chart directory and the environment that renders them.
pub(crate) struct Bundle {
    /// `<chart_dir>/templates`, for error messages.
    templates_label: String,
    /// Every file below `templates/`, by its `/`-separated relative name.
    files: Arc<BTreeMap<String, Entry>>,
    env: Environment<'static>,
    limits: RenderLimits,
}

impl Bundle {
    /// Reads the chart's `templates/` directory (which may be missing) and
    /// prepares an environment limited to it.
    pub(crate) fn load(chart_dir: &Path, limits: &RenderLimits) -> Result<Self, RenderError> {
        let templates_dir = chart_dir.join(TEMPLATES_DIR);
        let mut files = BTreeMap::new();
        if templates_dir.is_dir() {
            let root =
                templates_dir.canonicalize().map_err(|e| RenderError::io("cannot resolve", &templates_dir, e))?;
            collect(&root, &templates_dir, "", &mut files)?;
        }
        let files = Arc::new(files);
        let mut env = Environment::new();
        // SemiStrict: printing, iterating or reading an attribute of an
        // undefined value fails; `{% if values.x %}` still tests for presence.
        env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
        env.set_fuel(Some(limits.fuel));
        // minijinja would JSON-escape `.yaml` templates by default; our output
        // is YAML written by the author, quoting is the `quote` filter's job.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        // Block tags on their own line leave no blank line or indentation
        // behind: what authors of YAML templates expect.
        if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build() {
            env.set_syntax(syntax);
        }
        let loader_files = Arc::clone(&files);
        env.set_loader(move |name: &str| load(&loader_files, name));
        add_filters(&mut env);
        Ok(Self { templates_label: templates_dir.display().to_string(), files, env, limits: *limits })
    }

    /// The templates rendered on their own: `*.yaml`/`*.yml` directly in
    /// `templates/`, not starting with `_`, sorted.
    pub(crate) fn rendered_templates(&self) -> Vec<String> {
        self.files
            .keys()
            .filter(|n| !n.contains('/') && !n.starts_with('_') && (n.ends_with(".yaml") || n.ends_with(".yml")))
            .cloned()
            .collect()
    }

    /// How a template is named in messages: its path below the chart directory.
    pub(crate) fn label(&self, name: &str) -> String {
        if self.files.contains_key(name) { format!("{}/{name}", self.templates_label) } else { name.to_string() }
    }

    /// Renders the template `name` with `context`, within the limits.
    pub(crate) fn render(&self, name: &str, context: &serde_json::Value) -> Result<String, RenderError> {
        let label = self.label(name);
        let template = self.env.get_template(name).map_err(|e| self.error(&label, &e, false))?;
        let mut out = LimitedWriter { buf: Vec::new(), limit: self.limits.max_output_bytes, exceeded: false };
        let result = template.render_captured_to(Value::from(minijinja::value::Serde(context)), &mut out).map(drop);
        if let Err(e) = result {
            return Err(self.error(&label, &e, out.exceeded));
        }
        String::from_utf8(out.buf).map_err(|e| RenderError::NotYaml { file: label, message: e.to_string() })
    }

    /// Renders a template that is not part of `templates/` (`overwrite.yaml`),
    /// named `label` in messages.
    pub(crate) fn render_source(
        &self,
        label: &str,
        source: &str,
        context: &serde_json::Value,
    ) -> Result<String, RenderError> {
        let output = self
            .env
            .render_named_str(label, source, Value::from(minijinja::value::Serde(context)))
            .map_err(|e| self.error(label, &e, false))?;
        if output.len() > self.limits.max_output_bytes {
            return Err(RenderError::OutputTooLarge { file: label.to_string(), limit: self.limits.max_output_bytes });
        }
        Ok(output)
    }

    /// Turns a minijinja error into one naming the file, line and (for
    /// undefined values) the expression that was undefined.
    fn error(&self, label: &str, err: &Error, output_exceeded: bool) -> RenderError {
        if output_exceeded {
            return RenderError::OutputTooLarge { file: label.to_string(), limit: self.limits.max_output_bytes };
        }
        if err.kind() == ErrorKind::OutOfFuel {
            return RenderError::OutOfFuel { file: label.to_string(), fuel: self.limits.fuel };
        }
        // The innermost error with a position is where the author must look
        // (an include or macro call wraps the error of the included file).
        let mut innermost = err;
        let mut current: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
        while let Some(e) = current {
            if let Some(inner) = e.downcast_ref::<Error>()
                && inner.line().is_some()
            {
                innermost = inner;
            }
            current = e.source();
        }
        if innermost.kind() == ErrorKind::OutOfFuel {
            return RenderError::OutOfFuel { file: label.to_string(), fuel: self.limits.fuel };
        }
        let file = innermost.name().map(|n| self.label(n)).unwrap_or_else(|| label.to_string());
        let mut message = match innermost.detail() {
            Some(detail) => format!("{}: {detail}", innermost.kind()),
            None => innermost.kind().to_string(),
        };
        if innermost.kind() == ErrorKind::UndefinedError
            && let (Some(range), Some(source)) = (innermost.range(), innermost.template_source())
            && let Some(expr) = source.get(range)
        {
            message = format!("{message}: {} is undefined", expr.trim());
        }
        RenderError::Template { file, line: innermost.line().unwrap_or(0), message }
    }
}

/// Walks `dir` (below the canonical `root`), recording every file under its
/// relative name. A symlink is followed only when it stays inside `root`.
fn collect(root: &Path, dir: &Path, prefix: &str, files: &mut BTreeMap<String, Entry>) -> Result<(), RenderError> {
    let entries = std::fs::read_dir(dir).map_err(|e| RenderError::io("cannot read", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| RenderError::io("cannot read", dir, e))?;
        let path = entry.path();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        let meta = std::fs::symlink_metadata(&path).map_err(|e| RenderError::io("cannot inspect", &path, e))?;
        if meta.is_dir() {
            collect(root, &path, &format!("{name}/"), files)?;
        } else if meta.file_type().is_symlink() {
            match path.canonicalize() {
                Ok(target) if target.starts_with(root) && target.is_file() => {
                    let text =
                        std::fs::read_to_string(&target).map_err(|e| RenderError::io("cannot read", &path, e))?;
                    files.insert(name, Ok(text.into()));
                }
                // Not followed: the loader reports it when a template asks for it.
                _ => {
                    files.insert(name, Err("is a symlink that leads out of the bundle's templates directory".into()));
                }
            }
        } else if meta.is_file() {
            let text = std::fs::read_to_string(&path).map_err(|e| RenderError::io("cannot read", &path, e))?;
            files.insert(name, Ok(text.into()));
        }
    }
    Ok(())
}

/// The loader: names resolve inside the bundle's templates directory only.
fn load(files: &BTreeMap<String, Entry>, name: &str) -> Result<Option<String>, Error> {
    let path = Path::new(name);
    let confined = !name.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)));
    if !confined {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("template {name:?} is outside the bundle: only relative names inside templates/ can be loaded"),
        ));
    }
    match files.get(name) {
        Some(Ok(text)) => Ok(Some(text.to_string())),
        Some(Err(why)) => Err(Error::new(ErrorKind::InvalidOperation, format!("template {name:?} {why}"))),
        None => Ok(None),
    }
}

/// Collects the output and fails once it grows past the limit, so a runaway
/// template cannot eat the memory.
struct LimitedWriter {
    buf: Vec<u8>,
    limit: usize,
    exceeded: bool,
}

impl io::Write for LimitedWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len() + bytes.len() > self.limit {
            self.exceeded = true;
            return Err(io::Error::other("output size limit exceeded"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn undefined_check(value: &Value, filter: &str) -> Result<(), Error> {
    if value.is_undefined() {
        return Err(Error::new(ErrorKind::UndefinedError, format!("{filter} got an undefined value")));
    }
    Ok(())
}

/// The filters stack authors know from Helm. `default`, `trim`, `lower` and
/// `upper` are minijinja's own; `indent` is replaced by Helm's meaning.
fn add_filters(env: &mut Environment<'static>) {
    env.add_filter("to_yaml", to_yaml);
    env.add_filter("to_json", to_json);
    env.add_filter("indent", indent);
    env.add_filter("nindent", nindent);
    env.add_filter("quote", quote);
    env.add_filter("b64encode", b64encode);
    env.add_filter("b64decode", b64decode);
    env.add_filter("required", required);
}

/// YAML of a value, without the trailing newline (like Helm's `toYaml`).
fn to_yaml(value: Value) -> Result<String, Error> {
    undefined_check(&value, "to_yaml")?;
    let text = serde_saphyr::to_string(&value)
        .map_err(|e| Error::new(ErrorKind::BadSerialization, "to_yaml cannot serialise the value").with_source(e))?;
    Ok(text.trim_end_matches('\n').to_string())
}

/// Compact JSON of a value (like Helm's `toJson`).
fn to_json(value: Value) -> Result<String, Error> {
    undefined_check(&value, "to_json")?;
    serde_json::to_string(&value)
        .map_err(|e| Error::new(ErrorKind::BadSerialization, "to_json cannot serialise the value").with_source(e))
}

/// Helm's `indent N`: every non-empty line, the first one included, gets N spaces.
fn indent(text: &str, width: usize) -> String {
    let pad = " ".repeat(width);
    let mut out = String::with_capacity(text.len() + width * 4);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
    }
    out
}

/// Helm's `nindent N`: a newline, then `indent N`.
fn nindent(text: &str, width: usize) -> String {
    format!("\n{}", indent(text, width))
}

/// A double-quoted string, escaped so it is valid YAML and JSON.
fn quote(value: Value) -> Result<String, Error> {
    undefined_check(&value, "quote")?;
    let text = if value.is_none() { String::new() } else { value.to_string() };
    serde_json::to_string(&text)
        .map_err(|e| Error::new(ErrorKind::BadSerialization, "quote cannot escape the value").with_source(e))
}

fn b64encode(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn b64decode(text: &str) -> Result<String, Error> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("b64decode: not base64: {e}")))?;
    String::from_utf8(bytes).map_err(|_| Error::new(ErrorKind::InvalidOperation, "b64decode: the result is not UTF-8"))
}

/// `{{ values.x | required("values.x is needed for ...") }}`: fails with the
/// message when the value is undefined, none or an empty string.
fn required(value: Value, message: &str) -> Result<Value, Error> {
    let missing = value.is_undefined() || value.is_none() || value.as_str().is_some_and(str::is_empty);
    if missing {
        return Err(Error::new(ErrorKind::InvalidOperation, format!("required: {message}")));
    }
    Ok(value)
}
