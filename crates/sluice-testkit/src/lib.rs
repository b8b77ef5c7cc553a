//! Test support for sluice: a **real** PostgreSQL server for integration tests,
//! with one fresh schema per test.
//!
//! # Which server
//!
//! The server is chosen once per test process (the first time [`TestDb::new`] or
//! [`server_url`] is called):
//!
//! 1. If the environment variable `SLUICE_TEST_PG_URL` is set (and not empty), that
//!    `postgres://` URL is used as is. It must point at a database in which the user
//!    may create schemas.
//! 2. Otherwise an **ephemeral cluster** is created: `initdb` into a directory
//!    `sluice-test-pg-<pid>-*` under [`std::env::temp_dir`], then `postgres` is started
//!    as a child of the test process, listening on a free TCP port of `127.0.0.1` only,
//!    with durability switched off for speed. A database `sluice_test` is created in it.
//!    The binaries are looked up in `pg_config --bindir`, then the newest
//!    `/usr/lib/postgresql/*/bin`, then `PATH`. If they cannot be found the tests
//!    **panic** (they are never skipped silently): install PostgreSQL (Debian/Ubuntu:
//!    `apt-get install postgresql`) or set `SLUICE_TEST_PG_URL`.
//!
//! When the test process runs as root (`initdb` refuses to), the cluster is owned by
//! and runs as the user `nobody` (its directory then goes to `/tmp` if the temp dir is
//! not reachable by other users).
//!
//! # Lifetime of the ephemeral server
//!
//! On Linux the postmaster is started with `PR_SET_PDEATHSIG = SIGQUIT` from a
//! dedicated thread that never exits, so it shuts down (immediately) as soon as the
//! test process ends, however it ends — even on `SIGKILL`. A small `sh` watcher,
//! detached in its own process group, removes the cluster's directory once the test
//! process is gone and the postmaster has exited; directories left behind anyway
//! (for example if the watcher was killed too) are removed by the next test process
//! that starts an ephemeral cluster, once their owning process is dead.
//!
//! # Isolation
//!
//! Each [`TestDb`] is a new, empty schema named `t_<pid>_<counter>_<random>`; its
//! [`TestDb::url`] makes every connection use that schema as `search_path`, and the
//! schema is dropped (`CASCADE`) when the `TestDb` is dropped. Tests of one process
//! run in parallel threads and share one server; everything here is thread-safe.
//!
//! SQL helpers ([`TestDb::execute`], [`TestDb::query_text`], [`TestDb::psql_bytes`])
//! run the `psql` command-line client, which must therefore be installed too.
//!
//! # Example
//!
//! ```no_run
//! use sluice_testkit::TestDb;
//!
//! let db = TestDb::new();
//! db.execute("create table t (id int, name text); insert into t values (1, 'a'), (2, 'b');");
//! assert_eq!(db.query_text("select count(*) from t"), "2");
//! let csv = db.psql_bytes("copy (select id, name from t order by id) to stdout with (format csv)");
//! assert_eq!(csv, b"1,a\n2,b\n");
//! // `db.url()` is what the code under test connects to.
//! assert!(db.url().contains("search_path"));
//! ```

#![warn(missing_docs)]

use std::collections::hash_map::RandomState;
use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

/// Environment variable naming an existing server to use instead of an ephemeral one.
const ENV_URL: &str = "SLUICE_TEST_PG_URL";
/// Prefix of the ephemeral clusters' directories in the temp dir.
const DIR_PREFIX: &str = "sluice-test-pg-";
/// Database created in the ephemeral cluster.
const TEST_DATABASE: &str = "sluice_test";
/// How long the ephemeral server may take to accept connections.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many ports are tried when the chosen one turns out to be taken.
const PORT_ATTEMPTS: usize = 5;

const SERVER_BINARIES_NOT_FOUND: &str = "PostgreSQL server binaries (initdb, postgres) not found: \
     install them (Debian/Ubuntu: apt-get install postgresql) or set SLUICE_TEST_PG_URL";
const PSQL_NOT_FOUND: &str = "psql (the PostgreSQL client) not found: install it \
     (Debian/Ubuntu: apt-get install postgresql-client) or put it on PATH";

/// The shared server of this test process.
struct Server {
    /// URL of the server's test database, without schema options.
    url: String,
    /// The `psql` binary used for all SQL helpers.
    psql: PathBuf,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// The shared server, started on first use. A failure to get one is remembered and
/// reported (by a panic) to every caller, so it is only attempted once per process.
fn server() -> &'static Server {
    match SERVER.get_or_init(init_server) {
        Ok(server) => server,
        Err(message) => panic!("sluice-testkit: no PostgreSQL server for tests: {message}"),
    }
}

