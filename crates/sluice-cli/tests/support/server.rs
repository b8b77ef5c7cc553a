//! `sluice serve` as a child process for tests: started on a free port (read back
//! from its "listening on" line), its stderr collected line by line as it comes,
//! its peak memory read from `/proc`, and killed if the test ends first. Also the
//! configuration file and `/metrics` helpers the serve tests share.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running `sluice serve`, killed if the test fails before it exits.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub address: SocketAddr,
    stderr: mpsc::Receiver<String>,
    lines: Vec<String>,
}

impl Server {
    /// Starts `sluice serve arguments… --listen 127.0.0.1:0` with `SLUICE_LOG=warn`.
    pub fn start(arguments: &[&str]) -> Server {
        Server::start_logging(arguments, "warn")
    }

    /// Starts with `SLUICE_LOG=level`; returns once it listens.
    pub fn start_logging(arguments: &[&str], level: &str) -> Server {
        Server::spawn(Server::command(arguments, level))
    }

    /// Starts with both open-files limits (soft and hard) at `limit`, as
    /// `prlimit --nofile=LIMIT` would.
    pub fn start_with_open_files(arguments: &[&str], level: &str, limit: u64) -> Server {
        use std::os::unix::process::CommandExt;
        let mut command = Server::command(arguments, level);
        // SAFETY: only setrlimit, which is async-signal-safe, runs in the child.
        unsafe {
            command.pre_exec(move || {
                let limits = libc::rlimit {
                    rlim_cur: limit as libc::rlim_t,
                    rlim_max: limit as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limits) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Server::spawn(command)
    }

    fn command(arguments: &[&str], level: &str) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command
            .arg("serve")
            .args(arguments)
            .args(["--listen", "127.0.0.1:0"])
            .env("SLUICE_LOG", level)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    fn spawn(mut command: Command) -> Server {
        let mut child = command.spawn().unwrap();
        let (sender, stderr) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = Vec::new();
        let address = loop {
            let line = stderr
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no listening line; stderr so far: {lines:#?}"));
            lines.push(line.clone());
            let listening = line
                .split_once("listening on http://")
                .or_else(|| line.split_once("listening on https://"));
            if let Some((_, rest)) = listening {
                break rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        };
        Server {
            child,
            address,
            stderr,
            lines,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        assert_eq!(unsafe { libc::kill(self.pid(), libc::SIGTERM) }, 0);
    }

    /// Sends SIGHUP.
    pub fn hang_up(&self) {
        // SAFETY: as in `terminate`.
        assert_eq!(unsafe { libc::kill(self.pid(), libc::SIGHUP) }, 0);
    }

    /// Waits for a new stderr line (one not yet collected) containing `text`, at
    /// most `limit`, and returns it.
    pub fn wait_for_line(&mut self, text: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        let mut seen = self.lines.len();
        loop {
            if let Some(line) = self.lines[seen..].iter().find(|line| line.contains(text)) {
                return line.clone();
            }
            seen = self.lines.len();
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => self.lines.push(line),
                Err(_) => panic!("no line with {text:?} within {limit:?}: {:#?}", self.lines),
            }
        }
    }

    /// Waits for the exit code, at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                started.elapsed() < limit,
                "the server did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every stderr line so far, from the first.
    pub fn lines(&mut self) -> &[String] {
        while let Ok(line) = self.stderr.try_recv() {
            self.lines.push(line);
        }
        &self.lines
    }

    /// Every stderr line, once the server has closed it (after it exited); at
    /// most `limit`.
    pub fn all_lines(&mut self, limit: Duration) -> &[String] {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => self.lines.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => return &self.lines,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("stderr still open after {limit:?}: {:#?}", self.lines)
                }
            }
        }
    }

    /// Everything written to stderr so far.
    pub fn stderr(&mut self) -> String {
        self.lines().join("\n")
    }

    /// Peak resident memory of the server process so far, in bytes (`VmHWM`, the
    /// high-water mark `wait4` would report, read while the process runs).
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status
            .lines()
            .find(|line| line.starts_with("VmHWM:"))
            .unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `text` as `sluice.toml` in `directory` and returns its path.
pub fn write_config(directory: &tempfile::TempDir, text: &str) -> String {
    let path = directory.path().join("sluice.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `text` as a TOML basic string.
pub fn quoted(text: &str) -> String {
    format!("{text:?}")
}

/// The value of the series `series` (name and labels, as `/metrics` prints them),
/// 0 while it is absent.
pub async fn metric(address: SocketAddr, series: &str) -> f64 {
    let text = reqwest::get(format!("http://{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |value| value.trim().parse().unwrap())
}

/// Polls `/metrics` until `series` has the value `want` (at most 20 s).
pub async fn wait_for_metric(address: SocketAddr, series: &str, want: f64) {
    let started = Instant::now();
    loop {
        let value = metric(address, series).await;
        if value == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{series} is {value}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
