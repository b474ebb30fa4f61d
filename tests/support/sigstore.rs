//! A Sigstore instance of our own for tests, on 127.0.0.1: a Fulcio (`POST /api/v2/signingCert`)
//! whose test CA issues short-lived certificates for the identity in the OIDC token it is given
//! (the SAN, the OIDC issuer extension, and for a GitHub Actions token the repository and ref
//! claims), each with an embedded SCT from a CT log key of ours; and a Rekor v1 (`POST
//! /api/v1/log/entries`) that appends each entry to a Merkle tree and answers it with an inclusion
//! proof, a signed checkpoint and a signed entry timestamp. [`FakeSigstore::trusted_root`] is the
//! `trusted_root.json` a verifier needs to trust this instance and no other.
//!
//! What it does not do like the real ones: it does not check the token's signature (there is no
//! OIDC provider here; [`token`] makes an unsigned one) nor the proof of possession, and serves
//! one log shard and a root CA without intermediate.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64URL};
use rcgen::{
    CertificateParams, CustomExtension, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PublicKeyData, SanType, SigningKey, SubjectPublicKeyInfo,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The checkpoint origin of the fake log.
const ORIGIN: &str = "fake-rekor.test";

struct Keys {
    ca: KeyPair,
    ca_params: CertificateParams,
    ca_der: Vec<u8>,
    ct: KeyPair,
    rekor: KeyPair,
}

struct Log {
    /// RFC 6962 leaf hashes, in order.
    leaves: Vec<[u8; 32]>,
    /// Identities certificates were issued to.
    issued: Vec<String>,
}

/// The running fake; its server stops when it is dropped.
pub struct FakeSigstore {
    url: String,
    keys: Arc<Keys>,
    log: Arc<Mutex<Log>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeSigstore {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An unsigned OIDC token (JWT) with these claims plus `iss` and a one-hour `exp`.
pub fn token(issuer: &str, claims: Value) -> String {
    let mut claims = claims;
    claims["iss"] = json!(issuer);
    claims["exp"] = json!(jiff::Timestamp::now().as_second() + 3600);
    claims["iat"] = json!(jiff::Timestamp::now().as_second());
    if claims.get("sub").is_none() {
        claims["sub"] = claims.get("email").cloned().unwrap_or(json!("someone"));
    }
    let header = B64URL.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let payload = B64URL.encode(serde_json::to_vec(&claims).expect("JSON"));
    format!("{header}.{payload}.{}", B64URL.encode(b"unsigned"))
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl FakeSigstore {
    /// Generates the keys and starts Fulcio and Rekor on one 127.0.0.1 port.
    pub async fn start() -> Self {
        let ca = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "clusterstack tests");
        dn.push(DnType::CommonName, "fake fulcio");
        ca_params.distinguished_name = dn;
        ca_params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca_params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(1);
        ca_params.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(365);
        let ca_der = ca_params.self_signed(&ca).expect("the CA certificate").der().to_vec();
        let keys = Keys {
            ca,
            ca_params,
            ca_der,
            ct: KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a CT key"),
            rekor: KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a Rekor key"),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake Sigstore");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let keys = Arc::new(keys);
        let log = Arc::new(Mutex::new(Log { leaves: Vec::new(), issued: Vec::new() }));
        let app = Router::new()
            .route("/api/v2/signingCert", post(signing_cert))
            .route("/api/v1/log/entries", post(log_entry))
            .with_state((keys.clone(), log.clone()));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, keys, log, task }
    }

    /// Fulcio's and Rekor's base URL (both served here).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many entries the log holds.
    pub fn log_size(&self) -> usize {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).leaves.len()
    }

    /// The identities certificates were issued to, in order.
    pub fn issued(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).issued.clone()
    }

    /// The `trusted_root.json` of this instance: its CA, its log and its CT log.
    pub fn trusted_root(&self) -> String {
        let key = |k: &KeyPair| {
            let spki = k.subject_public_key_info();
            json!({
                "baseUrl": self.url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": B64.encode(&spki),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": "2020-01-01T00:00:00Z"},
                },
                "logId": {"keyId": B64.encode(sha256(&spki))},
            })
        };
        json!({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [key(&self.keys.rekor)],
            "certificateAuthorities": [{
                "subject": {"organization": "clusterstack tests", "commonName": "fake fulcio"},
                "uri": self.url,
                "certChain": {"certificates": [{"rawBytes": B64.encode(&self.keys.ca_der)}]},
                "validFor": {"start": "2020-01-01T00:00:00Z"},
            }],
            "ctlogs": [key(&self.keys.ct)],
            "timestampAuthorities": [],
        })
        .to_string()
    }
}

type AppState = (Arc<Keys>, Arc<Mutex<Log>>);

fn bad_request(message: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, message.into()).into_response()
}

