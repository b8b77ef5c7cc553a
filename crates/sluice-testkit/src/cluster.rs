//! Ephemeral PostgreSQL clusters: `initdb` into a temporary directory, `postgres` on
//! a free port of 127.0.0.1, stopped when their owner is done with them.
//!
//! The shared server of a test process is one of these (see the crate docs); a test
//! that needs server settings of its own (a small `max_connections`, `pg_hba.conf`
//! lines for an authentication method, TLS files) starts a dedicated one with
//! [`ClusterBuilder`] and drops it when done.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::process::{self, RunAs, ServerDir, Startup, Watch};
use crate::psql::{run_psql, PSQL_NOT_FOUND};

/// The ephemeral clusters' directories: `sluice-test-pg-<pid>-*` in the temp dir,
/// removed once the postmaster has removed its pid file, which it does on every
/// shutdown, the immediate one included (`<dir>/data` is the data directory).
const CLUSTER_DIR: ServerDir = ServerDir {
    prefix: "sluice-test-pg-",
    // Clients use TCP; the server's socket is skipped when its path is too long.
    socket: None,
    watch: Watch::FileGone("data/postmaster.pid"),
};
/// The signal the postmaster gets when the test process ends: PostgreSQL's
/// immediate shutdown (no checkpoint; the server's children stop too).
const DEATH_SIGNAL: libc::c_int = libc::SIGQUIT;
/// Database created in every ephemeral cluster.
pub(crate) const TEST_DATABASE: &str = "sluice_test";
/// How long an ephemeral server may take to accept connections.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

const SERVER_BINARIES_NOT_FOUND: &str = "PostgreSQL server binaries (initdb, postgres) not found: \
     install them (Debian/Ubuntu: apt-get install postgresql) or set SLUICE_TEST_PG_URL";

/// Settings the shared cluster runs with: durability off for speed, room for the
/// suite's parallel tests, and as little WAL on disk as PostgreSQL allows (the
/// large-value tests write gigabytes; CI machines' disks are not always roomy).
const SHARED_SETTINGS: [(&str, &str); 8] = [
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("wal_level", "minimal"),
    ("max_wal_senders", "0"),
    ("max_wal_size", "128MB"),
    ("max_connections", "200"),
    ("shared_buffers", "128MB"),
];

/// How to start a dedicated cluster. Defaults: durability off, trust authentication
/// for every local connection, the server's other settings as `initdb` leaves them.
///
/// ```no_run
/// let cluster = sluice_testkit::ClusterBuilder::new()
///     .setting("max_connections", "3")
///     .hba_line("host all md5_user 127.0.0.1/32 md5")
///     .start();
/// cluster.execute("create role md5_user login password 'secret'");
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClusterBuilder {
    settings: Vec<(String, String)>,
    hba_lines: Vec<String>,
    tls: Option<TlsFiles>,
}

