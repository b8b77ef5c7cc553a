//! Where exported bytes go: a file or standard output, written directly.
//!
//! Rust's `Stdout` is line-buffered, which would cost a system call per NDJSON row;
//! sluice writes standard output through a duplicate of its file descriptor instead,
//! in the large chunks [`sluice_core::pump`] hands over. The writes are blocking:
//! the CLI runs one export per process, so blocking a runtime worker while the pipe
//! is full is exactly the back-pressure wanted.

use std::fs::File;
use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

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

    /// A file, created or truncated.
    pub fn create(path: &std::path::Path) -> io::Result<BlockingWriter> {
        Ok(BlockingWriter {
            file: File::create(path)?,
        })
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
