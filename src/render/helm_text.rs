//! A Helm chart's output as `helm template` prints it: each document's rendered text, in helm's
//! install order, under `# Source:`, for `clusterstack render` (which only prints).
//!
//! Helm reads every document it prints (so invalid YAML fails the chart, as here), keeps only its
//! head (`apiVersion`, `kind`, `metadata`) to sort by kind and find hooks, and prints the text
//! as the template wrote it; `crds/` files are printed whole and never read. Objects are built
//! only for applying (`render_helm_release`); printing needs none, so here each document is
//! checked but only its head is built ([`helm_render::yaml_head`]), on another thread while the
//! next templates render.

use std::io::Write;
use std::ops::Range;
use std::path::Path;

use super::RenderError;
use super::objects::{self, HelmDocument, UnacceptedDocument};

/// `helm template`'s output of a chart, ready to print.
pub struct HelmText {
    crds: Vec<helm_render::CrdFile>,
    /// The rendered templates, sorted by name.
    templates: Vec<Template>,
    /// Documents that are not hooks, in helm's install order: (template, range of its text).
    manifests: Vec<(usize, Range<usize>)>,
    /// Hooks, in helm's install order, printed after the manifests.
    hooks: Vec<(usize, Range<usize>)>,
    /// Documents helm prints but no API server accepts (their `document` is the head only).
    pub unaccepted: Vec<UnacceptedDocument>,
    /// Objects rendered twice (same group, kind, namespace and name): helm prints both, the
    /// operator refuses such a release ([`RenderError::Duplicate`] each).
    pub duplicates: Vec<RenderError>,
    /// Whether anything is printed but blank CRD files (helm then prints an empty line).
    pub rendered_anything: bool,
}

/// One rendered template and its documents, each read as helm reads it.
struct Template {
    name: String,
    text: String,
    docs: Vec<(Range<usize>, Result<serde_json::Value, String>)>,
}

/// Renders a Helm chart (a directory or a `.tgz`) as `helm template` does with `opts`;
/// `skip_tests` leaves `helm test` hooks out as `--skip-tests` does. Fails where helm fails (a
/// template error, a document that is not YAML or whose head helm cannot read); an object
/// rendered twice is printed twice, as helm prints it, and listed in `duplicates`.
pub fn template_helm_release(
    chart_path: &Path,
    opts: &helm_render::HelmOptions,
    skip_tests: bool,
) -> Result<HelmText, RenderError> {
    let mut chart = helm_render::load_chart(chart_path)?;
    chart.label = chart_path.display().to_string();
    let (tx, rx) = std::sync::mpsc::channel::<(String, String)>();
    // Reading the documents (most of it checking YAML) overlaps with rendering the next ones.
    let (crds, mut templates) = std::thread::scope(|scope| {
        let reader = scope.spawn(move || rx.into_iter().map(|(name, text)| read_template(name, text)).collect());
        let crds = helm_render::render_templates(&chart, opts, &mut |name, out| {
            // The reader only stops early by panicking, which `join` passes on.
            let _ = tx.send((name, out));
        });
        drop(tx);
        let templates: Vec<Template> = reader.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (crds, templates)
    });
    let crds = crds?;
    templates.sort_by(|a, b| a.name.cmp(&b.name));

    let mut text = HelmText {
        rendered_anything: crds.iter().any(|c| !c.data.trim_ascii().is_empty()),
        crds,
        templates: Vec::new(),
        manifests: Vec::new(),
        hooks: Vec::new(),
        unaccepted: Vec::new(),
        duplicates: Vec::new(),
    };
    let (mut heads, mut sources) = (Vec::new(), Vec::new());
    let (mut manifests, mut hooks) = (Vec::new(), Vec::new());
    for (t, template) in templates.iter_mut().enumerate() {
        let inner = template.name.split_once('/').map(|(_, rest)| rest).unwrap_or(&template.name);
        let label = format!("{}/{inner}", chart.label);
        for (i, (range, read)) in std::mem::take(&mut template.docs).into_iter().enumerate() {
            let kind = read.as_ref().ok().and_then(|h| h.get("kind")?.as_str()).unwrap_or_default().to_string();
            let hook = read.as_ref().ok().and_then(helm_render::hook_in_head);
            let document = objects::helm_document(&label, i + 1, read)?;
            if let Some(hook) = &hook {
                let is_test =
                    hook.split(',').any(|h| matches!(h.trim().to_lowercase().as_str(), "test" | "test-success"));
                if !helm_render::known_hook(hook) || (skip_tests && is_test) {
                    continue;
                }
            }
            match document {
                // Comments only: helm prints it all the same.
                HelmDocument::Empty => {}
                HelmDocument::Object(head) => {
                    heads.push(*head);
                    sources.push(label.clone());
                }
                HelmDocument::Unaccepted(document) => text.unaccepted.push(document),
            }
            text.rendered_anything = true;
            let list = if hook.is_some() { &mut hooks } else { &mut manifests };
            list.push((kind, t, range));
        }
    }
    text.duplicates = objects::duplicates(&heads, &sources);
    for (list, out) in [(manifests, &mut text.manifests), (hooks, &mut text.hooks)] {
        let mut list = list;
        list.sort_by(|a, b| helm_render::sorter::install_rank(&a.0).cmp(&helm_render::sorter::install_rank(&b.0)));
        out.extend(list.into_iter().map(|(_, t, range)| (t, range)));
    }
    text.templates = templates;
    Ok(text)
}

/// Splits a template's output where helm does and reads each document's head.
fn read_template(name: String, text: String) -> Template {
    let docs = helm_render::manifest_parts(&text)
        .into_iter()
        .map(|part| {
            let start = part.as_ptr() as usize - text.as_ptr() as usize;
            (start..start + part.len(), helm_render::yaml_head(part))
        })
        .collect();
    Template { name, text, docs }
}

impl HelmText {
    /// Writes the output as `helm template` prints it: the CRD files and the manifests, each
    /// as `---\n# Source: <path>\n<text>\n`, all of it trimmed and ended by a newline, then the
    /// hooks the same way.
    pub fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        let crds = self.crds.iter().map(|c| (c.path.as_str(), &c.data[..]));
        let manifests = self.manifests.iter().map(|(t, range)| self.piece(*t, range));
        let mut pieces = crds.chain(manifests).peekable();
        while let Some((path, content)) = pieces.next() {
            let header = format!("---\n# Source: {path}\n");
            if pieces.peek().is_some() {
                out.write_all(header.as_bytes())?;
                out.write_all(content)?;
                out.write_all(b"\n")?;
                continue;
            }
            // Helm prints `strings.TrimSpace` of everything before the hooks.
            let content = trim_end(content);
            if content.is_empty() {
                out.write_all(header.trim_end().as_bytes())?;
            } else {
                out.write_all(header.as_bytes())?;
                out.write_all(content)?;
            }
        }
        out.write_all(b"\n")?;
        for (t, range) in &self.hooks {
            let (path, content) = self.piece(*t, range);
            write!(out, "---\n# Source: {path}\n")?;
            out.write_all(content)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    fn piece(&self, t: usize, range: &Range<usize>) -> (&str, &[u8]) {
        let template = &self.templates[t];
        (template.name.as_str(), template.text[range.clone()].as_bytes())
    }
}

/// Text without trailing white space, as Go's `strings.TrimSpace` cuts it.
fn trim_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.trim_end().as_bytes(),
        Err(_) => bytes.trim_ascii_end(),
    }
}