/// The files a TLS cluster serves with: its certificate and key, and the CA
/// that client certificates must be signed by.
#[derive(Debug, Clone)]
struct TlsFiles {
    certificate: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

impl ClusterBuilder {
    /// A builder with the defaults above.
    pub fn new() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// A server setting passed as `-c name=value` (later ones win).
    pub fn setting(mut self, name: &str, value: &str) -> ClusterBuilder {
        self.settings.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A `pg_hba.conf` line placed before `initdb`'s trust lines, so it takes
    /// precedence for the connections it matches.
    pub fn hba_line(mut self, line: &str) -> ClusterBuilder {
        self.hba_lines.push(line.to_owned());
        self
    }

    /// Serves TLS (`ssl = on`) with `certificates`' server certificate, and
    /// checks client certificates against its CA (for `cert` hba lines).
    pub fn tls(mut self, certificates: &crate::TestCertificates) -> ClusterBuilder {
        let server = certificates.server();
        self.tls = Some(TlsFiles {
            certificate: server.certificate,
            key: server.key,
            ca: certificates.ca(),
        });
        self
    }

    /// Starts the cluster and creates its `sluice_test` database.
    ///
    /// # Panics
    ///
    /// If the server binaries are missing or the server does not start (the message
    /// names the package to install, or holds the server log).
    pub fn start(self) -> Cluster {
        match start_cluster(&self.settings, &self.hba_lines, self.tls.as_ref()) {
            Ok(cluster) => cluster,
            Err(message) => {
                panic!("sluice-testkit: could not start a PostgreSQL cluster: {message}")
            }
        }
    }
}

/// A running ephemeral cluster. Dropping it stops the server at once (immediate
/// shutdown); its directory is removed once the postmaster is gone.
#[derive(Debug)]
pub struct Cluster {
    port: u16,
    url: String,
    psql: PathBuf,
    data: PathBuf,
    postmaster: Option<Child>,
}

impl Cluster {
    /// `postgres://postgres@127.0.0.1:<port>/sluice_test` (superuser, trust unless an
    /// hba line says otherwise for `postgres`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The TCP port of 127.0.0.1 the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory (holds `pg_hba.conf`, `postgresql.conf`).
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Runs SQL as the superuser in the `sluice_test` database.
    ///
    /// # Panics
    ///
    /// If psql fails (the message holds its stderr).
    pub fn execute(&self, sql: &str) {
        if let Err(message) = run_psql(&self.psql, &self.url, None, &["-X", "-q"], sql) {
            panic!("sluice-testkit: SQL on the dedicated cluster failed: {message}\nSQL: {sql}");
        }
    }

    /// A streaming standby of this cluster (`pg_basebackup -R`) on a port of its
    /// own; it has the same databases and roles, read-only.
    ///
    /// # Panics
    ///
    /// If `pg_basebackup` is missing or the standby does not start.
    pub fn start_standby(&self) -> Cluster {
        match start_standby(self) {
            Ok(cluster) => cluster,
            Err(message) => panic!("sluice-testkit: could not start a standby: {message}"),
        }
    }

    /// The `psql` binary found next to the server.
    pub(crate) fn psql(&self) -> &Path {
        &self.psql
    }

    /// Leaves the server running for the life of the process (the shared cluster):
    /// it still stops when the process ends, however it ends.
    pub(crate) fn keep_for_process(mut self) {
        drop(self.postmaster.take());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut postmaster) = self.postmaster.take() {
            // The same immediate shutdown as when the test process ends.
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(postmaster.id() as libc::pid_t, DEATH_SIGNAL) };
            let _ = postmaster.wait();
        }
    }
}

/// Starts the shared cluster of this test process.
pub(crate) fn start_shared() -> Result<Cluster, String> {
    let settings: Vec<(String, String)> = SHARED_SETTINGS
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    start_cluster(&settings, &[], None)
}

fn start_cluster(
    settings: &[(String, String)],
    hba_lines: &[String],
    tls: Option<&TlsFiles>,
) -> Result<Cluster, String> {
    let (initdb, postgres) =
        find_server_binaries().ok_or_else(|| SERVER_BINARIES_NOT_FOUND.to_owned())?;
    let psql = find_binary("psql", postgres.parent()).ok_or_else(|| PSQL_NOT_FOUND.to_owned())?;
    // `initdb` refuses to run as root: then the cluster runs as `nobody`.
    let run_as = process::server_user()?;
    let root_hint = if run_as.is_some() {
        " (running as root, the cluster is run as `nobody`, which must be able to reach its directory)"
    } else {
        ""
    };
    let dir = CLUSTER_DIR.create(run_as)?;
    let data = dir.join("data");
    run_initdb(&initdb, &dir, &data, run_as, root_hint)?;
    if !hba_lines.is_empty() {
        prepend_hba_lines(&data, hba_lines)?;
    }
    let mut settings = settings.to_vec();
    if let Some(tls) = tls {
        install_tls_files(&data, tls, run_as)?;
        for (name, value) in [
            ("ssl", "on"),
            ("ssl_cert_file", "server.crt"),
            ("ssl_key_file", "server.key"),
            ("ssl_ca_file", "root.crt"),
        ] {
            settings.push((name.to_owned(), value.to_owned()));
        }
    }
    let settings = settings.as_slice();
    let launch = Launch {
        postgres: &postgres,
        psql: &psql,
        dir: &dir,
        data: &data,
        settings,
        run_as,
        root_hint,
        standby: false,
    };
    launch.start()
}

