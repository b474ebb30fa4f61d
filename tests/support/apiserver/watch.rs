//! Watches: events since a `resourceVersion` from the store's history, bookmarks, initial
//! events, `timeoutSeconds`, 410 Gone past the kept history, an end when the test expires
//! every watch, and no events at all for a resource whose streams the test cut.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use clusterstack::util::lock;
use serde_json::{Value, json};

use super::store::{self, ResourceType};
use super::{FieldSelector, LabelSelector, Shared};

pub(super) fn watch(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    ns: Option<&str>,
    labels: LabelSelector,
    fields: FieldSelector,
    query: &BTreeMap<String, String>,
) -> Response {
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|b| b == "true");
    let initial = query.get("sendInitialEvents").is_some_and(|b| b == "true");
    let timeout = query.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()).unwrap_or(1800);
    let from: Option<u64> = query.get("resourceVersion").and_then(|r| r.parse().ok()).filter(|r| *r > 0);
    let ns = ns.map(str::to_string);
    let matches = {
        let (rt, ns) = (rt.clone(), ns.clone());
        let shared = shared.clone();
        move |e: &store::Event| {
            !lock(&shared.cut_watches).contains(&e.plural)
                && e.group == rt.group
                && e.plural == rt.plural
                && ns.as_ref().is_none_or(|n| *n == e.namespace)
                && labels.matches(&e.obj)
                && fields.matches(&e.obj)
        }
    };
    let line = store::encode_line;
    let (first, mut rx, current_rv) = {
        let store = lock(&shared.store);
        let rx = store.tx.subscribe();
        let mut first = Vec::new();
        match from {
            // Resume: replay what happened since.
            Some(rv) if !initial => match store.events_since(rv, &rt.group, &rt.plural) {
                Ok(evs) => first.extend(evs.iter().filter(|e| matches(e)).map(|e| e.line())),
                Err(e) => {
                    // The watch itself succeeds and carries the error, as the real server does.
                    first.push(line("ERROR", &e.to_status()));
                }
            },
            // No version (or sendInitialEvents): the current state as ADDED events.
            _ => {
                let all = store.list(rt, ns.as_deref(), &LabelSelector::default(), &FieldSelector::default());
                for o in all {
                    let namespace = o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_string();
                    let ev = store::Event::new(0, "ADDED", rt.group.clone(), rt.plural.clone(), namespace, o);
                    if matches(&ev) {
                        first.push(ev.line());
                    }
                }
            }
        }
        if initial {
            let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": {
                "resourceVersion": store.resource_version().to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"}}});
            first.push(line("BOOKMARK", &bm));
        }
        (first, rx, store.resource_version())
    };
    let (tx, out_rx) = tokio::sync::mpsc::channel::<Bytes>(1024);
    let (kind, api_version) = (rt.kind.clone(), rt.api_version());
    let interval = shared.bookmark_interval;
    let mut expire = shared.expire.subscribe();
    expire.mark_unchanged();
    tokio::spawn(async move {
        for b in first {
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let mut last_rv = current_rv;
        let deadline = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(interval);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = expire.changed() => return,
                _ = tick.tick(), if bookmarks => {
                    // Only a version every earlier event has been delivered for is safe to resume from.
                    let bm = json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": last_rv.to_string()}});
                    if tx.send(line("BOOKMARK", &bm)).await.is_err() { return; }
                }
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        if ev.rv <= current_rv { continue; }
                        last_rv = ev.rv;
                        if !matches(&ev) { continue; }
                        if tx.send(ev.line()).await.is_err() { return; }
                    }
                    // Too slow a reader: end the watch; the client resumes from its last version.
                    Err(_) => return,
                },
            }
        }
    });
    let stream = futures::stream::unfold(out_rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::from_stream(stream)).into_response()
}
