//! The processes the test kit runs, whatever the database: the machinery shared
//! by the ephemeral PostgreSQL clusters (`cluster.rs`) and the ephemeral MariaDB
//! server (`mariadb/server.rs`), and the running of their command-line clients.
//!
//! It owns:
//!
//! - **who** a server runs as ([`server_user`], [`run_as`]): this process's user,
//!   or `nobody` when that is root (`initdb` refuses root; `mariadbd` would switch
//!   users itself, which clears the parent-death signal);
//! - **where** its directory goes and how that directory goes away
//!   ([`ServerDir`]): a `<prefix><pid>-*` directory of the temp dir, removed
//!   by a detached `sh` watcher once the test process and the server are gone
//!   ([`Watch`] says how the watcher knows the server is gone), and leftovers of
//!   dead processes removed by the next process that makes one;
//! - **how long** the server lives ([`spawn_server`]): spawned with
//!   `PR_SET_PDEATHSIG` from a thread that never exits, so it dies with the test
//!   process however that ends, even on `SIGKILL`;
//! - **starting** it ([`start_on_free_port`]): a free port of 127.0.0.1, retried
//!   when another process took the port in between, polled until it answers;
//! - running **setup commands** ([`run_setup`]) and **clients** fed SQL on their
//!   standard input ([`run_with_input`]) and reading their output as text
//!   ([`output_text`]), checking helper programs succeeded
//!   ([`stdout_of_success`]), and finding executables ([`find_in`]).
//!
//! What differs between the databases comes in as parameters: the directory prefix
//! and socket, the [`Watch`], the death signal, the server's name and readiness
//! check.

use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// uid and gid a server (and its setup commands) run as; `None`: this process's.
pub(crate) type RunAs = Option<(u32, u32)>;

/// Longest Unix socket path the kernel takes (`sun_path` is 108 bytes with the
/// NUL), with some room to spare.
const MAX_SOCKET_PATH: usize = 100;

/// How many ports are tried when the chosen one turns out to be taken.
const PORT_ATTEMPTS: usize = 5;

// ---------------------------------------------------------------------------
// Who the server runs as
// ---------------------------------------------------------------------------

/// Who servers run as: this process's user, or `nobody` when that is root.
pub(crate) fn server_user() -> Result<RunAs, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    lookup_user("nobody")
        .map(Some)
        .map_err(|e| format!("running as root, so the test server must run as `nobody`, but: {e}"))
}