/// URL of the shared server itself (no schema option), starting it if needed.
///
/// This is `SLUICE_TEST_PG_URL` when that is set, otherwise
/// `postgres://postgres@127.0.0.1:<port>/sluice_test` of the ephemeral cluster.
/// Connections made with it use the server's default `search_path`; prefer
/// [`TestDb::url`] in tests.
///
/// # Panics
///
/// If no server can be had (see the [crate documentation](crate)).
pub fn server_url() -> &'static str {
    &server().url
}

/// A fresh, empty schema on a real PostgreSQL server, dropped (CASCADE) on Drop (best effort, errors ignored).
///
/// See the [crate documentation](crate) for how the server is chosen.
#[derive(Debug)]
pub struct TestDb {
    schema: String,
    url: String,
    pgoptions: String,
    /// Roles made by [`TestDb::create_role`], dropped after the schema.
    roles: std::sync::Mutex<Vec<String>>,
}

/// A login role made for one test by [`TestDb::create_role`].
#[derive(Debug, Clone)]
pub struct TestRole {
    /// The role's name (unique in the cluster).
    pub name: String,
    /// Like [`TestDb::url`] (same server, database and `search_path`), logging in as this role.
    pub url: String,
}

impl TestDb {
    /// Creates a new schema named like `t_<pid>_<counter>_<short random>` on the shared server.
    ///
    /// # Panics
    ///
    /// If no server can be had, or the schema cannot be created.
    #[allow(clippy::new_without_default)] // creating a schema is a side effect, not a default
    pub fn new() -> TestDb {
        static COUNTER: AtomicU64 = AtomicU64::new(1);
        let server = server();
        let counter = COUNTER.fetch_add(1, Ordering::Relaxed);
        let schema = format!(
            "t_{}_{}_{}",
            std::process::id(),
            counter,
            random_suffix(counter)
        );
        let sql = format!("CREATE SCHEMA {schema};");
        if let Err(failure) = run_psql(&server.psql, &server.url, None, &[], &sql) {
            panic!("sluice-testkit: could not create schema {schema}: {failure}");
        }
        TestDb {
            url: url_with_search_path(&server.url, &schema),
            pgoptions: format!("-c search_path={schema}"),
            schema,
            roles: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Creates a login role named `<schema>_<suffix>` with a random password and
    /// `USAGE` on this schema, and nothing else (no superuser, no other grants:
    /// grant what the test needs with [`TestDb::execute`]). Roles are cluster-wide,
    /// so the schema in the name keeps parallel tests apart; the role is dropped
    /// (best effort) when the `TestDb` is.
    ///
    /// # Panics
    ///
    /// If `suffix` is not lowercase letters, digits and `_`, or the role cannot be
    /// created, or the server's URL has no `user@` to replace.
    pub fn create_role(&self, suffix: &str) -> TestRole {
        assert!(
            !suffix.is_empty()
                && suffix
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "sluice-testkit: role suffix {suffix:?} must be lowercase letters, digits and _"
        );
        let name = format!("{}_{suffix}", self.schema);
        let password = format!(
            "{}{}",
            random_suffix(name.len() as u64),
            random_suffix(u64::MAX - name.len() as u64)
        );
        self.execute(&format!(
            "CREATE ROLE {name} LOGIN PASSWORD '{password}'; GRANT USAGE ON SCHEMA {} TO {name};",
            self.schema
        ));
        self.roles
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(name.clone());
        let url = url_with_user(&self.url, &name, &password).unwrap_or_else(|| {
            panic!(
                "sluice-testkit: cannot put a user into the URL {}",
                self.url
            )
        });
        TestRole { name, url }
    }

    /// postgres:// URL whose connections use this schema: it carries `options=-c search_path=<schema>` URL-encoded
    /// (e.g. postgres://user@127.0.0.1:PORT/dbname?options=-c%20search_path%3Dt_123_1_ab). Host is TCP, never a socket path.
    ///
    /// (With `SLUICE_TEST_PG_URL` the host is whatever that URL says. If that URL
    /// already has an `options` parameter, the `search_path` setting is appended to it.)
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema name.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Runs SQL through `psql -X -q -v ON_ERROR_STOP=1` with this schema as search_path (PGOPTIONS), panics with psql's stderr on failure.
    ///
    /// The SQL is fed to psql on its standard input, so it may hold several statements
    /// (and psql meta-commands); they run one after another, stopping at the first error.
    pub fn execute(&self, sql: &str) {
        self.run(&[], sql);
    }

    /// Runs SQL with psql in unaligned tuples-only mode (-A -t) and returns stdout as a String (trailing newline trimmed).
    ///
    /// Columns are separated by `|` and rows by `\n`; NULL prints as an empty string.
    /// Only one trailing newline is removed.
    ///
    /// # Panics
    ///
    /// Like [`TestDb::execute`], or if the output is not UTF-8.
    pub fn query_text(&self, sql: &str) -> String {
        let out = self.run(&["-A", "-t"], sql);
        let mut text = String::from_utf8(out).unwrap_or_else(|e| {
            panic!("sluice-testkit: psql output is not UTF-8 for SQL:\n{sql}\n({e})")
        });
        if text.ends_with('\n') {
            text.pop();
        }
        text
    }

    /// Runs SQL with psql and returns raw stdout bytes untouched (used to capture `COPY (...) TO STDOUT ...` output byte for byte).
    ///
    /// psql runs as for [`TestDb::execute`] (`-q` keeps command tags such as `COPY 2` out
    /// of the output); the client encoding is UTF8.
    pub fn psql_bytes(&self, sql: &str) -> Vec<u8> {
        self.run(&[], sql)
    }

    fn run(&self, extra_args: &[&str], sql: &str) -> Vec<u8> {
        let server = server();
        match run_psql(
            &server.psql,
            &self.url,
            Some(&self.pgoptions),
            extra_args,
            sql,
        ) {
            Ok(stdout) => stdout,
            Err(failure) => panic!(
                "sluice-testkit: SQL failed in schema {}: {failure}\n--- SQL ---\n{sql}",
                self.schema
            ),
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(Ok(server)) = SERVER.get() {
            let mut sql = format!("DROP SCHEMA IF EXISTS {} CASCADE;", self.schema);
            let roles = self
                .roles
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            for role in roles.iter() {
                sql.push_str(&format!(" DROP ROLE IF EXISTS {role};"));
            }
            let _ = run_psql(&server.psql, &server.url, None, &[], &sql);
        }
    }
}

/// `url` (`postgres://[user[:password]@]host…`) logging in as `user` with `password`.
fn url_with_user(url: &str, user: &str, password: &str) -> Option<String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let host = match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    Some(format!("postgres://{user}:{password}@{host}"))
}

/// `base` with `options=-c search_path=<schema>` (URL-encoded) added to its query
/// string, or appended to an `options` parameter it already has.
fn url_with_search_path(base: &str, schema: &str) -> String {
    let option = format!("-c%20search_path%3D{schema}");
    let (head, query) = match base.split_once('?') {
        Some((head, query)) => (head, query),
        None => (base, ""),
    };
    let mut params: Vec<String> = Vec::new();
    let mut merged = false;
    for param in query.split('&').filter(|p| !p.is_empty()) {
        if !merged && param.starts_with("options=") {
            merged = true;
            params.push(format!("{param}%20{option}"));
        } else {
            params.push(param.to_owned());
        }
    }
    if !merged {
        params.push(format!("options={option}"));
    }
    format!("{head}?{}", params.join("&"))
}

/// A short lowercase alphanumeric random string (not cryptographic).
fn random_suffix(salt: u64) -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(salt);
    hasher.write_u32(std::process::id());
    if let Ok(elapsed) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        hasher.write_u128(elapsed.as_nanos());
    }
    let mut n = hasher.finish();
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..6)
        .map(|_| {
            let c = alphabet[(n % alphabet.len() as u64) as usize] as char;
            n /= alphabet.len() as u64;
            c
        })
        .collect()
}

