//! [`ConfigError`]: a problem of the configuration file, where it is and what
//! is wrong; every section's reader returns it.

/// A configuration problem: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {key}: {message}")]
pub struct ConfigError {
    /// The file (or a name for configuration built in memory).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The offending key, as a dotted path.
    pub key: String,
    /// What is wrong.
    pub message: String,
}