/// The token's claims, unverified (see the module's note).
fn claims_of(token: &str) -> Option<Value> {
    let payload = token.split('.').nth(1)?;
    serde_json::from_slice(&B64URL.decode(payload.trim_end_matches('=')).ok()?).ok()
}

/// DER of a UTF8String, as Fulcio's "V2" claim extensions hold their values.
fn der_utf8(text: &str) -> Vec<u8> {
    let mut out = vec![0x0c];
    der_length(&mut out, text.len());
    out.extend_from_slice(text.as_bytes());
    out
}

fn der_octets(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0x04];
    der_length(&mut out, bytes.len());
    out.extend_from_slice(bytes);
    out
}

fn der_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len.to_be_bytes().iter().copied().skip_while(|b| *b == 0).collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
}

/// Fulcio's OIDs (https://github.com/sigstore/fulcio/blob/main/docs/oid-info.md).
const OID_ISSUER_V1: &[u64] = &[1, 3, 6, 1, 4, 1, 57264, 1, 1];
const OID_ISSUER_V2: &[u64] = &[1, 3, 6, 1, 4, 1, 57264, 1, 8];
const OID_SOURCE_REPOSITORY_URI: &[u64] = &[1, 3, 6, 1, 4, 1, 57264, 1, 12];
const OID_SOURCE_REPOSITORY_REF: &[u64] = &[1, 3, 6, 1, 4, 1, 57264, 1, 14];
const OID_SCT_LIST: &[u64] = &[1, 3, 6, 1, 4, 1, 11129, 2, 4, 2];

