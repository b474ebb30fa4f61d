//! `clusterstack render`'s YAML output of every chart of the public corpus
//! (`../shared/helm-corpus/charts`, never copied into the project) against `helm template`'s,
//! text against text: the same documents under the same `# Source:` in the same order, each
//! byte for byte, except where helm's own two runs differ (random passwords, keys, checksums of
//! them), which only have to be at the same place. `tests/helm_corpus.rs` compares the objects.
//!
//! The arguments are the corpus README's, as in `tests/helm_corpus.rs`; where the corpus is:
//! `$CLUSTERSTACK_HELM_CORPUS`, else `../shared/helm-corpus`. Under `CI=true` a missing corpus or
//! helm fails; locally the test is skipped loudly.

#[path = "support/corpus.rs"]
mod corpus;
#[path = "../crates/helm/tests/support/helm.rs"]
mod helm;

use std::path::Path;
use std::process::Command;

/// `RELEASE CHART --namespace NS --skip-tests [--include-crds -f VALUES]`, as the README says.
fn args(charts: &Path, name: &str) -> Vec<String> {
    let dir = charts.join(name).display().to_string();
    let values = charts.join(format!("{name}.values.yaml"));
    let mut args: Vec<String> = if values.is_file() {
        ["cluster-addon", &dir, "--namespace", "kube-system", "--include-crds", "-f", &values.display().to_string()]
            .map(String::from)
            .to_vec()
    } else {
        ["corpus-chart-1-30", &dir, "--namespace", "corpus-ns"].map(String::from).to_vec()
    };
    args.push("--skip-tests".into());
    args
}

/// Stdout, or why the command failed.
fn output(mut cmd: Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The output cut before each `---\n# Source: ` line: one piece per printed document.
fn pieces(text: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = text.match_indices("---\n# Source: ").map(|(i, _)| i).collect();
    starts.retain(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n');
    starts.push(text.len());
    let mut out = vec![&text[..starts[0]]];
    out.extend(starts.windows(2).map(|w| &text[w[0]..w[1]]));
    out
}

/// Where ours differs from helm (`None` when it does not).
fn compare(name: &str, ours: &str, helm: &str, helm_again: impl Fn() -> Result<String, String>) -> Option<String> {
    if ours == helm {
        return None;
    }
    let again = match helm_again() {
        Ok(again) => again,
        Err(e) => return Some(format!("{name}: helm fails the second time: {e}")),
    };
    let (o, h, h2) = (pieces(ours), pieces(helm), pieces(&again));
    if o.len() != h.len() || h.len() != h2.len() {
        return Some(format!("{name}: {} documents printed, helm {} (then {})", o.len(), h.len(), h2.len()));
    }
    let source = |p: &str| p.lines().nth(1).unwrap_or_default().to_string();
    for (i, ((o, h), h2)) in o.iter().zip(&h).zip(&h2).enumerate() {
        // What helm's two runs print alike must be ours too; the rest at least from the same place.
        if (h == h2 && o != h) || source(o) != source(h) {
            return Some(format!("{name}: document {i} differs:\n{}", helm::line_diff(h, o)));
        }
    }
    None
}

#[test]
fn corpus_charts_print_as_helm_prints_them() {
    let test = "corpus_charts_print_as_helm_prints_them";
    let Some(corpus) = corpus::require_corpus(test) else { return };
    let Some(helm_bin) = helm::require_helm(test) else { return };
    let charts = corpus.join("charts");
    let names = corpus::chart_names(&corpus);
    let helm_run = |args: &[String]| {
        let mut cmd = Command::new(&helm_bin);
        cmd.arg("template").args(args);
        helm::isolate(&mut cmd);
        output(cmd)
    };
    let ours_run = |args: &[String]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_clusterstack"));
        cmd.arg("render").args(args);
        output(cmd)
    };
    let (mut failures, mut compared) = (Vec::new(), 0);
    for name in &names {
        let args = args(&charts, name);
        match (ours_run(&args), helm_run(&args)) {
            (Ok(ours), Ok(helm)) => {
                compared += 1;
                failures.extend(compare(name, &ours, &helm, || helm_run(&args)));
            }
            // helm prints nothing where every template is empty; ours says so and fails.
            (Err(e), Ok(helm)) if e.contains("rendered no objects") && helm.trim().is_empty() => {}
            (Err(e), Ok(_)) => failures.push(format!("{name}: ours fails where helm prints:\n{e}")),
            (_, Err(e)) => failures.push(format!("{name}: helm fails (not a chart helm renders?):\n{e}")),
        }
    }
    eprintln!("{test}: {compared} of {} charts compared", names.len());
    assert!(failures.is_empty(), "{} charts print differently:\n{}", failures.len(), failures.join("\n"));
}
