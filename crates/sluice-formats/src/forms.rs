//! Which value forms an encoder reads: the checks each encoder makes of a
//! schema before its first batch, so that values in a form it does not read
//! are refused by name rather than written wrongly.

use sluice_core::{Encoding, Error, ErrorKind, Schema};

/// Refuses a schema with binary columns for an encoder that reads text only:
/// a caller asked its source for binary values without the format reading them
/// ([`Format::reads_binary_values`]), which would otherwise write bytes as text.
pub(crate) fn require_text(schema: &Schema) -> Result<(), Error> {
    match schema
        .columns
        .iter()
        .find(|column| column.encoding != Encoding::Text)
    {
        None => Ok(()),
        Some(column) => Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "column {:?} arrived in binary form, which this format does not read",
                column.name
            ),
        )),
    }
}

/// Refuses a schema with columns in a database's own binary form
/// ([`Encoding::Native`]), which no format reads: only a target database of
/// the source's product does.
pub(crate) fn refuse_native(schema: &Schema) -> Result<(), Error> {
    match schema
        .columns
        .iter()
        .find(|column| column.encoding == Encoding::Native)
    {
        None => Ok(()),
        Some(column) => Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "column {:?} arrived in its database's own binary form, which no format reads",
                column.name
            ),
        )),
    }
}
