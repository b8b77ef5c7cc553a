//! Large values against a real PostgreSQL: inline with their rows at constant
//! round trips, large objects inline versus the locator pattern, and rows too
//! large to hold handed over in pieces.

use sha2::{Digest, Sha256};
use sluice_core::{BatchSource, Chunk, Meter};
use sluice_postgres::{Config, Connection, QueryOptions, QueryStream};
use sluice_testkit::TestDb;

/// Streams `sql`, feeding every value of every row (NULLs skipped) into a hash in
/// order; returns the hash, the row count and the query's round trips.
async fn hash_values(db: &TestDb, sql: &str, lob_inline: bool) -> (String, u64, u64) {
    let config: Config = db.url().parse().unwrap();
    let meter = Meter::new();
    let connection = Connection::connect(&config, &meter).await.unwrap();
    let before = meter.snapshot();
    let mut stream = QueryStream::start(
        connection,
        sql,
        QueryOptions {
            lob_inline,
            ..QueryOptions::default()
        },
    )
    .await
    .unwrap();
    let mut hash = Sha256::new();
    let mut rows = 0;
    while let Some(chunk) = stream.next_chunk().await.unwrap() {
        match chunk {
            Chunk::Rows(batch) => {
                for row in batch.rows() {
                    for column in 0..row.len() {
                        if let Some(value) = row.get(column) {
                            hash.update(value);
                        }
                    }
                    rows += 1;
                }
            }
            Chunk::Value {
                value: Some(value), ..
            } => hash.update(value),
            Chunk::Piece { bytes, .. } => hash.update(bytes),
            Chunk::RowEnd => rows += 1,
            _ => {}
        }
    }
    let trips = (meter.snapshot() - before).round_trips;
    (format!("{:x}", hash.finalize()), rows, trips)
}

#[tokio::test]
async fn external_text_and_bytea_travel_inline_at_constant_round_trips() {
    let db = TestDb::new();
    db.execute(
        "create table blobs (id int primary key, t text, b bytea);
         alter table blobs alter t set storage external, alter b set storage external;
         insert into blobs
         select g, repeat(md5(g::text), 320),
                (select string_agg(sha256((g * 1000 + i)::text::bytea), ''::bytea) from generate_series(1, 320) i)
         from generate_series(1, 10000) g;",
    );
    let (ours, rows, many) = hash_values(&db, "select t, b from blobs order by id", false).await;
    assert_eq!(rows, 10_000);
    let theirs = db.query_text(
        "select encode(sha256(string_agg(convert_to(t, 'UTF8') || b, ''::bytea order by id)), 'hex') from blobs",
    );
    assert_eq!(ours, theirs, "exported bytes equal the stored bytes");
    let (_, _, few) = hash_values(
        &db,
        "select t, b from blobs where id <= 10 order by id",
        false,
    )
    .await;
    assert_eq!(many, few, "round trips do not grow with the row count");
}

#[tokio::test]
async fn large_objects_inline_cost_constant_trips_and_the_locator_pattern_two_per_row() {
    let db = TestDb::new();
    db.execute(
        "create table documents (id int primary key, body oid, note text);
         insert into documents
         select g, case when g % 100 = 0 then null else
                lo_from_bytea(0, (select string_agg(sha256((g * 1000 + i)::text::bytea), ''::bytea)
                                  from generate_series(1, 320) i)) end, 'note ' || g
         from generate_series(1, 1000) g;",
    );
    let (ours, rows, many) = hash_values(
        &db,
        "select id, body, note from documents order by id",
        true,
    )
    .await;
    assert_eq!(rows, 1000);
    let theirs = db.query_text(
        "select encode(sha256(string_agg(convert_to(id::text, 'UTF8') || coalesce(lo_get(body), '') \
         || convert_to(note, 'UTF8'), ''::bytea order by id)), 'hex') from documents",
    );
    assert_eq!(
        ours, theirs,
        "large objects arrive with their rows, byte for byte"
    );
    let (_, _, few) = hash_values(
        &db,
        "select id, body, note from documents where id <= 3",
        true,
    )
    .await;
    assert_eq!(
        many, few,
        "inline large objects cost a constant number of round trips"
    );

    // The locator pattern: fetch the OIDs, then open, read and close each object.
    let config: Config = db.url().parse().unwrap();
    let meter = Meter::new();
    let mut connection = Connection::connect(&config, &meter).await.unwrap();
    let before = meter.snapshot();
    let oids = connection
        .query_rows(
            "select body::text from documents where body is not null order by id",
            &[],
        )
        .await
        .unwrap();
    connection.simple_query("begin").await.unwrap();
    for oid in &oids {
        let descriptor = connection
            .query_rows(
                "select lo_open($1::oid, 262144)::text",
                &[oid[0].as_deref()],
            )
            .await
            .unwrap();
        let fd = descriptor[0][0].clone();
        connection
            .query_rows("select loread($1::int, 1048576)", &[fd.as_deref()])
            .await
            .unwrap();
        connection
            .query_rows("select lo_close($1::int)", &[fd.as_deref()])
            .await
            .unwrap();
    }
    connection.simple_query("commit").await.unwrap();
    let locator = (meter.snapshot() - before).round_trips;
    assert!(
        locator >= 2 * oids.len() as u64,
        "{locator} trips for {} objects",
        oids.len()
    );
    assert!(
        locator > 100 * many,
        "inline: {many} trips; locator: {locator}"
    );
}

#[tokio::test]
async fn rows_too_large_to_hold_arrive_in_pieces() {
    let db = TestDb::new();
    db.execute(
        "create table huge (id int, t text, b bytea);
         alter table huge alter t set storage external, alter b set storage external;
         insert into huge values (1, 'small', '\\x00'),
                                 (2, repeat('0123456789', 3000000), decode(repeat('00ff', 5000000), 'hex')),
                                 (3, null, null);",
    );
    let config: Config = db.url().parse().unwrap();
    let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let mut stream = QueryStream::start(
        connection,
        "select id, t, b from huge order by id",
        QueryOptions::default(),
    )
    .await
    .unwrap();
    let mut large_rows = 0;
    let mut largest_piece = 0;
    let mut text_bytes = 0;
    let mut rows = 0;
    while let Some(chunk) = stream.next_chunk().await.unwrap() {
        match chunk {
            Chunk::Rows(batch) => rows += batch.num_rows(),
            Chunk::RowStart => large_rows += 1,
            Chunk::Piece { column, bytes } => {
                largest_piece = largest_piece.max(bytes.len());
                if column == 1 {
                    text_bytes += bytes.len();
                }
            }
            Chunk::RowEnd => rows += 1,
            _ => {}
        }
    }
    assert_eq!((rows, large_rows), (3, 1));
    assert_eq!(text_bytes, 30_000_000);
    assert!(largest_piece <= sluice_postgres::query::PIECE_BYTES);
}
