//! Ephemeral PostgreSQL clusters: `initdb` into a temporary directory, `postgres` on
//! a free port of 127.0.0.1, stopped when their owner is done with them.
//!
//! The shared server of a test process is one of these (see the crate docs); a test
//! that needs server settings of its own (a small `max_connections`, `pg_hba.conf`
//! lines for an authentication method, TLS files) starts a dedicated one with
//! [`ClusterBuilder`] and drops it when done.

use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::{run_psql, PSQL_NOT_FOUND};

/// Prefix of the ephemeral clusters' directories in the temp dir.
const DIR_PREFIX: &str = "sluice-test-pg-";
/// Database created in every ephemeral cluster.
pub(crate) const TEST_DATABASE: &str = "sluice_test";
/// How long an ephemeral server may take to accept connections.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many ports are tried when the chosen one turns out to be taken.
const PORT_ATTEMPTS: usize = 5;

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
            // SIGQUIT is PostgreSQL's immediate shutdown: no checkpoint, children stop.
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(postmaster.id() as libc::pid_t, libc::SIGQUIT) };
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

/// Who the cluster runs as: this process's user, or `nobody` when that is root
/// (`initdb` refuses to run as root).
fn cluster_user() -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    lookup_user("nobody")
        .map(Some)
        .map_err(|e| format!("running as root, so the test cluster must run as `nobody`, but: {e}"))
}

fn start_cluster(
    settings: &[(String, String)],
    hba_lines: &[String],
    tls: Option<&TlsFiles>,
) -> Result<Cluster, String> {
    let (initdb, postgres) =
        find_server_binaries().ok_or_else(|| SERVER_BINARIES_NOT_FOUND.to_owned())?;
    let psql = find_binary("psql", postgres.parent()).ok_or_else(|| PSQL_NOT_FOUND.to_owned())?;
    let run_as = cluster_user()?;
    let root_hint = if run_as.is_some() {
        " (running as root, the cluster is run as `nobody`, which must be able to reach its directory)"
    } else {
        ""
    };
    let dir = make_cluster_dir(run_as)?;
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
    let run_as = cluster_user()?;
    let dir = make_cluster_dir(run_as)?;
    let data = dir.join("data");
    let mut command = Command::new(&basebackup);
    command
        .arg("-D")
        .arg(&data)
        .args(["-R", "-X", "stream", "--checkpoint=fast", "--no-sync"])
        .args(["-h", "127.0.0.1", "-U", "postgres"])
        .args(["-p", &primary.port.to_string()])
        .current_dir(&dir)
        .stdin(Stdio::null());
    if let Some((uid, gid)) = run_as {
        command.uid(uid).gid(gid);
    }
    let output = command
        .output()
        .map_err(|e| format!("could not run {}: {e}", basebackup.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            basebackup.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
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

/// A fresh cluster directory, removed by a watcher once this process is gone.
fn make_cluster_dir(run_as: Option<(u32, u32)>) -> Result<PathBuf, String> {
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
    Ok(dir)
}

fn run_initdb(
    initdb: &Path,
    dir: &Path,
    data: &Path,
    run_as: Option<(u32, u32)>,
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
    .current_dir(dir)
    .stdin(Stdio::null());
    if let Some((uid, gid)) = run_as {
        cmd.uid(uid).gid(gid);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("could not run {}{root_hint}: {e}", initdb.display()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{} failed ({}){root_hint}:\n{}{}",
        initdb.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Copies the TLS files into the data directory, owned by the server's user
/// (the server refuses a key others may read).
fn install_tls_files(
    data: &Path,
    tls: &TlsFiles,
    run_as: Option<(u32, u32)>,
) -> Result<(), String> {
    for (source, name, mode) in [
        (&tls.certificate, "server.crt", 0o644),
        (&tls.key, "server.key", 0o600),
        (&tls.ca, "root.crt", 0o644),
    ] {
        let target = data.join(name);
        fs::copy(source, &target).map_err(|e| {
            format!(
                "could not copy {} to {}: {e}",
                source.display(),
                target.display()
            )
        })?;
        fs::set_permissions(&target, fs::Permissions::from_mode(mode))
            .map_err(|e| format!("could not chmod {}: {e}", target.display()))?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&target, Some(uid), Some(gid))
                .map_err(|e| format!("could not chown {}: {e}", target.display()))?;
        }
    }
    Ok(())
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
    run_as: Option<(u32, u32)>,
    root_hint: &'a str,
    /// A standby: its databases come from the primary.
    standby: bool,
}

impl Launch<'_> {
    /// Starts the postmaster on a free port (retrying when the port was taken in
    /// between) and creates the test database.
    fn start(&self) -> Result<Cluster, String> {
        let log_path = self.dir.join("server.log");
        let mut last_error = String::new();
        for _attempt in 0..PORT_ATTEMPTS {
            let port = free_port()?;
            let mut child = self.spawn(port, &log_path)?;
            let admin_url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
            match wait_until_ready(&mut child, port, self.psql, &admin_url) {
                Ready::Yes => return self.finish(child, port, &admin_url),
                Ready::Exited(status) => {
                    let log = read_log(&log_path);
                    last_error = format!(
                        "postgres exited with {status} during startup{}; server log:\n{log}",
                        self.root_hint
                    );
                    if !(log.contains("could not bind") || log.contains("Address already in use")) {
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

    fn spawn(&self, port: u16, log_path: &Path) -> Result<Child, String> {
        let log = File::create(log_path)
            .map_err(|e| format!("could not create {}: {e}", log_path.display()))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("could not dup log file: {e}"))?;
        // Unix sockets are not needed (clients use TCP); skip them if the path is too long.
        let socket_dir = if self.dir.as_os_str().len() + "/.s.PGSQL.65535.lock".len() < 100 {
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
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid);
        }
        die_with_parent(&mut cmd);
        spawn_from_keeper_thread(cmd)
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
pub(crate) fn find_binary(name: &str, preferred: Option<&Path>) -> Option<PathBuf> {
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
