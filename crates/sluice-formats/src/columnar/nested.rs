//! Lists and structs, parsed from PostgreSQL's array literals (`{1,NULL,"a b"}`,
//! `{{1,2},{3,4}}`) and record literals (`(1,"a b",)`) straight into Arrow
//! offsets, validity bits and the element converters of [`super::convert`].
//!
//! The literals are read by [`sluice_core::canonical`]'s readers, which hand
//! each element over as they go; this module only places them. Unlike the
//! JSON writer, a literal that does not parse is an error here: a typed
//! column has no place for it.
//!
//! An Arrow list type has a fixed depth, but a PostgreSQL array column does
//! not declare its number of dimensions (`{1,2}` and `{{1,2},{3,4}}` may
//! share one): [`TopList`] takes it from the first non-empty array of the
//! column (one dimension if the first record batch has none). While the
//! column's type is still open (its first record batch), it also keeps the
//! literals' text; should the batch's arrays differ in depth, the column is
//! `Utf8` of PostgreSQL's array text for good, marked `sluice.text: array`.
//! Once the type is fixed, an array of another depth is an error. Arrays
//! inside composites are one-dimensional.

use std::sync::Arc;

use arrow_array::{ArrayRef, ListArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{Field, Fields};
use sluice_core::canonical::{self, ArrayVisitor, LiteralError, Strictness};

use super::convert::{text_of, Metadata, TextConverter, Utf8};
use super::text::{Reason, Shown};

/// Words a literal's error: the reader's reason, or the converter's.
fn literal_error(text: &[u8], what: &str, error: LiteralError<Reason>) -> Reason {
    match error {
        LiteralError::Malformed(why) => {
            format!("{} is not a valid {what} literal ({why})", Shown(text))
        }
        LiteralError::Visitor(reason) => reason,
    }
}

/// One dimension of a list: offsets into the next dimension (or the
/// elements) and which entries are NULL (only the outermost can be).
struct Level {
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
}

impl Level {
    fn new() -> Level {
        Level {
            offsets: vec![0],
            nulls: NullBufferBuilder::new(0),
        }
    }

    fn push(&mut self, children: usize, valid: bool) -> Result<(), Reason> {
        let last = *self.offsets.last().expect("offsets start with 0");
        let children = i32::try_from(children).map_err(|_| "too many array elements".to_owned())?;
        let next = last.checked_add(children).ok_or_else(|| {
            "more array elements in one record batch than Arrow's 32-bit offsets count".to_owned()
        })?;
        self.offsets.push(next);
        self.nulls.append(valid);
        Ok(())
    }
}

/// Arrays of a fixed number of dimensions: nested lists of the element type.
pub(crate) struct List {
    levels: Vec<Level>,
    element: Box<dyn TextConverter>,
    /// The last error was an array of another depth (the builders then hold
    /// part of it: the list is not used again).
    depth_mismatch: bool,
}

impl List {
    /// Lists `dimensions` deep (at least one) of `element` values.
    pub(crate) fn new(dimensions: usize, element: Box<dyn TextConverter>) -> List {
        List {
            levels: (0..dimensions.max(1)).map(|_| Level::new()).collect(),
            element,
            depth_mismatch: false,
        }
    }
}

/// Places one array literal's pieces in a [`List`]'s levels.
struct ListVisitor<'list> {
    list: &'list mut List,
    text: &'list [u8],
}

impl ListVisitor<'_> {
    fn depth_error(&mut self, which: &str) -> Reason {
        self.list.depth_mismatch = true;
        format!(
            "{} has {which} dimensions than the column's arrays ({}): an Arrow column has one list depth",
            Shown(self.text),
            self.list.levels.len()
        )
    }
}

impl ArrayVisitor for ListVisitor<'_> {
    type Error = Reason;

    fn open(&mut self, depth: usize, _index: usize) -> Result<(), Reason> {
        match depth < self.list.levels.len() {
            true => Ok(()),
            false => Err(self.depth_error("more")),
        }
    }

    fn element(&mut self, depth: usize, _index: usize, value: Option<&[u8]>) -> Result<(), Reason> {
        match depth + 1 == self.list.levels.len() {
            true => self.list.element.append(value),
            false => Err(self.depth_error("fewer")),
        }
    }

    fn close(&mut self, depth: usize, items: usize) -> Result<(), Reason> {
        self.list.levels[depth].push(items, true)
    }
}

