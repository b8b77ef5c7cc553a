//! One read split into parts that separate sessions read at the same time,
//! all in one snapshot of the database, so that together they return exactly
//! the rows one read would have returned at one moment, whatever writes run
//! meanwhile (`sluice copy --jobs`).
//!
//! A coordinating session plans the split ([`crate::connect::Session::split_read`]):
//! it opens a snapshot other sessions can join, and cuts the read into
//! [`ReadPart`]s (ranges of the table's physical storage, or of an integer
//! column's values). Each part is then an ordinary export on a session of its
//! own, given the snapshot through [`crate::connect::ExportOptions::snapshot`].
//! The snapshot lives as long as the coordinator's transaction: keep the
//! coordinating session open until every part's export has started.

/// What to split.
#[derive(Debug, Clone)]
pub enum SplitSource {
    /// Every row of a table, named as a user writes it: the database reads
    /// it by [`crate::connect::Dialect::table_name`], never as SQL.
    Table(String),
    /// The rows of a query, with its parameters as text (`None` is NULL).
    Query {
        /// The query.
        sql: String,
        /// Its parameters' values.
        params: Vec<Option<String>>,
    },
}

/// A request to split a read into parts.
#[derive(Debug, Clone)]
pub struct SplitRequest {
    /// The rows to read.
    pub source: SplitSource,
    /// How many parts. A table too small to cut that finely gets fewer.
    pub parts: usize,
    /// An integer column whose value ranges make the parts; needed for a
    /// query. Default: `None`, a table is cut by the ranges of its storage.
    pub split_by: Option<String>,
}

/// One part of a split read: a query of its own, read in the split's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPart {
    /// The part's query.
    pub sql: String,
    /// Its parameters' values, as text.
    pub params: Vec<Option<String>>,
}

/// A read split into parts that share a snapshot.
#[derive(Debug, Clone)]
pub struct SplitRead {
    /// The snapshot the parts read in: opaque, for
    /// [`crate::connect::ExportOptions::snapshot`].
    pub snapshot: String,
    /// The parts; together they return every row of the read once.
    pub parts: Vec<ReadPart>,
}

impl SplitRead {
    /// The read with each part narrowed to `columns` of its rows
    /// ([`Dialect::projection`](crate::connect::Dialect::projection)); all of
    /// them when `columns` is empty.
    pub fn narrowed(mut self, columns: &[String], dialect: crate::connect::Dialect) -> SplitRead {
        for part in &mut self.parts {
            part.sql = dialect.projection(&part.sql, columns);
        }
        self
    }
}

/// Cuts `0..total` into at most `parts` ranges of near-equal length,
/// returning the inner boundaries (so `k` ranges have `k - 1` of them); a
/// range is never empty.
pub fn boundaries(total: u64, parts: usize) -> Vec<u64> {
    let parts = (parts.max(1) as u64).min(total.max(1));
    (1..parts).map(|index| total * index / parts).collect()
}

/// Cuts the integer range `low..=high` into at most `parts` ranges, returning
/// the inner boundaries: each is the first value of the range it starts.
pub fn value_boundaries(low: i64, high: i64, parts: usize) -> Vec<i64> {
    if high < low {
        return Vec::new();
    }
    // i128: `high - low + 1` overflows i64 for the full range.
    let span = high as i128 - low as i128 + 1;
    let parts = (parts.max(1) as i128).min(span);
    (1..parts)
        .map(|index| (low as i128 + span * index / parts) as i64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_is_cut_into_ranges_that_are_never_empty() {
        assert_eq!(boundaries(100, 4), vec![25, 50, 75]);
        assert_eq!(boundaries(10, 3), vec![3, 6]);
        assert_eq!(boundaries(2, 4), vec![1]);
        assert!(boundaries(0, 4).is_empty());
        assert!(boundaries(100, 1).is_empty());
        assert!(boundaries(100, 0).is_empty());
    }

    #[test]
    fn values_are_cut_into_ranges_that_cover_the_whole_span() {
        assert_eq!(value_boundaries(1, 100, 4), vec![26, 51, 76]);
        assert_eq!(value_boundaries(5, 6, 4), vec![6]);
        assert!(value_boundaries(7, 7, 4).is_empty());
        assert!(value_boundaries(8, 7, 4).is_empty());
        let full = value_boundaries(i64::MIN, i64::MAX, 2);
        assert_eq!(full, vec![0]);
    }
}
