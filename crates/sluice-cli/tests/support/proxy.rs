//! `sluice proxy` as a child process for tests: started on a free port (read
//! back from its first line, as is the control API's address when it has
//! one), its stderr collected line by line as it comes, stopped as Ctrl-C
//! would, and killed if the test ends first.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A running `sluice proxy`, killed if the test ends before it does.
pub struct RunningProxy {
    /// The process.
    pub child: Child,
    stderr: Receiver<String>,
    seen: Vec<String>,
}

impl RunningProxy {
    /// Starts `sluice proxy --listen 127.0.0.1:0 --upstream UPSTREAM OPTIONS…`.
    pub fn start(upstream: &str, options: &[&str]) -> RunningProxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["proxy", "--listen", "127.0.0.1:0", "--upstream", upstream])
            .args(options)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (sender, stderr) = channel();
        let pipe = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in pipe.lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        RunningProxy {
            child,
            stderr,
            seen: Vec::new(),
        }
    }

    /// Waits for a stderr line containing `text` and returns it.
    pub fn line_with(&mut self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(line) = self.seen.iter().find(|line| line.contains(text)) {
                return line.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("no line with {text:?} on stderr:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// The address clients connect to (`127.0.0.1:PORT`), from the first line.
    pub fn address(&mut self) -> String {
        let started = self.line_with("sluice proxy: ");
        started
            .strip_prefix("sluice proxy: ")
            .and_then(|rest| rest.split(' ').next())
            .expect("the listening address")
            .to_owned()
    }

    /// The control API's address (`127.0.0.1:PORT`), from its line.
    pub fn control(&mut self) -> String {
        let line = self.line_with("control API on http://");
        let rest = &line[line.find("http://").unwrap() + "http://".len()..];
        rest.split('/').next().unwrap().to_owned()
    }

    /// Stops it as Ctrl-C would and returns everything it wrote to stderr.
    pub fn stop(self) -> String {
        let (code, stderr) = self.stop_with_code();
        assert_eq!(code, Some(0), "{stderr}");
        stderr
    }

    /// Stops it as Ctrl-C would: its exit code and everything it wrote to stderr.
    pub fn stop_with_code(mut self) -> (Option<i32>, String) {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        self.seen.extend(self.stderr.iter());
        (status.code(), self.seen.join("\n"))
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
