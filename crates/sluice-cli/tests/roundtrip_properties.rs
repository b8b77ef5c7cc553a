//! Property test against a real PostgreSQL: generated values of every common
//! type (NULLs, empty and long strings, every Unicode plane, NaN and
//! infinities, dates and timestamps from 4713 BC to far beyond 9999 AD,
//! arrays with NULLs and quotes) survive `sluice export` → `sluice import` →
//! `sluice export` unchanged, in NDJSON and in CSV.
//!
//! Values are loaded with COPY's text format through a staging table, and
//! moments are made by the server from generated microsecond counts, so the
//! test relies on no formatter of its own for dates.

mod support;

use proptest::prelude::*;
use sluice_testkit::TestDb;
use support::{assert_exit, run, sluice};

/// The columns under test, with their types, and how each is made from the
/// staging table's text column of the same name.
const COLUMNS: &[(&str, &str, &str)] = &[
    ("i2", "int2", "i2::int2"),
    ("i4", "int4", "i4::int4"),
    ("i8", "int8", "i8::int8"),
    ("f4", "float4", "f4::float4"),
    ("f8", "float8", "f8::float8"),
    ("num", "numeric", "num::numeric"),
    ("flag", "bool", "flag::bool"),
    ("body", "text", "body"),
    ("short", "varchar(12)", "short::varchar(12)"),
    ("blob", "bytea", "blob::bytea"),
    ("day", "date", "date '2000-01-01' + day::int"),
    (
        "moment",
        "timestamp",
        "timestamp '2000-01-01' + (moment || ' microseconds')::interval",
    ),
    (
        "instant",
        "timestamptz",
        "timestamptz '2000-01-01 00:00:00+00' + (instant || ' microseconds')::interval",
    ),
    ("clock", "time", "clock::time"),
    ("zoned", "timetz", "zoned::timetz"),
    ("span", "interval", "span::interval"),
    ("id", "uuid", "id::uuid"),
    ("doc", "jsonb", "doc::jsonb"),
    ("raw", "json", "raw::json"),
    ("ints", "int4[]", "ints::int4[]"),
    ("words", "text[]", "words::text[]"),
];

/// `value` as a COPY text field (`\N` for NULL).
fn copy_field(value: &Option<String>) -> String {
    match value {
        None => "\\N".to_owned(),
        Some(text) => text
            .replace('\\', "\\\\")
            .replace('\t', "\\t")
            .replace('\n', "\\n")
            .replace('\r', "\\r"),
    }
}

/// A float as PostgreSQL reads it: its shortest exact digits, or a special word.
fn float_text(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        format!("{value:e}")
    }
}

/// Text without NUL, which PostgreSQL's text cannot hold.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ a\"\\\\,{}\t\r\n]{0,6}",
        Just(String::new()),
        "[a-z]{3000}",
    ]
    .prop_map(|text| text.replace('\0', ""))
}

/// A one-dimensional array literal of `elements` (quoted, NULLs bare).
fn array_literal(elements: &[Option<String>]) -> String {
    let inner: Vec<String> = elements
        .iter()
        .map(|element| match element {
            None => "NULL".to_owned(),
            Some(text) => format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\"")),
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "-?(0|[1-9][0-9]{0,29})\\.[0-9]{1,10}"
            .prop_map(|digits| serde_json::from_str(&digits).unwrap()),
        text().prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(text(), inner, 0..4)
                .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
        ]
    })
    .prop_map(|value| value.to_string())
}

/// `strategy`'s values, or NULL one time in eight.
fn nullable<S: Strategy<Value = String>>(strategy: S) -> impl Strategy<Value = Option<String>> {
    prop_oneof![1 => Just(None), 7 => strategy.prop_map(Some)]
}

