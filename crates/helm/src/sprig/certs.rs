//! Sprig's keys and certificates (crypto.go): `genPrivateKey`, `genCA`,
//! `genCAWithKey`, `genSelfSignedCert[WithKey]`, `genSignedCert[WithKey]`,
//! `buildCustomCert`. RSA keys are generated with the `rsa` crate from the
//! host's randomness (2048 bits for certificates, 4096 for `genPrivateKey`,
//! as Sprig); certificates are built and signed by `rcgen` with Go's
//! template: a random 128-bit serial, the common name as subject, validity
//! from now for the given days, key usages and server/client auth.

use crate::env::HostExt as _;
use std::rc::Rc;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
use rsa::pkcs8::EncodePrivateKey;

use super::{i, reg, s};
use gotmpl::func::{FuncMap, Host, Param};
use gotmpl::value::{FuncError, Object, Value};

use Param::{Any, Int, List, String as Str};

/// Sprig's `certificate` struct: `.Cert` and `.Key`, PEM.
#[derive(Debug, Clone)]
pub struct Certificate {
    pub cert: String,
    pub key: String,
}

impl Object for Certificate {
    fn type_name(&self) -> &str {
        "sprig.certificate"
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Cert" => Some(Value::str(self.cert.as_str())),
            "Key" => Some(Value::str(self.key.as_str())),
            _ => None,
        }
    }
    fn go_string(&self) -> String {
        format!("{{{} {}}}", self.cert, self.key)
    }
    fn to_data(&self) -> Value {
        let mut m = std::collections::BTreeMap::new();
        m.insert("Cert".to_string(), Value::str(self.cert.as_str()));
        m.insert("Key".to_string(), Value::str(self.key.as_str()));
        Value::map(m)
    }
}

fn cert_value(c: Certificate) -> Value {
    Value::Object(Rc::new(c))
}

/// rand 0.9's generator as the rand_core 0.6 one the `rsa` crate wants.
struct RngAdapter<'a>(&'a mut dyn rand::RngCore);

impl rand_core::RngCore for RngAdapter<'_> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest);
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.0.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for RngAdapter<'_> {}

fn err(msg: impl Into<String>) -> FuncError {
    FuncError::msg(msg)
}

/// A private key in the forms Sprig writes and rcgen signs with.
struct Key {
    /// PEM as Sprig writes it (`RSA PRIVATE KEY`, `EC PRIVATE KEY`, `PRIVATE KEY`).
    pem: String,
    pair: KeyPair,
}

/// What generating an RSA key costs in steps, per 1024 bits of modulus:
/// key generation grows with about the cube of the size (a 4096-bit key
/// is 64 times a 1024-bit one), so a 4096-bit key costs 16 million steps,
/// about what the executor does in the same CPU time (~0.3 s): twelve of
/// them fill the default step limit.
const RSA_FUEL_PER_1024_CUBED: u64 = 250_000;

fn rsa_key(h: &mut dyn Host, bits: usize) -> Result<Key, FuncError> {
    let k = (bits as u64).div_ceil(1024);
    h.charge(RSA_FUEL_PER_1024_CUBED * k * k * k)?;
    let key = rsa::RsaPrivateKey::new(&mut RngAdapter(&mut *h.rng()), bits)
        .map_err(|e| err(format!("error generating rsa key: {e}")))?;
    rsa_key_from(&key)
}

fn rsa_key_from(key: &rsa::RsaPrivateKey) -> Result<Key, FuncError> {
    let pem = key.to_pkcs1_pem(rsa::pkcs8::LineEnding::LF).map_err(|e| err(e.to_string()))?.to_string();
    let der = key.to_pkcs8_der().map_err(|e| err(e.to_string()))?;
    let pair = KeyPair::from_pkcs8_der_and_sign_algo(&der.as_bytes().into(), &rcgen::PKCS_RSA_SHA256)
        .map_err(|e| err(e.to_string()))?;
    Ok(Key { pem, pair })
}

fn pem_block(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

const P256_OID: [u8; 10] = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// An ECDSA P-256 key as Go's `x509.MarshalECPrivateKey` writes it.
fn ec_key() -> Result<Key, FuncError> {
    let pair = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| err(e.to_string()))?;
    let pkcs8 = pair.serialize_der();
    let marker = [0x02, 0x01, 0x01, 0x04, 0x20];
    let at = pkcs8.windows(5).position(|w| w == marker).ok_or_else(|| err("unexpected PKCS#8 layout"))? + 5;
    let scalar = pkcs8.get(at..at + 32).ok_or_else(|| err("unexpected PKCS#8 layout"))?;
    let public = pair.public_key_raw();
    let mut body = vec![0x02, 0x01, 0x01, 0x04, 0x20];
    body.extend_from_slice(scalar);
    body.extend_from_slice(&[0xa0, P256_OID.len() as u8]);
    body.extend_from_slice(&P256_OID);
    body.extend_from_slice(&[0xa1, (public.len() + 3) as u8, 0x03, (public.len() + 1) as u8, 0x00]);
    body.extend_from_slice(public);
    let mut der = vec![0x30, body.len() as u8];
    der.extend(body);
    Ok(Key { pem: pem_block("EC PRIVATE KEY", &der), pair })
}

