//! Template errors worded as helm words them (helm's `pkg/engine`: `cleanupParseError` and
//! `reformatExecErrorMsg`), so that a message of ours reads as the one `helm template` prints:
//!
//! - a parse error: `parse error at (chart/templates/x.yaml:8): unexpected EOF`;
//! - `required`/`fail`, however deep in helpers and `tpl`: `execution error at
//!   (chart/templates/deploy.yaml:6:12): MESSAGE`, the location being the call site in the
//!   template being rendered;
//! - any other failure: the chain of `include`s, one location, action and message per template
//!   (`chart/templates/cm.yaml:6:8` / `executing "…" at <include "x" .>:` / `error calling
//!   include:` …) when every link of Go's error chain is a template error, else Go's own
//!   one-line text (a function's error, such as `index out of range: 5` or a `tpl` failure,
//!   ends the chain helm can follow).

use gotmpl::{TemplateError, TemplateErrorKind};

/// Helm's text of a template error (what follows `Error: ` on its stderr).
pub(crate) fn helm_message(e: &TemplateError) -> String {
    let go = e.to_string();
    match e.kind {
        TemplateErrorKind::Parse => parse_error(&go),
        TemplateErrorKind::Fail => {
            let location =
                if e.line == 0 { e.template.clone() } else { format!("{}:{}:{}", e.template, e.line, e.column) };
            format!("execution error at ({location}): {}", e.detail)
        }
        TemplateErrorKind::Exec => exec_error(&go).unwrap_or(go),
        // Our own limits (steps, output, depth): helm has none of these to word.
        TemplateErrorKind::Limit => format!("limit reached: {}", e.detail),
    }
}

/// `cleanupParseError`: the second `: `-separated token is the location, the last the message.
fn parse_error(go: &str) -> String {
    let tokens: Vec<&str> = go.split(": ").collect();
    match tokens.as_slice() {
        [_, location, .., message] => format!("parse error at ({location}): {message}"),
        _ => go.to_string(),
    }
}

/// One link of the chain, as helm's `TraceableError` holds it.
#[derive(PartialEq)]
struct Link<'a> {
    location: &'a str,
    action: Option<(&'a str, &'a str)>,
    message: &'a str,
}

impl Link<'_> {
    fn write(&self, out: &mut String) {
        if !self.location.is_empty() {
            out.push_str(self.location);
            out.push_str("\n  ");
        }
        if let Some((function, node)) = self.action {
            out.push_str(&format!("executing \"{function}\" at <{node}>:\n    "));
        }
        if !self.message.is_empty() {
            out.push_str(self.message);
            out.push('\n');
        }
    }
}

/// `reformatExecErrorMsg` for errors that are not `required`/`fail`: `None` when helm prints
/// Go's text unchanged.
fn exec_error(go: &str) -> Option<String> {
    let mut links: Vec<Link> = Vec::new();
    let mut text = go;
    loop {
        let (link, wrapped) = parse_link(text)?;
        if links.last() != Some(&link) {
            links.push(link);
        }
        match wrapped {
            // Go wraps a function's error (`error calling NAME: %w`): helm follows it only
            // while it is a template error again (`include`'s).
            Some(inner) => text = inner,
            None => break,
        }
    }
    let mut out = String::new();
    for link in &links {
        link.write(&mut out);
    }
    Some(out.trim().to_string())
}

/// Parses one template error (helm's `parseTemplateExecErrorString`), with the text of the
/// error it wraps, if any.
fn parse_link(text: &str) -> Option<(Link<'_>, Option<&str>)> {
    let rest = text.strip_prefix("template: ")?;
    if rest.starts_with("no template ") {
        return Some((Link { location: "", action: None, message: text }, None));
    }
    if let Some((location, after)) = rest.split_once(": executing ") {
        let after = after.strip_prefix('"')?;
        let end = after.find('"')?;
        let function = &after[..end];
        let after_at = after[end + 1..].strip_prefix(" at <")?;
        let (node, full) = after_at.split_once(">: ")?;
        let message = full.find(" template:").map_or(full, |cut| &full[..cut]);
        let link = Link { location, action: Some((function, node)), message };
        return Some((link, wrapped(full)));
    }
    let sep = rest.rfind(": ")?;
    let (location, full) = (&rest[..sep], &rest[sep + 2..]);
    let message = full.find(" template:").map_or(full, |cut| &full[..cut]);
    Some((Link { location, action: None, message }, wrapped(full)))
}

/// The error a message wraps: Go's `s.errorf("error calling %s: %w", ...)` is the only wrapping
/// form of its template errors.
fn wrapped(message: &str) -> Option<&str> {
    let after = message.strip_prefix("error calling ")?;
    after.split_once(": ").map(|(_, inner)| inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts of Go's errors and what helm v4.2.3 prints for them (charts of
    /// `tests/charts/errors/`, run through the real helm).
    #[test]
    fn exec_errors_as_helm_words_them() {
        let chain = "template: c/templates/cm.yaml:6:8: executing \"c/templates/cm.yaml\" at <include \"h.outer\" .>: \
                     error calling include: template: c/templates/_helpers.tpl:5:3: executing \"h.outer\" at <include \"h.field\" .>: \
                     error calling include: template: c/templates/_helpers.tpl:2:13: executing \"h.field\" at \
                     <.Values.image.repository.nested>: nil pointer evaluating interface {}.nested";
        assert_eq!(
            exec_error(chain).as_deref(),
            Some(
                "c/templates/cm.yaml:6:8\n  executing \"c/templates/cm.yaml\" at <include \"h.outer\" .>:\n    error calling include:\n\
                 c/templates/_helpers.tpl:5:3\n  executing \"h.outer\" at <include \"h.field\" .>:\n    error calling include:\n\
                 c/templates/_helpers.tpl:2:13\n  executing \"h.field\" at <.Values.image.repository.nested>:\n    \
                 nil pointer evaluating interface {}.nested"
            )
        );
        // A function's own error ends what helm can follow: Go's text stays.
        let call = "template: c/templates/cm.yaml:6:8: executing \"c/templates/cm.yaml\" at <index .Values.list 5>: \
                    error calling index: index out of range: 5";
        assert_eq!(exec_error(call), None);
        let tpl = "template: c/templates/cm.yaml:6:8: executing \"c/templates/cm.yaml\" at <tpl \"{{ .a.b }}\" .>: \
                   error calling tpl: error during tpl function execution for \"{{ .a.b }}\": template: gotpl:1:3: \
                   executing \"gotpl\" at <.a.b>: nil pointer evaluating interface {}.b";
        assert_eq!(exec_error(tpl), None);
        let missing = "template: c/templates/cm.yaml:6:8: executing \"c/templates/cm.yaml\" at <include \"missing\" .>: \
                       error calling include: template: no template \"missing\" associated with template \"gotpl\"";
        assert_eq!(
            exec_error(missing).as_deref(),
            Some(
                "c/templates/cm.yaml:6:8\n  executing \"c/templates/cm.yaml\" at <include \"missing\" .>:\n    \
                 error calling include:\ntemplate: no template \"missing\" associated with template \"gotpl\""
            )
        );
    }

    #[test]
    fn parse_errors_as_helm_words_them() {
        assert_eq!(
            parse_error("template: c/templates/cm.yaml:6: function \"nope\" not defined"),
            "parse error at (c/templates/cm.yaml:6): function \"nope\" not defined"
        );
    }
}
