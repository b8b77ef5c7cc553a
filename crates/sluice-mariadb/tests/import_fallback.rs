//! A server that refuses `LOAD DATA LOCAL` (`local_infile = OFF`, MySQL 8's
//! default) gets multi-row INSERTs instead, sized to its packet limit.
//!
//! In a test binary of its own: `local_infile` is a global setting, and the
//! other import tests, running in parallel threads, must not see it switched
//! off. (cargo runs test binaries one after another.)

use sluice_core::load::{ImportInput, ImportOptions, Scope};
use sluice_core::{Error, Meter, Progress, Rejected};
use sluice_formats::{NdjsonDecoder, NdjsonOptions};
use sluice_mariadb::import::{describe_table, import_rows};
use sluice_mariadb::{Config, Connection};
use sluice_testkit::TestMariaDb;

/// Switches local files off for the test, and on again however it ends.
struct LocalFilesOff<'a>(&'a TestMariaDb);

impl<'a> LocalFilesOff<'a> {
    fn new(db: &'a TestMariaDb) -> Self {
        db.execute("set global local_infile = 0");
        LocalFilesOff(db)
    }
}

impl Drop for LocalFilesOff<'_> {
    fn drop(&mut self) {
        self.0.execute("set global local_infile = 1");
    }
}

#[tokio::test]
async fn a_server_refusing_local_files_gets_insert_batches_sized_to_its_packets() {
    let db = TestMariaDb::new();
    db.execute(
        "create table payments (id bigint primary key, amount decimal(12,2) not null, note text)",
    );
    let mut data = Vec::new();
    for id in 1..=50_000 {
        data.extend_from_slice(
            format!("{{\"id\": {id}, \"amount\": \"{id}.25\", \"note\": \"row {id}\"}}\n")
                .as_bytes(),
        );
    }
    let _off = LocalFilesOff::new(&db);
    let config: Config = db.url().parse().unwrap();
    let meter = Meter::new();
    let mut connection = Connection::connect(&config, &meter).await.unwrap();
    assert!(!connection.server().local_infile);
    let before = meter.snapshot();
    let info = describe_table(&mut connection, "payments").await.unwrap();
    let mut decoder = NdjsonDecoder::new(info.columns.clone(), NdjsonOptions::default()).unwrap();
    let mut sink = |_: &Rejected| -> Result<(), Error> { Ok(()) };
    let summary = import_rows(
        &mut connection,
        &info,
        &mut ImportInput::new(&mut decoder, &mut &data[..], &Progress::new()),
        &ImportOptions::default(),
        &mut sink,
        Scope::Own,
    )
    .await
    .unwrap();
    let trips = (meter.snapshot() - before).round_trips;
    assert_eq!(summary.written, 50_000);
    assert_eq!(
        db.query_text("select count(*), sum(amount) from payments"),
        "50000\t1250037500.00"
    );
    // Statements sized to the packet limit: a handful, not one per row.
    assert!(trips <= 12, "{trips} round trips");
}
