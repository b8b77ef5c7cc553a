//! Turning the server's ERR packet into a [`sluice_core::Error`] with the
//! SQLSTATE and MariaDB's own error number.

use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::ErrPacket;
use mysql_common::proto::MyDeserialize;
use sluice_core::{DbError, Error};

/// The error an ERR packet (`payload`, starting with `0xFF`) carries.
pub(crate) fn server_error(payload: &[u8], capabilities: CapabilityFlags) -> Error {
    let packet = match ErrPacket::deserialize(capabilities, &mut ParseBuf(payload)) {
        Ok(packet) if packet.is_error() => packet,
        _ => return Error::protocol("the server sent an error packet sluice cannot read"),
    };
    let server = packet.server_error();
    let code = server.error_code();
    Error::db(DbError {
        severity: "ERROR".into(),
        code: server
            .sql_state_ref()
            .map_or_else(|| "HY000".to_owned(), |state| state.as_str().into_owned()),
        vendor_code: Some(u32::from(code)),
        message: server.message_str().into_owned(),
        ..DbError::default()
    })
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