/// Runs `psql -X -q -w -v ON_ERROR_STOP=1 <extra_args> -d <url> -f -` with `sql` on
/// its stdin. Returns its stdout, or a description of the failure (with stderr).
fn run_psql(
    psql: &Path,
    url: &str,
    pgoptions: Option<&str>,
    extra_args: &[&str],
    sql: &str,
) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new(psql);
    cmd.args(["-X", "-q", "-w", "-v", "ON_ERROR_STOP=1"])
        .args(extra_args)
        .args(["-d", url, "-f", "-"])
        .env("PGCLIENTENCODING", "UTF8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(options) = pgoptions {
        cmd.env("PGOPTIONS", options);
    }
    if std::env::var_os("PGCONNECT_TIMEOUT").is_none() {
        cmd.env("PGCONNECT_TIMEOUT", "10");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", psql.display()))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let sql_owned = sql.to_owned();
    // Write from another thread so a large output cannot deadlock against the input.
    let writer = thread::spawn(move || {
        // psql may exit early (e.g. connection failure): a broken pipe is not our error.
        let _ = stdin.write_all(sql_owned.as_bytes());
    });
    let output = child
        .wait_with_output()
        .map_err(|e| format!("could not wait for psql: {e}"))?;
    let _ = writer.join();
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(format!(
            "psql exited with {}; stderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        ))
    }
}

// ---------------------------------------------------------------------------
// Server selection
// ---------------------------------------------------------------------------

fn init_server() -> Result<Server, String> {
    match std::env::var(ENV_URL) {
        Ok(url) if !url.trim().is_empty() => external_server(url.trim().to_owned()),
        _ => start_ephemeral(),
    }
}

/// The server named by `SLUICE_TEST_PG_URL`, checked to be reachable.
fn external_server(url: String) -> Result<Server, String> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(format!(
            "{ENV_URL} must be a postgres:// or postgresql:// URL, got {url:?}"
        ));
    }
    let psql = find_binary("psql", None).ok_or_else(|| PSQL_NOT_FOUND.to_owned())?;
    run_psql(&psql, &url, None, &[], "SELECT 1;")
        .map_err(|e| format!("{ENV_URL} is set but its server cannot be used: {e}"))?;
    Ok(Server { url, psql })
}

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