/// Makes `cmd` run as `user` (nothing when `None`). std applies this before
/// [`spawn_server`]'s `pre_exec`, which matters: a uid change clears the
/// parent-death signal, so it has to come first.
pub(crate) fn run_as(cmd: &mut Command, user: RunAs) -> &mut Command {
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    cmd
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
// The server's directory
// ---------------------------------------------------------------------------

/// How the cleanup watcher knows that the server has stopped, so that it does not
/// pull the directory from under a server still shutting down. Paths are relative
/// to the server's directory.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Watch {
    /// Until this file is gone: the postmaster removes `postmaster.pid` on every
    /// shutdown, the immediate one its parent-death SIGQUIT asks for included.
    FileGone(&'static str),
    /// Until the process whose pid this file holds is dead (or a zombie): a
    /// SIGKILLed `mariadbd` leaves its pid file behind, so the file's presence
    /// says nothing.
    PidDead(&'static str),
    /// No server uses the directory: it goes as soon as this process is gone
    /// (test certificates, whose private keys must not outlive the tests
    /// even when a `static` holds them and no destructor runs).
    Nothing,
}

/// What a server's directory (or another directory the tests must not leave
/// behind, such as their certificates') is called and what must fit in it.
pub(crate) struct ServerDir {
    /// Name prefix, followed by `<pid>-` and a random part; how leftovers of dead
    /// processes are recognised, so every kind of directory has its own.
    pub(crate) prefix: &'static str,
    /// A Unix socket the server must be able to create in the directory (the
    /// kernel limits its path's length), if any.
    pub(crate) socket: Option<&'static str>,
    pub(crate) watch: Watch,
}

impl ServerDir {
    /// A fresh directory, owned by `user`, removed by a watcher once this process
    /// and the server are gone. Leftovers of dead processes are removed first.
    pub(crate) fn create(&self, user: RunAs) -> Result<PathBuf, String> {
        let parent = self.parent_dir(user.is_some());
        remove_stale_dirs(&parent, self.prefix);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}{}-", self.prefix, std::process::id()))
            .tempdir_in(&parent)
            .map_err(|e| format!("could not create a directory in {}: {e}", parent.display()))?
            .keep();
        // From here on the watcher removes `dir` once this process is gone.
        spawn_cleanup_watcher(&dir, self.watch);
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| format!("could not chown {} to nobody: {e}", dir.display()))?;
        }
        Ok(dir)
    }

    /// Where the directory goes: the temp dir, or `/tmp` when the server runs as
    /// `nobody` (we are root) and the temp dir is not reachable by other users
    /// (e.g. TMPDIR under /root), or when it is so deep that the socket path
    /// inside would be too long for the kernel.
    fn parent_dir(&self, as_nobody: bool) -> PathBuf {
        let temp = std::env::temp_dir();
        let reachable = !as_nobody
            || temp.ancestors().all(|dir| {
                fs::metadata(dir)
                    .map(|m| m.permissions().mode() & 0o001 != 0)
                    .unwrap_or(false)
            });
        // <temp>/<prefix><pid>-XXXXXX/<socket>
        let socket_fits = self.socket.is_none_or(|socket| {
            let inside = format!("/{}{}-XXXXXX/{socket}", self.prefix, std::process::id());
            socket_path_fits(&temp, &inside)
        });
        if (reachable && socket_fits) || !Path::new("/tmp").is_dir() {
            temp
        } else {
            PathBuf::from("/tmp")
        }
    }
}

/// Whether `dir` followed by `rest` is short enough for a Unix socket's path.
pub(crate) fn socket_path_fits(dir: &Path, rest: &str) -> bool {
    dir.as_os_str().len() + rest.len() <= MAX_SOCKET_PATH
}

/// The watcher's script: `$1` the directory, `$2` `file` or `pid` ([`Watch`]),
/// `$3` the file. It ignores the signals a terminal or test harness sends to a
/// process group (it has its own anyway), waits for EOF on its stdin (the test
/// process is gone), then at most a minute for the server, then removes `$1`.
const WATCHER_SCRIPT: &str = r#"trap '' INT HUP TERM QUIT
while read -r _; do :; done
pid=
if [ "$2" = pid ]; then pid=$(cat "$1/$3" 2>/dev/null); fi
running() {
  case "$2" in
  file) [ -e "$1/$3" ] ;;
  pid)
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
      [ "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)" != Z ]
    ;;
  *) false ;;
  esac
}
i=0
while [ "$i" -lt 600 ] && running "$@"; do
  sleep 0.1 2>/dev/null || sleep 1
  i=$((i+1))
done
rm -rf "$1"
"#;

