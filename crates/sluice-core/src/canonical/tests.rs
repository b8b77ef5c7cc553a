//! Every form written and read back: the writers here (and, for arrays,
//! records and intervals, test writers that follow the server's `array_out`,
//! `record_out` and `interval_out`) against the readers, in both
//! strictnesses; and whatever the canonical reader takes, the lenient one
//! reads as the same value.

use proptest::prelude::*;

use super::*;
use Strictness::{Canonical, Lenient};

/// PostgreSQL's first and last dates (4713-01-01 BC, 5874897-12-31) in days from 1970.
const FIRST_DAY: i64 = -2_440_550;
const LAST_DAY: i64 = 2_145_042_905;
/// PostgreSQL's first and last timestamps (4713 BC, 294276-12-31 23:59:59.999999) in µs from 1970.
const FIRST_MICROS: i128 = -210_866_803_200_000_000;
const LAST_MICROS: i128 = 9_224_318_015_999_999_999;
const DAY_MICROS: i64 = 86_400_000_000;

/// `interval_out` in the `postgres` style.
fn write_interval(interval: Interval) -> String {
    let mut text = String::new();
    let (mut is_zero, mut is_before) = (true, false);
    let years = interval.months / 12;
    let months = interval.months % 12;
    for (value, unit) in [(years, "year"), (months, "mon"), (interval.days, "day")] {
        if value == 0 {
            continue;
        }
        let separator = if is_zero { "" } else { " " };
        let plus = if is_before && value > 0 { "+" } else { "" };
        let plural = if value != 1 { "s" } else { "" };
        text.push_str(&format!("{separator}{plus}{value} {unit}{plural}"));
        is_before = value < 0;
        is_zero = false;
    }
    let micros = interval.microseconds;
    if is_zero || micros != 0 {
        let sign = if micros < 0 {
            "-"
        } else if is_before {
            "+"
        } else {
            ""
        };
        let magnitude = micros.unsigned_abs();
        let seconds = magnitude / 1_000_000;
        let fraction = magnitude % 1_000_000;
        let separator = if is_zero { "" } else { " " };
        text.push_str(&format!(
            "{separator}{sign}{:02}:{:02}:{:02}",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        ));
        if fraction != 0 {
            text.push_str(format!(".{fraction:06}").trim_end_matches('0'));
        }
    }
    text
}

/// `array_out`'s quoting of one element.
fn write_element(value: &str, text: &mut String) {
    let special = |c: char| matches!(c, '"' | '\\' | '{' | '}' | ',') || c.is_ascii_whitespace();
    if value.is_empty() || value.eq_ignore_ascii_case("NULL") || value.chars().any(special) {
        text.push('"');
        for c in value.chars() {
            if c == '"' || c == '\\' {
                text.push('\\');
            }
            text.push(c);
        }
        text.push('"');
    } else {
        text.push_str(value);
    }
}

/// A two-dimensional array literal of `rows` × `columns`.
fn write_array(rows: &[Vec<Option<String>>]) -> String {
    let mut text = String::from("{");
    for (row_index, row) in rows.iter().enumerate() {
        if row_index > 0 {
            text.push(',');
        }
        text.push('{');
        for (index, value) in row.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            match value {
                Some(value) => write_element(value, &mut text),
                None => text.push_str("NULL"),
            }
        }
        text.push('}');
    }
    text.push('}');
    text
}

/// `record_out`: fields quoted when they hold a special character or are
/// empty, `"` and `\` doubled inside quotes.
fn write_record(fields: &[Option<String>]) -> String {
    let mut text = String::from("(");
    for (index, field) in fields.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        let Some(value) = field else { continue };
        let special =
            |c: char| matches!(c, '"' | '\\' | '(' | ')' | ',') || c.is_ascii_whitespace();
        if value.is_empty() || value.chars().any(special) {
            text.push('"');
            for c in value.chars() {
                if c == '"' || c == '\\' {
                    text.push(c);
                }
                text.push(c);
            }
            text.push('"');
        } else {
            text.push_str(value);
        }
    }
    text.push(')');
    text
}

/// Collects an array literal's elements and checks the events' order.
#[derive(Default)]
struct Collect {
    elements: Vec<Option<Vec<u8>>>,
    open: usize,
}

impl ArrayVisitor for Collect {
    type Error = ();

    fn open(&mut self, depth: usize, _index: usize) -> Result<(), ()> {
        assert_eq!(depth, self.open);
        self.open += 1;
        Ok(())
    }

    fn element(&mut self, depth: usize, index: usize, value: Option<&[u8]>) -> Result<(), ()> {
        assert_eq!(depth + 1, self.open);
        let _ = index;
        self.elements.push(value.map(<[u8]>::to_vec));
        Ok(())
    }

