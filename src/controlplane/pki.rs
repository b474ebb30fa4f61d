//! The certificates and keys of a local control plane, as controller-runtime's envtest makes them:
//! ECDSA P-256 keys in PKCS#8; a serving CA for kube-apiserver's certificate (SANs `localhost`,
//! `127.0.0.1` and the in-cluster names); a separate key pair that signs and verifies
//! ServiceAccount tokens; a client CA whose certificates authenticate users (CN the user name, O
//! its groups). Written into one directory, mode 0600 for keys.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use super::ControlPlaneError;

/// A certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct CertKey {
    pub cert: String,
    pub key: String,
}

/// Everything the control plane's processes and clients need.
#[derive(Debug)]
pub struct Pki {
    /// Signs kube-apiserver's serving certificate; clients trust it.
    pub serving_ca: CertKey,
    /// kube-apiserver's serving certificate.
    pub apiserver: CertKey,
    /// Signs client certificates; kube-apiserver's `--client-ca-file`.
    pub client_ca: CertKey,
    /// The ServiceAccount token signing key pair (public key PEM in `cert`).
    pub service_accounts: CertKey,
    /// `admin` in `system:masters`.
    pub admin: CertKey,
    client_issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Result<(CertKey, Issuer<'static, KeyPair>), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let cert = params.self_signed(&key)?;
    let pair = CertKey { cert: cert.pem(), key: key.serialize_pem() };
    Ok((pair, Issuer::new(params, key)))
}

/// A new CA and a serving certificate it signs for `sans` (DNS names or IP addresses): for
/// servers other than kube-apiserver that it calls (webhooks, Runtime SDK extensions).
pub fn serving_pair(ca_name: &str, sans: &[&str]) -> Result<(CertKey, CertKey), ControlPlaneError> {
    let inner = || -> Result<(CertKey, CertKey), rcgen::Error> {
        let (ca_pair, issuer) = ca(ca_name)?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name.push(DnType::CommonName, sans.first().copied().unwrap_or("localhost"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving = CertKey { cert: params.signed_by(&key, &issuer)?.pem(), key: key.serialize_pem() };
        Ok((ca_pair, serving))
    };
    inner().map_err(|e| ControlPlaneError::Certificates(e.to_string()))
}

impl Pki {
    /// Generates a new set.
    pub fn generate() -> Result<Self, ControlPlaneError> {
        Self::generate_inner().map_err(|e| ControlPlaneError::Certificates(e.to_string()))
    }

    fn generate_inner() -> Result<Self, rcgen::Error> {
        let (serving_ca, serving_issuer) = ca("clusterstack control plane serving CA")?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "kubernetes.default.svc.cluster.local".to_string(),
        ])?;
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let apiserver = CertKey { cert: params.signed_by(&key, &serving_issuer)?.pem(), key: key.serialize_pem() };

        let (client_ca, client_issuer) = ca("clusterstack control plane client CA")?;
        let sa = KeyPair::generate()?;
        let service_accounts = CertKey { cert: sa.public_key_pem(), key: sa.serialize_pem() };
        let mut pki = Self {
            serving_ca,
            apiserver,
            client_ca,
            service_accounts,
            admin: CertKey { cert: String::new(), key: String::new() },
            client_issuer,
        };
        pki.admin = pki.client_cert_inner("admin", &["system:masters"])?;
        Ok(pki)
    }

    /// A client certificate for `user` in `groups`, signed by the client CA.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<CertKey, ControlPlaneError> {
        self.client_cert_inner(user, groups).map_err(|e| ControlPlaneError::Certificates(e.to_string()))
    }

    fn client_cert_inner(&self, user: &str, groups: &[&str]) -> Result<CertKey, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, user);
        for g in groups {
            params.distinguished_name.push(DnType::OrganizationName, *g);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        Ok(CertKey { cert: params.signed_by(&key, &self.client_issuer)?.pem(), key: key.serialize_pem() })
    }

    /// Writes the files the processes read into `dir`; returns their paths.
    pub fn write(&self, dir: &Path) -> Result<PkiFiles, ControlPlaneError> {
        let files = PkiFiles {
            serving_ca: dir.join("serving-ca.crt"),
            apiserver_cert: dir.join("apiserver.crt"),
            apiserver_key: dir.join("apiserver.key"),
            client_ca: dir.join("client-ca.crt"),
            sa_public: dir.join("sa.pub"),
            sa_key: dir.join("sa.key"),
        };
        write(&files.serving_ca, &self.serving_ca.cert, false)?;
        write(&files.apiserver_cert, &self.apiserver.cert, false)?;
        write(&files.apiserver_key, &self.apiserver.key, true)?;
        write(&files.client_ca, &self.client_ca.cert, false)?;
        write(&files.sa_public, &self.service_accounts.cert, false)?;
        write(&files.sa_key, &self.service_accounts.key, true)?;
        Ok(files)
    }
}

/// Where [`Pki::write`] put each file.
#[derive(Debug, Clone)]
pub struct PkiFiles {
    pub serving_ca: PathBuf,
    pub apiserver_cert: PathBuf,
    pub apiserver_key: PathBuf,
    pub client_ca: PathBuf,
    pub sa_public: PathBuf,
    pub sa_key: PathBuf,
}

/// Writes `text` to `path`, readable by us only when `secret`.
pub(crate) fn write(path: &Path, text: &str, secret: bool) -> Result<(), ControlPlaneError> {
    use std::io::Write;
    let mut options = std::fs::File::options();
    options.create(true).write(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if secret { 0o600 } else { 0o644 });
    }
    let io = |e| ControlPlaneError::Io { path: path.to_path_buf(), source: e };
    let mut f = options.open(path).map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_certificates_name_the_user_and_groups_and_chain_to_the_client_ca() {
        let pki = Pki::generate().unwrap();
        let pem = pem::parse(&pki.admin.cert).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(pem.contents()).unwrap();
        assert_eq!(cert.subject().iter_common_name().next().unwrap().as_str().unwrap(), "admin");
        let orgs: Vec<_> = cert.subject().iter_organization().map(|o| o.as_str().unwrap()).collect();
        assert_eq!(orgs, ["system:masters"]);
        let ca_pem = pem::parse(&pki.client_ca.cert).unwrap();
        let (_, ca) = x509_parser::parse_x509_certificate(ca_pem.contents()).unwrap();
        assert!(cert.verify_signature(Some(ca.public_key())).is_ok());
        // The serving certificate is not signed by the client CA.
        let serving = pem::parse(&pki.apiserver.cert).unwrap();
        let (_, serving) = x509_parser::parse_x509_certificate(serving.contents()).unwrap();
        assert!(serving.verify_signature(Some(ca.public_key())).is_err());
    }
}