fn is_executable(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// Finds `name`: in `preferred` first, then the candidate bindirs, then PATH.
fn find_binary(name: &str, preferred: Option<&Path>) -> Option<PathBuf> {
    preferred
        .into_iter()
        .map(Path::to_path_buf)
        .chain(candidate_bindirs())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
        .or_else(|| find_in_path(name))
}

/// `initdb` and `postgres`, from the same directory when possible.
fn find_server_binaries() -> Option<(PathBuf, PathBuf)> {
    for dir in candidate_bindirs() {
        let (initdb, postgres) = (dir.join("initdb"), dir.join("postgres"));
        if is_executable(&initdb) && is_executable(&postgres) {
            return Some((initdb, postgres));
        }
    }
    Some((find_in_path("initdb")?, find_in_path("postgres")?))
}

// ---------------------------------------------------------------------------
// Ephemeral cluster
// ---------------------------------------------------------------------------

fn start_ephemeral() -> Result<Server, String> {
    let (initdb, postgres) =
        find_server_binaries().ok_or_else(|| SERVER_BINARIES_NOT_FOUND.to_owned())?;
    let psql = find_binary("psql", postgres.parent()).ok_or_else(|| PSQL_NOT_FOUND.to_owned())?;

    // SAFETY: geteuid has no preconditions.
    let run_as = if unsafe { libc::geteuid() } == 0 {
        Some(lookup_user("nobody").map_err(|e| {
            format!("running as root, so the test cluster must run as `nobody`, but: {e}")
        })?)
    } else {
        None
    };
    let parent = cluster_parent_dir(run_as.is_some());
    remove_stale_clusters(&parent);

    let dir = tempfile::Builder::new()
        .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
        .tempdir_in(&parent)
        .map_err(|e| format!("could not create a directory in {}: {e}", parent.display()))?
        .keep();
    // From here on the watcher removes `dir` once this process is gone.
    spawn_cleanup_watcher(&dir);
    if let Some((uid, gid)) = run_as {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
            .map_err(|e| format!("could not chown {} to nobody: {e}", dir.display()))?;
    }
    let root_hint = if run_as.is_some() {
        " (running as root, the cluster is run as `nobody`, which must be able to reach its directory)"
    } else {
        ""
    };

    // initdb
    let data = dir.join("data");
    let mut cmd = Command::new(&initdb);
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
    .arg(&data)
    .current_dir(&dir)
    .stdin(Stdio::null());
    if let Some((uid, gid)) = run_as {
        cmd.uid(uid).gid(gid);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("could not run {}{root_hint}: {e}", initdb.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}){root_hint}:\n{}{}",
            initdb.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }

    // Unix sockets are not needed (clients use TCP); skip them if the path is too long.
    let socket_dir = if dir.as_os_str().len() + "/.s.PGSQL.65535.lock".len() < 100 {
        dir.clone()
    } else {
        PathBuf::new()
    };
    let log_path = dir.join("server.log");
    let mut last_error = String::new();
    for _attempt in 0..PORT_ATTEMPTS {
        let port = free_port()?;
        let log = File::create(&log_path)
            .map_err(|e| format!("could not create {}: {e}", log_path.display()))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("could not dup log file: {e}"))?;
        let mut cmd = Command::new(&postgres);
        cmd.arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(&socket_dir)
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-F"])
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
            .args(["-c", "shared_buffers=128MB"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        if let Some((uid, gid)) = run_as {
            cmd.uid(uid).gid(gid);
        }
        die_with_parent(&mut cmd);
        let mut child = spawn_from_keeper_thread(cmd)
            .map_err(|e| format!("could not start {}: {e}", postgres.display()))?;
        let admin_url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        match wait_until_ready(&mut child, port, &psql, &admin_url) {
            Ready::Yes => {
                let sql = format!("CREATE DATABASE {TEST_DATABASE};");
                run_psql(&psql, &admin_url, None, &[], &sql)
                    .map_err(|e| format!("could not create database {TEST_DATABASE}: {e}"))?;
                // The child is not waited for: it lives as long as this process.
                drop(child);
                return Ok(Server {
                    url: format!("postgres://postgres@127.0.0.1:{port}/{TEST_DATABASE}"),
                    psql,
                });
            }
            Ready::Exited(status) => {
                let log = read_log(&log_path);
                last_error = format!(
                    "postgres exited with {status} during startup{root_hint}; server log:\n{log}"
                );
                let port_taken =
                    log.contains("could not bind") || log.contains("Address already in use");
                if !port_taken {
                    break;
                }
            }
            Ready::TimedOut(detail) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "postgres did not accept connections within {STARTUP_TIMEOUT:?} ({detail}); server log:\n{}",
                    read_log(&log_path)
                ));
            }
        }
    }
    Err(last_error)
}

