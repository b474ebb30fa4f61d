//! Rendering one minijinja bundle chart: `values.yaml`, the per-cluster `overwrite.yaml` and
//! platform values merged over it, then every template (in parallel, results in template order)
//! parsed into objects, checked for duplicates and sorted for apply.

use std::path::Path;

use super::{
    CHART_FILE, OVERWRITE_FILE, RenderContext, RenderError, RenderedChart, VALUES_FILE, engine, merge_values, objects,
    parse_values, platform_values, read_chart_file, read_text, topology_variables,
};
use crate::apply::sort_for_apply;

pub(super) fn render_jinja_chart(chart_dir: &Path, ctx: &RenderContext) -> Result<RenderedChart, RenderError> {
    let chart_file = chart_dir.join(CHART_FILE);
    let chart = read_chart_file(chart_dir)?;
    let chart_name = Some(chart.name).filter(|n| !n.is_empty()).ok_or_else(|| RenderError::Bundle {
        file: chart_file.display().to_string(),
        message: "field name is required".into(),
    })?;

    let values_file = chart_dir.join(VALUES_FILE);
    let mut values = if values_file.exists() {
        parse_values(&values_file.display().to_string(), &read_text(&values_file)?)?
    } else {
        serde_json::Value::Object(Default::default())
    };

    let bundle = engine::Bundle::load(chart_dir, &ctx.limits)?;
    let mut context = serde_json::json!({
        "release": {"name": ctx.release_name, "namespace": ctx.namespace},
        "chart": {"name": chart_name, "version": ctx.chart_version},
        "values": values,
    });
    if let Some(cluster) = &ctx.cluster {
        context["cluster"] = cluster.cluster.clone();
        context["control_plane"] = cluster.control_plane.clone();
        context["infra_cluster"] = cluster.infra_cluster.clone();
        context["variables"] = topology_variables(&cluster.cluster);
        let overwrite_file = chart_dir.join(OVERWRITE_FILE);
        if overwrite_file.exists() {
            let label = overwrite_file.display().to_string();
            let source = read_text(&overwrite_file)?;
            let rendered = bundle.render_source(&label, &source, &context)?;
            let overwrite = parse_values(&label, &rendered)?;
            merge_values(&mut values, overwrite);
            context["values"] = values.clone();
        }
        if let Some(platform) = platform_values(ctx, chart_dir, &chart_name) {
            merge_values(&mut values, platform.clone());
            context["values"] = values;
        }
    }

    let names = bundle.rendered_templates();
    let rendered = parallel_map(&names, |name| {
        let label = bundle.label(name);
        let output = bundle.render(name, &context)?;
        Ok::<_, RenderError>((label.clone(), objects::parse_objects(&label, &output)?))
    });
    let (mut objects, mut sources) = (Vec::new(), Vec::new());
    // In template order, so the first error reported does not depend on thread timing.
    for result in rendered {
        let (label, parsed) = result?;
        for object in parsed {
            objects.push(object);
            sources.push(label.clone());
        }
    }
    objects::check_duplicates(&objects, &sources)?;
    sort_for_apply(&mut objects);
    Ok(RenderedChart { name: chart_name, objects, unaccepted: Vec::new(), texts: Vec::new(), streamed: Vec::new() })
}

/// Maps `f` over `items` on up to as many threads as there are CPUs, keeping
/// the order of `items` in the result. Rendering and YAML parsing are
/// CPU-bound and templates are independent, so big bundles scale with cores.
fn parallel_map<T, R, F>(items: &[T], f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(items.len());
    if threads <= 1 {
        return items.iter().map(&f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(done) => done,
                // A panic in a template filter is a bug; re-raise it where the caller can see it.
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}
