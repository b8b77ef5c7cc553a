//! Test certificates: a CA of its own, a server certificate it signs for the
//! names asked for, and client certificates for login by certificate; all
//! generated in-process (rcgen), written as PEM files into a temporary directory.
//!
//! The directory holds private keys, so it never outlives the test process:
//! it is removed on drop, and by the test kit's cleanup watcher once the
//! process is gone when nothing drops it (a `static` holding a server and
//! its certificates for a whole test file), and a process killed outright
//! has its leftovers removed by the next one.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::process::{ServerDir, Watch};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// The certificates' directories: `sluice-test-tls-<pid>-*` in the temp dir.
const CERTIFICATES_DIR: ServerDir = ServerDir {
    prefix: "sluice-test-tls-",
    socket: None,
    watch: Watch::Nothing,
};

/// A CA with a server certificate, as PEM files.
pub struct TestCertificates {
    dir: PathBuf,
    ca: Certificate,
    ca_key: KeyPair,
}

impl std::fmt::Debug for TestCertificates {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TestCertificates")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A certificate and its private key (mode 0600), as PEM files.
#[derive(Debug, Clone)]
pub struct CertificateFiles {
    /// The certificate.
    pub certificate: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

impl TestCertificates {
    /// A new CA and a server certificate for `server_names` (host names, or IP
    /// addresses such as `127.0.0.1`).
    ///
    /// # Panics
    ///
    /// If the files cannot be written.
    pub fn generate(server_names: &[&str]) -> TestCertificates {
        let dir = CERTIFICATES_DIR
            .create(None)
            .unwrap_or_else(|error| panic!("a temporary directory for certificates: {error}"));
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "sluice test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params.self_signed(&ca_key).expect("a CA certificate");
        write(&dir.join("ca.pem"), &ca.pem(), 0o644);
        let certificates = TestCertificates { dir, ca, ca_key };
        let names: Vec<String> = server_names.iter().map(|name| (*name).to_owned()).collect();
        certificates.issue(
            "server",
            names,
            server_names.first().copied().unwrap_or("localhost"),
        );
        certificates
    }

    /// The CA's certificate: the `sslrootcert` that trusts the server.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The server's certificate and key.
    pub fn server(&self) -> CertificateFiles {
        self.files("server")
    }

    /// A client certificate for `user` (its common name), signed by the CA.
    pub fn client(&self, user: &str) -> CertificateFiles {
        self.issue(&format!("client-{user}"), Vec::new(), user)
    }

    fn files(&self, stem: &str) -> CertificateFiles {
        CertificateFiles {
            certificate: self.dir.join(format!("{stem}.crt")),
            key: self.dir.join(format!("{stem}.key")),
        }
    }

    fn issue(&self, stem: &str, names: Vec<String>, common_name: &str) -> CertificateFiles {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(names).expect("certificate parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let certificate = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("a signed certificate");
        let files = self.files(stem);
        write(&files.certificate, &certificate.pem(), 0o644);
        write(&files.key, &key.serialize_pem(), 0o600);
        files
    }
}

impl Drop for TestCertificates {
    fn drop(&mut self) {
        // Best effort: the watcher removes what this leaves.
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn write(path: &Path, text: &str, mode: u32) {
    fs::write(path, text).unwrap_or_else(|error| panic!("writing {}: {error}", path.display()));
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|error| panic!("chmod {}: {error}", path.display()));
}
