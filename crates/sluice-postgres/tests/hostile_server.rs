//! A broken or hostile server must not make sluice panic: a fake server on a
//! local socket answers the startup and the statement honestly, then sends a
//! malformed `DataRow`; every path that decodes rows must return an error.
//! It also holds a statement's description back until a cancel has come, as
//! a real server can drop that cancel.

use sluice_core::database::BoxFuture;
use sluice_core::{BatchSource, Error, ErrorKind, Meter};
use sluice_postgres::{
    Config, Connection, ParamSet, ParamSource, Pipeline, QueryOptions, QueryStream, Transaction,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One backend message: tag, length, body.
fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut bytes = vec![tag];
    bytes.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    bytes.extend_from_slice(body);
    bytes
}

/// `ParseComplete`, no parameters, one `text` column named `v`.
fn described() -> Vec<u8> {
    let mut row_description = 1u16.to_be_bytes().to_vec();
    row_description.extend_from_slice(b"v\0");
    row_description.extend_from_slice(&0u32.to_be_bytes()); // table
    row_description.extend_from_slice(&0u16.to_be_bytes()); // attribute
    row_description.extend_from_slice(&25u32.to_be_bytes()); // text
    row_description.extend_from_slice(&(-1i16).to_be_bytes()); // size
    row_description.extend_from_slice(&(-1i32).to_be_bytes()); // modifier
    row_description.extend_from_slice(&0u16.to_be_bytes()); // format
    [
        message(b'1', &[]),
        message(b't', &0u16.to_be_bytes()),
        message(b'T', &row_description),
    ]
    .concat()
}

fn ready() -> Vec<u8> {
    message(b'Z', b"I")
}

/// A `DataRow` with an explicit declared length and raw content after it.
fn raw_data_row(declared_length: u32, content: &[u8]) -> Vec<u8> {
    let mut bytes = vec![b'D'];
    bytes.extend_from_slice(&declared_length.to_be_bytes());
    bytes.extend_from_slice(content);
    bytes
}

/// One value of `length` bytes (its header only, then `bytes`), in a row of one.
fn one_value(length: i32, bytes: &[u8]) -> Vec<u8> {
    [&1u16.to_be_bytes()[..], &length.to_be_bytes(), bytes].concat()
}

/// Reads the client's messages up to and including the next `Flush` or
/// `Sync`, and returns their tags.
async fn read_exchange(socket: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut tags = Vec::new();
    loop {
        let tag = socket.read_u8().await?;
        let length = socket.read_u32().await? as usize;
        let mut body = vec![0; length - 4];
        socket.read_exact(&mut body).await?;
        tags.push(tag);
        if tag == b'H' || tag == b'S' {
            return Ok(tags);
        }
    }
}

/// Accepts a session and logs it in: its startup message, then trust, a
/// cancel key and `ReadyForQuery`.
async fn log_in(listener: &TcpListener) -> std::io::Result<TcpStream> {
    let (mut socket, _) = listener.accept().await?;
    let length = socket.read_u32().await? as usize;
    let mut startup = vec![0; length - 4];
    socket.read_exact(&mut startup).await?;
    let key = [1u32.to_be_bytes(), 2u32.to_be_bytes()].concat();
    let login = [
        message(b'R', &0u32.to_be_bytes()),
        message(b'K', &key),
        ready(),
    ]
    .concat();
    socket.write_all(&login).await?;
    Ok(socket)
}

/// The configuration of a client of the fake server on `port`.
fn fake_server_config(port: u16) -> Config {
    // A scripted server: it answers a startup message, not a TLS request.
    format!("postgres://sluice@127.0.0.1:{port}/test?sslmode=disable")
        .parse()
        .unwrap()
}

/// Serves one session: startup, then each of `answers` after the client's next
/// exchange; then stops sending and waits for the client to hang up.
async fn serve(listener: TcpListener, answers: Vec<Vec<u8>>) -> std::io::Result<()> {
    let mut socket = log_in(&listener).await?;
    for answer in answers {
        read_exchange(&mut socket).await?;
        socket.write_all(&answer).await?;
    }
    socket.shutdown().await?;
    let mut rest = Vec::new();
    let _ = socket.read_to_end(&mut rest).await;
    Ok(())
}

/// Starts a fake server with `answers` and connects to it.
async fn connect(answers: Vec<Vec<u8>>) -> (Connection, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let _ = serve(listener, answers).await;
    });
    let connection = Connection::connect(&fake_server_config(port), &Meter::new())
        .await
        .unwrap();
    (connection, server)
}