    fn close(&mut self, depth: usize, _items: usize) -> Result<(), ()> {
        self.open -= 1;
        assert_eq!(depth, self.open);
        Ok(())
    }
}

fn both<T: PartialEq + std::fmt::Debug>(read: impl Fn(Strictness) -> T) -> T {
    let canonical = read(Canonical);
    assert_eq!(read(Lenient), canonical, "the lenient reader disagrees");
    canonical
}

fn text_value() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9 ,{}()\"\\\\.é-]{0,8}").expect("a valid regex")
}

proptest! {
    #[test]
    fn dates_read_back(days in FIRST_DAY..=LAST_DAY) {
        let mut text = Vec::new();
        write_date(days, &mut text);
        prop_assert_eq!(both(|strictness| read_date(&text, strictness)), Ok(Moment::Finite(days)));
    }

    #[test]
    fn timestamps_read_back(
        micros in FIRST_MICROS..=LAST_MICROS,
        offset in -MAX_OFFSET..=MAX_OFFSET,
        zoned: bool,
    ) {
        let mut text = Vec::new();
        let (offset, zone) = match zoned {
            true => (Some(offset as i32), Zone::With),
            false => (None, Zone::Without),
        };
        write_timestamp(micros * 1000, offset, &mut text).unwrap();
        let read = both(|strictness| read_timestamp(&text, zone, strictness));
        prop_assert_eq!(read, Ok(Moment::Finite(micros)), "{}", String::from_utf8_lossy(&text));
    }

    #[test]
    fn times_read_back(micros in 0..=DAY_MICROS, offset in -MAX_OFFSET..=MAX_OFFSET) {
        let mut text = Vec::new();
        write_clock(micros * 1000, &mut text);
        prop_assert_eq!(both(|strictness| read_time(&text, strictness)), Ok(micros));
        write_offset(offset as i32, &mut text);
        let read = both(|strictness| read_time_tz(&text, strictness));
        prop_assert_eq!(read, Ok((micros, offset as i32)));
    }

    #[test]
    fn uuids_and_booleans_read_back(bytes: [u8; 16], value: bool) {
        let mut text = Vec::new();
        write_uuid(&bytes, &mut text);
        prop_assert_eq!(both(|strictness| read_uuid(&text, strictness)), Ok(bytes));
        let text: &[u8] = if value { b"t" } else { b"f" };
        prop_assert_eq!(both(|strictness| read_bool(text, strictness)), Ok(value));
    }

    #[test]
    fn intervals_read_back(months: i32, days: i32, microseconds: i64) {
        let interval = Interval { months, days, microseconds };
        let text = write_interval(interval);
        prop_assert_eq!(read_interval(text.as_bytes()), Ok(interval), "{}", text);
        // The canonical text signs every field after a negative one, so SQL
        // standard's rule for a leading minus reads it the same way.
        for signs in [IntervalSigns::PerField, IntervalSigns::Leading] {
            let read = read_interval_lenient(text.as_bytes(), signs);
            prop_assert_eq!(read, Ok(interval), "{}", text);
        }
    }

    #[test]
    fn arrays_read_back(
        rows in (1usize..4, 1usize..4).prop_flat_map(|(rows, columns)| {
            proptest::collection::vec(
                proptest::collection::vec(proptest::option::of(text_value()), columns),
                rows,
            )
        })
    ) {
        let text = write_array(&rows);
        let expected: Vec<Option<Vec<u8>>> = rows
            .iter()
            .flatten()
            .map(|value| value.as_ref().map(|value| value.as_bytes().to_vec()))
            .collect();
        for strictness in [Canonical, Lenient] {
            let mut collect = Collect::default();
            let shape = read_array(text.as_bytes(), strictness, &mut collect);
            prop_assert_eq!(
                shape.map(|shape| shape.lengths().to_vec()),
                Ok(vec![rows.len() as i32, rows[0].len() as i32]),
                "{}", text
            );
            prop_assert_eq!(&collect.elements, &expected, "{}", text);
        }
    }

    #[test]
    fn records_read_back(fields in proptest::collection::vec(proptest::option::of(text_value()), 1..5)) {
        // `record_out` writes an empty string quoted, so only a NULL is empty.
        let text = write_record(&fields);
        let mut read = Vec::new();
        let count = read_record::<()>(text.as_bytes(), |_, value| {
            read.push(value.map(|value| String::from_utf8_lossy(value).into_owned()));
            Ok(())
        });
        prop_assert_eq!(count, Ok(fields.len()), "{}", text);
        prop_assert_eq!(read, fields, "{}", text);
    }

    /// Whatever the canonical reader takes, the lenient one takes as the
    /// same value; no text panics either.
    #[test]
    fn lenient_reads_what_canonical_reads(
        text in "[-+0-9:. TZtfPYMWDHSBCinftyepoch{}(),\"\\\\NUL\\[\\]=]{0,30}"
    ) {
        let text = text.as_bytes();
        fn agree<T: PartialEq + std::fmt::Debug, E>(read: impl Fn(Strictness) -> Result<T, E>) -> bool {
            match read(Canonical) {
                Ok(value) => read(Lenient).ok() == Some(value),
                Err(_) => {
                    let _ = read(Lenient);
                    true
                }
            }
        }
        prop_assert!(agree(|strictness| read_bool(text, strictness)));
        prop_assert!(agree(|strictness| read_uuid(text, strictness)));
        prop_assert!(agree(|strictness| read_date(text, strictness)));
        prop_assert!(agree(|strictness| read_time(text, strictness)));
        prop_assert!(agree(|strictness| read_time_tz(text, strictness)));
        prop_assert!(agree(|strictness| read_timestamp(text, Zone::With, strictness)));
        prop_assert!(agree(|strictness| read_timestamp(text, Zone::Without, strictness)));
        let array = |strictness| {
            let mut collect = Collect::default();
            read_array(text, strictness, &mut collect).map(|shape| (shape, collect.elements))
        };
        prop_assert!(agree(array));
        let _ = read_interval(text);
        let _ = read_interval_lenient(text, IntervalSigns::PerField);
        let _ = read_interval_lenient(text, IntervalSigns::Leading);
        let _ = read_record::<()>(text, |_, _| Ok(()));
    }
}

