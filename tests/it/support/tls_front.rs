//! TLS in front of a fake provider: certificates made in the test from a local CA, and a
//! tokio-rustls acceptor on 127.0.0.1 that terminates TLS and relays the plain bytes to a
//! [`FakeProvider`](super::fake::FakeProvider), so every scripted reply works over TLS too.
//!
//! The front counts what a certificate test needs to see: TCP connections accepted (each one a
//! handshake attempt), handshakes completed, and the SNI each client sent.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A certificate and its key, as a TLS server presents them.
pub struct ServerCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// A local certificate authority; its certificate is written to a PEM file for `tls.ca_file`.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// Path of the CA's certificate in PEM.
    pub ca_file: String,
    dir: PathBuf,
}

impl TestCa {
    /// A new CA; `tag` names its directory under the system's temporary directory.
    pub fn new(tag: &str) -> TestCa {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "switchyard-upstream-tls-{}-{tag}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "Switchyard test CA");
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, issuer.pem()).unwrap();
        TestCa {
            issuer,
            ca_file: ca_file.to_string_lossy().into_owned(),
            dir,
        }
    }

    /// A certificate for `names` (DNS names or IP addresses), signed by this CA, valid now.
    pub fn leaf(&self, names: &[&str]) -> ServerCert {
        self.sign(leaf_params(names))
    }

    /// A certificate for `names` signed by this CA that expired in 2021.
    pub fn expired_leaf(&self, names: &[&str]) -> ServerCert {
        let mut params = leaf_params(names);
        params.not_before = date_time_ymd(2020, 1, 1);
        params.not_after = date_time_ymd(2021, 1, 1);
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> ServerCert {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        ServerCert {
            chain: vec![cert.der().clone()],
            key: private_key(&key),
        }
    }

    /// Write `text` next to the CA file (for config tests of bad CA files).
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A self-signed certificate for `names`, from no CA.
pub fn self_signed(names: &[&str]) -> ServerCert {
    let key = KeyPair::generate().unwrap();
    let cert = leaf_params(names).self_signed(&key).unwrap();
    ServerCert {
        chain: vec![cert.der().clone()],
        key: private_key(&key),
    }
}

fn leaf_params(names: &[&str]) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "fake provider");
    params
}

fn private_key(key: &KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))
}

#[derive(Default)]
struct Counts {
    connections: usize,
    handshakes: usize,
    /// The SNI of each completed handshake (`None`: the client sent none).
    sni: Vec<Option<String>>,
}

#[derive(Default)]
struct Shared {
    counts: Mutex<Counts>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A TLS listener on 127.0.0.1 relaying to a plain-HTTP backend; stopped when dropped.
pub struct TlsFront {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TlsFront {
    /// Serve `cert` on 127.0.0.1:0 (listening when this returns), relaying to `backend`.
    pub fn start(cert: ServerCert, backend: SocketAddr) -> TlsFront {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(cert.chain, cert.key)
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let (tx, rx) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("tls-front-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(accept_loop(listener, acceptor, backend, thread_shared, rx));
            })
            .unwrap();
        TlsFront {
            addr,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// TCP connections accepted so far: each is one handshake attempt.
    pub fn connections(&self) -> usize {
        self.shared.lock().connections
    }

    /// Handshakes completed so far.
    pub fn handshakes(&self) -> usize {
        self.shared.lock().handshakes
    }

    /// The SNI sent in each completed handshake, in order.
    pub fn sni(&self) -> Vec<Option<String>> {
        self.shared.lock().sni.clone()
    }

    /// Block until at least `n` connections were accepted (at most 5 s) and return the count.
    pub fn wait_connections(&self, n: usize) -> usize {
        let guard = self.shared.lock();
        let (guard, _) = self
            .shared
            .changed
            .wait_timeout_while(guard, Duration::from_secs(5), |c| c.connections < n)
            .unwrap_or_else(PoisonError::into_inner);
        guard.connections
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    acceptor: TlsAcceptor,
    backend: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: oneshot::Receiver<()>,
) {
    let listener = TcpListener::from_std(listener).unwrap();
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                shared.lock().connections += 1;
                shared.changed.notify_all();
                tokio::spawn(relay(stream, acceptor.clone(), backend, Arc::clone(&shared)));
            }
        }
    }
}

/// Finish the handshake, then copy bytes both ways until either side closes.
async fn relay(stream: TcpStream, acceptor: TlsAcceptor, backend: SocketAddr, shared: Arc<Shared>) {
    let Ok(mut tls) = acceptor.accept(stream).await else {
        return;
    };
    {
        let mut counts = shared.lock();
        counts.handshakes += 1;
        let sni = tls.get_ref().1.server_name().map(str::to_string);
        counts.sni.push(sni);
    }
    shared.changed.notify_all();
    let Ok(mut plain) = TcpStream::connect(backend).await else {
        return;
    };
    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
}
