//! A real MariaDB server for tests, with one fresh database per test: the shared
//! server of the test process ([`mariadb_server_url`]) and [`TestMariaDb`].
//!
//! The server is `SLUICE_TEST_MARIADB_URL` or an ephemeral one (`server.rs`,
//! kept alive and cleaned up by `crate::process`, as the PostgreSQL clusters
//! are); see the [crate documentation](crate) for how it is chosen and how long
//! it lives.

mod client;
mod server;
mod url;

use std::sync::OnceLock;

use self::url::Endpoint;

/// Environment variable naming an existing server to use instead of an ephemeral one.
const ENV_URL: &str = "SLUICE_TEST_MARIADB_URL";

/// The shared server of this test process.
struct Server {
    /// `SLUICE_TEST_MARIADB_URL`, or the ephemeral server's URL (no database).
    url: String,
    /// The server itself, with no database selected, for creating and dropping
    /// the tests' databases (the URL's database may not even exist).
    admin: Endpoint,
    /// The `mariadb` client binary used for all SQL helpers.
    client: std::path::PathBuf,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// The shared server, started on first use. A failure to get one is remembered and
/// reported (by a panic) to every caller, so it is only attempted once per process.
fn shared_server() -> &'static Server {
    match SERVER.get_or_init(init_server) {
        Ok(server) => server,
        Err(message) => panic!("sluice-testkit: no MariaDB server for tests: {message}"),
    }
}

fn init_server() -> Result<Server, String> {
    match std::env::var(ENV_URL) {
        Ok(url) if !url.trim().is_empty() => external_server(url.trim().to_owned()),
        _ => {
            // The handle is dropped: the shared server runs until the process ends.
            let ephemeral = server::start(None)?;
            server_at(ephemeral.url, ephemeral.client)
        }
    }
}

/// The server named by `SLUICE_TEST_MARIADB_URL`, checked to be reachable.
fn external_server(url: String) -> Result<Server, String> {
    let client = server::find_client()?;
    let server = server_at(url, client).map_err(|e| format!("{ENV_URL}: {e}"))?;
    client::run(&server.client, &server.admin, &[], "SELECT 1;")
        .map_err(|e| format!("{ENV_URL} is set but its server cannot be used: {e}"))?;
    Ok(server)
}

fn server_at(url: String, client: std::path::PathBuf) -> Result<Server, String> {
    let mut admin = url::parse(&url)?;
    admin.database = None;
    Ok(Server { url, admin, client })
}

/// URL of the shared MariaDB server itself (no database of a test), starting it
/// if needed.
///
/// This is `SLUICE_TEST_MARIADB_URL` when that is set, otherwise
/// `mariadb://sluice:sluice@127.0.0.1:<port>` (no database) of the ephemeral
/// server, whose `sluice` user has every privilege. Prefer [`TestMariaDb::url`]
/// in tests.
///
/// # Panics
///
/// If no server can be had (see the [crate documentation](crate)).
pub fn mariadb_server_url() -> &'static str {
    &shared_server().url
}

/// A fresh, empty database on a real MariaDB server, dropped on Drop (best
/// effort, errors ignored).
///
/// See the [crate documentation](crate) for how the server is chosen.
#[derive(Debug)]
pub struct TestMariaDb {
    name: String,
    url: String,
    endpoint: Endpoint,
}

impl TestMariaDb {
    /// Creates a new database named like `t_<pid>_<counter>_<short random>` on the
    /// shared server, with the utf8mb4 character set whatever the server's default.
    ///
    /// # Panics
    ///
    /// If no server can be had, or the database cannot be created.
    #[allow(clippy::new_without_default)] // creating a database is a side effect, not a default
    pub fn new() -> TestMariaDb {
        let server = shared_server();
        let name = crate::names::unique_name();
        let sql = format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4;");
        if let Err(failure) = client::run(&server.client, &server.admin, &[], &sql) {
            panic!("sluice-testkit: could not create MariaDB database {name}: {failure}");
        }
        let url = url::with_database(&server.url, &name)
            .unwrap_or_else(|e| panic!("sluice-testkit: {e}"));
        let mut endpoint = server.admin.clone();
        endpoint.database = Some(name.clone());
        TestMariaDb {
            name,
            url,
            endpoint,
        }
    }

    /// `mariadb://user[:password]@127.0.0.1:PORT/<name>`: the server's URL with this
    /// database as its path (with `SLUICE_TEST_MARIADB_URL`, its scheme, login, host
    /// and query are kept).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs SQL in this database with `mariadb --batch --skip-column-names`.
    ///
    /// The SQL is fed to the client on its standard input, so it may hold several
    /// statements separated by `;` (and client commands such as `DELIMITER`); they
    /// run one after another, stopping at the first error.
    ///
    /// # Panics
    ///
    /// If the client fails (the message holds its stderr and the SQL).
    pub fn execute(&self, sql: &str) {
        self.run(&[], sql);
    }

