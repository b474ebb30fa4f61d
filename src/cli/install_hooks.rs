//! The Runtime SDK wiring of `clusterstack install --export`: the hook Service, the
//! `ExtensionConfig` that registers it with Cluster API, and its serving certificate — by
//! default from cert-manager (an Issuer and a Certificate; CAPI injects the CA into the
//! ExtensionConfig from the certificate's Secret), or with `--self-signed` a CA and a serving
//! certificate generated here, put into the Secret and the CA bundle into the ExtensionConfig.

use base64::Engine;
use serde_json::{Value, json};

/// The Secret holding the hook server's `tls.crt` / `tls.key` (and `ca.crt`).
pub const HOOKS_TLS_SECRET: &str = "clusterstack-hooks-tls";
/// The hook Service.
pub const HOOKS_SERVICE: &str = "clusterstack-hooks";
/// The hook server's container port.
pub const HOOKS_PORT: i32 = 9443;
/// Where the Secret is mounted.
pub const HOOKS_CERT_DIR: &str = "/etc/clusterstack/hooks-tls";
/// The CAPI annotation that makes CAPI copy `ca.crt` of a Secret into the ExtensionConfig.
pub const INJECT_CA_ANNOTATION: &str = "runtime.cluster.x-k8s.io/inject-ca-from-secret-name";

/// The DNS names the serving certificate must carry.
pub fn dns_names(namespace: &str) -> Vec<String> {
    vec![format!("{HOOKS_SERVICE}.{namespace}.svc"), format!("{HOOKS_SERVICE}.{namespace}.svc.cluster.local")]
}

/// The Service in front of the hook server.
pub fn service(namespace: &str, labels: &Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": HOOKS_SERVICE, "namespace": namespace, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "hooks", "port": 443, "targetPort": "hooks", "protocol": "TCP"}]}
    })
}

/// The ExtensionConfig; `ca_bundle` set for `--self-signed`, else the CA is injected from the Secret.
pub fn extension_config(namespace: &str, labels: &Value, ca_bundle: Option<&str>) -> Value {
    let mut client = json!({"service": {"name": HOOKS_SERVICE, "namespace": namespace, "port": 443}});
    let mut metadata = json!({"name": "clusterstack", "labels": labels});
    match ca_bundle {
        Some(pem) => client["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(pem)),
        None => metadata["annotations"] = json!({INJECT_CA_ANNOTATION: format!("{namespace}/{HOOKS_TLS_SECRET}")}),
    }
    json!({
        "apiVersion": "runtime.cluster.x-k8s.io/v1alpha1", "kind": "ExtensionConfig",
        "metadata": metadata,
        "spec": {"clientConfig": client, "namespaceSelector": {}}
    })
}

/// cert-manager: a self-signed Issuer and the serving Certificate into [`HOOKS_TLS_SECRET`].
pub fn cert_manager(namespace: &str, labels: &Value) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": {"name": "clusterstack-selfsigned", "namespace": namespace, "labels": labels},
            "spec": {"selfSigned": {}}
        }),
        json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": HOOKS_SERVICE, "namespace": namespace, "labels": labels},
            "spec": {"secretName": HOOKS_TLS_SECRET, "dnsNames": dns_names(namespace),
                     "issuerRef": {"kind": "Issuer", "name": "clusterstack-selfsigned"}}
        }),
    ]
}

/// `--self-signed`: a CA and a serving certificate signed by it; returns the Secret and the CA PEM.
pub fn self_signed(namespace: &str, labels: &Value) -> Result<(Value, String), rcgen::Error> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "clusterstack hooks CA");
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate()?;
    let params = rcgen::CertificateParams::new(dns_names(namespace))?;
    let cert = params.signed_by(&key, &issuer)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": HOOKS_TLS_SECRET, "namespace": namespace, "labels": labels},
        "data": {"tls.crt": b64(&cert.pem()), "tls.key": b64(&key.serialize_pem()), "ca.crt": b64(&ca_cert.pem())}
    });
    Ok((secret, ca_cert.pem()))
}
