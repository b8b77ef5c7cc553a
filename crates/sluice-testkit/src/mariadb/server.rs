//! The ephemeral MariaDB server: `mariadb-install-db` into a temporary directory,
//! `mariadbd` on a free port of 127.0.0.1 (as `nobody` when we are root), a
//! `sluice` user with every privilege, and the server left running for the life
//! of the test process (its lifetime and directory are `crate::process`'s
//! business, as for the PostgreSQL clusters).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::client;
use super::url::{self, Endpoint, Target};
use crate::process::{self, RunAs, ServerDir, Startup, Watch};

/// The server's socket, pid and log files, inside its directory.
const SOCKET_FILE: &str = "mysqld.sock";
const PID_FILE: &str = "mysqld.pid";
const LOG_FILE: &str = "error.log";
/// The servers' directories: `sluice-test-mariadb-<pid>-*` in the temp dir (or
/// `/tmp`, for the socket's sake), removed once the server is dead. A SIGKILLed
/// `mariadbd` leaves its pid file behind, so the watcher waits for the pid in it.
const SERVER_DIR: ServerDir = ServerDir {
    prefix: "sluice-test-mariadb-",
    socket: Some(SOCKET_FILE),
    watch: Watch::PidDead(PID_FILE),
};
/// The signal the server gets when the test process ends: its data is thrown
/// away anyway, so there is nothing to shut down cleanly.
const DEATH_SIGNAL: libc::c_int = libc::SIGKILL;
/// How long the server may take to accept connections.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// The user the tests log in as (password: the same).
const TEST_USER: &str = "sluice";

/// What to do about missing binaries, in every message about them.
pub(crate) const INSTALL_HINT: &str =
    "install them (Debian/Ubuntu: apt-get install mariadb-server mariadb-client) \
     or set SLUICE_TEST_MARIADB_URL to a server where the user may create databases";

/// InnoDB sizes given to both `mariadb-install-db` and the server, so the redo
/// log is created small instead of at 96 MiB and then resized.
const INNODB_SIZES: [&str; 2] = [
    "--innodb-buffer-pool-size=64M",
    "--innodb-log-file-size=16M",
];

/// Server settings besides the paths and the port: grants enforced (so the test
/// user's password matters), durability and the binary log off for speed, room
/// for parallel tests and big rows, `LOAD DATA LOCAL` allowed, no reverse DNS on
/// connect, and utf8mb4 as Debian's packaged server has it (the bare server's
/// default is latin1).
const SERVER_SETTINGS: [&str; 11] = [
    "--bind-address=127.0.0.1",
    "--skip-grant-tables=0",
    "--skip-name-resolve",
    "--innodb-flush-log-at-trx-commit=0",
    "--innodb-doublewrite=0",
    "--skip-log-bin",
    "--max-connections=300",
    "--local-infile=1",
    "--max-allowed-packet=1G",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
];

/// The binaries an ephemeral server needs.
pub(crate) struct Binaries {
    install_db: PathBuf,
    server: PathBuf,
    /// The `mariadb` command-line client.
    pub(crate) client: PathBuf,
}

/// A running ephemeral server.
pub(crate) struct Ephemeral {
    /// `mariadb://sluice:sluice@127.0.0.1:<port>` (no database).
    pub(crate) url: String,
    /// The TCP port of 127.0.0.1.
    pub(crate) port: u16,
    /// The `mariadb` client found next to the server.
    pub(crate) client: PathBuf,
    /// The server's `root`, through its socket.
    pub(crate) root: Endpoint,
    /// The server process: dropping the handle leaves it running (until the
    /// test process ends); killing it stops it.
    pub(crate) process: Child,
}

/// TLS files a server serves with: its certificate and key, and the CA that
/// client certificates must be signed by.
pub(crate) struct ServerTls<'a> {
    pub(crate) certificate: &'a Path,
    pub(crate) key: &'a Path,
    pub(crate) ca: &'a Path,
}

