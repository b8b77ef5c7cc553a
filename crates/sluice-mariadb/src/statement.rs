//! Prepared statements on a [`Connection`]: `COM_STMT_PREPARE`,
//! `COM_STMT_EXECUTE` and `COM_STMT_CLOSE` queued and their answers read, for
//! every path that runs one: a streamed query (`crate::query`), a statement
//! without a result ([`Connection::execute_prepared`], an import's
//! `INSERT`s), calls (`crate::calls`) and the gateway's statement checks.
//!
//! On MariaDB the prepare and the execute travel together (MariaDB executes
//! "the statement just prepared" when given the id
//! [`LAST_PREPARED`]): one round trip a statement. MySQL needs the prepared
//! statement's id first, one trip more.

use sluice_core::{Error, ErrorKind};

use crate::connection::Connection;
use crate::error::server_error;
use crate::protocol::{
    write_close, write_execute, write_prepare, ColumnDefinition, OkPacket, LAST_PREPARED,
};

impl Connection {
    /// Prepares and runs a statement without a result, with `params` as text
    /// (`None` is NULL); returns the rows it changed.
    pub async fn execute_prepared<P: AsRef<[u8]>>(
        &mut self,
        sql: &str,
        params: &[Option<P>],
    ) -> Result<u64, Error> {
        execute(self, sql, params).await
    }
}

/// Queues `COM_STMT_CLOSE`, which has no answer: it leaves with the next command.
pub(crate) fn queue_close(connection: &mut Connection, statement: u32) {
    connection
        .wire
        .queue_command(|payload| write_close(statement, payload));
}

/// Prepares and runs a statement without a result (an `INSERT` of many rows)
/// with `params` as text; returns the rows it changed. On MariaDB the prepare
/// and the execute travel together: one round trip.
async fn execute<P: AsRef<[u8]>>(
    connection: &mut Connection,
    sql: &str,
    params: &[Option<P>],
) -> Result<u64, Error> {
    let direct = connection.server().mariadb;
    queue_prepare(connection, sql);
    if direct {
        queue_execute(connection, LAST_PREPARED, params, false);
    }
    connection.wire.flush().await?;
    let settings = connection.read_settings_answers().await;
    let prepared = read_prepared(connection).await;
    let statement = match settings.and(prepared) {
        Ok(statement) => statement,
        Err(error) => {
            if direct && error.kind() == ErrorKind::Database {
                // The execute of a statement that failed to prepare fails too.
                connection.wire.read_payload().await?;
            }
            return Err(error);
        }
    };
    if !direct {
        queue_execute(connection, statement, params, false);
        connection.wire.flush().await?;
    }
    let answer = connection.wire.read_payload().await;
    queue_close(connection, statement);
    let answer = answer?;
    match answer.first() {
        Some(0x00) => Ok(OkPacket::parse(&answer)?.affected_rows),
        Some(0xFF) => Err(server_error(&answer, connection.capabilities)),
        _ => Err(connection
            .unexpected_answer("the statement's result", &answer)
            .await),
    }
}

/// Prepares `sql` (after any queued settings) and returns its statement id.
pub(crate) async fn prepare(connection: &mut Connection, sql: &str) -> Result<u32, Error> {
    queue_prepare(connection, sql);
    connection.wire.flush().await?;
    let settings = connection.read_settings_answers().await;
    let prepared = read_prepared(connection).await;
    settings.and(prepared)
}

/// Queues `COM_STMT_PREPARE` of `sql`.
pub(crate) fn queue_prepare(connection: &mut Connection, sql: &str) {
    connection
        .wire
        .queue_command(|payload| write_prepare(sql, payload));
}

/// Queues `COM_STMT_EXECUTE` of `statement` with `params`, all sent as
/// strings for the server to convert; behind a read-only cursor when `cursor`.
pub(crate) fn queue_execute<P: AsRef<[u8]>>(
    connection: &mut Connection,
    statement: u32,
    params: &[Option<P>],
    cursor: bool,
) {
    connection
        .wire
        .queue_command(|payload| write_execute(statement, params, cursor, payload));
}

/// The parts of a `COM_STMT_PREPARE` answer.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) statement: u32,
    pub(crate) parameters: usize,
    pub(crate) columns: Vec<ColumnDefinition>,
}

/// Reads the answer to `COM_STMT_PREPARE`: the statement's id, its parameter
/// count and its result columns (parameter definitions say nothing useful:
/// every value is sent as text).
pub(crate) async fn read_prepare_answer(connection: &mut Connection) -> Result<Prepared, Error> {
    let answer = connection.wire.read_payload().await?;
    match answer.first() {
        Some(0x00) if answer.len() >= 9 => {}
        Some(0xFF) => return Err(server_error(&answer, connection.capabilities)),
        _ => {
            return Err(connection
                .unexpected_answer("the statement's prepare", &answer)
                .await)
        }
    }
    let statement = u32::from_le_bytes([answer[1], answer[2], answer[3], answer[4]]);
    let columns = u16::from_le_bytes([answer[5], answer[6]]);
    let parameters = u16::from_le_bytes([answer[7], answer[8]]);
    read_definitions(connection, u64::from(parameters)).await?;
    let columns = read_definitions(connection, u64::from(columns)).await?;
    Ok(Prepared {
        statement,
        parameters: usize::from(parameters),
        columns,
    })
}

/// Reads `count` column (or parameter) definitions and, where the protocol
/// has one, the EOF packet after them.
pub(crate) async fn read_definitions(
    connection: &mut Connection,
    count: u64,
) -> Result<Vec<ColumnDefinition>, Error> {
    let definitions = read_definition_packets(connection, count).await?;
    if count > 0 && !connection.deprecate_eof() {
        connection.wire.read_payload().await?;
    }
    Ok(definitions)
}

/// Reads `count` column (or parameter) definitions, and nothing after them.
pub(crate) async fn read_definition_packets(
    connection: &mut Connection,
    count: u64,
) -> Result<Vec<ColumnDefinition>, Error> {
    let extended = connection.server().extended_metadata;
    let mut definitions = Vec::with_capacity(count.min(4096) as usize);
    for _ in 0..count {
        let packet = connection.wire.read_payload().await?;
        definitions.push(ColumnDefinition::parse(&packet, extended)?);
    }
    Ok(definitions)
}

/// The statement id of a `COM_STMT_PREPARE` answer.
pub(crate) async fn read_prepared(connection: &mut Connection) -> Result<u32, Error> {
    Ok(read_prepare_answer(connection).await?.statement)
}
