//! [`Batch`]: a block of rows, the one representation between every database and every format.
//!
//! Values are stored back to back in one byte buffer with a `(start, length)` pair per
//! field, row-major, so filling a batch from a network buffer is a `memcpy` per value
//! and a batch is reused without reallocating once it has grown to its working size.

/// Marks a NULL in the field table (no value can be this long: batches hold < 4 GiB).
const NULL_LENGTH: u32 = u32::MAX;

/// A position in a [`Batch`], from [`Batch::mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMark {
    fields: usize,
    data: usize,
}

/// A block of rows with a fixed number of columns; see the module docs.
///
/// ```
/// use sluice_core::Batch;
///
/// let mut batch = Batch::new(2);
/// batch.push_value(b"1");
/// batch.push_null();
/// // A value written in place, as a source decoding a wire buffer does.
/// let start = batch.begin_value();
/// batch.value_buffer().extend_from_slice(b"2");
/// batch.end_value(start);
/// batch.push_value(b"");
/// assert_eq!(batch.num_rows(), 2);
/// let second = batch.row(1);
/// assert_eq!((second.get(0), second.get(1)), (Some(&b"2"[..]), Some(&b""[..])));
/// assert_eq!(batch.row(0).get(1), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Batch {
    columns: usize,
    data: Vec<u8>,
    fields: Vec<(u32, u32)>,
}

impl Batch {
    /// An empty batch for rows of `columns` values.
    pub fn new(columns: usize) -> Batch {
        Batch {
            columns,
            data: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// Removes all rows and sets a new column count, keeping the allocated capacity.
    pub fn reset(&mut self, columns: usize) {
        self.clear();
        self.columns = columns;
    }

    /// Where the batch ends now; [`Batch::rollback`] returns to it, which lets a
    /// decoder abandon a row it has half written when the record turns out bad.
    pub fn mark(&self) -> BatchMark {
        BatchMark {
            fields: self.fields.len(),
            data: self.data.len(),
        }
    }

    /// Drops everything pushed since `mark`.
    pub fn rollback(&mut self, mark: BatchMark) {
        self.fields.truncate(mark.fields);
        self.data.truncate(mark.data);
    }

    /// Removes the complete row `row`, keeping the others in order (its
    /// values' bytes stay in the buffer until the batch is cleared).
    pub fn remove_row(&mut self, row: usize) {
        let start = row * self.columns;
        self.fields.drain(start..start + self.columns);
    }

    /// Number of values pushed so far (complete rows times columns, plus any partial row).
    pub fn num_values(&self) -> usize {
        self.fields.len()
    }

    /// Bytes allocated for values and the field table, used or not.
    pub fn capacity_bytes(&self) -> usize {
        self.data.capacity() + self.fields.capacity() * std::mem::size_of::<(u32, u32)>()
    }

    /// Removes all rows, keeping the allocated capacity.
    pub fn clear(&mut self) {
        self.data.clear();
        self.fields.clear();
    }

    /// Number of columns per row.
    pub fn num_columns(&self) -> usize {
        self.columns
    }

    /// Number of complete rows.
    pub fn num_rows(&self) -> usize {
        self.fields.len().checked_div(self.columns).unwrap_or(0)
    }

    /// True when the batch holds no rows.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Bytes of value data held.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// Appends one value to the row being built.
    #[inline]
    pub fn push_value(&mut self, value: &[u8]) {
        let start = self.data.len() as u32;
        self.data.extend_from_slice(value);
        self.fields.push((start, value.len() as u32));
    }

    /// Appends a NULL to the row being built.
    #[inline]
    pub fn push_null(&mut self) {
        self.fields.push((0, NULL_LENGTH));
    }

    /// Starts a value that the caller writes piecewise into [`Batch::value_buffer`]
    /// (for sources that convert while copying); close it with [`Batch::end_value`].
    #[inline]
    pub fn begin_value(&mut self) -> usize {
        self.data.len()
    }

    /// The buffer a value begun with [`Batch::begin_value`] is appended to.
    #[inline]
    pub fn value_buffer(&mut self) -> &mut Vec<u8> {
        &mut self.data
    }

    /// Ends the value begun at `start`.
    #[inline]
    pub fn end_value(&mut self, start: usize) {
        self.fields
            .push((start as u32, (self.data.len() - start) as u32));
    }

    /// Appends a copy of `row` (from this or another batch of the same width).
    pub fn push_row(&mut self, row: &Row<'_>) {
        for index in 0..row.len() {
            match row.get(index) {
                Some(value) => self.push_value(value),
                None => self.push_null(),
            }
        }
    }

    /// Row `index`; panics when out of range.
    #[inline]
    pub fn row(&self, index: usize) -> Row<'_> {
        let start = index * self.columns;
        Row {
            data: &self.data,
            fields: &self.fields[start..start + self.columns],
        }
    }

    /// The rows in order.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> + '_ {
        (0..self.num_rows()).map(move |index| self.row(index))
    }
}

/// One row of a [`Batch`].
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    data: &'a [u8],
    fields: &'a [(u32, u32)],
}

impl<'a> Row<'a> {
    /// The value of column `index`, `None` for NULL.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&'a [u8]> {
        let (start, length) = self.fields[index];
        if length == NULL_LENGTH {
            None
        } else {
            Some(&self.data[start as usize..(start + length) as usize])
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True for a row of zero columns.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_values_nulls_and_empty_strings_apart() {
        let mut batch = Batch::new(2);
        batch.push_value(b"a");
        batch.push_null();
        batch.push_value(b"");
        let start = batch.begin_value();
        batch.value_buffer().extend_from_slice(b"xy");
        batch.end_value(start);
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.row(0).get(0), Some(&b"a"[..]));
        assert_eq!(batch.row(0).get(1), None);
        assert_eq!(batch.row(1).get(0), Some(&b""[..]));
        assert_eq!(batch.row(1).get(1), Some(&b"xy"[..]));
        batch.clear();
        assert!(batch.is_empty());
    }
}