/// Starts an ephemeral server, with TLS when `tls` is given.
pub(crate) fn start(tls: Option<&ServerTls<'_>>) -> Result<Ephemeral, String> {
    let binaries = find_binaries()?;
    // As root, `mariadbd` would need `--user`, and its own switch to that user
    // would clear the parent-death signal: so it runs as `nobody` from the start.
    let run_as = process::server_user()?;
    let dir = SERVER_DIR.create(run_as)?;
    install(&binaries.install_db, &dir, run_as)?;
    let mut settings = Vec::new();
    if let Some(tls) = tls {
        let files = [
            (tls.certificate, "server.crt", 0o644),
            (tls.key, "server.key", 0o600),
            (tls.ca, "ca.crt", 0o644),
        ];
        process::install_files(&dir, &files, run_as)?;
        for (option, file) in [
            ("ssl-cert", "server.crt"),
            ("ssl-key", "server.key"),
            ("ssl-ca", "ca.crt"),
        ] {
            settings.push(format!("--{option}={}", dir.join(file).display()));
        }
    }
    let (process, port) = launch(&binaries, &dir, run_as, &settings)?;
    let url = format!("mariadb://{TEST_USER}:{TEST_USER}@127.0.0.1:{port}");
    create_test_user(&binaries.client, &dir)?;
    // The URL handed out must work as it is: check it over TCP with the password.
    let endpoint = url::parse(&url)?;
    client::run(&binaries.client, &endpoint, &[], "SELECT 1;")
        .map_err(|e| format!("the new server refuses {url}: {e}"))?;
    Ok(Ephemeral {
        url,
        port,
        client: binaries.client,
        root: root_endpoint(&dir),
        process,
    })
}

/// `mariadb-install-db` into `<dir>/data`, with a password-less `root` (the
/// `normal` method: `unix_socket` would tie root to the OS user `root`).
fn install(install_db: &Path, dir: &Path, run_as: RunAs) -> Result<(), String> {
    let mut cmd = Command::new(install_db);
    cmd.args([
        "--no-defaults",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
    ])
    .arg(format!("--datadir={}", dir.join("data").display()))
    .args(INNODB_SIZES)
    .arg("--skip-log-bin")
    // Its bootstrap server's temporary files: TMPDIR may be out of nobody's reach.
    .env("TMPDIR", dir)
    .current_dir(dir);
    let hint = if run_as.is_some() {
        " (run as nobody)"
    } else {
        ""
    };
    process::run_setup(process::run_as(&mut cmd, run_as), hint)
}

/// Starts `mariadbd` on a free port (retrying when the port was taken in between)
/// with `settings` beside the usual ones, and waits until `root` can run a
/// query through the socket. Returns the server and its port.
fn launch(
    binaries: &Binaries,
    dir: &Path,
    run_as: RunAs,
    settings: &[String],
) -> Result<(Child, u16), String> {
    let log_path = dir.join(LOG_FILE);
    let startup = Startup {
        name: "mariadbd",
        timeout: STARTUP_TIMEOUT,
        log: &log_path,
        hint: "",
    };
    let root = root_endpoint(dir);
    process::start_on_free_port(
        &startup,
        |port| {
            // Each attempt's log starts empty, so the bind check reads only its own.
            let _ = fs::remove_file(&log_path);
            spawn_server(&binaries.server, dir, port, run_as, settings)
        },
        |_| client::run(&binaries.client, &root, &[], "SELECT 1;").map(drop),
    )
}

