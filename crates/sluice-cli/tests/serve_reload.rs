//! SIGHUP re-reads `sluice serve`'s configuration: new requests see the new
//! queries and tokens, a stream in flight finishes whole on the old ones, and a
//! configuration that does not load, or whose start-up checks fail, is refused
//! with the usual message while the old one keeps serving.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use sluice_testkit::TestDb;
use support::server::{quoted, write_config, Server};

const FIRST: &str = "first-token-0123456789";
const SECOND: &str = "second-token-0123456789";

/// The configuration text: the database, `queries` and one token.
fn config(db: &TestDb, queries: &str, token: &str) -> String {
    format!(
        "[databases.main]\nurl = {}\npool_size = 2\n{queries}\n\
         [[tokens]]\nname = \"client\"\ntoken = \"{token}\"\nqueries = [\"*\"]\n",
        quoted(db.url())
    )
}

async fn get(address: std::net::SocketAddr, path: &str, token: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(format!("http://{address}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[test]
fn sighup_reloads_queries_and_tokens_and_streams_in_flight_finish_whole() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let before = "[queries.numbers]\nsql = \"select generate_series(1, 100) as n\"\n\
        [queries.slow]\nsql = \"select g as n from generate_series(1, 3000) g where pg_sleep(0.001) is not null\"\n";
    let path = write_config(&directory, &config(&db, before, FIRST));
    let mut server = Server::start_logging(&["--config", &path], "info");
    let address = server.address;
    let runtime = tokio::runtime::Runtime::new().unwrap();

    let (status, body) = runtime.block_on(get(address, "/queries/numbers", FIRST));
    assert_eq!((status, body.lines().count()), (200, 100));

    // A stream that takes about three seconds, begun before the reload.
    let slow = runtime.block_on(async {
        reqwest::Client::new()
            .get(format!("http://{address}/queries/slow"))
            .bearer_auth(FIRST)
            .send()
            .await
            .unwrap()
    });
    assert_eq!(slow.status(), 200);
    let mut slow = slow.bytes_stream();
    let mut received = runtime.block_on(slow.next()).unwrap().unwrap().to_vec();

    let after = "[queries.numbers]\nsql = \"select generate_series(1, 50) as n\"\n\
        [queries.letters]\nsql = \"select chr(64 + g) as letter from generate_series(1, 3) g\"\n";
    write_config(&directory, &config(&db, after, SECOND));
    server.hang_up();
    server.wait_for_line("configuration reloaded", Duration::from_secs(30));

    // The stream in flight goes on to its end on the configuration it began with.
    runtime.block_on(async {
        while let Some(chunk) = slow.next().await {
            received.extend_from_slice(&chunk.expect("the stream in flight completes"));
        }
    });
    assert_eq!(received.iter().filter(|&&byte| byte == b'\n').count(), 3000);

    // New requests see the new queries and tokens.
    let (status, _) = runtime.block_on(get(address, "/queries/numbers", FIRST));
    assert_eq!(status, 401, "the removed token is refused");
    let (status, body) = runtime.block_on(get(address, "/queries/numbers", SECOND));
    assert_eq!((status, body.lines().count()), (200, 50));
    let (status, body) = runtime.block_on(get(address, "/queries/letters", SECOND));
    assert_eq!(
        (status, body.as_str()),
        (
            200,
            "{\"letter\":\"A\"}\n{\"letter\":\"B\"}\n{\"letter\":\"C\"}\n"
        )
    );
    let (status, _) = runtime.block_on(get(address, "/queries/slow", SECOND));
    assert_eq!(status, 404);
    let (_, openapi) = runtime.block_on(get(address, "/openapi.json", SECOND));
    assert!(openapi.contains("/queries/letters") && !openapi.contains("/queries/slow"));

    // A file that does not load: refused with the usual message, naming the
    // file, the line and the key; the previous configuration keeps serving.
    let broken = after.replace(
        "generate_series(1, 50) as n\"",
        "generate_series(1, 50) as n\"\nmax_rows = -1",
    );
    write_config(&directory, &config(&db, &broken, SECOND));
    server.hang_up();
    let line = server.wait_for_line("configuration not reloaded", Duration::from_secs(30));
    assert!(
        line.contains("sluice.toml:6: queries.numbers.max_rows: must be positive"),
        "{line}"
    );
    let (status, body) = runtime.block_on(get(address, "/queries/numbers", SECOND));
    assert_eq!((status, body.lines().count()), (200, 50));

    // One whose start-up checks fail (a table that does not exist): the same.
    let missing = after.replace("from generate_series(1, 3) g", "from no_such_table");
    write_config(&directory, &config(&db, &missing, SECOND));
    server.hang_up();
    let line = server.wait_for_line("configuration not reloaded", Duration::from_secs(30));
    assert!(line.contains("queries.letters"), "{line}");
    assert!(line.contains("no_such_table"), "{line}");
    let (status, body) = runtime.block_on(get(address, "/queries/letters", SECOND));
    assert_eq!(status, 200, "{body}");

    server.terminate();
    assert_eq!(server.wait(Duration::from_secs(15)), Some(0));
}