/// An Ed25519 key as Go's `x509.MarshalPKCS8PrivateKey` writes it.
fn ed25519_key() -> Result<Key, FuncError> {
    let pair = KeyPair::generate_for(&rcgen::PKCS_ED25519).map_err(|e| err(e.to_string()))?;
    let pkcs8 = pair.serialize_der();
    let marker = [0x04, 0x22, 0x04, 0x20];
    let at = pkcs8.windows(4).position(|w| w == marker).ok_or_else(|| err("unexpected PKCS#8 layout"))? + 4;
    let seed = pkcs8.get(at..at + 32).ok_or_else(|| err("unexpected PKCS#8 layout"))?;
    let mut der = vec![0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];
    der.extend_from_slice(seed);
    Ok(Key { pem: pem_block("PRIVATE KEY", &der), pair })
}

/// Sprig's `parsePrivateKeyPEM`, for the keys rcgen can sign with.
fn parse_key(text: &str) -> Result<Key, FuncError> {
    let block = pem::parse(text.trim_start()).map_err(|_| err("no PEM data in input"))?;
    let tag = block.tag().to_string();
    match tag.as_str() {
        "PRIVATE KEY" => {
            let der = block.contents();
            for alg in [
                &rcgen::PKCS_RSA_SHA256,
                &rcgen::PKCS_ECDSA_P256_SHA256,
                &rcgen::PKCS_ECDSA_P384_SHA384,
                &rcgen::PKCS_ED25519,
            ] {
                if let Ok(pair) = KeyPair::from_pkcs8_der_and_sign_algo(&der.into(), alg) {
                    return Ok(Key { pem: text.to_string(), pair });
                }
            }
            Err(err("decoding PEM as PKCS#8: unsupported key"))
        }
        "RSA PRIVATE KEY" => {
            let key = rsa::RsaPrivateKey::from_pkcs1_der(block.contents())
                .map_err(|e| err(format!("parsing RSA private key from PEM: {e}")))?;
            let mut k = rsa_key_from(&key)?;
            k.pem = text.to_string();
            Ok(k)
        }
        "EC PRIVATE KEY" => {
            // wrap SEC1 in PKCS#8 for the signer
            let sec1 = block.contents();
            let mut alg = vec![0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
            alg.extend_from_slice(&P256_OID);
            let mut inner = vec![0x02, 0x01, 0x00];
            inner.extend(alg);
            inner.push(0x04);
            inner.extend(der_len(sec1.len()));
            inner.extend_from_slice(sec1);
            let mut der = vec![0x30];
            der.extend(der_len(inner.len()));
            der.extend(inner);
            let pair = KeyPair::from_pkcs8_der_and_sign_algo(&der.as_slice().into(), &rcgen::PKCS_ECDSA_P256_SHA256)
                .map_err(|e| err(format!("parsing EC private key from PEM: {e}")))?;
            Ok(Key { pem: text.to_string(), pair })
        }
        t if t.ends_with(" PRIVATE KEY") => Err(err(format!("invalid private key type {t}"))),
        t => Err(err(format!("no private key data in PEM block of type {t}"))),
    }
}

fn der_len(n: usize) -> Vec<u8> {
    if n < 128 {
        vec![n as u8]
    } else if n < 256 {
        vec![0x81, n as u8]
    } else {
        vec![0x82, (n >> 8) as u8, n as u8]
    }
}

fn strings_of(v: &Value, what: &str) -> Result<Vec<String>, FuncError> {
    let items = super::items(v).unwrap_or_default();
    items
        .iter()
        .map(|x| match x {
            Value::String(s) => Ok(s.to_string()),
            other => Err(err(format!("error {what}: {} is not a string", super::format_value(other)))),
        })
        .collect()
}

/// Go's `getBaseCertTemplate`.
fn base_params(
    h: &mut dyn Host,
    cn: &str,
    ips: &Value,
    dns: &Value,
    days: i64,
) -> Result<CertificateParams, FuncError> {
    let mut sans = Vec::new();
    for ip in strings_of(ips, "parsing ip")? {
        let addr: std::net::IpAddr = ip.parse().map_err(|_| err(format!("error parsing ip: {ip}")))?;
        sans.push(SanType::IpAddress(addr));
    }
    for name in strings_of(dns, "processing alternate dns name")? {
        sans.push(SanType::DnsName(name.try_into().map_err(|e: rcgen::Error| err(e.to_string()))?));
    }
    let mut serial = [0u8; 16];
    h.rng().fill_bytes(&mut serial);
    let first = serial.iter().position(|b| *b != 0).unwrap_or(15);
    let now = h.now().timestamp();
    let to_time = |secs: i64| time::OffsetDateTime::from_unix_timestamp(secs).map_err(|e| err(e.to_string()));
    let mut params = CertificateParams::default();
    params.serial_number = Some(SerialNumber::from_slice(&serial[first..]));
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.subject_alt_names = sans;
    params.not_before = to_time(now.as_second())?;
    params.not_after = to_time(now.as_second().saturating_add(days.saturating_mul(86_400)))?;
    params.key_usages = vec![KeyUsagePurpose::KeyEncipherment, KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    params.is_ca = IsCa::ExplicitNoCa;
    Ok(params)
}

fn gen_ca(h: &mut dyn Host, cn: &str, days: i64, key: Key) -> Result<Value, FuncError> {
    let mut params = base_params(h, cn, &Value::Nil, &Value::Nil, days)?;
    params.key_usages =
        vec![KeyUsagePurpose::KeyEncipherment, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyCertSign];
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key.pair).map_err(|e| err(format!("error creating certificate: {e}")))?;
    Ok(cert_value(Certificate { cert: cert.pem(), key: key.pem }))
}

fn gen_self_signed(h: &mut dyn Host, a: &[Value], key: Key) -> Result<Value, FuncError> {
    let params = base_params(h, &s(&a[0]), &a[1], &a[2], i(&a[3]))?;
    let cert = params.self_signed(&key.pair).map_err(|e| err(format!("error creating certificate: {e}")))?;
    Ok(cert_value(Certificate { cert: cert.pem(), key: key.pem }))
}

fn ca_of(v: &Value) -> Result<(String, String), FuncError> {
    match v {
        Value::Object(o) if o.type_name() == "sprig.certificate" => {
            let get = |f: &str| o.field(f).map(|x| super::strval(&x)).unwrap_or_default();
            Ok((get("Cert"), get("Key")))
        }
        other => Err(err(format!("wrong type for value; expected sprig.certificate; got {}", other.type_name()))),
    }
}

fn gen_signed(h: &mut dyn Host, a: &[Value], key: Key) -> Result<Value, FuncError> {
    let (ca_cert, ca_key) = ca_of(&a[4])?;
    let signer = parse_key(&ca_key).map_err(|e| err(format!("error parsing private key: {e}")))?;
    let issuer = Issuer::from_ca_cert_pem(&ca_cert, &signer.pair)
        .map_err(|e| err(format!("error parsing certificate: decodedSignerCert.Bytes: {e}")))?;
    let params = base_params(h, &s(&a[0]), &a[1], &a[2], i(&a[3]))?;
    let cert = params.signed_by(&key.pair, &issuer).map_err(|e| err(format!("error creating certificate: {e}")))?;
    Ok(cert_value(Certificate { cert: cert.pem(), key: key.pem }))
}

pub(super) fn register(m: &mut FuncMap) {
    reg(m, "genPrivateKey", &[Str], |h, a| {
        let key = match s(&a[0]).as_ref() {
            "" | "rsa" => rsa_key(h, 4096),
            "ecdsa" => ec_key(),
            "ed25519" => ed25519_key(),
            "dsa" => return Ok("failed to generate dsa params: DSA keys are not supported here".into()),
            other => return Ok(format!("Unknown type {other}").into()),
        };
        Ok(match key {
            Ok(k) => k.pem.into(),
            Err(e) => format!("failed to generate private key: {e}").into(),
        })
    });
    reg(m, "genCA", &[Str, Int], |h, a| {
        let key = rsa_key(h, 2048)?;
        gen_ca(h, &s(&a[0]), i(&a[1]), key)
    });
    reg(m, "genCAWithKey", &[Str, Int, Str], |h, a| {
        let key = parse_key(&s(&a[2])).map_err(|e| err(format!("parsing private key: {e}")))?;
        gen_ca(h, &s(&a[0]), i(&a[1]), key)
    });
    reg(m, "genSelfSignedCert", &[Str, List, List, Int], |h, a| {
        let key = rsa_key(h, 2048)?;
        gen_self_signed(h, a, key)
    });
    reg(m, "genSelfSignedCertWithKey", &[Str, List, List, Int, Str], |h, a| {
        let key = parse_key(&s(&a[4])).map_err(|e| err(format!("parsing private key: {e}")))?;
        gen_self_signed(h, a, key)
    });
    reg(m, "genSignedCert", &[Str, List, List, Int, Any], |h, a| {
        let key = rsa_key(h, 2048)?;
        gen_signed(h, a, key)
    });
    reg(m, "genSignedCertWithKey", &[Str, List, List, Int, Any, Str], |h, a| {
        let key = parse_key(&s(&a[5])).map_err(|e| err(format!("parsing private key: {e}")))?;
        gen_signed(h, a, key)
    });
    reg(m, "buildCustomCert", &[Str, Str], |_, a| {
        let cert = base64::engine::general_purpose::STANDARD
            .decode(s(&a[0]).as_bytes())
            .map_err(|_| err("unable to decode base64 certificate"))?;
        let key = base64::engine::general_purpose::STANDARD
            .decode(s(&a[1]).as_bytes())
            .map_err(|_| err("unable to decode base64 private key"))?;
        let cert = String::from_utf8_lossy(&cert).into_owned();
        let key = String::from_utf8_lossy(&key).into_owned();
        let block = pem::parse(cert.trim_start()).map_err(|_| err("unable to decode certificate"))?;
        x509_parser::parse_x509_certificate(block.contents())
            .map_err(|e| err(format!("error parsing certificate: decodedCert.Bytes: {e}")))?;
        parse_key(&key).map_err(|e| err(format!("error parsing private key: {e}")))?;
        Ok(cert_value(Certificate { cert, key }))
    });
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use super::*;

    fn field(v: &Value, f: &str) -> String {
        match v {
            Value::Object(o) => super::super::strval(&o.field(f).expect("field")),
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn ca_and_signed_certificates() {
        let ca = call("genCA", &[st("my-ca"), Value::Int(365)]).expect("genCA");
        assert_eq!(ca.type_name(), "sprig.certificate");
        assert!(field(&ca, "Cert").starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert!(field(&ca, "Key").starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
        let cert = call(
            "genSignedCert",
            &[
                st("svc.ns"),
                li(vec![st("10.0.0.1")]),
                li(vec![st("svc"), st("svc.ns.svc")]),
                Value::Int(30),
                ca.clone(),
            ],
        )
        .expect("genSignedCert");
        let pem_text = field(&cert, "Cert");
        let block = pem::parse(&pem_text).expect("pem");
        let (_, x) = x509_parser::parse_x509_certificate(block.contents()).expect("x509");
        assert_eq!(x.subject().to_string(), "CN=svc.ns");
        assert_eq!(x.issuer().to_string(), "CN=my-ca");
        let days = (x.validity().not_after.timestamp() - x.validity().not_before.timestamp()) / 86_400;
        assert_eq!(days, 30);
        let self_signed = call("genSelfSignedCert", &[st("x"), Value::Nil, Value::Nil, Value::Int(1)]).expect("self");
        assert!(field(&self_signed, "Cert").contains("BEGIN CERTIFICATE"));
        let b64 = |t: String| Value::str(base64::engine::general_purpose::STANDARD.encode(t));
        let custom = call("buildCustomCert", &[b64(field(&ca, "Cert")), b64(field(&ca, "Key"))]).expect("custom");
        assert_eq!(field(&custom, "Cert"), field(&ca, "Cert"));
        call("genSignedCert", &[st("y"), Value::Nil, Value::Nil, Value::Int(1), custom]).expect("signed by custom");
        assert!(
            callv("buildCustomCert", &[st("bm9wZQ=="), st("bm9wZQ==")]).starts_with("ERR unable to decode certificate")
        );
    }

    #[test]
    fn private_keys() {
        assert!(callv("genPrivateKey", &[st("ecdsa")]).starts_with("-----BEGIN EC PRIVATE KEY-----\n"));
        let ed = callv("genPrivateKey", &[st("ed25519")]);
        assert!(ed.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        assert_eq!(callv("genPrivateKey", &[st("nope")]), "Unknown type nope");
        let ec = callv("genPrivateKey", &[st("ecdsa")]);
        let ca = call("genCAWithKey", &[st("ec-ca"), Value::Int(1), st(&ec)]).expect("ec ca");
        assert_eq!(field(&ca, "Key"), ec);
        call("genCAWithKey", &[st("ed-ca"), Value::Int(1), st(&ed)]).expect("ed ca");
    }
}
