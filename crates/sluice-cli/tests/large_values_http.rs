//! Values too large to hold, served over HTTP: a named query returning a
//! 900 MB `bytea`, and one returning a 1.5 GB large object with `lob =
//! "inline"`, stream through `sluice serve` in pieces, every byte right, with
//! the server's peak memory under 128 MiB (before the one streaming engine, the
//! gateway held such a row whole).

mod support;

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use sluice_testkit::TestDb;
use support::server::{quoted, write_config, Server};
use support::{repeated_sha256, HUGE_BYTEA_SQL};

/// Peak resident memory allowed for the server, whatever the value's size.
const RSS_LIMIT_BYTES: u64 = 128 << 20;

/// Streams `path` from `server`, hashing the body as it comes; the SHA-256 and
/// the body's length.
fn fetch_hashed(server: &Server, path: &str) -> (String, usize) {
    let url = format!("http://{}{path}", server.address);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let response = reqwest::get(url).await.unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.bytes_stream();
        let mut hash = Sha256::new();
        let mut bytes = 0usize;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.expect("the body completes");
            bytes += chunk.len();
            hash.update(&chunk);
        }
        (format!("{:x}", hash.finalize()), bytes)
    })
}

#[test]
fn a_900_mb_bytea_streams_over_http_in_bounded_server_memory() {
    let db = TestDb::new();
    db.execute(HUGE_BYTEA_SQL);
    let directory = tempfile::tempdir().unwrap();
    let config = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\n[queries.huge]\nsql = \"select id, b from huge\"\n",
            quoted(db.url())
        ),
    );
    let server = Server::start(&["--config", &config]);
    let (hash, bytes) = fetch_hashed(&server, "/queries/huge");
    // 900 MB of 'x' is 300 M groups of three bytes, each "eHh4" in base64.
    assert_eq!(bytes, "{\"id\":1,\"b\":\"\"}\n".len() + 1_200_000_000);
    assert_eq!(
        hash,
        repeated_sha256("{\"id\":1,\"b\":\"", b"eHh4", 300_000_000, "\"}\n")
    );
    let peak = server.peak_rss();
    eprintln!(
        "900 MB bytea over HTTP: server peak RSS {:.1} MiB",
        peak as f64 / (1 << 20) as f64
    );
    assert!(peak < RSS_LIMIT_BYTES, "server peak RSS {peak} bytes");
}

#[test]
fn a_1_5_gb_large_object_streams_over_http_with_lob_inline_in_bounded_server_memory() {
    let db = TestDb::new();
    db.execute(
        "create table documents (id int, body oid);
         insert into documents values (1, lo_from_bytea(0, convert_to(repeat('y', 750000000), 'UTF8')));
         select lo_put(body, 750000000, convert_to(repeat('y', 750000000), 'UTF8')) from documents;",
    );
    let directory = tempfile::tempdir().unwrap();
    let config = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\n[queries.document]\nsql = \"select id, body from documents\"\nlob = \"inline\"\n",
            quoted(db.url())
        ),
    );
    let server = Server::start(&["--config", &config]);
    let (hash, bytes) = fetch_hashed(&server, "/queries/document");
    // 1.5 GB of 'y' is 500 M groups of three bytes, each "eXl5" in base64.
    assert_eq!(bytes, "{\"id\":1,\"body\":\"\"}\n".len() + 2_000_000_000);
    assert_eq!(
        hash,
        repeated_sha256("{\"id\":1,\"body\":\"", b"eXl5", 500_000_000, "\"}\n")
    );
    let peak = server.peak_rss();
    eprintln!(
        "1.5 GB large object over HTTP: server peak RSS {:.1} MiB",
        peak as f64 / (1 << 20) as f64
    );
    assert!(peak < RSS_LIMIT_BYTES, "server peak RSS {peak} bytes");
    db.execute("select lo_unlink(body) from documents");
}