fn spawn_server(
    server: &Path,
    dir: &Path,
    port: u16,
    run_as: RunAs,
    settings: &[String],
) -> Result<Child, String> {
    let in_dir = |name: &str| dir.join(name).display().to_string();
    let mut cmd = Command::new(server);
    // --no-defaults must come first: /etc/mysql would otherwise add its settings.
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", in_dir("data")))
        .arg(format!("--socket={}", in_dir(SOCKET_FILE)))
        .arg(format!("--pid-file={}", in_dir(PID_FILE)))
        .arg(format!("--log-error={}", in_dir(LOG_FILE)))
        .arg(format!("--tmpdir={}", dir.display()))
        .arg(format!("--port={port}"))
        .args(INNODB_SIZES)
        .args(SERVER_SETTINGS)
        .args(settings)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Not `--user=nobody`: the server's own setuid would clear PR_SET_PDEATHSIG.
    process::run_as(&mut cmd, run_as);
    process::spawn_server(cmd, DEATH_SIGNAL)
        .map_err(|e| format!("could not start {}: {e}", server.display()))
}

/// The server's `root`, password-less, through the socket in `dir`.
fn root_endpoint(dir: &Path) -> Endpoint {
    Endpoint {
        target: Target::Socket(dir.join(SOCKET_FILE).display().to_string()),
        user: Some("root".into()),
        password: None,
        database: None,
    }
}

/// Creates `sluice` (password `sluice`) for TCP (`%`) and socket (`localhost`)
/// logins, with every privilege, so tests may create databases and users.
fn create_test_user(mariadb: &Path, dir: &Path) -> Result<(), String> {
    let sql: String = ["%", "localhost"]
        .iter()
        .map(|host| {
            format!(
                "CREATE USER '{TEST_USER}'@'{host}' IDENTIFIED BY '{TEST_USER}';
                 GRANT ALL PRIVILEGES ON *.* TO '{TEST_USER}'@'{host}' WITH GRANT OPTION;\n"
            )
        })
        .collect();
    client::run(mariadb, &root_endpoint(dir), &[], &sql)
        .map(drop)
        .map_err(|e| format!("could not create the user {TEST_USER}: {e}"))
}

// ---------------------------------------------------------------------------
// Finding the binaries
// ---------------------------------------------------------------------------

/// Where the binaries are looked for after PATH: Debian puts the server in
/// /usr/sbin, which is not on every user's PATH.
const FALLBACK_DIRS: [&str; 2] = ["/usr/bin", "/usr/sbin"];

/// `mariadb-install-db`, `mariadbd` and `mariadb` (or their `mysql` names).
fn find_binaries() -> Result<Binaries, String> {
    let find = |names: &[&str]| names.iter().find_map(|name| find_binary(name));
    let install_db = find(&["mariadb-install-db", "mysql_install_db"]);
    let server = find(&["mariadbd", "mysqld"]);
    let client = find_client();
    match (install_db, server, client) {
        (Some(install_db), Some(server), Ok(client)) => Ok(Binaries {
            install_db,
            server,
            client,
        }),
        (install_db, server, client) => {
            let missing: Vec<&str> = [
                ("mariadb-install-db", install_db.is_none()),
                ("mariadbd", server.is_none()),
                ("mariadb", client.is_err()),
            ]
            .iter()
            .filter(|(_, missing)| *missing)
            .map(|(name, _)| *name)
            .collect();
            Err(format!(
                "MariaDB binaries not found ({}, looked in PATH, /usr/bin, /usr/sbin): {INSTALL_HINT}",
                missing.join(", ")
            ))
        }
    }
}

/// The `mariadb` command-line client (or `mysql`).
pub(crate) fn find_client() -> Result<PathBuf, String> {
    ["mariadb", "mysql"]
        .iter()
        .find_map(|name| find_binary(name))
        .ok_or_else(|| {
            "the mariadb command-line client was not found (looked in PATH, /usr/bin): \
             install it (Debian/Ubuntu: apt-get install mariadb-client)"
                .to_owned()
        })
}

/// `name` in PATH, then in the fallback directories.
fn find_binary(name: &str) -> Option<PathBuf> {
    let fallback = FALLBACK_DIRS.iter().map(PathBuf::from);
    process::find_in(name, process::path_dirs().into_iter().chain(fallback))
}
