//! Tests of the OCI source: loopback hosts, `Link` pagination, artifact manifests.

use super::*;

#[test]
fn loopback_hosts() {
    for h in ["127.0.0.1:5000", "localhost", "localhost:1", "[::1]:5000", "127.1.2.3"] {
        assert!(is_loopback(h), "{h}");
    }
    for h in ["registry.example.com", "10.0.0.1:5000", "ghcr.io"] {
        assert!(!is_loopback(h), "{h}");
    }
    assert_eq!(registry_base_url("127.0.0.1:5000", &[]), "http://127.0.0.1:5000");
    assert_eq!(registry_base_url("r.local:5000", &["r.local:5000".into()]), "http://r.local:5000");
    assert_eq!(registry_base_url("ghcr.io", &[]), "https://ghcr.io");
}

#[test]
fn link_headers() {
    assert_eq!(next_link(r#"</v2/a/tags/list?last=x&n=2>; rel="next""#).as_deref(), Some("/v2/a/tags/list?last=x&n=2"));
    assert_eq!(next_link(r#"<https://x/y>; rel="prev""#), None);
    assert_eq!(resolve("http://h:1", "/v2/a/tags/list?n=2").as_deref(), Some("http://h:1/v2/a/tags/list?n=2"));
}

#[test]
fn artifact_manifests() {
    let d = "a".repeat(64);
    let ok = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"{EMPTY_CONFIG}","digest":"sha256:{d}","size":2}},
            "layers":[{{"mediaType":"application/octet-stream","digest":"sha256:{d}","size":5,"annotations":{{"{TITLE_ANNOTATION}":"metadata.yaml"}}}}]}}"#
    );
    let assets = artifact_assets(ok.as_bytes(), None).unwrap();
    assert_eq!(assets[0].name, "metadata.yaml");
    assert_eq!(assets[0].sha256.as_deref(), Some(d.as_str()));
    let image = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:{d}","size":5}}]}}"#
    );
    assert!(artifact_assets(image.as_bytes(), None).unwrap_err().contains("not an artifact"));
    let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
    assert!(artifact_assets(index.as_bytes(), None).unwrap_err().contains("media type"));
    let evil = ok.replace("metadata.yaml", "../x");
    assert!(artifact_assets(evil.as_bytes(), None).is_err());
}
