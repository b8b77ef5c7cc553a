//! Where exported bytes go: standard output, or a file that appears complete or
//! not at all.
//!
//! Rust's `Stdout` is line-buffered, which would cost a system call per NDJSON row;
//! sluice writes standard output through a duplicate of its file descriptor instead,
//! in the large chunks [`sluice_core::pump()`] hands over. The writes are blocking:
//! the CLI runs one export per process, so blocking a runtime worker while the pipe
//! is full is exactly the back-pressure wanted.
//!
//! `--output FILE` is a [`StagedFile`]: the rows go to a temporary file beside FILE,
//! which is renamed over FILE once the export has succeeded. An export that fails
//! part-way (the server gone, Ctrl-C) never leaves whole-looking rows under FILE's
//! name, and an existing FILE stays as it was.

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tempfile::TempPath;
use tokio::io::AsyncWrite;

/// A blocking file presented as an async writer.
pub struct BlockingWriter {
    file: File,
}

impl BlockingWriter {
    /// Standard output.
    pub fn stdout() -> io::Result<BlockingWriter> {
        use std::os::fd::AsFd;
        let descriptor = io::stdout().as_fd().try_clone_to_owned()?;
        Ok(BlockingWriter {
            file: File::from(descriptor),
        })
    }

    /// Opens `--output`: a [`StagedFile`] for a regular file or a new one; anything
    /// else (a device such as `/dev/null`, a FIFO) is written directly, since it
    /// cannot be renamed over and its reader wants the bytes as they come.
    pub fn create(path: &Path) -> io::Result<(BlockingWriter, Option<Arc<StagedFile>>)> {
        let staged = match std::fs::metadata(path) {
            Ok(metadata) if metadata.is_file() => {
                // Through a symbolic link, replace the file it points to, not the link.
                StagedFile::create(&std::fs::canonicalize(path)?)?
            }
            Err(error)
                if error.kind() == io::ErrorKind::NotFound
                    && std::fs::symlink_metadata(path).is_err() =>
            {
                StagedFile::create(path)?
            }
            _ => None,
        };
        Ok(match staged {
            Some((file, staged)) => (BlockingWriter { file }, Some(Arc::new(staged))),
            None => (
                BlockingWriter {
                    file: File::create(path)?,
                },
                None,
            ),
        })
    }

    /// A new file at `path`, written directly (a part of a staged directory,
    /// which is staged as a whole).
    pub fn new_file(path: &Path) -> io::Result<BlockingWriter> {
        Ok(BlockingWriter {
            file: File::create_new(path)?,
        })
    }

    /// Makes what was written durable, so the rename that follows cannot outlive
    /// the data in a crash.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}

impl AsyncWrite for BlockingWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(self.get_mut().file.write(buffer))
    }

    fn poll_flush(self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.get_mut().file.flush())
    }

    fn poll_shutdown(self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// An output file being written under a temporary name in the target's directory
/// (so the final rename is atomic), until [`StagedFile::commit`] or
/// [`StagedFile::abandon`]. Shared with the Ctrl-C handler, which abandons it;
/// whichever comes first takes the temporary file, so it is handled once.
pub struct StagedFile {
    target: PathBuf,
    temporary: Mutex<Option<TempPath>>,
}

impl StagedFile {
    /// Creates the temporary file beside `target`, or `None` when `target` names no
    /// file (`/`, `dir/..`), which is left to fail as a plain create does.
    fn create(target: &Path) -> io::Result<Option<(File, StagedFile)>> {
        let Some(name) = target.file_name() else {
            return Ok(None);
        };
        let directory = parent_directory(target)?;
        let (file, temporary) = tempfile::Builder::new()
            .prefix(&format!(".{}.", name.to_string_lossy()))
            .suffix(".tmp")
            // As a new file gets: 0666 less the umask (the default would be 0600).
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(directory)?
            .into_parts();
        let staged = StagedFile {
            target: target.to_path_buf(),
            temporary: Mutex::new(Some(temporary)),
        };
        Ok(Some((file, staged)))
    }

    /// Where the file goes.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where `--keep-partial` keeps an incomplete file: `FILE.partial`.
    pub fn partial_path(&self) -> PathBuf {
        partial_path(&self.target)
    }

    fn take(&self) -> Option<TempPath> {
        self.temporary
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Renames the complete file over the target (atomically replacing one that
    /// exists). On failure the temporary file is removed.
    pub fn commit(&self) -> io::Result<()> {
        match self.take() {
            Some(temporary) => temporary.persist(&self.target).map_err(|error| error.error),
            None => Ok(()),
        }
    }

    /// Removes the incomplete file, or with `keep` renames it to `FILE.partial`;
    /// returns what happened, in words for the error line (`None` once committed
    /// or abandoned already).
    pub fn abandon(&self, keep: bool) -> Option<String> {
        let temporary = self.take()?;
        let target = self.target.display();
        if !keep {
            let removed = match temporary.close() {
                Ok(()) => "has been removed".to_owned(),
                Err(error) => format!("could not be removed ({error})"),
            };
            return Some(format!(
                "the output was incomplete and {removed} ({target} not written)"
            ));
        }
        let partial = self.partial_path();
        Some(match temporary.persist(&partial) {
            Ok(()) => format!(
                "the output was incomplete and is kept as {} ({target} not written)",
                partial.display()
            ),
            Err(error) => format!(
                "the output was incomplete, could not be kept as {} ({}) and has been \
                 removed ({target} not written)",
                partial.display(),
                error.error
            ),
        })
    }
}

/// The directory a staged output is written beside, so that renaming it into
/// place is atomic: `target`'s parent (`.` for a bare name). The temporary's
/// errors would name its own path, so one that is not a directory is said in
/// plain words first.
fn parent_directory(target: &Path) -> io::Result<&Path> {
    let directory = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if !std::fs::metadata(directory)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", directory.display()),
        ));
    }
    Ok(directory)
}

