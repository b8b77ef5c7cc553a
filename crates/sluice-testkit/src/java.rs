//! Java programs as real clients: a test's source is compiled with `javac` into
//! a temporary directory and run with `java`, both with pgjdbc on the class
//! path (Debian's `libpostgresql-jdbc-java`, [`JDBC_JAR`]), so the proxy's tests
//! can watch the round trips of the JDBC driver most Java applications use.
//!
//! Nothing is skipped: without a JDK or the driver the tests panic saying what
//! to install (CI's `.ci/run` installs both when they are missing).

use std::path::Path;
use std::process::Command;

use tempfile::TempDir;

use crate::process::stdout_of_success;

/// Where Debian's `libpostgresql-jdbc-java` puts pgjdbc.
pub const JDBC_JAR: &str = "/usr/share/java/postgresql.jar";

/// What to install when something is missing.
const INSTALL_HINT: &str = "install it (Debian/Ubuntu: apt-get install default-jdk-headless \
     libpostgresql-jdbc-java)";

/// A compiled Java program: one public class with a `main`.
#[derive(Debug)]
pub struct JavaProgram {
    /// Holds the source and its classes (removed on drop).
    directory: TempDir,
    class: String,
}

impl JavaProgram {
    /// Compiles `source`, whose public class is `class`, against pgjdbc.
    ///
    /// # Panics
    ///
    /// If `javac` or the driver is missing, or the source does not compile
    /// (with javac's messages).
    pub fn compile(class: &str, source: &str) -> JavaProgram {
        assert!(
            Path::new(JDBC_JAR).exists(),
            "sluice-testkit: pgjdbc ({JDBC_JAR}) not found: {INSTALL_HINT}"
        );
        let directory = tempfile::tempdir().expect("a temporary directory");
        let file = directory.path().join(format!("{class}.java"));
        std::fs::write(&file, source).expect("the Java source written");
        let output = Command::new("javac")
            .args(["-cp", JDBC_JAR, "-d"])
            .arg(directory.path())
            .arg(&file)
            .output()
            .unwrap_or_else(|e| panic!("sluice-testkit: cannot run javac ({e}): {INSTALL_HINT}"));
        stdout_of_success(output, "javac");
        JavaProgram {
            directory,
            class: class.to_owned(),
        }
    }

    /// Runs the program with `args` and returns what it printed.
    ///
    /// # Panics
    ///
    /// If `java` cannot be started or the program fails (with its stderr).
    pub fn run(&self, args: &[&str]) -> Vec<u8> {
        let class_path = format!("{}:{JDBC_JAR}", self.directory.path().display());
        let output = Command::new("java")
            .args(["-cp", &class_path, &self.class])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("sluice-testkit: cannot run java ({e}): {INSTALL_HINT}"));
        stdout_of_success(output, "the Java program")
    }
}

/// The pgjdbc URL for a `postgres://user[:password]@host:port/database?…`
/// URL: pgjdbc takes no credentials before the host, so they become `user` and
/// `password` parameters; the other parameters (`sslmode`, `options`) are
/// pgjdbc's too, and it decodes them as libpq does.
///
/// # Panics
///
/// If `url` has no `://`.
pub fn jdbc_url(url: &str) -> String {
    let (_, rest) = url.split_once("://").expect("a URL with a scheme");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(end);
    let (credentials, host_port) = authority.rsplit_once('@').unwrap_or(("", authority));
    let mut parameters = Vec::new();
    if !credentials.is_empty() {
        let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
        parameters.push(format!("user={user}"));
        if !password.is_empty() {
            parameters.push(format!("password={password}"));
        }
    }
    let (path, query) = after.split_once('?').unwrap_or((after, ""));
    parameters.extend(
        query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(str::to_owned),
    );
    let separator = if parameters.is_empty() { "" } else { "?" };
    format!(
        "jdbc:postgresql://{host_port}{path}{separator}{}",
        parameters.join("&")
    )
}

#[cfg(test)]
mod tests {
    use super::jdbc_url;

    #[test]
    fn credentials_become_parameters_and_the_others_stay() {
        assert_eq!(
            jdbc_url(
                "postgres://me:s%40cret@127.0.0.1:6432/test?sslmode=disable&options=-c%20x%3D1"
            ),
            "jdbc:postgresql://127.0.0.1:6432/test?user=me&password=s%40cret\
             &sslmode=disable&options=-c%20x%3D1"
        );
        assert_eq!(
            jdbc_url("postgresql://localhost/db"),
            "jdbc:postgresql://localhost/db"
        );
    }
}
