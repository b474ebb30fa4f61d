//! Renders a chart in process and prints it as `helm template NAME CHART` does, to compare
//! the two by hand: `cargo run --example helm_template -- NAME CHART [--namespace NS]
//! [--kube-version V] [--include-crds] [--values-json JSON]`.

use std::path::PathBuf;
use std::process::ExitCode;

use helm_render::{HelmOptions, load_chart, render_chart};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let mut namespace = "default".to_string();
    let mut kube_version = None;
    let mut include_crds = false;
    let mut values = serde_json::json!({});
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--namespace" | "-n" => namespace = args.next().unwrap_or_default(),
            "--kube-version" => kube_version = args.next(),
            "--include-crds" => include_crds = true,
            "--values-json" => match serde_json::from_str(&args.next().unwrap_or_default()) {
                Ok(v) => values = v,
                Err(e) => {
                    eprintln!("--values-json: {e}");
                    return ExitCode::from(2);
                }
            },
            _ => positional.push(arg),
        }
    }
    let [name, chart] = positional.as_slice() else {
        eprintln!(
            "usage: helm_template NAME CHART [--namespace NS] [--kube-version V] [--include-crds] [--values-json JSON]"
        );
        return ExitCode::from(2);
    };
    let opts = HelmOptions { kube_version, include_crds, values, ..HelmOptions::new(name.as_str(), namespace) };
    let rendered = load_chart(&PathBuf::from(chart)).and_then(|c| render_chart(&c, &opts));
    match rendered {
        Ok(manifests) => {
            for m in manifests {
                println!("---\n# Source: {}\n{}", m.source, m.content.trim_end());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}
