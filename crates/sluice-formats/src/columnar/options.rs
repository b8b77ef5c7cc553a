//! The settings of the Arrow and Parquet encoders, each with its default and
//! its range: what the CLI's flags and the server fill in, and what the
//! encoder and its sink read.

use sluice_core::Error;

/// Parquet's compression codecs sluice offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ParquetCompression {
    /// Zstandard at its default level: small files, fast to write. The default.
    #[default]
    Zstd,
    /// Snappy.
    Snappy,
    /// LZ4 (Parquet's `LZ4_RAW`, the one every current reader knows).
    Lz4,
    /// No compression.
    None,
}

impl std::str::FromStr for ParquetCompression {
    type Err = String;

    fn from_str(name: &str) -> Result<ParquetCompression, String> {
        match name.to_ascii_lowercase().as_str() {
            "zstd" => Ok(ParquetCompression::Zstd),
            "snappy" => Ok(ParquetCompression::Snappy),
            "lz4" => Ok(ParquetCompression::Lz4),
            "none" | "uncompressed" => Ok(ParquetCompression::None),
            other => Err(format!(
                "unknown compression {other:?}: expected zstd, snappy, lz4 or none"
            )),
        }
    }
}

/// Settings of the Arrow and Parquet encoders; each states its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnarOptions {
    /// Rows per record batch (Parquet: per write into the row group).
    /// Default: 32,768.
    pub batch_rows: usize,
    /// A record batch is emitted early once its values hold this many bytes
    /// (of their canonical text). Default: 8 MiB.
    pub batch_bytes: usize,
    /// The largest value accepted, in bytes; a larger one is an error, since
    /// Arrow needs each value whole in memory. At most 1 GiB, as is
    /// `batch_bytes`. Default: 1 GiB.
    pub max_value_bytes: usize,
    /// Decimals without a declared precision and scale (`numeric`) become
    /// `Decimal128(38, scale)` with this scale (0–38): a value that needs
    /// rounding or more digits is an error. Default: `None`, which writes
    /// their exact text as `Utf8`.
    pub numeric_scale: Option<i8>,
    /// Parquet: the most rows of a row group. Default: 262,144 (four record
    /// batches).
    pub row_group_rows: usize,
    /// Parquet: a row group is closed once its encoded size passes this,
    /// whatever its row count, which bounds memory for wide rows.
    /// Default: 128 MiB.
    pub row_group_bytes: usize,
    /// Parquet: the codec of every column. Default: [`ParquetCompression::Zstd`].
    pub compression: ParquetCompression,
}

impl Default for ColumnarOptions {
    fn default() -> ColumnarOptions {
        ColumnarOptions {
            batch_rows: 32_768,
            batch_bytes: 8 << 20,
            max_value_bytes: 1 << 30,
            numeric_scale: None,
            row_group_rows: 262_144,
            row_group_bytes: 128 << 20,
            compression: ParquetCompression::Zstd,
        }
    }
}

impl ColumnarOptions {
    /// Refuses settings out of range, naming the setting.
    pub(super) fn check(&self) -> Result<(), Error> {
        const GIB: usize = 1 << 30;
        let fault = match () {
            _ if self.batch_rows == 0 => "the rows per record batch must be at least 1",
            _ if self.batch_bytes == 0 || self.batch_bytes > GIB => {
                "the bytes per record batch must be between 1 and 1 GiB"
            }
            _ if self.max_value_bytes == 0 || self.max_value_bytes > GIB => {
                "the largest value must be between 1 byte and 1 GiB"
            }
            _ if self
                .numeric_scale
                .is_some_and(|scale| !(0..=38).contains(&scale)) =>
            {
                "the numeric scale must be between 0 and 38"
            }
            _ if self.row_group_rows == 0 || self.row_group_bytes == 0 => {
                "a row group must hold at least 1 row and 1 byte"
            }
            _ => return Ok(()),
        };
        Err(Error::config(fault))
    }
}