    /// Runs one query with `mariadb --batch --skip-column-names --raw` and returns
    /// its output, trailing newline trimmed: columns separated by tabs, rows by
    /// newlines, values unescaped (`--raw`), NULL printed as `NULL`.
    ///
    /// # Panics
    ///
    /// Like [`TestMariaDb::execute`], or if the output is not UTF-8.
    pub fn query_text(&self, sql: &str) -> String {
        crate::process::output_text(self.run(&["--raw"], sql), "mariadb", sql)
    }

    /// A `mariadb` client connected to this database that reads SQL from its
    /// piped standard input and runs it as it comes, for tests that hold a
    /// session open (a transaction, a lock) while something else happens.
    /// Its output goes nowhere; it ends when its standard input closes.
    ///
    /// # Panics
    ///
    /// If the client cannot be started.
    pub fn open_session(&self) -> std::process::Child {
        let server = shared_server();
        client::command(&server.client, &self.endpoint, &[])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("sluice-testkit: starting the mariadb client: {error}"))
    }

    fn run(&self, extra_args: &[&str], sql: &str) -> Vec<u8> {
        let server = shared_server();
        client::run(&server.client, &self.endpoint, extra_args, sql).unwrap_or_else(|failure| {
            panic!(
                "sluice-testkit: SQL failed in MariaDB database {}: {failure}\n--- SQL ---\n{sql}",
                self.name
            )
        })
    }
}

/// A MariaDB server of a test's own, serving TLS with generated certificates
/// (the shared server has none), stopped when dropped. Starting one takes a few
/// seconds (`mariadb-install-db`), so a test file shares one among its tests.
#[derive(Debug)]
pub struct MariaDbServer {
    url: String,
    port: u16,
    client: std::path::PathBuf,
    root: Endpoint,
    process: std::process::Child,
}

impl MariaDbServer {
    /// Starts a server with `certificates`' server certificate and key, which
    /// checks client certificates (`REQUIRE X509` users) against their CA. It
    /// accepts plain connections too.
    ///
    /// # Panics
    ///
    /// If the binaries are missing (the message names the packages) or the
    /// server does not start.
    pub fn start_tls(certificates: &crate::TestCertificates) -> MariaDbServer {
        let server = certificates.server();
        let ca = certificates.ca();
        let tls = server::ServerTls {
            certificate: &server.certificate,
            key: &server.key,
            ca: &ca,
        };
        match server::start(Some(&tls)) {
            Ok(ephemeral) => MariaDbServer {
                url: ephemeral.url,
                port: ephemeral.port,
                client: ephemeral.client,
                root: ephemeral.root,
                process: ephemeral.process,
            },
            Err(message) => panic!("sluice-testkit: could not start a MariaDB server: {message}"),
        }
    }

    /// `mariadb://sluice:sluice@127.0.0.1:<port>` (no database): a user with
    /// every privilege.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The TCP port of 127.0.0.1 the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mariadb://sluice:sluice@/?socket=<path>`: the same user through the
    /// server's Unix-domain socket.
    pub fn socket_url(&self) -> String {
        match &self.root.target {
            url::Target::Socket(path) => format!("mariadb://sluice:sluice@/?socket={path}"),
            url::Target::Tcp(..) => unreachable!("the root endpoint is the socket"),
        }
    }

    /// Runs SQL as the server's `root` (through its socket), as
    /// [`TestMariaDb::execute`] does.
    ///
    /// # Panics
    ///
    /// If the client fails.
    pub fn execute(&self, sql: &str) {
        if let Err(failure) = client::run(&self.client, &self.root, &[], sql) {
            panic!(
                "sluice-testkit: SQL failed on the MariaDB server: {failure}\n--- SQL ---\n{sql}"
            );
        }
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Drop for TestMariaDb {
    fn drop(&mut self) {
        if let Some(Ok(server)) = SERVER.get() {
            drop_database(server, &self.name);
        }
    }
}

/// Drops database `name` even while sessions the test left open hold
/// metadata locks in it.
///
/// The test is over, but its sessions may not be (a server's pooled
/// connection still ending a transaction), and DROP DATABASE would wait for
/// their locks for `lock_wait_timeout`, a year by default; a
/// `#[tokio::test]` runs those sessions' tasks on the very thread this drop
/// blocks, so they would never end. So the sessions using the database are
/// killed first (where this account may), and a lock taken in the meantime
/// is waited for a few seconds at a time.
fn drop_database(server: &Server, name: &str) {
    let sessions = format!(
        "SELECT id FROM information_schema.PROCESSLIST WHERE db = '{name}' AND id <> CONNECTION_ID();"
    );
    for _attempt in 0..12 {
        if let Ok(ids) = client::run(&server.client, &server.admin, &[], &sessions) {
            for id in String::from_utf8_lossy(&ids).split_whitespace() {
                let _ = client::run(
                    &server.client,
                    &server.admin,
                    &[],
                    &format!("KILL CONNECTION {id};"),
                );
            }
        }
        let sql = format!("SET SESSION lock_wait_timeout = 5; DROP DATABASE IF EXISTS `{name}`;");
        if client::run(&server.client, &server.admin, &[], &sql).is_ok() {
            return;
        }
    }
}