/// `--output-dir DIR`: one file per part, written in a temporary directory
/// beside DIR and renamed to DIR once every part has succeeded, so an engine
/// that reads a directory of parts (Spark, DuckDB, Dask) never finds some
/// parts without the others, and a failed export leaves no DIR. DIR must not
/// exist or be an empty directory: parts of an earlier export left beside new
/// ones would be read as rows of this one, and the rename replaces nothing
/// else. What it cannot replace is refused when staging, before the export
/// runs, not by the rename at its end.
pub struct StagedDirectory {
    target: PathBuf,
    temporary: Mutex<Option<PathBuf>>,
}

impl StagedDirectory {
    /// Creates the temporary directory beside `target`, after checking that
    /// the final rename can replace `target` ([`replaceable`]).
    pub fn create(target: &Path) -> io::Result<StagedDirectory> {
        let Some(name) = target.file_name() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path names no directory to create",
            ));
        };
        let parent = parent_directory(target)?;
        replaceable(target)?;
        let temporary = tempfile::Builder::new()
            .prefix(&format!(".{}.", name.to_string_lossy()))
            .suffix(".tmp")
            // As a new directory gets: 0777 less the umask (the default would be 0700).
            .permissions(Permissions::from_mode(0o777))
            .tempdir_in(parent)?
            .keep();
        Ok(StagedDirectory {
            target: target.to_path_buf(),
            temporary: Mutex::new(Some(temporary)),
        })
    }

    /// Where the directory goes.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where a part's file is written until the commit: `part-00000.EXT` in
    /// the temporary directory (`None` once committed or abandoned).
    pub fn part_path(&self, part: usize, extension: &str) -> Option<PathBuf> {
        let temporary = self.temporary.lock().unwrap_or_else(|e| e.into_inner());
        Some(temporary.as_ref()?.join(part_name(part, extension)))
    }

    fn take(&self) -> Option<PathBuf> {
        self.temporary
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Renames the complete directory to the target (over an empty one, which
    /// rename(2) replaces atomically). Each file was synced by its writer.
    pub fn commit(&self) -> io::Result<()> {
        let Some(temporary) = self.take() else {
            return Ok(());
        };
        std::fs::rename(&temporary, &self.target).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&temporary);
        })
    }

    /// Removes the incomplete directory, or with `keep` renames it to
    /// `DIR.partial`; returns what happened, in words for the error line.
    pub fn abandon(&self, keep: bool) -> Option<String> {
        let temporary = self.take()?;
        let target = self.target.display();
        if keep {
            let partial = partial_path(&self.target);
            if std::fs::rename(&temporary, &partial).is_ok() {
                return Some(format!(
                    "the output was incomplete and is kept as {} ({target} not written)",
                    partial.display()
                ));
            }
        }
        let removed = match std::fs::remove_dir_all(&temporary) {
            Ok(()) => "has been removed".to_owned(),
            Err(error) => format!("could not be removed ({error})"),
        };
        Some(format!(
            "the output was incomplete and {removed} ({target} not written)"
        ))
    }
}

/// Whether renaming a directory to `target` can succeed: nothing is there, or
/// an empty directory. A symbolic link is refused, dangling or not: rename(2)
/// does not follow it, and cannot put a directory in its place.
fn replaceable(target: &Path) -> io::Result<()> {
    let refused = |kind, words| Err(io::Error::new(kind, words));
    let found = match std::fs::symlink_metadata(target) {
        Ok(found) => found,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    if found.file_type().is_symlink() {
        return refused(
            io::ErrorKind::InvalidInput,
            "it is a symbolic link, which the directory of parts cannot replace (it is renamed \
             into place): name the directory itself, or a new one",
        );
    }
    if !found.is_dir() {
        return refused(
            io::ErrorKind::AlreadyExists,
            "it is not a directory: name a new or empty directory",
        );
    }
    if std::fs::read_dir(target)?.next().is_some() {
        return refused(
            io::ErrorKind::AlreadyExists,
            "the directory is not empty (its files would be read as parts of this export): \
             name a new or empty directory",
        );
    }
    Ok(())
}

/// Where `--keep-partial` keeps an incomplete output: `FILE.partial`, or
/// `DIR.partial`.
fn partial_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    target.with_file_name(name)
}

/// A part's file name: `part-00000.parquet`, numbered from 0 as Spark and
/// Hive name the parts of a directory, so they sort in part order.
fn part_name(part: usize, extension: &str) -> String {
    format!("part-{part:05}.{extension}")
}
