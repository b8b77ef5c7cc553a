//! Turning the server's ERR packet into a [`sluice_core::Error`] with the
//! SQLSTATE, MariaDB's own error number and what they mean
//! ([`sluice_core::DbCause`]).

use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::ErrPacket;
use mysql_common::proto::MyDeserialize;
use sluice_core::{DbCause, DbError, Error};

/// The error an ERR packet (`payload`, starting with `0xFF`) carries.
pub(crate) fn server_error(payload: &[u8], capabilities: CapabilityFlags) -> Error {
    let packet = match ErrPacket::deserialize(capabilities, &mut ParseBuf(payload)) {
        Ok(packet) if packet.is_error() => packet,
        _ => return Error::protocol("the server sent an error packet sluice cannot read"),
    };
    let server = packet.server_error();
    let code = server.error_code();
    let sqlstate = server
        .sql_state_ref()
        .map_or_else(|| "HY000".to_owned(), |state| state.as_str().into_owned());
    Error::db(DbError {
        severity: "ERROR".into(),
        cause: cause(&sqlstate, u32::from(code)),
        code: sqlstate,
        vendor_code: Some(u32::from(code)),
        message: server.message_str().into_owned(),
        ..DbError::default()
    })
}

/// What MariaDB's (or MySQL's) error means: its own numbers first (many of
/// its errors say only `HY000`), then the standard's SQLSTATE classes.
pub(crate) fn cause(sqlstate: &str, number: u32) -> DbCause {
    match (sqlstate, number) {
        // ER_DUP_ENTRY, whose SQLSTATE 23000 says only "a constraint".
        (_, 1062) => DbCause::DuplicateKey,
        // ER_LOCK_WAIT_TIMEOUT (HY000); ER_LOCK_DEADLOCK is 40001 anyway.
        (_, 1205 | 1213) => DbCause::LostRace,
        // MariaDB's max_statement_time (SQLSTATE 70100); MySQL's
        // max_execution_time (ER_QUERY_TIMEOUT, HY000).
        ("70100", _) | (_, 3024) => DbCause::StatementTimeout,
        (sqlstate, _) => DbCause::of_sqlstate(sqlstate),
    }
}

/// The server sent a packet that does not belong where it arrived.
pub(crate) fn unexpected(what: &str, payload: &[u8]) -> Error {
    let first = payload
        .first()
        .map_or("nothing".to_owned(), |byte| format!("{byte:#04x}"));
    Error::protocol(format!(
        "expected {what}, the server sent a packet starting with {first}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mariadb_s_own_numbers_come_before_its_sqlstate() {
        assert_eq!(cause("23000", 1062), DbCause::DuplicateKey);
        assert_eq!(cause("23000", 1452), DbCause::Integrity);
        assert_eq!(cause("HY000", 1205), DbCause::LostRace);
        assert_eq!(cause("40001", 1213), DbCause::LostRace);
        assert_eq!(cause("70100", 1969), DbCause::StatementTimeout);
        assert_eq!(cause("HY000", 3024), DbCause::StatementTimeout);
        assert_eq!(cause("42S02", 1146), DbCause::Statement);
        assert_eq!(cause("HY000", 1105), DbCause::Other);
    }
}