fn read_log(path: &Path) -> String {
    let mut text = String::new();
    match File::open(path) {
        Ok(mut f) => {
            let mut bytes = Vec::new();
            let _ = f.read_to_end(&mut bytes);
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
        Err(e) => text.push_str(&format!("(could not read {}: {e})", path.display())),
    }
    text
}

/// A TCP port of 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("could not bind 127.0.0.1:0 to find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("could not get a free port: {e}"))
}

enum Ready {
    Yes,
    Exited(ExitStatus),
    TimedOut(String),
}

fn wait_until_ready(child: &mut Child, port: u16, psql: &Path, admin_url: &str) -> Ready {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut last;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ready::Exited(status),
            Ok(None) => {}
            Err(e) => return Ready::TimedOut(format!("could not check the postgres process: {e}")),
        }
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => match run_psql(psql, admin_url, None, &[], "SELECT 1;") {
                Ok(_) => return Ready::Yes,
                Err(e) => last = e,
            },
            Err(e) => last = format!("connect to {addr}: {e}"),
        }
        if Instant::now() >= deadline {
            return Ready::TimedOut(format!("last attempt: {last}"));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Makes the child get SIGQUIT (PostgreSQL's "immediate shutdown") when its parent
/// thread exits. Applied after std's uid/gid change, which would otherwise clear it.
fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure only makes async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGQUIT as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before the prctl: then nobody will signal us.
                if libc::getppid() != parent {
                    return Err(io::Error::other("parent exited during spawn"));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` from a thread that never exits, so that PR_SET_PDEATHSIG (which is
/// tied to the spawning *thread*) only fires when the whole process is gone.
fn spawn_from_keeper_thread(cmd: Command) -> io::Result<Child> {
    static KEEPER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("sluice-testkit-postgres-keeper".into())
            .spawn(move || {
                // The sender lives in a static, so this loop never ends; park just in case.
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                loop {
                    thread::park();
                }
            })
            .expect("sluice-testkit: could not start the postgres keeper thread");
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    keeper
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("postgres keeper thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("postgres keeper thread is gone"))?
}

/// Starts a detached `sh` that waits until this process is gone (EOF on a pipe whose
/// only write end this process holds, close-on-exec), then until the postmaster has
/// removed its pid file, and then removes `dir`. Best effort: on failure the next
/// run's stale cleanup removes `dir`.
fn spawn_cleanup_watcher(dir: &Path) {
    const SCRIPT: &str = r#"trap '' INT HUP TERM QUIT
while read -r _; do :; done
i=0
while [ -e "$1/data/postmaster.pid" ] && [ "$i" -lt 600 ]; do
  sleep 0.1 2>/dev/null || sleep 1
  i=$((i+1))
done
rm -rf "$1"
"#;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    // SAFETY: pipe2 just returned these two fresh descriptors, owned by nobody else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let spawned = Command::new("/bin/sh")
        .args([
            OsStr::new("-c"),
            OsStr::new(SCRIPT),
            OsStr::new("sluice-testkit-cleanup"),
        ])
        .arg(dir)
        .current_dir("/")
        .stdin(Stdio::from(read_end))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    if spawned.is_ok() {
        // Keep the write end open (and never written) for the life of the process.
        std::mem::forget(write_end);
    }
}

/// Where the cluster directory goes: the temp dir, except that when the cluster runs
/// as `nobody` (we are root) and the temp dir is not reachable by other users (e.g.
/// TMPDIR under /root), `/tmp` is used instead.
fn cluster_parent_dir(as_nobody: bool) -> PathBuf {
    let temp = std::env::temp_dir();
    if !as_nobody {
        return temp;
    }
    let reachable = temp.ancestors().all(|dir| {
        fs::metadata(dir)
            .map(|m| m.permissions().mode() & 0o001 != 0)
            .unwrap_or(false)
    });
    if reachable || !Path::new("/tmp").is_dir() {
        temp
    } else {
        PathBuf::from("/tmp")
    }
}

/// Removes `sluice-test-pg-<pid>-*` directories in `parent` whose process is dead.
fn remove_stale_clusters(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let own_pid = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest
            .split('-')
            .next()
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        if pid <= 0 || pid as u32 == own_pid {
            continue;
        }
        let is_dir = entry
            .path()
            .symlink_metadata()
            .map(|m| m.is_dir())
            .unwrap_or(false);
        if is_dir && !process_alive(pid) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

fn process_alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// uid and gid of a user, via getpwnam_r.
fn lookup_user(name: &str) -> Result<(u32, u32), String> {
    let cname = CString::new(name).map_err(|_| format!("bad user name {name:?}"))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value to be overwritten.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the duration of the call; buf's length is passed.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 {
        return Err(format!(
            "getpwnam_r({name}) failed: {}",
            io::Error::from_raw_os_error(rc)
        ));
    }
    if result.is_null() {
        return Err(format!("user {name:?} does not exist"));
    }
    Ok((pwd.pw_uid, pwd.pw_gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_path_is_added_to_urls_without_query() {
        assert_eq!(
            url_with_search_path("postgres://u@127.0.0.1:5432/db", "t_1_2_ab"),
            "postgres://u@127.0.0.1:5432/db?options=-c%20search_path%3Dt_1_2_ab"
        );
        assert_eq!(
            url_with_search_path("postgres://u@127.0.0.1:5432/db?", "s"),
            "postgres://u@127.0.0.1:5432/db?options=-c%20search_path%3Ds"
        );
    }

    #[test]
    fn search_path_is_appended_to_existing_query() {
        assert_eq!(
            url_with_search_path("postgres://u@h/db?sslmode=disable", "s"),
            "postgres://u@h/db?sslmode=disable&options=-c%20search_path%3Ds"
        );
        assert_eq!(
            url_with_search_path(
                "postgres://u@h/db?options=-c%20work_mem%3D1MB&sslmode=disable",
                "s"
            ),
            "postgres://u@h/db?options=-c%20work_mem%3D1MB%20-c%20search_path%3Ds&sslmode=disable"
        );
    }

    #[test]
    fn a_user_replaces_the_one_in_the_url() {
        assert_eq!(
            url_with_user("postgres://postgres@127.0.0.1:5432/db?options=x", "r", "pw").unwrap(),
            "postgres://r:pw@127.0.0.1:5432/db?options=x"
        );
        assert_eq!(
            url_with_user("postgresql://u:secret@h/db", "r", "pw").unwrap(),
            "postgres://r:pw@h/db"
        );
        assert_eq!(
            url_with_user("postgres://h/db", "r", "pw").unwrap(),
            "postgres://r:pw@h/db"
        );
        assert!(url_with_user("mysql://h/db", "r", "pw").is_none());
    }

    #[test]
    fn random_suffixes_are_short_identifiers() {
        let a = random_suffix(1);
        assert_eq!(a.len(), 6);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert_ne!(a, random_suffix(2));
    }
}