/// The malformed rows, each with the kind of error it must give.
fn malformed_rows() -> Vec<(&'static str, Vec<u8>, ErrorKind)> {
    let after = [message(b'C', b"SELECT 1\0"), ready()].concat();
    vec![
        (
            "a length shorter than the length field",
            [raw_data_row(2, &[]), after.clone()].concat(),
            ErrorKind::Protocol,
        ),
        (
            "a value overrunning its message into the next one",
            [
                raw_data_row(4 + 6 + 1, &one_value(100, b"x")),
                after.clone(),
            ]
            .concat(),
            ErrorKind::Protocol,
        ),
        (
            "bytes after the last value",
            [
                raw_data_row(4 + 6 + 3, &one_value(1, b"xyz")),
                after.clone(),
            ]
            .concat(),
            ErrorKind::Protocol,
        ),
        (
            "a length beyond what the server sends before hanging up",
            raw_data_row(1000, &one_value(3, b"abc")),
            ErrorKind::Closed,
        ),
    ]
}

async fn query_error(answer: Vec<u8>, chunked: bool) -> Error {
    let (connection, server) = connect(vec![described(), answer]).await;
    let mut stream = QueryStream::start(connection, "select v", QueryOptions::default())
        .await
        .expect("the statement is described honestly");
    let error = loop {
        let next = if chunked {
            stream.next_chunk().await.map(|chunk| chunk.is_some())
        } else {
            stream.next_batch().await.map(|batch| batch.is_some())
        };
        match next {
            Ok(true) => continue,
            Ok(false) => panic!("a malformed row was accepted"),
            Err(error) => break error,
        }
    };
    drop(stream);
    server.await.unwrap();
    error
}

#[tokio::test]
async fn malformed_rows_of_a_query_are_errors() {
    for (case, answer, kind) in malformed_rows() {
        for chunked in [false, true] {
            let answer = [message(b'2', &[]), answer.clone()].concat();
            let error = query_error(answer, chunked).await;
            assert_eq!(error.kind(), kind, "{case} (chunked: {chunked}): {error}");
        }
    }
}

#[tokio::test]
async fn a_large_row_whose_value_overruns_it_is_an_error() {
    // The row declares 9 MB (past the large-row threshold, so it is handed over
    // value by value) but its one value claims 10 MB.
    let declared = 9 * 1024 * 1024;
    let row = raw_data_row(declared, &one_value(10 * 1024 * 1024, &[]));
    let error = query_error([message(b'2', &[]), row].concat(), true).await;
    assert_eq!(error.kind(), ErrorKind::Protocol, "{error}");
}

/// PostgreSQL drops a cancel request that reaches a backend while it reads
/// the client's next message, as it does between describing a statement and
/// its `Bind`: a cancel asked then must keep the session from running the
/// statement, or the statement would run to its end (Ctrl-C ignored). The
/// fake server holds its answer to the describe until the cancel request has
/// come, then looks at what the client sends next.
#[tokio::test]
async fn a_cancel_asked_while_the_statement_is_described_keeps_it_from_running() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = fake_server_config(listener.local_addr().unwrap().port());
    let (describing, described_now) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(async move {
        let mut session = log_in(&listener).await?;
        read_exchange(&mut session).await?;
        let _ = describing.send(());
        let (mut cancel, _) = listener.accept().await?;
        let mut request = [0; 16];
        cancel.read_exact(&mut request).await?;
        drop(cancel);
        session.write_all(&described()).await?;
        let next = read_exchange(&mut session).await?;
        session.write_all(&ready()).await?;
        std::io::Result::Ok(next)
    });
    let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let token = connection.cancel_token();
    let started = tokio::spawn(QueryStream::start(
        connection,
        "select v",
        QueryOptions::default(),
    ));
    described_now.await.unwrap();
    token.cancel(&config).await.unwrap();
    let error = match started.await.unwrap() {
        Ok(_) => panic!("the statement ran although its cancel was asked first"),
        Err(error) => error,
    };
    assert_eq!(error.kind(), ErrorKind::Cancelled, "{error}");
    // Only a Sync ends the exchange: no Bind, no Execute.
    assert_eq!(server.await.unwrap().unwrap(), vec![b'S']);
}

struct OneSet(Option<ParamSet>);

impl ParamSource for OneSet {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(std::future::ready(Ok(self.0.take())))
    }
}

#[tokio::test]
async fn malformed_rows_of_a_pipeline_are_errors() {
    for (case, answer, kind) in malformed_rows() {
        let answers = vec![described(), ready(), [message(b'2', &[]), answer].concat()];
        let (mut connection, server) = connect(answers).await;
        let pipeline = Pipeline::prepare(&mut connection, "select v")
            .await
            .expect("the statement is described honestly");
        let mut source = OneSet(Some(ParamSet {
            line: 1,
            values: Ok(Vec::new()),
        }));
        let mut report = |_: u64, _: sluice_postgres::CallOutcome<'_>| Ok(());
        let error = pipeline
            .run(&mut source, Transaction::Each, 1 << 20, &mut report)
            .await
            .expect_err(case);
        assert_eq!(error.kind(), kind, "{case}: {error}");
        drop(connection);
        server.await.unwrap();
    }
}
