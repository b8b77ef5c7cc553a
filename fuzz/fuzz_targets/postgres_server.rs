//! A hostile PostgreSQL server: it logs the client in honestly, then answers
//! the query's exchanges with the fuzzer's bytes (`DataRow`s with lying
//! lengths, truncated messages, unknown tags, a `RowDescription` that
//! disagrees with the rows) and hangs up. The client must end with an error
//! or a result: never a panic, a hang, or memory sized by a declared length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::servers::{against, answer_and_hang_up, drain, meter};
use sluice_fuzz::Bytes;
use sluice_postgres::{Config, Connection, QueryOptions, QueryStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One backend message.
fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut bytes = vec![tag];
    bytes.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    bytes.extend_from_slice(body);
    bytes
}

/// Reads the startup message and logs the client in: `AuthenticationOk`,
/// `BackendKeyData`, `ReadyForQuery`.
async fn log_in(socket: &mut TcpStream) -> std::io::Result<()> {
    let length = socket.read_u32().await? as usize;
    let mut startup = vec![0; length.saturating_sub(4)];
    socket.read_exact(&mut startup).await?;
    let key = [1u32.to_be_bytes(), 2u32.to_be_bytes()].concat();
    let login = [
        message(b'R', &0u32.to_be_bytes()),
        message(b'K', &key),
        message(b'Z', b"I"),
    ]
    .concat();
    socket.write_all(&login).await
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let flags = input.byte();
    let answer = input.rest().to_vec();
    let options = QueryOptions {
        fetch_size: (flags & 1 != 0).then_some(u32::from(flags >> 4) + 1),
        lob_inline: flags & 2 != 0,
        ..QueryOptions::default()
    };
    against(
        move |mut socket| async move {
            log_in(&mut socket).await?;
            answer_and_hang_up(socket, &answer).await
        },
        |port| async move {
            let config: Config = format!("postgres://fuzz@127.0.0.1:{port}/fuzz?sslmode=disable")
                .parse()
                .expect("a valid URL");
            let Ok(connection) = Connection::connect(&config, &meter()).await else {
                return;
            };
            if let Ok(mut stream) = QueryStream::start(connection, "select 1", options).await {
                let _ = drain(&mut stream).await;
            }
        },
    );
});