/// One row of staging text, in `COLUMNS` order.
fn row() -> impl Strategy<Value = Vec<Option<String>>> {
    let floats = prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
    ];
    let numbers = (
        nullable(any::<i16>().prop_map(|v| v.to_string())),
        nullable(any::<i32>().prop_map(|v| v.to_string())),
        nullable(any::<i64>().prop_map(|v| v.to_string())),
        nullable(any::<f32>().prop_map(|v| float_text(f64::from(v)))),
        nullable(floats.prop_map(float_text)),
        nullable(prop_oneof![
            "-?[0-9]{1,40}(\\.[0-9]{1,30})?",
            Just("NaN".to_owned()),
            Just("Infinity".to_owned()),
            Just("-Infinity".to_owned()),
        ]),
        nullable(any::<bool>().prop_map(|v| v.to_string())),
    );
    let texts = (
        nullable(text()),
        nullable("[^\u{0}]{0,12}"),
        nullable(
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(|bytes| {
                let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
                format!("\\x{hex}")
            }),
        ),
    );
    let moments = (
        // Days and microseconds from 2000-01-01, within PostgreSQL's ranges.
        nullable((-2_451_545i64..2_000_000_000).prop_map(|v| v.to_string())),
        nullable(
            (-211_813_488_000_000_000i64..9_000_000_000_000_000_000).prop_map(|v| v.to_string()),
        ),
        nullable(
            (-211_813_488_000_000_000i64..9_000_000_000_000_000_000).prop_map(|v| v.to_string()),
        ),
        nullable((0u64..86_400_000_000).prop_map(|us| {
            let seconds = us / 1_000_000;
            format!(
                "{:02}:{:02}:{:02}.{:06}",
                seconds / 3600,
                seconds / 60 % 60,
                seconds % 60,
                us % 1_000_000
            )
        })),
        nullable(
            (0u32..86_400, -57_599i32..57_600).prop_map(|(seconds, offset)| {
                let sign = if offset < 0 { '-' } else { '+' };
                let offset = offset.unsigned_abs();
                format!(
                    "{:02}:{:02}:{:02}{sign}{:02}:{:02}:{:02}",
                    seconds / 3600,
                    seconds / 60 % 60,
                    seconds % 60,
                    offset / 3600,
                    offset / 60 % 60,
                    offset % 60
                )
            }),
        ),
        nullable(
            (
                -100_000i32..100_000,
                -100_000i32..100_000,
                -1_000_000_000_000_000i64..1_000_000_000_000_000,
            )
                .prop_map(|(months, days, us)| {
                    format!("{months} months {days} days {us} microseconds")
                }),
        ),
    );
    let documents = (
        nullable(any::<u128>().prop_map(|v| {
            let hex = format!("{v:032x}");
            format!(
                "{}-{}-{}-{}-{}",
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..]
            )
        })),
        nullable(json_text()),
        nullable(json_text()),
        nullable(
            proptest::collection::vec(proptest::option::weighted(0.8, any::<i32>()), 0..6)
                .prop_map(|values| {
                    let elements: Vec<Option<String>> =
                        values.iter().map(|v| v.map(|v| v.to_string())).collect();
                    array_literal(&elements)
                }),
        ),
        nullable(
            proptest::collection::vec(proptest::option::weighted(0.8, text()), 0..5)
                .prop_map(|values| array_literal(&values)),
        ),
    );
    (numbers, texts, moments, documents).prop_map(|(n, t, m, d)| {
        vec![
            n.0, n.1, n.2, n.3, n.4, n.5, n.6, t.0, t.1, t.2, m.0, m.1, m.2, m.3, m.4, m.5, d.0,
            d.1, d.2, d.3, d.4,
        ]
    })
}

/// Loads `rows` into table `source` (with a serial `ord` for the order).
fn load(db: &TestDb, rows: &[Vec<Option<String>>]) {
    let staging: Vec<String> = COLUMNS
        .iter()
        .map(|(name, ..)| format!("{name} text"))
        .collect();
    let typed: Vec<String> = COLUMNS
        .iter()
        .map(|(name, kind, _)| format!("{name} {kind}"))
        .collect();
    let names: Vec<&str> = COLUMNS.iter().map(|(name, ..)| *name).collect();
    let made: Vec<&str> = COLUMNS.iter().map(|(.., made)| *made).collect();
    let data: String = rows
        .iter()
        .map(|row| row.iter().map(copy_field).collect::<Vec<_>>().join("\t") + "\n")
        .collect();
    db.execute(&format!(
        "set timezone = 'UTC';
         create table staging (ord serial, {staging});
         create table source (ord int primary key, {typed});
         create table target (ord int primary key, {typed});
         copy staging ({names}) from stdin;
{data}\\.
         insert into source select ord, {made} from staging;",
        staging = staging.join(", "),
        typed = typed.join(", "),
        names = names.join(", "),
        made = made.join(", "),
    ));
}

fn export(db: &TestDb, table: &str, format: &str) -> Vec<u8> {
    let query = format!("select * from {table} order by ord");
    let output = run(
        sluice().args([
            "export",
            "--db",
            db.url(),
            "--query",
            &query,
            "--format",
            format,
        ]),
        b"",
    );
    assert_exit(&output, 0);
    output.stdout
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_type_survives_export_import_export(rows in proptest::collection::vec(row(), 1..6)) {
        let db = TestDb::new();
        load(&db, &rows);
        for format in ["ndjson", "csv"] {
            db.execute("truncate target");
            let first = export(&db, "source", format);
            let output = run(
                sluice().args(["import", "--db", db.url(), "--table", "target", "--format", format]),
                &first,
            );
            assert_exit(&output, 0);
            let second = export(&db, "target", format);
            prop_assert_eq!(
                String::from_utf8_lossy(&second),
                String::from_utf8_lossy(&first),
                "{} changed on the way", format
            );
        }
    }
}
