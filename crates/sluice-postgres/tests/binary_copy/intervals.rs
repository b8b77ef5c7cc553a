//! `interval` and `timetz` over binary COPY, with the server as the oracle:
//! every spelling the encoder reads is loaded by binary COPY and compared,
//! field for field (`interval_send`), with what the server's own
//! `'…'::interval` gives in a session of the same `IntervalStyle`; every
//! spelling it refuses must be one the server refuses too, or one of the
//! few it refuses on purpose. A few thousand generated spellings (units,
//! abbreviations, signs, fractions, styles) go through the same check.

use bytes::BytesMut;
use sluice_core::load::ImportOptions;
use sluice_core::{Batch, Meter};
use sluice_postgres::binary_encode::{encoder_for_column, SessionSettings};
use sluice_postgres::{describe_table, Config, Connection};
use sluice_testkit::TestDb;

use super::{import_csv, round_trip, texts};

/// What the oracle found: spellings read differently from the server, and
/// those the encoder refused with its SQLSTATE and the server's reading
/// (`error <SQLSTATE>` or the value's bytes in hex).
struct Verdict {
    differing: Vec<String>,
    refused: Vec<(String, String, String)>,
}

/// The server's reading of a text in this session: the value's binary form
/// in hex, or `error` and the SQLSTATE.
fn server_reader(sql_type: &str) -> String {
    format!(
        "create function server_reads(t text) returns text language plpgsql as $$ \
         begin return encode(interval_send(t::{sql_type}), 'hex'); \
         exception when others then return 'error ' || sqlstate; end $$;"
    )
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Loads the spellings the encoder reads into a fresh `(n, s, v sql_type)`
/// table by binary COPY, in a session whose `IntervalStyle` is `style`, and
/// compares each with the server's reading of `s`.
async fn oracle(spellings: &[String], sql_type: &str, style: &str) -> Verdict {
    let db = TestDb::new();
    db.execute(&format!(
        "create table oracle (n int4, s text, v {sql_type}); {}",
        server_reader(sql_type)
    ));
    let mut config: Config = db.url().parse().unwrap();
    config.settings.push(("IntervalStyle".into(), style.into()));
    let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    assert_eq!(connection.interval_style(), style);
    let table = describe_table(&mut connection, "oracle").await.unwrap();
    let session = SessionSettings {
        time_zone: connection.time_zone(),
        interval_style: connection.interval_style(),
    };
    let encoders: Vec<_> = table
        .columns
        .iter()
        .map(|column| {
            encoder_for_column(column, table.declared_type(&column.name), &session)
                .unwrap_or_else(|| panic!("no encoder for {}", column.name))
        })
        .collect();
    let mut batch = Batch::new(3);
    let mut refused = Vec::new();
    let mut scratch = BytesMut::new();
    for (index, spelling) in spellings.iter().enumerate() {
        match encoders[2].encode(spelling.as_bytes(), &mut scratch) {
            Ok(()) => {
                batch.push_value((index + 1).to_string().as_bytes());
                batch.push_value(spelling.as_bytes());
                batch.push_value(spelling.as_bytes());
            }
            Err(error) => refused.push((spelling.clone(), error.code().to_owned())),
        }
    }
    let statement = "copy oracle (n, s, v) from stdin (format binary)";
    let mut copy = connection
        .copy_in_binary(statement, &table.columns, encoders)
        .await
        .unwrap();
    copy.write_rows(&batch, 0..batch.num_rows()).await.unwrap();
    copy.finish().await.unwrap();
    let set_style = format!("set intervalstyle = {style};");
    let differing = db.query_text(&format!(
        "{set_style} select s || '  binary: ' || encode(interval_send(v), 'hex') \
         || '  server: ' || server_reads(s) from oracle \
         where encode(interval_send(v), 'hex') is distinct from server_reads(s) order by n"
    ));
    let refused = server_readings(&db, &set_style, refused);
    Verdict {
        differing: differing.lines().map(str::to_owned).collect(),
        refused,
    }
}

/// The server's reading of each refused spelling.
fn server_readings(
    db: &TestDb,
    set_style: &str,
    refused: Vec<(String, String)>,
) -> Vec<(String, String, String)> {
    if refused.is_empty() {
        return Vec::new();
    }
    let values: Vec<String> = refused
        .iter()
        .enumerate()
        .map(|(index, (spelling, _))| format!("({index}, {})", literal(spelling)))
        .collect();
    let readings = db.query_text(&format!(
        "{set_style} select server_reads(s) from (values {}) r(n, s) order by n",
        values.join(", ")
    ));
    refused
        .into_iter()
        .zip(readings.lines())
        .map(|((spelling, code), reading)| (spelling, code, reading.to_owned()))
        .collect()
}

/// Spellings of every rule: each output style, unit words with their
/// abbreviations and plurals, fractions that cascade, signs, `ago`, bare
/// numbers, times, punctuation, case, blanks, and the limits of each field.
const SPELLINGS: &[&str] = &[
    // IntervalStyle postgres
    "1 year 2 mons 3 days 04:05:06.789",
    "-1 days +02:03:00",
    "-1 years -2 mons +3 days -04:05:06.789",
    "00:00:00",
    "-00:00:01",
    "1 day",
    "2 mons",
    // postgres_verbose
    "@ 1 year 2 mons -3 days 4 hours 5 mins 6.789 secs ago",
    "@ 1 min",
    "@ 0",
    "@ 1 day -1 hours ago",
    // sql_standard
    "1-2 3 4:05:06.789",
    "-1-2 -3 -4:05:06",
    "+1-2 -3 +4:05:06",
    "1-2",
    "-1-2",
    "3 4:05:06",
    "-3 4:05:06",
    "0",
    "-0-11",
    // iso_8601
    "P1Y2M3DT4H5M6.789S",
    "P-1Y-2M3DT-4H-5M-6S",
    "P0001-02-03T04:05:06",
    "P0001-02-03",
    "P0001-02",
    "P1-2-3T4:5:6.5",
    "P00010203T040506",
    "P00010203T040506.789",
    "P00010203",
    "PT1H",
    "PT1.5H",
    "PT0.000001S",
    "P1.5Y",
    "P0.5M",
    "P1.5W",
    "P2W3D",
    "P1D2D",
    "PT",
    "P5",
    "P1.5",
    "P1e2D",
    "P1E-2Y",
    "PT-0.5S",
    "P.5D",
    "PT04:05",
    "PT040506",
    "P-00010203",
    // what sluice's own readers write: Arrow/Parquet (nanoseconds), JSON
    // export (ISO with signed time fields), MariaDB TIME
    "1 mons -2 days -3.500000000 secs",
    "0 mons 0 days 0.000000500 secs",
    "0 mons 0 days 0.000001500 secs",
    "-2147483648 mons 2147483647 days 9223372036854.775807000 secs",
    "12 mons 0 days -9223372036854.775808000 secs",
    "PT0S",
    "P1Y2M-3DT-4H-5M-6.5S",
    "PT-0.000001S",
    "-838:59:59.000000",
    "838:59:59.999999",
    // unit words, abbreviations, plurals
    "1 microsecond",
    "2 microseconds",
    "3 us",
    "4 usec",
    "5 usecs",
    "6 useconds",
    "1 millisecond",
    "2 milliseconds",
    "3 ms",
    "4 msec",
    "5 msecs",
    "6 mseconds",
    "1 second",
    "2 seconds",
    "3 s",
    "4 sec",
    "5 secs",
    "1 minute",
    "2 minutes",
    "3 m",
    "4 min",
    "5 mins",
    "1 hour",
    "2 hours",
    "3 h",
    "4 hr",
    "5 hrs",
    "1 day",
    "2 days",
    "3 d",
    "1 week",
    "2 weeks",
    "3 w",
    "1 month",
    "2 months",
    "3 mon",
    "4 mons",
    "1 year",
    "2 years",
    "3 y",
    "4 yr",
    "5 yrs",
    "1 decade",
    "2 decades",
    "3 dec",
    "4 decs",
    "1 century",
    "2 centuries",
    "3 c",
    "4 cent",
    "1 millennium",
    "2 millennia",
    "3 mil",
    "4 mils",
    "2 millenniums",
    "1 microsecondsxx",
    // case, blanks, punctuation
    "1 YEAR 2 Mons",
    "  1 day  ",
    "\t1\tday\n",
    "1day",
    "1d2h",
    "1h30m",
    "1mon2d",
    "1dec2d",
    "1 day, 2 hours",
    "(1 day)",
    "1 day; 2 hours",
    "- 1 day",
    "+1 day",
    // fractions and their cascade
    "1.5 years",
    "1.5 days",
    "1.5 months",
    "1.5 weeks",
    "0.1 decade",
    "0.001 millennium",
    "1.01 centuries",
    "0.3 years",
    "0.333333 months",
    "1.123456789 days",
    "-1.5 years",
    "-1.5 days",
    "-1.75 months",
    "0.5 weeks",
    "1.5 hours",
    "1.5 minutes",
    "1.5 ms",
    "1.5 us",
    "0.5 us",
    "1.0000005 seconds",
    "0.0000015",
    "-0.0000005",
    ".5 hours",
    "5.",
    ".",
    "00:30 1.5 days",
    "1.5 days 00:30",
    // bare numbers, times
    "42",
    "-42",
    "1.5",
    "-1.5",
    "12:34",
    "12:34:56",
    "-12:34:56.5",
    "+12:34",
    "1:59.5",
    "00:00:60",
    "123456:00:00",
    "1 02:00",
    "1 +02:03",
    "1 -02:03",
    "1 2 hours",
    "1 days 2",
    "12:00:00.9999995",
    "00:00:00.0000005",
    "1 day 00:00:00.1234567",
    // ago
    "1 day ago",
    "1 year 2 months ago",
    "-1 day ago",
    "01:00 ago",
    "1 day 02:00 ago",
    // limits
    "2147483647 months",
    "-2147483648 months",
    "178956970 years 7 months",
    "-178956970 years -8 months",
    "2147483647 days",
    "-2147483648 days",
    "9223372036854775807 us",
    "-9223372036854775808 us",
    "2562047788:00:54.775807",
    "-2562047788:00:54.775807",
    "9223372036854 ms",
    "306783378 weeks",
    "2147483647 days 2147483647 months",
];

/// Spellings no server reads, or only PostgreSQL 15 (the encoder refuses
/// those on purpose: see the module docs of `binary_encode::interval`).
const REFUSED: &[(&str, bool)] = &[
    // (spelling, whether PostgreSQL 15 reads it)
    ("", false),
    ("1 fortnight", false),
    ("1 day.", false),
    (" P1D", false),
    ("p1d", false),
    ("P1D ", false),
    ("P", false),
    ("1:60", false),
    ("+1:60", false),
    ("1-13", false),
    ("2147483648 days", false),
    ("2147483648 months", false),
    ("178956971 years", false),
    ("2147483647 months 1 year", false),
    ("9223372036854775808 us", false),
    ("2562047789 hours", false),
    // The server negates the time after reading it: one more is too many.
    ("-2562047788:00:54.775808", false),
    ("1 microsecond 2 microseconds", false),
    ("1 ago", false),
    ("ago", false),
    ("1 day 1 day", false),
    ("1 day 00:30 5 ms", false),
    ("infinity", false),
    ("-infinity", false),
    ("1 hr30min", false),
    ("1 qtr", false),
    ("1 day ago 2 hours", true),
    ("1 hours days", true),
    ("day 1", true),
    ("1-", true),
    ("1:", true),
    ("1::2", true),
    ("P0x1AD", true),
    ("1 dáy", false),
    (
        "2147483647 days 2147483647 months 9223372036854775807 us",
        true,
    ),
];

async fn check_spellings(spellings: &[String], sql_type: &str, style: &str) -> Verdict {
    let verdict = oracle(spellings, sql_type, style).await;
    assert!(
        verdict.differing.is_empty(),
        "{sql_type} in {style}: read differently from the server:\n{}",
        verdict.differing.join("\n")
    );
    verdict
}

fn owned(spellings: &[&str]) -> Vec<String> {
    spellings
        .iter()
        .map(|&spelling| spelling.to_owned())
        .collect()
}

#[tokio::test]
async fn interval_spellings_read_as_the_server_reads_them() {
    for style in ["postgres", "sql_standard"] {
        let verdict = check_spellings(&owned(SPELLINGS), "interval", style).await;
        let refused: Vec<_> = verdict
            .refused
            .iter()
            .map(|(s, code, server)| format!("{s:?} {code} (server: {server})"))
            .collect();
        assert!(
            refused.is_empty(),
            "{style}: refused\n{}",
            refused.join("\n")
        );
    }
}

#[tokio::test]
async fn refused_interval_spellings_are_refused_by_the_server_or_on_purpose() {
    let spellings: Vec<String> = REFUSED
        .iter()
        .map(|(spelling, _)| (*spelling).to_owned())
        .collect();
    let verdict = check_spellings(&spellings, "interval", "postgres").await;
    let refused: Vec<&str> = verdict
        .refused
        .iter()
        .map(|(spelling, ..)| spelling.as_str())
        .collect();
    let read: Vec<&&str> = REFUSED
        .iter()
        .map(|(spelling, _)| spelling)
        .filter(|spelling| !refused.contains(spelling))
        .collect();
    assert!(read.is_empty(), "read: {read:?}");
    for ((spelling, code, server), (_, server_reads)) in verdict.refused.iter().zip(REFUSED) {
        match server.strip_prefix("error ") {
            // Where both refuse, the SQLSTATE is the server's.
            Some(server_code) => {
                assert!(!server_reads, "{spelling:?}: the server refused it");
                assert_eq!(code, server_code, "{spelling:?}");
            }
            None => assert!(
                server_reads,
                "{spelling:?}: the server reads it as {server}"
            ),
        }
    }
}

#[tokio::test]
async fn typmod_precision_is_the_servers_to_apply() {
    check_spellings(&owned(SPELLINGS), "interval(2)", "postgres").await;
    let read = round_trip("interval(0)", &["1 day 00:00:00.5", "1.7 seconds"]).await;
    assert_eq!(texts(&read)[..2], ["1 day 00:00:01", "00:00:02"]);
}

#[tokio::test]
async fn generated_interval_spellings_read_as_the_server_reads_them() {
    let spellings = generate(3000, 0x5eed_1e55);
    for style in ["postgres", "sql_standard"] {
        let verdict = check_spellings(&spellings, "interval", style).await;
        // The generator writes only what the encoder claims to read, or
        // what nobody reads (fields that clash, overflows).
        let unexpected: Vec<_> = verdict
            .refused
            .iter()
            .filter(|(_, _, server)| !server.starts_with("error"))
            .map(|(spelling, code, server)| format!("{spelling:?} {code} (server: {server})"))
            .collect();
        assert!(
            unexpected.is_empty(),
            "{style}: refused what the server reads:\n{}",
            unexpected.join("\n")
        );
        let read = spellings.len() - verdict.refused.len();
        assert!(read > spellings.len() * 3 / 4, "{style}: only {read} read");
    }
}

#[tokio::test]
async fn intervals_round_trip_with_arrays_and_nulls() {
    let read = round_trip(
        "interval",
        &[
            "1 year 2 mons",
            "P1DT2H",
            "-1 days +02:03:00",
            "1.5 days ago",
        ],
    )
    .await;
    assert_eq!(
        texts(&read),
        [
            "1 year 2 mons",
            "1 day 02:00:00",
            "-1 days +02:03:00",
            "-1 days -12:00:00",
            "<null>"
        ]
    );
    let read = round_trip(
        "interval[]",
        &[r#"{"1 day","-00:00:01",NULL,P1Y}"#, "{{1,2},{3,4}}", "{}"],
    )
    .await;
    assert_eq!(
        texts(&read)[..2],
        [
            r#"{"1 day",-00:00:01,NULL,"1 year"}"#,
            r#"{{00:00:01,00:00:02},{00:00:03,00:00:04}}"#
        ]
    );
}

#[tokio::test]
async fn bad_intervals_and_timetz_name_their_line_and_column() {
    let cases = [
        (
            "span",
            "2,1 fortnight,12:00:00+00",
            "22007",
            "invalid input syntax for type interval: \"1 fortnight\"",
        ),
        (
            "span",
            "2,2147483648 days,12:00:00+00",
            "22015",
            "interval field value out of range: \"2147483648 days\"",
        ),
        (
            "span",
            "2,178956971 years,12:00:00+00",
            "22008",
            "interval out of range: \"178956971 years\"",
        ),
        // PostgreSQL 15 reads this one (16 does not): refused on purpose.
        (
            "span",
            "2,1 day ago 2 hours,12:00:00+00",
            "22007",
            "invalid input syntax for type interval: \"1 day ago 2 hours\"",
        ),
        (
            "at",
            "2,1 day,12:00+16",
            "22009",
            "time zone displacement out of range: \"12:00+16\"",
        ),
        (
            "at",
            "2,1 day,12:00 EST",
            "22007",
            "invalid input syntax for type time with time zone: \"12:00 EST\"",
        ),
    ];
    for (column, bad_line, code, reason) in cases {
        let db = TestDb::new();
        db.execute("create table t (id int4, span interval, at timetz)");
        let csv = format!("id,span,at\n1,1 day,12:00:00+00\n{bad_line}\n3,3 days,01:00:00-01\n");
        let error = import_csv(&db, "t", &csv, ImportOptions::default())
            .await
            .err()
            .unwrap_or_else(|| panic!("{bad_line} was accepted"));
        assert_eq!(error.code(), Some(code), "{error}");
        let row = error.as_row_error().expect("a row error");
        assert_eq!((row.line, row.column.as_deref()), (3, Some(column)));
        assert_eq!(row.reason, reason);
        assert_eq!(db.query_text("select count(*) from t"), "0");
    }
}

#[tokio::test]
async fn timetz_round_trips_odd_offsets() {
    let values = [
        "12:00:00+05:30",
        "00:00:00-08",
        "23:59:59.999999+14",
        "24:00:00-15:59:59",
        "24:00:00+15:59:59",
        "12:00Z",
        "12:00:00 z",
        "01:02:03.1234567+05:45:30",
        "10:00:00+0530",
        "10:00:00-03",
        "10:00:00 -03:30",
        "23:59:60+01",
        "12:00:00.9999995-00",
        // No offset: the session's zone, UTC here (else no binary encoder).
        "12:34:56",
        " 12:00:00+01 ",
    ];
    let read = round_trip("timetz", &values).await;
    assert_eq!(
        texts(&read)[..4],
        [
            "12:00:00+05:30",
            "00:00:00-08",
            "23:59:59.999999+14",
            "24:00:00-15:59:59"
        ]
    );
    round_trip("timetz(0)", &["12:00:00.5+01"]).await;
    round_trip("timetz[]", &[r#"{"12:00:00+05:45",NULL,00:00:00Z}"#]).await;
}

#[tokio::test]
async fn timetz_refusals_are_the_servers() {
    let db = TestDb::new();
    db.execute("create table t (n int4, at timetz)");
    for (value, code) in [
        ("25:00:00+00", "22007"),
        ("12:60+00", "22007"),
        ("12:00+16", "22009"),
    ] {
        let csv = format!("n,at\n1,{value}\n");
        let error = import_csv(&db, "t", &csv, ImportOptions::default())
            .await
            .err()
            .unwrap_or_else(|| panic!("{value} was accepted"));
        assert_eq!(error.code(), Some(code), "{value}: {error}");
    }
}

// ----------------------------------------------------------------- generator --

/// A small deterministic generator (xorshift64*), so that a failure repeats.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Each unit's spellings; the first is the unit's name for ISO fields.
const UNITS: &[&[&str]] = &[
    &[
        "microseconds",
        "microsecond",
        "us",
        "usec",
        "usecs",
        "useconds",
    ],
    &[
        "milliseconds",
        "millisecond",
        "ms",
        "msec",
        "msecs",
        "mseconds",
    ],
    &["seconds", "second", "s", "sec", "secs"],
    &["minutes", "minute", "m", "min", "mins"],
    &["hours", "hour", "h", "hr", "hrs"],
    &["days", "day", "d"],
    &["weeks", "week", "w"],
    &["months", "month", "mon", "mons"],
    &["years", "year", "y", "yr", "yrs"],
    &["decades", "decade", "dec", "decs"],
    &["centuries", "century", "c", "cent"],
    &["millennia", "millennium", "mil", "mils"],
];

fn generate(count: usize, seed: u64) -> Vec<String> {
    let mut random = Random(seed);
    (0..count)
        .map(|_| match random.below(6) {
            0 | 1 => words(&mut random),
            2 => sql_standard(&mut random),
            3 => iso_designators(&mut random),
            4 => iso_alternative(&mut random),
            _ => bare(&mut random),
        })
        .collect()
}

/// A number: mostly small, sometimes large, perhaps with a fraction.
fn number(random: &mut Random, signed: bool) -> String {
    let sign = if signed {
        random.pick(&["", "", "-", "+"])
    } else {
        ""
    };
    let whole = match random.below(10) {
        0 => random.below(100_000_000).to_string(),
        1 => String::new(),
        2 => "0".to_owned(),
        _ => random.below(100).to_string(),
    };
    let fraction = if whole.is_empty() || random.chance(35) {
        let digits = 1 + random.below(9) as usize;
        let value = random.next() % 10u64.pow(digits as u32);
        format!(".{value:0digits$}")
    } else {
        String::new()
    };
    format!("{sign}{whole}{fraction}")
}

fn mixed_case(random: &mut Random, word: &str) -> String {
    match random.below(8) {
        0 => word.to_uppercase(),
        1 => {
            let mut letters = word.chars();
            letters
                .next()
                .map(|first| first.to_uppercase().chain(letters).collect())
                .unwrap_or_default()
        }
        _ => word.to_owned(),
    }
}

fn clock(random: &mut Random) -> String {
    let hours = if random.chance(10) {
        random.below(100_000)
    } else {
        random.below(30)
    };
    let mut text = format!("{hours:02}:{:02}", random.below(60));
    if random.chance(70) {
        text.push_str(&format!(":{:02}", random.below(61)));
        if random.chance(40) {
            let digits = 1 + random.below(8) as usize;
            text.push_str(&format!(
                ".{:0digits$}",
                random.next() % 10u64.pow(digits as u32)
            ));
        }
    }
    text
}

/// `[@] n unit … [hh:mm[:ss]] [ago]`, units in any order, each once.
fn words(random: &mut Random) -> String {
    let mut units: Vec<usize> = (0..UNITS.len()).collect();
    for index in (1..units.len()).rev() {
        units.swap(index, random.below(index as u64 + 1) as usize);
    }
    let fields = 1 + random.below(4) as usize;
    let mut parts = Vec::new();
    if random.chance(20) {
        parts.push("@".to_owned());
    }
    for &unit in &units[..fields] {
        let value = number(random, true);
        let word = random.pick(UNITS[unit]);
        let word = mixed_case(random, word);
        let glue = if random.chance(15) && !value.ends_with('.') {
            ""
        } else {
            " "
        };
        parts.push(format!("{value}{glue}{word}"));
    }
    if random.chance(30) {
        let sign = random.pick(&["", "-", "+"]);
        parts.push(format!("{sign}{}", clock(random)));
    }
    if random.chance(15) {
        parts.push(mixed_case(random, "ago"));
    }
    let separator = random.pick(&[" ", "  ", ", ", "\t"]);
    parts.join(separator)
}

/// `[-]Y-M [±]D [±]H:MM:SS[.f]`, parts left out at random.
fn sql_standard(random: &mut Random) -> String {
    let mut parts = Vec::new();
    let sign = |random: &mut Random| random.pick(&["", "", "-", "+"]);
    if random.chance(60) {
        parts.push(format!(
            "{}{}-{}",
            sign(random),
            random.below(10_000),
            random.below(12)
        ));
    }
    if random.chance(60) {
        parts.push(format!("{}{}", sign(random), random.below(1000)));
    }
    if parts.is_empty() || random.chance(70) {
        parts.push(format!("{}{}", sign(random), clock(random)));
    }
    parts.join(" ")
}

/// `P[nY][nM][nW][nD][T[nH][nM][nS]]`, numbers signed and fractional.
fn iso_designators(random: &mut Random) -> String {
    let mut text = "P".to_owned();
    for unit in ["Y", "M", "W", "D"] {
        if random.chance(40) {
            text.push_str(&iso_number(random));
            text.push_str(unit);
        }
    }
    if text.len() == 1 || random.chance(50) {
        text.push('T');
        for unit in ["H", "M", "S"] {
            if random.chance(50) {
                text.push_str(&iso_number(random));
                text.push_str(unit);
            }
        }
    }
    text
}

fn iso_number(random: &mut Random) -> String {
    let value = number(random, false);
    let sign = random.pick(&["", "", "-"]);
    let exponent = if random.chance(5) {
        random.pick(&["e1", "E-2", "e+0"])
    } else {
        ""
    };
    format!("{sign}{value}{exponent}")
}

/// `PYYYY-MM-DDThh:mm:ss[.f]` and `PYYYYMMDDThhmmss`, parts left off.
fn iso_alternative(random: &mut Random) -> String {
    let (year, month, day) = (random.below(10_000), random.below(13), random.below(32));
    let (hour, minute, second) = (random.below(24), random.below(60), random.below(60));
    let fraction = if random.chance(30) {
        format!(".{}", random.below(1_000_000))
    } else {
        String::new()
    };
    match random.below(5) {
        0 => format!("P{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}"),
        1 => format!("P{year:04}-{month:02}-{day:02}"),
        2 => format!("P{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}{fraction}"),
        3 => format!("PT{hour:02}:{minute:02}{fraction}"),
        _ => format!("P{year:04}{month:02}{day:02}{fraction}"),
    }
}

/// A bare number (seconds), a time, or days and a time.
fn bare(random: &mut Random) -> String {
    match random.below(4) {
        0 => number(random, true),
        1 => format!("{}{}", random.pick(&["", "-", "+"]), clock(random)),
        2 => format!(
            "{}:{:02}.{}",
            random.below(60),
            random.below(60),
            random.below(1000)
        ),
        _ => format!(
            "{} {}{}",
            number(random, true),
            random.pick(&["", "-", "+"]),
            clock(random)
        ),
    }
}
