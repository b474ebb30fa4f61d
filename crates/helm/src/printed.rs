//! Each document's text as `helm template` prints it, which is the text its value is read from.
//!
//! White space at a document's end changes one thing only: a block scalar that keeps its final
//! line breaks (`|+`, `>+`, `|2+`...) ending the document keeps every one. helm prints each
//! document followed by a newline (`---\n# Source: <path>\n<document>\n`), the document being
//! what its `SplitManifests` left of the template's output: one in the middle of a file without
//! its trailing white space (the separator `(?:^|\s*\n)---\s*` takes it), the last one of a file
//! with all of it. It prints the `crds/` files whole, each followed by a newline, and trims
//! (`strings.TrimSpace`) the CRD files and manifests as one text before it prints the hooks: the
//! last of them ends at its last character.

use crate::HelmManifest;

/// A template's document followed by the newline helm prints after it.
pub(crate) fn document(part: &str) -> String {
    let mut text = String::with_capacity(part.len() + 1);
    text.push_str(part);
    text.push('\n');
    text
}

/// The documents of a `crds/` file as a reader of helm's output finds them: the file is printed
/// whole and split at the lines that start with `---`, each document keeping its text up to the
/// next such line (the last one, the newline printed after the file). Text after `---` on the
/// same line opens the next document; blank documents are left out.
pub(crate) fn crd_documents(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut parts = Vec::new();
    let (mut start, mut from) = (0, 0);
    for (i, _) in text.match_indices("---") {
        if i < from || (i > 0 && bytes[i - 1] != b'\n') {
            continue;
        }
        parts.push(&text[start..i]);
        let mut next = i + 3;
        while next < bytes.len() && matches!(bytes[next], b' ' | b'\t') {
            next += 1;
        }
        if bytes.get(next) == Some(&b'\r') {
            next += 1;
        }
        if bytes.get(next) == Some(&b'\n') {
            next += 1;
        }
        (start, from) = (next, next);
    }
    let last = document(&text[start..]);
    parts.into_iter().map(str::to_string).chain([last]).filter(|d| !d.trim().is_empty()).collect()
}

/// Whether a document may hold a block scalar that keeps its final line breaks: `|` or `>`
/// followed by `+`, perhaps after an indentation digit (`|2+`). Text elsewhere (a quoted `|+`)
/// only makes the caller look closer.
pub(crate) fn may_keep_final_breaks(doc: &str) -> bool {
    let b = doc.as_bytes();
    doc.match_indices('+').any(|(i, _)| {
        let before = |n: usize| i.checked_sub(n).map(|j| b[j]);
        matches!(before(1), Some(b'|' | b'>'))
            || (before(1).is_some_and(|c| c.is_ascii_digit()) && matches!(before(2), Some(b'|' | b'>')))
    })
}

/// Trims the document helm prints last before the hooks: the last manifest that is not a hook
/// in helm's install order (a stable sort by kind), or the last CRD document when there is no
/// such manifest. `crd_docs` is the number of CRD documents at the front of `manifests`. Only a
/// kept block scalar can tell, so the kinds are read only when some document has one.
pub(crate) fn trim_last_printed(manifests: &mut [HelmManifest], crd_docs: usize) {
    let plain: Vec<usize> = (crd_docs..manifests.len()).filter(|&i| manifests[i].hook.is_none()).collect();
    let last = if plain.is_empty() {
        crd_docs.checked_sub(1).filter(|&i| may_keep_final_breaks(&manifests[i].content))
    } else if plain.iter().any(|&i| may_keep_final_breaks(&manifests[i].content)) {
        let heads: Vec<serde_json::Value> =
            plain.iter().map(|&i| crate::yaml_head(&manifests[i].content).unwrap_or_default()).collect();
        let kind = |n: usize| heads[n].get("kind").and_then(serde_json::Value::as_str).unwrap_or_default();
        // Among equal kinds the later one is printed later.
        (0..plain.len()).max_by_key(|&n| (crate::sorter::install_rank(kind(n)), n)).map(|n| plain[n])
    } else {
        None
    };
    if let Some(i) = last {
        let content = &mut manifests[i].content;
        content.truncate(content.trim_end().len());
        content.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_block_scalars_are_found() {
        for doc in ["a: |+\n  x\n", "a: >+\n  x\n", "a: |2+\n   x\n", "a: >-\n  x\n  b: |+\n   y\n"] {
            assert!(may_keep_final_breaks(doc), "{doc:?}");
        }
        for doc in ["a: |\n  x\n", "a: |-\n  x\n", "a: 1+2\n", "+a: b\n", "a: |2-\n   x\n"] {
            assert!(!may_keep_final_breaks(doc), "{doc:?}");
        }
    }

    #[test]
    fn crd_files_split_at_marker_lines_keeping_white_space() {
        let text = "# licence\n---\na: |+\n  x\n\n---   \n\n--- # note\nb: 1\n----\nc: 2\n  ---\n---d: 3\n\n";
        assert_eq!(
            crd_documents(text),
            ["# licence\n", "a: |+\n  x\n\n", "# note\nb: 1\n", "-\nc: 2\n  ---\n", "d: 3\n\n\n"]
        );
        assert_eq!(crd_documents("a: 1"), ["a: 1\n"]);
        assert!(crd_documents("\n---\n").is_empty());
    }

    fn manifest(content: &str, hook: Option<&str>) -> HelmManifest {
        HelmManifest { source: "c/templates/x.yaml".into(), content: content.into(), hook: hook.map(str::to_string) }
    }

    #[test]
    fn the_last_manifest_printed_before_the_hooks_is_trimmed() {
        let kept = |name: &str, kind: &str| format!("kind: {kind}\nmetadata:\n  name: {name}\nv: |+\n  x\n\n");
        let mut m = vec![
            manifest(&kept("crd", "CustomResourceDefinition"), None),
            manifest(&kept("svc", "Service"), None),
            manifest(&kept("cm", "ConfigMap"), None),
            manifest(&kept("hook", "Job"), Some("pre-install")),
        ];
        trim_last_printed(&mut m, 1);
        // The Service is printed after the ConfigMap: it is the last; CRDs and hooks keep theirs.
        let ends: Vec<bool> = m.iter().map(|m| m.content.ends_with("x\n\n")).collect();
        assert_eq!(ends, [true, false, true, true]);
        assert!(m[1].content.ends_with("  x\n"));

        // No manifest but hooks: the last CRD document is printed last.
        let mut m = vec![manifest(&kept("a", "X"), None), manifest(&kept("b", "X"), None)];
        trim_last_printed(&mut m, 2);
        assert!(m[0].content.ends_with("x\n\n") && m[1].content.ends_with("  x\n"));

        // Equal kinds: the later one.
        let mut m = vec![manifest(&kept("a", "ConfigMap"), None), manifest(&kept("b", "ConfigMap"), None)];
        trim_last_printed(&mut m, 0);
        assert!(m[0].content.ends_with("x\n\n") && m[1].content.ends_with("  x\n"));
    }
}