/// Starts a detached `sh` (its own process group, so a Ctrl-C to the tests does
/// not reach it) that waits until this process is gone — EOF on a pipe whose only
/// write end this process holds, close-on-exec so no other child inherits it —
/// then until the server has stopped as `watch` says, and then removes `dir`.
/// Best effort: on failure the next process's stale cleanup removes `dir`.
fn spawn_cleanup_watcher(dir: &Path, watch: Watch) {
    let Ok((read_end, write_end)) = pipe() else {
        return;
    };
    let (mode, file) = match watch {
        Watch::FileGone(file) => ("file", file),
        Watch::PidDead(file) => ("pid", file),
        Watch::Nothing => ("none", ""),
    };
    let spawned = Command::new("/bin/sh")
        .args([
            OsStr::new("-c"),
            OsStr::new(WATCHER_SCRIPT),
            OsStr::new("sluice-testkit-cleanup"),
        ])
        .arg(dir)
        .args([mode, file])
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

/// A pipe, both ends close-on-exec: `(read end, write end)`.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array on success. Close-on-exec
    // keeps the ends out of children spawned by other threads meanwhile.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two fresh descriptors, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Removes `<prefix><pid>-*` directories in `parent` whose process is dead (their
/// watcher was killed too, or never started).
fn remove_stale_dirs(parent: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let own_pid = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
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

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// Copies `files` (source, name in `dir`, mode) into `dir`, owned by `run_as`,
/// for a server that must read them as that user (TLS certificates and keys).
pub(crate) fn install_files(
    dir: &Path,
    files: &[(&Path, &str, u32)],
    run_as: RunAs,
) -> Result<(), String> {
    for (source, name, mode) in files {
        let target = dir.join(name);
        fs::copy(source, &target).map_err(|e| {
            format!(
                "could not copy {} to {}: {e}",
                source.display(),
                target.display()
            )
        })?;
        fs::set_permissions(&target, fs::Permissions::from_mode(*mode))
            .map_err(|e| format!("could not chmod {}: {e}", target.display()))?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&target, Some(uid), Some(gid))
                .map_err(|e| format!("could not chown {}: {e}", target.display()))?;
        }
    }
    Ok(())
}

/// Spawns a server that gets `death_signal` when this process ends, however it
/// ends (on Linux; elsewhere it simply outlives a killed test process).
pub(crate) fn spawn_server(mut cmd: Command, death_signal: libc::c_int) -> io::Result<Child> {
    die_with_parent(&mut cmd, death_signal);
    spawn_from_keeper_thread(cmd)
}

