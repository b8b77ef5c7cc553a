//! [`RowFormat`]: how a binary-protocol result's rows read into a batch —
//! its columns and their decoders, chosen once from the column definitions,
//! and the null bitmap before each row's values. A streamed query
//! (`crate::query`) and a call's rows (`crate::calls`) read rows with it.

use sluice_core::{Batch, Column, Error, Schema};

use crate::config::ZeroDates;
use crate::types::{read_value, Decode};

/// How a result's rows read: its columns and their decoders, chosen once.
#[derive(Debug)]
pub(crate) struct RowFormat {
    pub(crate) schema: Schema,
    pub(crate) decoders: Vec<Decode>,
    /// The null bitmap's length in a row (columns + 2 offset bits).
    pub(crate) bitmap_bytes: usize,
    pub(crate) zero_dates: ZeroDates,
}

impl RowFormat {
    /// The format of rows of `columns`, each read by its decoder.
    pub(crate) fn new(columns: Vec<Column>, decoders: Vec<Decode>, zero_dates: ZeroDates) -> Self {
        RowFormat {
            bitmap_bytes: (columns.len() + 7 + 2) / 8,
            schema: Schema { columns },
            decoders,
            zero_dates,
        }
    }

    /// One binary-protocol row into `batch`; on an error nothing of the row
    /// is left in it.
    pub(crate) fn decode(&self, payload: &[u8], batch: &mut Batch) -> Result<(), Error> {
        let bitmap_bytes = self.bitmap_bytes;
        if payload.len() < 1 + bitmap_bytes {
            return Err(Error::protocol("a row shorter than its null bitmap"));
        }
        let bitmap = &payload[1..1 + bitmap_bytes];
        let mut rest = &payload[1 + bitmap_bytes..];
        let mark = batch.mark();
        for (index, decode) in self.decoders.iter().enumerate() {
            let bit = index + 2;
            if bitmap[bit / 8] >> (bit % 8) & 1 == 1 {
                batch.push_null();
                continue;
            }
            if let Err(error) = read_value(
                *decode,
                &mut rest,
                batch,
                &self.schema.columns[index],
                self.zero_dates,
            ) {
                batch.rollback(mark);
                return Err(error);
            }
        }
        Ok(())
    }
}
