//! Renders a synthetic bundle of 1,000 objects and prints objects per second
//! and peak memory (`VmHWM`). Run with `cargo run --release --example bench_render`.
//!
//! Goal: at least 20,000 objects/s on a 2-core machine.

use std::time::Instant;

use clusterstack::release::ReleaseId;
use clusterstack::render::{RenderContext, render_cluster_class};

const TEMPLATES: usize = 10;
const PER_TEMPLATE: usize = 100;
const ROUNDS: usize = 20;

const TEMPLATE: &str = r#"{% import "_helpers.j2" as h %}
{% for i in range(values.count) %}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ h.name(TEMPLATE_ID, i) }}
  namespace: {{ release.namespace }}
  labels: {{ values.labels | to_yaml | nindent(4) }}
spec:
  replicas: {{ values.replicas }}
  selector:
    matchLabels:
      app: {{ h.name(TEMPLATE_ID, i) }}
  template:
    metadata:
      labels:
        app: {{ h.name(TEMPLATE_ID, i) }}
    spec:
      containers:
        - name: app
          image: {{ values.image | quote }}
          args: {{ values.args | to_json }}
          env:
            - name: RELEASE
              value: {{ (release.name ~ "-" ~ chart.version) | quote }}
            - name: SECRET
              value: {{ "s3cr3t" | b64encode | quote }}
          resources:
            requests: {cpu: 10m, memory: 16Mi}
{% endfor %}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let chart = dir.path();
    std::fs::create_dir_all(chart.join("templates"))?;
    // A Jinja bundle: the engine this benchmark measures.
    std::fs::write(
        chart.join("Chart.yaml"),
        "name: bench\nversion: v1\nannotations:\n  clusterstack.x-k8s.io/template-engine: jinja\n",
    )?;
    std::fs::write(
        chart.join("values.yaml"),
        format!(
            "count: {PER_TEMPLATE}\nreplicas: 2\nimage: registry.example/app:v1\nargs: [--a, --b=1]\n\
             labels: {{team: platform, tier: backend}}\n"
        ),
    )?;
    std::fs::write(chart.join("templates/_helpers.j2"), "{% macro name(t, i) %}app-{{ t }}-{{ i }}{% endmacro %}\n")?;
    for t in 0..TEMPLATES {
        std::fs::write(chart.join(format!("templates/t{t:02}.yaml")), TEMPLATE.replace("TEMPLATE_ID", &t.to_string()))?;
    }
    let ctx = RenderContext::new(&ReleaseId::from_tag("docker-bench-1-27-v1")?, "default");

    // One warm-up round, then the measured ones.
    let objects = render_cluster_class(chart, &ctx)?;
    assert_eq!(objects.len(), TEMPLATES * PER_TEMPLATE);
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let mut total = 0;
    for _ in 0..ROUNDS {
        total += render_cluster_class(chart, &ctx)?.len();
    }
    let elapsed = start.elapsed();
    let cpu = cpu_seconds().zip(cpu_start).map(|(end, start)| end - start);
    let per_second = total as f64 / elapsed.as_secs_f64();
    println!("bundle: {TEMPLATES} templates, {} objects", TEMPLATES * PER_TEMPLATE);
    println!(
        "rendered {total} objects in {:.1} ms: {per_second:.0} objects/s ({:.2} ms per bundle)",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_secs_f64() * 1e3 / ROUNDS as f64
    );
    if let Some(cpu) = cpu {
        // CPU time is what the work costs, whatever else the machine is doing.
        println!(
            "CPU time {:.1} ms on {} threads: {:.0} objects per CPU-second",
            cpu * 1e3,
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            total as f64 / cpu
        );
    }
    println!("peak memory (VmHWM): {}", peak_memory().unwrap_or_else(|| "unknown".into()));
    println!("goal: >= 20000 objects/s: {}", if per_second >= 20_000.0 { "met" } else { "NOT met" });
    Ok(())
}

/// User + system CPU time of the process, from /proc/self/stat (in 1/100 s).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn peak_memory() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
}
