//! Stamps the binary with the commit it was built from and the build date, for
//! `sluice --version`: a bug report then names the exact code. Outside a git
//! checkout (a source tarball) the commit is `unknown`; `SOURCE_DATE_EPOCH`
//! fixes the date for reproducible builds.

use std::process::Command;

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SLUICE_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=SLUICE_BUILD_DATE={}", build_date());
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit (HEAD moving, or the branch it names) stamps again.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(reference) = git(&["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={reference}");
        }
    }
}

/// A git command's output, trimmed; `None` without git or a checkout.
fn git(arguments: &[&str]) -> Option<String> {
    let output = Command::new("git").args(arguments).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The UTC date of `SOURCE_DATE_EPOCH`, or of now, as `YYYY-MM-DD`, from
/// `date(1)`: a build script has no calendar of its own, and sluice-core's
/// would have to be built for the host first.
fn build_date() -> String {
    let mut command = Command::new("date");
    command.arg("-u");
    if let Ok(epoch) = std::env::var("SOURCE_DATE_EPOCH") {
        command.arg("-d").arg(format!("@{epoch}"));
    }
    command
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