impl TextConverter for List {
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        let Some(text) = value else {
            return self.levels[0].push(0, false);
        };
        let mut visitor = ListVisitor { list: self, text };
        canonical::read_array(text, Strictness::Canonical, &mut visitor)
            .map_err(|error| literal_error(text, "array", error))?;
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        let mut values = self.element.finish();
        let mut metadata = self.element.metadata();
        for level in self.levels.iter_mut().rev() {
            let item = Field::new("item", values.data_type().clone(), true).with_metadata(metadata);
            metadata = Metadata::new();
            let offsets = std::mem::replace(&mut level.offsets, vec![0]);
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            values = Arc::new(ListArray::new(
                Arc::new(item),
                offsets,
                values,
                level.nulls.finish(),
            ));
        }
        values
    }
}

/// A top-level array column, whose depth is learned from its first
/// non-empty array, or which becomes text when its first record batch mixes
/// depths (see the module docs).
pub(crate) struct TopList {
    element: Option<Box<dyn TextConverter>>,
    list: Option<List>,
    /// Values before the depth was known: NULL (`true`) or `{}` (`false`).
    waiting: Vec<bool>,
    /// The literals as text while the column's type is open (its first
    /// record batch), and for good once its arrays differ in depth.
    texts: Option<Utf8>,
    /// The first record batch mixed depths: the column is text.
    mixed: bool,
}

impl TopList {
    pub(crate) fn new(element: Box<dyn TextConverter>) -> TopList {
        TopList {
            element: Some(element),
            list: None,
            waiting: Vec::new(),
            texts: Some(Utf8::new(text_of("array"))),
            mixed: false,
        }
    }

    /// Fixes the depth and replays the values that waited for it.
    fn start(&mut self, dimensions: usize) -> Result<&mut List, Reason> {
        let element = self.element.take().expect("started once");
        let list = self.list.insert(List::new(dimensions, element));
        for null in self.waiting.drain(..) {
            list.append(if null { None } else { Some(b"{}") })?;
        }
        Ok(list)
    }

    /// Appends to the lists, learning the depth from the first array with
    /// elements.
    fn append_list(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        if let Some(list) = &mut self.list {
            return list.append(value);
        }
        let Some(text) = value else {
            self.waiting.push(true);
            return Ok(());
        };
        match dimensions(text)? {
            0 => self.waiting.push(false),
            depth => self.start(depth)?.append(Some(text))?,
        }
        Ok(())
    }
}
/// An array literal's number of dimensions; 0 for an empty array.
fn dimensions(text: &[u8]) -> Result<usize, Reason> {
    /// Reads the literal for its shape only.
    struct Shape;
    impl ArrayVisitor for Shape {
        type Error = Reason;
        fn open(&mut self, _depth: usize, _index: usize) -> Result<(), Reason> {
            Ok(())
        }
        fn element(&mut self, _: usize, _: usize, _: Option<&[u8]>) -> Result<(), Reason> {
            Ok(())
        }
        fn close(&mut self, _depth: usize, _items: usize) -> Result<(), Reason> {
            Ok(())
        }
    }
    canonical::read_array(text, Strictness::Canonical, &mut Shape)
        .map(|shape| shape.lengths().len())
        .map_err(|error| literal_error(text, "array", error))
}

impl TextConverter for TopList {
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        if let Some(texts) = &mut self.texts {
            texts.append(value)?;
        }
        if self.mixed {
            return Ok(());
        }
        let appended = self.append_list(value);
        let mismatch = self.list.as_ref().is_some_and(|list| list.depth_mismatch);
        match appended {
            // The type is still open: the column becomes text.
            Err(_) if mismatch && self.texts.is_some() => {
                self.mixed = true;
                self.list = None;
                Ok(())
            }
            Err(reason) if mismatch => Err(format!(
                "{reason}, fixed by the first record batch: cast the column to text, or raise the rows per record batch"
            )),
            other => other,
        }
    }

    fn finish(&mut self) -> ArrayRef {
        if self.mixed {
            return self.texts.as_mut().expect("kept when mixed").finish();
        }
        // The type is fixed now: lists.
        self.texts = None;
        if self.list.is_none() {
            // No array with elements yet: one dimension, for good. Replaying
            // NULLs and `{}` cannot fail.
            let _ = self.start(1);
        }
        self.list.as_mut().expect("started above").finish()
    }

    fn metadata(&self) -> Metadata {
        match (&self.texts, self.mixed) {
            (Some(texts), true) => texts.metadata(),
            _ => Metadata::new(),
        }
    }
}