/// Makes the child get `signal` when the thread that spawned it exits. `pre_exec`
/// runs after std's uid/gid change, which would otherwise clear it.
fn die_with_parent(cmd: &mut Command, signal: libc::c_int) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure only makes async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    signal as libc::c_ulong,
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
    let _ = (cmd, signal);
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` from a thread that never exits, so that PR_SET_PDEATHSIG (which is
/// tied to the spawning *thread*, otherwise possibly a short-lived test thread)
/// only fires when the whole process is gone. One thread serves every server.
fn spawn_from_keeper_thread(cmd: Command) -> io::Result<Child> {
    static KEEPER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("sluice-testkit-keeper".into())
            .spawn(move || {
                // The sender lives in a static, so this loop never ends; park just in case.
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                loop {
                    thread::park();
                }
            })
            .expect("sluice-testkit: could not start the server keeper thread");
        tx
    });
    let gone = || io::Error::other("sluice-testkit's server keeper thread is gone");
    let (reply_tx, reply_rx) = mpsc::channel();
    keeper.send((cmd, reply_tx)).map_err(|_| gone())?;
    reply_rx.recv().map_err(|_| gone())?
}

/// How to tell, while starting a server, what became of it.
pub(crate) struct Startup<'a> {
    /// The server's program name in messages (`postgres`, `mariadbd`).
    pub(crate) name: &'a str,
    /// How long it may take to answer.
    pub(crate) timeout: Duration,
    /// Its log file, quoted when it fails and searched for a taken port.
    pub(crate) log: &'a Path,
    /// Said after "exited … during startup" (e.g. that it ran as `nobody`).
    pub(crate) hint: &'a str,
}

/// Starts a server on a free port of 127.0.0.1: `spawn(port)` starts it (with a
/// fresh log), then it is polled until its port takes connections and
/// `ready(port)` succeeds. When it exits because another process took the port
/// in between, another port is tried. Returns the server and its port.
pub(crate) fn start_on_free_port(
    startup: &Startup<'_>,
    mut spawn: impl FnMut(u16) -> Result<Child, String>,
    mut ready: impl FnMut(u16) -> Result<(), String>,
) -> Result<(Child, u16), String> {
    let name = startup.name;
    let mut last_error = String::new();
    for _attempt in 0..PORT_ATTEMPTS {
        let port = free_port()?;
        let mut child = spawn(port)?;
        match wait_until_ready(&mut child, port, startup, &mut ready) {
            Ready::Yes => return Ok((child, port)),
            Ready::Exited(status) => {
                let log = log_tail(startup.log);
                last_error = format!(
                    "{name} exited with {status} during startup{}; {log}",
                    startup.hint
                );
                if !(log.contains("could not bind") || log.contains("Address already in use")) {
                    break;
                }
            }
            Ready::TimedOut(detail) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{name} did not accept connections within {:?} ({detail}); {}",
                    startup.timeout,
                    log_tail(startup.log)
                ));
            }
        }
    }
    Err(last_error)
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

/// Polls until the port takes connections and `ready` succeeds, the server exits,
/// or the startup timeout passes.
fn wait_until_ready(
    child: &mut Child,
    port: u16,
    startup: &Startup<'_>,
    ready: &mut impl FnMut(u16) -> Result<(), String>,
) -> Ready {
    let deadline = Instant::now() + startup.timeout;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut last;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ready::Exited(status),
            Ok(None) => {}
            Err(e) => {
                return Ready::TimedOut(format!(
                    "could not check the {} process: {e}",
                    startup.name
                ))
            }
        }
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => match ready(port) {
                Ok(()) => return Ready::Yes,
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

/// The last lines of a server log, introduced for an error message.
fn log_tail(path: &Path) -> String {
    const TAIL_BYTES: u64 = 8 * 1024;
    let mut bytes = Vec::new();
    let read = File::open(path).and_then(|mut file| {
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))?;
        file.read_to_end(&mut bytes)
    });
    match read {
        Ok(_) => format!(
            "end of {}:\n{}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        ),
        Err(e) => format!("could not read {}: {e}", path.display()),
    }
}

// ---------------------------------------------------------------------------
// Other commands
// ---------------------------------------------------------------------------

/// Runs a setup command (`initdb`, `mariadb-install-db`, `pg_basebackup`) to the
/// end with no input; on failure says so with its output, and `hint`.
pub(crate) fn run_setup(cmd: &mut Command, hint: &str) -> Result<(), String> {
    let program = Path::new(cmd.get_program()).display().to_string();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run {program}{hint}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{program} failed ({}){hint}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Runs a command-line client (`psql`, `mariadb`) with `input` on its standard
/// input. Returns its stdout, or a description of the failure with its stderr.
pub(crate) fn run_with_input(mut cmd: Command, input: &str) -> Result<Vec<u8>, String> {
    let program = Path::new(cmd.get_program()).display().to_string();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run {program}: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_owned();
    // Write from another thread so a large output cannot deadlock against the input.
    let writer = thread::spawn(move || {
        // The client may exit early (e.g. cannot connect): a broken pipe is not our error.
        let _ = stdin.write_all(input.as_bytes());
    });
    let output = child
        .wait_with_output()
        .map_err(|e| format!("could not wait for {program}: {e}"))?;
    let _ = writer.join();
    if output.status.success() {
        return Ok(output.stdout);
    }
    Err(format!(
        "{program} exited with {}; stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim_end()
    ))
}

/// A client's output as text with one trailing newline removed, for the
/// `query_text` helpers.
///
/// # Panics
///
/// If the output is not UTF-8 (the message names `client` and `sql`).
pub(crate) fn output_text(out: Vec<u8>, client: &str, sql: &str) -> String {
    let mut text = String::from_utf8(out).unwrap_or_else(|e| {
        panic!("sluice-testkit: {client} output is not UTF-8 for SQL:\n{sql}\n({e})")
    });
    if text.ends_with('\n') {
        text.pop();
    }
    text
}

/// The stdout of a test's helper program (a Python script, a Java program or
/// its compiler) that must succeed; panics saying `what` failed, with its stderr.
pub(crate) fn stdout_of_success(output: Output, what: &str) -> Vec<u8> {
    assert!(
        output.status.success(),
        "sluice-testkit: {what} failed with {}; stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

// ---------------------------------------------------------------------------
// Finding executables
// ---------------------------------------------------------------------------

/// The first executable `name` in `dirs`.
pub(crate) fn find_in(name: &str, dirs: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    dirs.into_iter()
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// The directories of `PATH`, in order.
pub(crate) fn path_dirs() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).collect()
}

pub(crate) fn is_executable(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