async fn signing_cert(State((keys, log)): State<AppState>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else { return bad_request("not JSON") };
    let token = request["credentials"]["oidcIdentityToken"].as_str().unwrap_or_default();
    let Some(claims) = claims_of(token) else { return bad_request("no OIDC token") };
    let issuer = claims["iss"].as_str().unwrap_or_default().to_string();
    if claims["exp"].as_i64().is_none_or(|exp| exp < jiff::Timestamp::now().as_second()) {
        return (StatusCode::UNAUTHORIZED, "the token has expired").into_response();
    }
    let pem = request["publicKeyRequest"]["publicKey"]["content"].as_str().unwrap_or_default();
    let Ok(public_key) = SubjectPublicKeyInfo::from_pem(pem) else { return bad_request("no public key") };

    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = DistinguishedName::new();
    let mut serial = rand::random::<[u8; 16]>();
    serial[0] = (serial[0] & 0x7f) | 0x01; // a positive INTEGER
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::seconds(5);
    params.not_after = now + time::Duration::minutes(10);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
    params.use_authority_key_identifier_extension = true;
    let identity;
    if let Some(workflow_ref) = claims["job_workflow_ref"].as_str() {
        // A GitHub Actions token: the SAN is the workflow that signed.
        identity = format!("https://github.com/{workflow_ref}");
        let Ok(uri) = identity.clone().try_into() else { return bad_request("bad workflow ref") };
        params.subject_alt_names = vec![SanType::URI(uri)];
        let repository = claims["repository"].as_str().unwrap_or_default();
        let git_ref = claims["ref"].as_str().unwrap_or_default();
        params.custom_extensions.push(CustomExtension::from_oid_content(
            OID_SOURCE_REPOSITORY_URI,
            der_utf8(&format!("https://github.com/{repository}")),
        ));
        params.custom_extensions.push(CustomExtension::from_oid_content(OID_SOURCE_REPOSITORY_REF, der_utf8(git_ref)));
    } else {
        identity = claims["email"].as_str().or(claims["sub"].as_str()).unwrap_or_default().to_string();
        let Ok(email) = identity.clone().try_into() else { return bad_request("bad email") };
        params.subject_alt_names = vec![SanType::Rfc822Name(email)];
    }
    params.custom_extensions.push(CustomExtension::from_oid_content(OID_ISSUER_V1, issuer.as_bytes().to_vec()));
    params.custom_extensions.push(CustomExtension::from_oid_content(OID_ISSUER_V2, der_utf8(&issuer)));

    // The precertificate's TBS (without the SCT list, as the verifier rebuilds it), signed by the
    // CT log (RFC 6962 §3.2); then the certificate with the SCT list as its last extension.
    let issuer_ref = Issuer::from_params(&keys.ca_params, &keys.ca);
    let Ok(pre) = params.signed_by(&public_key, &issuer_ref) else { return bad_request("cannot issue") };
    let tbs = {
        use x509_cert::der::{Decode, Encode};
        let cert = x509_cert::Certificate::from_der(pre.der()).expect("our certificate parses");
        cert.tbs_certificate.to_der().expect("TBS")
    };
    let timestamp = jiff::Timestamp::now().as_millisecond() as u64;
    let issuer_key_hash = sha256(&keys.ca.subject_public_key_info());
    let mut signed = vec![0u8, 0u8];
    signed.extend_from_slice(&timestamp.to_be_bytes());
    signed.extend_from_slice(&1u16.to_be_bytes()); // precert_entry
    signed.extend_from_slice(&issuer_key_hash);
    signed.extend_from_slice(&(tbs.len() as u32).to_be_bytes()[1..]);
    signed.extend_from_slice(&tbs);
    signed.extend_from_slice(&0u16.to_be_bytes()); // no extensions
    let signature = keys.ct.sign(&signed).expect("the CT log signs");
    let mut sct = vec![0u8]; // v1
    sct.extend_from_slice(&sha256(&keys.ct.subject_public_key_info()));
    sct.extend_from_slice(&timestamp.to_be_bytes());
    sct.extend_from_slice(&0u16.to_be_bytes());
    sct.extend_from_slice(&[4, 3]); // sha256, ecdsa
    sct.extend_from_slice(&(signature.len() as u16).to_be_bytes());
    sct.extend_from_slice(&signature);
    let mut list = ((sct.len() + 2) as u16).to_be_bytes().to_vec();
    list.extend_from_slice(&(sct.len() as u16).to_be_bytes());
    list.extend_from_slice(&sct);
    params.custom_extensions.push(CustomExtension::from_oid_content(OID_SCT_LIST, der_octets(&list)));
    let Ok(cert) = params.signed_by(&public_key, &issuer_ref) else { return bad_request("cannot issue") };

    log.lock().unwrap_or_else(|e| e.into_inner()).issued.push(identity);
    let pem = |der: &[u8]| pem::encode(&pem::Pem::new("CERTIFICATE", der.to_vec()));
    let answer =
        json!({"signedCertificateEmbeddedSct": {"chain": {"certificates": [pem(cert.der()), pem(&keys.ca_der)]}}});
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

fn node(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// RFC 6962 §2.1: the tree head of `leaves`.
fn root(leaves: &[[u8; 32]]) -> [u8; 32] {
    if leaves.len() == 1 {
        return leaves[0];
    }
    let k = split(leaves.len());
    node(&root(&leaves[..k]), &root(&leaves[k..]))
}

/// RFC 6962 §2.1.1: the audit path of leaf `m`.
fn path(m: usize, leaves: &[[u8; 32]]) -> Vec<[u8; 32]> {
    if leaves.len() == 1 {
        return Vec::new();
    }
    let k = split(leaves.len());
    if m < k {
        let mut p = path(m, &leaves[..k]);
        p.push(root(&leaves[k..]));
        p
    } else {
        let mut p = path(m - k, &leaves[k..]);
        p.push(root(&leaves[..k]));
        p
    }
}

/// The largest power of two below `n`.
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

async fn log_entry(State((keys, log)): State<AppState>, body: axum::body::Bytes) -> Response {
    let Ok(entry) = serde_json::from_slice::<Value>(&body) else { return bad_request("not JSON") };
    if entry["kind"] != "hashedrekord" {
        return bad_request("this fake logs hashedrekord entries only");
    }
    // Rekor stores the proposed hashedrekord as it is, canonicalized (RFC 8785).
    let canonical = serde_json_canonicalizer::to_vec(&entry).expect("canonical JSON");
    let mut leaf = vec![0u8];
    leaf.extend_from_slice(&canonical);
    let leaf = sha256(&leaf);
    let (index, size, head, proof) = {
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        log.leaves.push(leaf);
        let index = log.leaves.len() - 1;
        (index, log.leaves.len(), root(&log.leaves), path(index, &log.leaves))
    };
    let rekor_spki = keys.rekor.subject_public_key_info();
    let log_id = sha256(&rekor_spki);
    let note = format!("{ORIGIN}\n{size}\n{}\n", B64.encode(head));
    let mut hinted = log_id[..4].to_vec();
    hinted.extend(keys.rekor.sign(note.as_bytes()).expect("the log signs"));
    let checkpoint = format!("{note}\n\u{2014} {ORIGIN} {}\n", B64.encode(hinted));
    let body = B64.encode(&canonical);
    let integrated_time = jiff::Timestamp::now().as_second();
    let set_payload = json!({
        "body": body,
        "integratedTime": integrated_time,
        "logID": hex::encode(log_id),
        "logIndex": index,
    });
    let set = keys.rekor.sign(&serde_json_canonicalizer::to_vec(&set_payload).expect("JSON")).expect("the log signs");
    let mut answer = serde_json::Map::new();
    answer.insert(
        hex::encode(leaf),
        json!({
            "body": body,
            "integratedTime": integrated_time,
            "logID": hex::encode(log_id),
            "logIndex": index,
            "verification": {
                "inclusionProof": {
                    "checkpoint": checkpoint,
                    "hashes": proof.iter().map(hex::encode).collect::<Vec<_>>(),
                    "logIndex": index,
                    "rootHash": hex::encode(head),
                    "treeSize": size,
                },
                "signedEntryTimestamp": B64.encode(set),
            },
        }),
    );
    (StatusCode::CREATED, axum::Json(Value::Object(answer))).into_response()
}