fn start_standby(primary: &Cluster) -> Result<Cluster, String> {
    let (_, postgres) =
        find_server_binaries().ok_or_else(|| SERVER_BINARIES_NOT_FOUND.to_owned())?;
    let basebackup = find_binary("pg_basebackup", postgres.parent()).ok_or_else(|| {
        "pg_basebackup not found: install the PostgreSQL server package \
         (Debian/Ubuntu: apt-get install postgresql)"
            .to_owned()
    })?;
    let run_as = process::server_user()?;
    let dir = CLUSTER_DIR.create(run_as)?;
    let data = dir.join("data");
    let mut command = Command::new(&basebackup);
    command
        .arg("-D")
        .arg(&data)
        .args(["-R", "-X", "stream", "--checkpoint=fast", "--no-sync"])
        .args(["-h", "127.0.0.1", "-U", "postgres"])
        .args(["-p", &primary.port.to_string()])
        .current_dir(&dir);
    process::run_setup(process::run_as(&mut command, run_as), "")?;
    Launch {
        postgres: &postgres,
        psql: &primary.psql,
        dir: &dir,
        data: &data,
        settings: &[],
        run_as,
        root_hint: "",
        standby: true,
    }
    .start()
}

fn run_initdb(
    initdb: &Path,
    dir: &Path,
    data: &Path,
    run_as: RunAs,
    root_hint: &str,
) -> Result<(), String> {
    let mut cmd = Command::new(initdb);
    cmd.args([
        "-A",
        "trust",
        "-U",
        "postgres",
        "-E",
        "UTF8",
        "--no-locale",
        "--no-sync",
        "-D",
    ])
    .arg(data)
    .current_dir(dir);
    process::run_setup(process::run_as(&mut cmd, run_as), root_hint)
}

/// Copies the TLS files into the data directory, owned by the server's user
/// (the server refuses a key others may read).
fn install_tls_files(data: &Path, tls: &TlsFiles, run_as: RunAs) -> Result<(), String> {
    let files = [
        (tls.certificate.as_path(), "server.crt", 0o644),
        (tls.key.as_path(), "server.key", 0o600),
        (tls.ca.as_path(), "root.crt", 0o644),
    ];
    process::install_files(data, &files, run_as)
}

/// Puts `lines` at the top of `pg_hba.conf` (the first matching line wins). The file
/// keeps its owner: only its contents are rewritten.
fn prepend_hba_lines(data: &Path, lines: &[String]) -> Result<(), String> {
    let path = data.join("pg_hba.conf");
    let existing =
        fs::read_to_string(&path).map_err(|e| format!("could not read {}: {e}", path.display()))?;
    let mut text = lines.join("\n");
    text.push('\n');
    text.push_str(&existing);
    fs::write(&path, text).map_err(|e| format!("could not write {}: {e}", path.display()))
}

/// Everything needed to start the postmaster of an initialised cluster.
struct Launch<'a> {
    postgres: &'a Path,
    psql: &'a Path,
    dir: &'a Path,
    data: &'a Path,
    settings: &'a [(String, String)],
    run_as: RunAs,
    root_hint: &'a str,
    /// A standby: its databases come from the primary.
    standby: bool,
}

