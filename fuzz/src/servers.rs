//! Hostile servers: a listener on 127.0.0.1 that logs the client in the way
//! the real server would, then answers whatever the client asks with the
//! fuzzer's bytes and hangs up. The client must end with an error or a
//! result, never a panic, a hang or memory that grows with a declared length.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use sluice_core::{BatchSource, Chunk, Error, Meter};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// How long one run may take: a client still waiting after this is a hang.
const PATIENCE: Duration = Duration::from_secs(10);

/// One runtime for every run of the process.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// Runs `client` against a server that `serve` plays on a fresh listener,
/// given the listener's port; panics when the client takes longer than
/// [`PATIENCE`] (libFuzzer reports the input as a crash).
pub fn against<S, C>(
    serve: impl FnOnce(TcpStream) -> S + Send + 'static,
    client: impl FnOnce(u16) -> C,
) where
    S: Future<Output = std::io::Result<()>> + Send + 'static,
    C: Future<Output = ()>,
{
    runtime().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let server = tokio::spawn(async move {
            if let Ok((socket, _)) = listener.accept().await {
                let _ = serve(socket).await;
            }
        });
        tokio::time::timeout(PATIENCE, client(port))
            .await
            .expect("the client hung on a hostile server");
        server.abort();
    });
}

/// Reads the whole result of `source` the way an export does (large rows in
/// pieces), up to the first error.
pub async fn drain(source: &mut impl BatchSource) -> Result<(), Error> {
    while let Some(chunk) = source.next_chunk().await? {
        if let Chunk::Rows(batch) = chunk {
            assert_eq!(batch.num_values() % batch.num_columns().max(1), 0);
        }
    }
    Ok(())
}

/// After the scripted part: sends `answer`, closes the sending side, and
/// reads (and drops) whatever the client still sends until it hangs up.
pub async fn answer_and_hang_up(mut socket: TcpStream, answer: &[u8]) -> std::io::Result<()> {
    socket.write_all(answer).await?;
    socket.shutdown().await?;
    discard(&mut socket).await
}

async fn discard(socket: &mut (impl AsyncRead + Unpin)) -> std::io::Result<()> {
    let mut sink = [0u8; 4096];
    while socket.read(&mut sink).await? > 0 {}
    Ok(())
}

/// A fresh meter per run.
pub fn meter() -> Meter {
    Meter::new()
}