#[test]
fn a_timestamp_writes_its_local_time_and_era() {
    let mut text = Vec::new();
    write_timestamp(-62_135_596_800_000_000_000 - 1000, Some(0), &mut text).unwrap();
    assert_eq!(text, b"0001-12-31 23:59:59.999999+00 BC");
    text.clear();
    write_timestamp(0, Some(-1800), &mut text).unwrap();
    assert_eq!(text, b"1969-12-31 23:30:00-00:30");
}

#[test]
fn the_interval_writer_prints_as_the_server_does() {
    let interval = |months, days, microseconds| Interval {
        months,
        days,
        microseconds,
    };
    for (value, text) in [
        (interval(0, 0, 0), "00:00:00"),
        (
            interval(14, 3, 14_706_789_000),
            "1 year 2 mons 3 days 04:05:06.789",
        ),
        (
            interval(-14, 3, -14_706_000_000),
            "-1 years -2 mons +3 days -04:05:06",
        ),
        (interval(0, -1, 1), "-1 days +00:00:00.000001"),
        (interval(1, 0, 0), "1 mon"),
    ] {
        assert_eq!(write_interval(value), text);
    }
}

#[test]
fn malformed_literals_say_why() {
    let read = |text: &[u8], strictness| read_array(text, strictness, &mut Collect::default());
    for (text, why) in [
        (&b"{1,2"[..], "expected \",\" or \"}\""),
        (b"{{1},{1,2}}", "sub-arrays of different lengths"),
        (b"{{1},2}", "sub-arrays of different depths"),
        (b"{1,,2}", "an empty element"),
        (b"{1}{2}", "text after the closing brace"),
        (b"{1,2\\}", "unexpected character in an element"),
        (b"[1:3]={1,2}", "the dimensions do not match the elements"),
        (b"{{{{{{{1}}}}}}}", "more than six dimensions"),
        (b"{\"a", "unterminated quoted element"),
        // Found by the canonical_forms fuzz target: the lenient reader drops
        // the trailing blank, so the canonical one must not read it.
        (b"{\xb1\xb1 J\n}", "a blank outside quotes"),
        (b"{a b}", "a blank outside quotes"),
    ] {
        assert_eq!(
            read(text, Canonical),
            Err(LiteralError::Malformed(why)),
            "{text:?}"
        );
    }
    assert_eq!(
        read(b"[0:1]={5,6}", Canonical).map(|shape| shape.lower_bounds().to_vec()),
        Ok(vec![0])
    );
    assert_eq!(read(b"{}", Canonical), Ok(ArrayShape::default()));
    let mut collect = Collect::default();
    assert!(read_array(b" { a\\,b , \"c\" } ", Lenient, &mut collect).is_ok());
    assert_eq!(
        collect.elements,
        [Some(b"a,b".to_vec()), Some(b"c".to_vec())]
    );
    assert!(read(b" {1}", Canonical).is_err());
    for bad in [&b"(1,a)x"[..], b"1,a", b"(1,\"a)", b"(a\"b)", b""] {
        assert!(read_record::<()>(bad, |_, _| Ok(())).is_err(), "{bad:?}");
    }
    assert_eq!(
        read_record::<()>(b"()", |_, value| {
            assert_eq!(value, None);
            Ok(())
        }),
        Ok(1)
    );
}