impl Launch<'_> {
    /// Starts the postmaster on a free port (retrying when the port was taken in
    /// between) and creates the test database.
    fn start(&self) -> Result<Cluster, String> {
        let log_path = self.dir.join("server.log");
        let admin_url = |port: u16| format!("postgres://postgres@127.0.0.1:{port}/postgres");
        let startup = Startup {
            name: "postgres",
            timeout: STARTUP_TIMEOUT,
            log: &log_path,
            hint: self.root_hint,
        };
        let (child, port) = process::start_on_free_port(
            &startup,
            |port| self.spawn(port, &log_path),
            |port| run_psql(self.psql, &admin_url(port), None, &[], "SELECT 1;").map(drop),
        )?;
        self.finish(child, port, &admin_url(port))
    }

    fn spawn(&self, port: u16, log_path: &Path) -> Result<Child, String> {
        let log = File::create(log_path)
            .map_err(|e| format!("could not create {}: {e}", log_path.display()))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("could not dup log file: {e}"))?;
        // Unix sockets are not needed (clients use TCP); skip them if the path is too long.
        let socket_dir = if process::socket_path_fits(self.dir, "/.s.PGSQL.65535.lock") {
            self.dir.to_path_buf()
        } else {
            PathBuf::new()
        };
        let mut cmd = Command::new(self.postgres);
        cmd.arg("-D")
            .arg(self.data)
            .arg("-k")
            .arg(&socket_dir)
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-F"]);
        for (name, value) in self.settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        cmd.current_dir(self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        process::run_as(&mut cmd, self.run_as);
        process::spawn_server(cmd, DEATH_SIGNAL)
            .map_err(|e| format!("could not start {}: {e}", self.postgres.display()))
    }

    fn finish(&self, child: Child, port: u16, admin_url: &str) -> Result<Cluster, String> {
        let sql = format!("CREATE DATABASE {TEST_DATABASE};");
        let cluster = Cluster {
            port,
            url: format!("postgres://postgres@127.0.0.1:{port}/{TEST_DATABASE}"),
            psql: self.psql.to_path_buf(),
            data: self.data.to_path_buf(),
            postmaster: Some(child),
        };
        if self.standby {
            return Ok(cluster);
        }
        // On failure the cluster is dropped, which stops the server.
        run_psql(self.psql, admin_url, None, &[], &sql)
            .map_err(|e| format!("could not create database {TEST_DATABASE}: {e}"))?;
        Ok(cluster)
    }
}

// ---------------------------------------------------------------------------
// Finding the server binaries
// ---------------------------------------------------------------------------

/// Directories that may hold PostgreSQL binaries, best first (PATH excluded).
fn candidate_bindirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(out) = Command::new("pg_config")
        .arg("--bindir")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    {
        if out.status.success() {
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if !dir.is_empty() {
                dirs.push(PathBuf::from(dir));
            }
        }
    }
    // Debian/Ubuntu layout: /usr/lib/postgresql/<version>/bin, newest first.
    if let Ok(entries) = fs::read_dir("/usr/lib/postgresql") {
        let mut versioned: Vec<(Vec<u64>, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let version: Option<Vec<u64>> = name.split('.').map(|p| p.parse().ok()).collect();
                version.map(|v| (v, e.path().join("bin")))
            })
            .collect();
        versioned.sort_by(|a, b| b.0.cmp(&a.0));
        dirs.extend(versioned.into_iter().map(|(_, dir)| dir));
    }
    dirs
}

/// Finds `name`: in `preferred` first, then the candidate bindirs, then PATH.
pub(crate) fn find_binary(name: &str, preferred: Option<&Path>) -> Option<PathBuf> {
    let dirs = preferred.map(Path::to_path_buf).into_iter();
    process::find_in(
        name,
        dirs.chain(candidate_bindirs()).chain(process::path_dirs()),
    )
}

/// `initdb` and `postgres`, from the same directory when possible.
fn find_server_binaries() -> Option<(PathBuf, PathBuf)> {
    for dir in candidate_bindirs() {
        let (initdb, postgres) = (dir.join("initdb"), dir.join("postgres"));
        if process::is_executable(&initdb) && process::is_executable(&postgres) {
            return Some((initdb, postgres));
        }
    }
    let in_path = |name| process::find_in(name, process::path_dirs());
    Some((in_path("initdb")?, in_path("postgres")?))
}
