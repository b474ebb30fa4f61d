//! Key generation in templates: a chart calling `genPrivateKey "rsa"` (4096-bit keys, as Sprig)
//! K times and `genCA` + `genSignedCert` (2048-bit keys) once, rendered by `helm template` and by
//! our renderer, rounds interleaved so both see the same machine load. Prints the median wall time
//! and CPU time per round of each, the wall time per 4096-bit key, and the ratio against the goal
//! (issue 20: as fast as helm's or faster, ≤ 1×).
//!
//! A prime search's length is random (it tests candidates until one is prime), so a round's time
//! varies by a factor of 2 or more; take at least 5 rounds of 6 keys.
//!
//! `cargo run --release -p clusterstack-helm --example bench_keys [-- ROUNDS [KEYS]]` (defaults 5 and 6). Needs helm
//! (`CLUSTERSTACK_HELM`, or `.ci/install-helm`).

#[path = "../tests/support/helm.rs"]
mod helm;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use helm_render::{HelmOptions, load_chart, render_chart};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5).max(1);
    let keys: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(6).max(1);
    let Some(helm_bin) = helm::find_helm() else {
        eprintln!("bench_keys: helm not found; {}", helm::INSTALL_HINT);
        std::process::exit(2);
    };
    let tmp = tempfile::tempdir()?;
    let chart = tmp.path().join("keys");
    write_chart(&chart, keys)?;

    let opts = HelmOptions::new("bench", "default");
    let (mut helm_wall, mut helm_cpu, mut ours_wall, mut ours_cpu) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let cpu_before = cpu_time(libc::RUSAGE_CHILDREN);
        let start = Instant::now();
        let mut cmd = Command::new(&helm_bin);
        cmd.args(["template", "bench"]).arg(&chart).args(["--namespace", "default"]);
        helm::isolate(&mut cmd);
        let out = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).output()?;
        helm_wall.push(start.elapsed());
        helm_cpu.push(cpu_time(libc::RUSAGE_CHILDREN).saturating_sub(cpu_before));
        if !out.status.success() {
            return Err(format!("helm failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        let helm_keys = String::from_utf8_lossy(&out.stdout).matches("BEGIN RSA PRIVATE KEY").count();

        let cpu_before = cpu_time(libc::RUSAGE_SELF);
        let start = Instant::now();
        let manifests = render_chart(&load_chart(&chart)?, &opts)?;
        ours_wall.push(start.elapsed());
        ours_cpu.push(cpu_time(libc::RUSAGE_SELF).saturating_sub(cpu_before));
        let ours_keys: usize = manifests.iter().map(|m| m.content.matches("BEGIN RSA PRIVATE KEY").count()).sum();
        if ours_keys != helm_keys || ours_keys < keys {
            return Err(format!("keys printed: helm {helm_keys}, ours {ours_keys} (expected {keys} or more)").into());
        }
    }

    let (hw, hc, ow, oc) = (median(&helm_wall), median(&helm_cpu), median(&ours_wall), median(&ours_cpu));
    let ratio = ow.as_secs_f64() / hw.as_secs_f64();
    println!(
        "chart: {keys} x genPrivateKey \"rsa\" (4096 bits), genCA + genSignedCert (2048 bits); {rounds} rounds (median)"
    );
    println!(
        "helm template (process): wall {:>7.0} ms, CPU {:>7.0} ms, {:>5.0} ms per 4096-bit key",
        ms(hw),
        ms(hc),
        ms(hw) / keys as f64
    );
    println!(
        "ours (in-process):       wall {:>7.0} ms, CPU {:>7.0} ms, {:>5.0} ms per 4096-bit key",
        ms(ow),
        ms(oc),
        ms(ow) / keys as f64
    );
    println!("ratio wall: {ratio:.2}x (goal <= 1x: {})", if ratio <= 1.0 { "met" } else { "NOT met" });
    Ok(())
}

fn write_chart(dir: &Path, keys: usize) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("templates"))?;
    std::fs::write(dir.join("Chart.yaml"), "apiVersion: v2\nname: keys\nversion: 0.1.0\n")?;
    let template = format!(
        r#"{{{{- range until {keys} }}}}
---
apiVersion: v1
kind: Secret
metadata:
  name: key-{{{{ . }}}}
stringData:
  tls.key: {{{{ genPrivateKey "rsa" | quote }}}}
{{{{- end }}}}
{{{{- $ca := genCA "bench-ca" 365 }}}}
{{{{- $cert := genSignedCert "bench" nil (list "bench.default.svc") 365 $ca }}}}
---
apiVersion: v1
kind: Secret
metadata:
  name: tls
stringData:
  ca.crt: {{{{ $ca.Cert | quote }}}}
  tls.crt: {{{{ $cert.Cert | quote }}}}
  tls.key: {{{{ $cert.Key | quote }}}}
"#
    );
    std::fs::write(dir.join("templates/keys.yaml"), template)
}

/// User + system CPU time of this process or of its waited-for children so far.
fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct, which `getrusage` fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid for writes for the duration of the call.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(times: &[Duration]) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    t.get(t.len() / 2).copied().unwrap_or_default()
}