/// Composite values: one child converter per field.
pub(crate) struct Struct {
    names: Vec<String>,
    children: Vec<Box<dyn TextConverter>>,
    nulls: NullBufferBuilder,
}

impl Struct {
    /// A struct of the named fields, at least one.
    pub(crate) fn new(names: Vec<String>, children: Vec<Box<dyn TextConverter>>) -> Struct {
        Struct {
            names,
            children,
            nulls: NullBufferBuilder::new(0),
        }
    }

    fn parse(&mut self, text: &[u8]) -> Result<(), Reason> {
        let (names, children) = (&self.names, &mut self.children);
        let count = canonical::read_record(text, |index, field| {
            let child = children.get_mut(index).ok_or_else(|| {
                format!(
                    "{} has more fields than the record type's {}",
                    Shown(text),
                    names.len()
                )
            })?;
            child
                .append(field)
                .map_err(|reason| format!("field {}: {reason}", names[index]))
        })
        .map_err(|error| literal_error(text, "record", error))?;
        match count == children.len() {
            true => Ok(()),
            false => Err(format!(
                "{} has {count} fields where the record type has {}",
                Shown(text),
                children.len()
            )),
        }
    }
}

impl TextConverter for Struct {
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        match value {
            Some(text) => self.parse(text)?,
            None => {
                // A null struct still takes a slot in every child.
                for child in &mut self.children {
                    child.append(None)?;
                }
            }
        }
        self.nulls.append(value.is_some());
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        let arrays: Vec<ArrayRef> = self
            .children
            .iter_mut()
            .map(|child| child.finish())
            .collect();
        let fields: Fields = self
            .names
            .iter()
            .zip(&arrays)
            .zip(&self.children)
            .map(|((name, array), child)| {
                Field::new(name, array.data_type().clone(), true).with_metadata(child.metadata())
            })
            .collect();
        Arc::new(StructArray::new(fields, arrays, self.nulls.finish()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columnar::convert::{Primitive, Utf8};
    use crate::columnar::text;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::Array;
    use arrow_schema::DataType;

    fn integers() -> Box<dyn TextConverter> {
        Box::new(Primitive::<Int64Type, _>::new(
            DataType::Int64,
            text::parse_i64,
        ))
    }

    fn texts() -> Box<dyn TextConverter> {
        Box::new(Utf8::new(Metadata::new()))
    }

    /// Each list of a one-dimensional list array, as optional strings.
    fn text_lists(array: &ArrayRef) -> Vec<Option<Vec<Option<String>>>> {
        let lists = array.as_list::<i32>();
        (0..lists.len())
            .map(|index| {
                lists.is_valid(index).then(|| {
                    let values = lists.value(index);
                    let strings = values.as_string::<i32>();
                    strings
                        .iter()
                        .map(|value| value.map(str::to_owned))
                        .collect()
                })
            })
            .collect()
    }

    #[test]
    fn arrays_keep_nulls_quotes_and_escapes() {
        let mut list = TopList::new(texts());
        for value in [
            Some(&br#"{"a b","c\"d","NULL",NULL,"","e\\",plain}"#[..]),
            None,
            Some(b"{}"),
            Some(b"[0:1]={x,y}"),
        ] {
            list.append(value).unwrap();
        }
        let array = list.finish();
        let some = |items: &[Option<&str>]| {
            Some(items.iter().map(|item| item.map(str::to_owned)).collect())
        };
        assert_eq!(
            text_lists(&array),
            vec![
                some(&[
                    Some("a b"),
                    Some("c\"d"),
                    Some("NULL"),
                    None,
                    Some(""),
                    Some("e\\"),
                    Some("plain")
                ]),
                None,
                some(&[]),
                some(&[Some("x"), Some("y")]),
            ]
        );
    }

    #[test]
    fn the_first_array_with_elements_sets_the_depth() {
        let mut list = TopList::new(integers());
        list.append(None).unwrap();
        list.append(Some(b"{}")).unwrap();
        list.append(Some(b"{{1,2},{NULL,4}}")).unwrap();
        let array = list.finish();
        assert!(list.metadata().is_empty());
        let outer = array.as_list::<i32>();
        assert_eq!(outer.len(), 3);
        assert!(outer.is_null(0));
        assert_eq!(outer.value(1).len(), 0);
        let rows = outer.value(2);
        let inner = rows.as_list::<i32>();
        assert_eq!(inner.len(), 2);
        let second = inner.value(1);
        let numbers = second.as_primitive::<Int64Type>();
        assert!(numbers.is_null(0));
        assert_eq!(numbers.value(1), 4);
        // The depth stays for the next record batch, which cannot change it.
        list.append(Some(b"{{5}}")).unwrap();
        let error = list.append(Some(b"{1,2}")).unwrap_err();
        assert!(error.contains("fewer dimensions"), "{error}");
        assert!(error.contains("first record batch"), "{error}");
        let error = list.append(Some(b"{{{1}}}")).unwrap_err();
        assert!(error.contains("more dimensions"), "{error}");
    }

    #[test]
    fn a_first_batch_of_mixed_depths_makes_the_column_text() {
        let mut list = TopList::new(integers());
        for value in [
            Some(&b"{1,2}"[..]),
            None,
            Some(b"{{1,2},{3,4}}"),
            Some(b"{}"),
        ] {
            list.append(value).unwrap();
        }
        let array = list.finish();
        assert_eq!(list.metadata()["sluice.text"], "array");
        let texts = array.as_string::<i32>();
        assert_eq!(
            texts.iter().collect::<Vec<_>>(),
            [Some("{1,2}"), None, Some("{{1,2},{3,4}}"), Some("{}")]
        );
        // Text for good, whatever the next batches hold.
        list.append(Some(b"{{{7}}}")).unwrap();
        assert_eq!(list.finish().as_string::<i32>().value(0), "{{{7}}}");
        // Text does not excuse a malformed literal in the first batch.
        let mut list = TopList::new(integers());
        assert!(list.append(Some(b"{1,x}")).is_err());
    }

    #[test]
    fn a_column_of_nulls_and_empty_arrays_is_one_dimensional() {
        let mut list = TopList::new(integers());
        list.append(None).unwrap();
        list.append(Some(b"{}")).unwrap();
        let array = list.finish();
        assert_eq!(array.len(), 2);
        assert!(
            matches!(array.data_type(), DataType::List(item) if item.data_type() == &DataType::Int64)
        );
        assert!(list.append(Some(b"{{1}}")).is_err());
    }

    #[test]
    fn malformed_arrays_are_errors() {
        for bad in [
            &b"{1,2"[..],
            b"1,2}",
            b"{1,,2}",
            b"{1,2}x",
            b"{\"unterminated}",
            b"{1}{2}",
            b"",
            b"{1,2\\}",
        ] {
            let mut list = List::new(1, integers());
            assert!(list.append(Some(bad)).is_err(), "{}", Shown(bad));
        }
        let mut list = List::new(1, integers());
        assert!(list.append(Some(b"{1,x}")).unwrap_err().contains("integer"));
    }

    #[test]
    fn records_become_structs_with_null_fields_and_doubled_quotes() {
        let mut record = Struct::new(
            vec!["id".into(), "label".into(), "tags".into(), "gone".into()],
            vec![
                integers(),
                texts(),
                Box::new(List::new(1, texts())),
                texts(),
            ],
        );
        record
            .append(Some(br#"(1,"say ""hi"", \\ ok","{a,""b c""}",)"#))
            .unwrap();
        record.append(None).unwrap();
        let array = record.finish();
        let structs = array.as_struct();
        assert!(structs.is_null(1));
        assert_eq!(structs.column(0).as_primitive::<Int64Type>().value(0), 1);
        assert_eq!(
            structs.column(1).as_string::<i32>().value(0),
            r#"say "hi", \ ok"#
        );
        assert_eq!(
            text_lists(structs.column(2))[0],
            Some(vec![Some("a".to_owned()), Some("b c".to_owned())])
        );
        assert!(structs.column(3).is_null(0));
        for bad in [
            &b"(1,a)x"[..],
            b"(1,a,b)",
            b"1,a,b,c",
            b"(1,a,{},d,e)",
            b"(x,a,{},)",
        ] {
            assert!(record.append(Some(bad)).is_err(), "{}", Shown(bad));
        }
    }

    proptest::proptest! {
        /// Malformed literals are errors, never panics (after an error the
        /// encoder stops: the builders are not used again).
        #[test]
        fn no_literal_panics_a_converter(text in "[{}(),\"\\\\a1 NUL=\\[\\]:]{0,24}") {
            let mut list = TopList::new(integers());
            let _ = list.append(Some(text.as_bytes()));
            let mut record = Struct::new(vec!["a".into(), "b".into()], vec![texts(), Box::new(List::new(1, texts()))]);
            let _ = record.append(Some(text.as_bytes()));
        }
    }
}
