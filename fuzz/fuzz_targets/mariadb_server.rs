//! A hostile MariaDB/MySQL server: it greets and logs the client in honestly,
//! answers the session setup, then answers the query (prepare and execute)
//! with the fuzzer's bytes and hangs up; or, by the first byte's choice, its
//! greeting itself is the fuzzer's. The client must end with an error or a
//! result: never a panic, a hang, or memory sized by a declared length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mysql_common::constants::{CapabilityFlags, StatusFlags};
use mysql_common::packets::HandshakePacket;
use mysql_common::proto::MySerialize;
use sluice_fuzz::servers::{against, answer_and_hang_up, drain, meter};
use sluice_fuzz::Bytes;
use sluice_mariadb::{Config, Connection, QueryOptions, QueryStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One packet: 3-byte length, sequence number, payload.
fn packet(sequence: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    bytes.push(sequence);
    bytes.extend_from_slice(payload);
    bytes
}

/// A length-encoded string (short ones only: the scripted answers are small).
fn lenenc(text: &[u8]) -> Vec<u8> {
    [&[text.len() as u8][..], text].concat()
}

fn greeting() -> Vec<u8> {
    let capabilities = CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
        | CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_LOCAL_FILES
        | CapabilityFlags::CLIENT_CONNECT_ATTRS;
    let handshake = HandshakePacket::new(
        10,
        &b"5.5.5-10.11.0-MariaDB"[..],
        7,
        *b"abcdefgh",
        Some(&b"ijklmnopqrst"[..]),
        capabilities,
        45,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        Some(&b"mysql_native_password"[..]),
    );
    let mut payload = Vec::new();
    handshake.serialize(&mut payload);
    packet(0, &payload)
}

/// An OK packet: no rows changed, autocommit.
fn ok(sequence: u8) -> Vec<u8> {
    packet(sequence, &[0x00, 0, 0, 0x02, 0, 0, 0])
}

/// The answers to the session setup: OK for the `SET`, then one row for
/// `SELECT @@max_allowed_packet, @@local_infile`.
fn setup_answers() -> Vec<u8> {
    [
        ok(1),
        packet(1, &[2]),
        // The client skips column definitions of its own statements.
        packet(2, b"\x03def"),
        packet(3, b"\x03def"),
        packet(4, &[lenenc(b"16777216"), lenenc(b"1")].concat()),
        packet(5, &[0xFE, 0, 0, 0x02, 0, 0, 0]),
    ]
    .concat()
}

async fn read_packet(socket: &mut TcpStream) -> std::io::Result<()> {
    let mut header = [0u8; 4];
    socket.read_exact(&mut header).await?;
    let length = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut payload = vec![0; length];
    socket.read_exact(&mut payload).await.map(drop)
}

/// Greets, reads the login, says OK, reads the setup and answers it.
async fn log_in(socket: &mut TcpStream) -> std::io::Result<()> {
    socket.write_all(&greeting()).await?;
    read_packet(socket).await?;
    socket.write_all(&ok(2)).await?;
    read_packet(socket).await?;
    read_packet(socket).await?;
    socket.write_all(&setup_answers()).await
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let flags = input.byte();
    let answer = input.rest().to_vec();
    let hostile_greeting = flags & 1 != 0;
    let options = QueryOptions {
        fetch_size: (flags & 2 != 0).then_some(u32::from(flags >> 4) + 1),
        ..QueryOptions::default()
    };
    against(
        move |mut socket| async move {
            if !hostile_greeting {
                log_in(&mut socket).await?;
            }
            answer_and_hang_up(socket, &answer).await
        },
        |port| async move {
            let config: Config = format!("mariadb://fuzz@127.0.0.1:{port}/fuzz?ssl-mode=DISABLED")
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
