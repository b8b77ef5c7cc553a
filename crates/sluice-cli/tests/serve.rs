//! `sluice serve` as a process: configuration errors before the port opens, the
//! demo, SIGTERM with streams in flight, and 32 concurrent clients in bounded memory.

mod support;

use std::hash::Hasher;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_testkit::{CertificateFiles, TestCertificates, TestDb};
use support::relay::Relay;
use support::server::{quoted, wait_for_metric, write_config, Server};

#[test]
fn a_bad_configuration_is_one_error_naming_file_line_and_key_before_the_port_opens() {
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(
        &directory,
        "[databases.main]\nurl = \"postgres://u@127.0.0.1:1/x\"\n\n[queries.q]\nsql = \"select $1\"\nparams = [{ name = \"a\", type = \"integr\" }]\n",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "serve",
            "--config",
            &path,
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with(&format!(
            "sluice: {path}:6: queries.q.params[0].type: unknown type \"integr\""
        )),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("listening"));
}

#[test]
fn the_demo_needs_no_database_server_and_is_made_once() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("demo.sqlite").display().to_string();
    let arguments = ["--demo", "--demo-file", &file, "--demo-rows", "5000"];
    let mut server = Server::start(&arguments);
    assert!(
        server.stderr().contains("created: 5000 payment events"),
        "{}",
        server.stderr()
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let body = runtime.block_on(async {
        reqwest::get(format!("http://{}/queries/payment_events", server.address))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert_eq!(body.lines().count(), 5000);
    server.terminate();
    assert_eq!(server.wait(Duration::from_secs(15)), Some(0));

    let mut server = Server::start(&arguments);
    assert!(server.stderr().contains("(reused)"), "{}", server.stderr());
    server.terminate();
    assert_eq!(server.wait(Duration::from_secs(15)), Some(0));
}

#[test]
fn sigterm_stops_accepting_lets_streams_finish_and_exits_zero() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    // About 1.5 s of rows: a nap every 1,000 rows.
    let path = write_config(
        &directory,
        &format!(
            "[server]\nshutdown_grace = \"20s\"\n[databases.main]\nurl = {}\n[queries.slow]\nsql = \"select g, case when g % 1000 = 0 then pg_sleep(0.15) end as nap from (select generate_series(1, 10000) as g) s\"\n",
            quoted(db.url())
        ),
    );
    let mut server = Server::start(&["--config", &path]);
    let address = server.address;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (lines, refused) = runtime.block_on(async {
        let response = reqwest::get(format!("http://{address}/queries/slow"))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        server.terminate();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let refused = tokio::net::TcpStream::connect(address).await.is_err();
        let text = response
            .text()
            .await
            .expect("the in-flight stream completes");
        (text.lines().count(), refused)
    });
    assert!(refused, "new connections must be refused after SIGTERM");
    assert_eq!(lines, 10_000);
    assert_eq!(
        server.wait(Duration::from_secs(15)),
        Some(0),
        "{}",
        server.stderr()
    );
}

#[test]
fn thirty_two_clients_streaming_200k_rows_each_get_identical_bodies_in_bounded_memory() {
    const CLIENTS: usize = 32;
    const ROWS: usize = 200_000;
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\npool_size = 32\n[queries.rows]\nsql = \"select g as id, md5(g::text) as hash, g * 1.5 as amount, 'row ' || g as label from (select generate_series(1, {ROWS}) as g) s\"\n",
            quoted(db.url())
        ),
    );
    let server = Server::start(&["--config", &path]);
    let address = server.address;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let results = runtime.block_on(async {
        let mut clients = tokio::task::JoinSet::new();
        for _ in 0..CLIENTS {
            clients.spawn(async move {
                let response = reqwest::get(format!("http://{address}/queries/rows"))
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                let mut stream = response.bytes_stream();
                // Hash as the bytes arrive: the test must not hold 32 bodies either.
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                let (mut bytes, mut lines) = (0usize, 0usize);
                while let Some(chunk) = futures_util::StreamExt::next(&mut stream).await {
                    let chunk = chunk.expect("the stream completes");
                    hasher.write(&chunk);
                    bytes += chunk.len();
                    lines += chunk.iter().filter(|&&byte| byte == b'\n').count();
                }
                (hasher.finish(), bytes, lines)
            });
        }
        let mut results = Vec::new();
        while let Some(result) = clients.join_next().await {
            results.push(result.unwrap());
        }
        results
    });
    assert_eq!(results.len(), CLIENTS);
    assert!(
        results.iter().all(|result| *result == results[0]),
        "{results:?}"
    );
    assert_eq!(results[0].2, ROWS);
    let peak = server.peak_rss();
    eprintln!(
        "{CLIENTS} clients x {ROWS} rows ({} bytes each): server peak RSS {:.1} MiB",
        results[0].1,
        peak as f64 / (1 << 20) as f64
    );
    assert!(peak < 256 << 20, "server peak RSS {peak} bytes");
}

#[test]
fn a_closed_stderr_neither_stops_the_server_nor_its_requests() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("demo.sqlite").display().to_string();
    // The listening line cannot be read back from a closed stderr: pick the port here.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "serve",
            "--demo",
            "--demo-file",
            &file,
            "--demo-rows",
            "100",
        ])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        // Every request writes a log line, which fails.
        .env("SLUICE_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(sluice_testkit::closed_pipe()))
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/queries/payment_events");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut bodies = Vec::new();
    while bodies.len() < 3 {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the server exited with {status}");
        }
        assert!(Instant::now() < deadline, "the server never answered");
        match runtime.block_on(async { reqwest::get(&url).await?.text().await }) {
            Ok(body) => bodies.push(body),
            // Not listening yet.
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    for body in &bodies {
        assert_eq!(body.lines().count(), 100);
    }
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
}

#[test]
fn clients_leaving_while_queued_for_a_connection_are_logged_and_counted() {
    const QUEUED: usize = 12;
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    // One connection; `hold` keeps it busy (20,000 rows, then a two-minute nap).
    let path = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\npool_size = 1\npool_wait = \"120s\"\n\
             [queries.hold]\nsql = \"select g, case when g = 20000 then pg_sleep(120) end as nap from generate_series(1, 30000) g\"\n\
             [queries.queued]\nsql = \"select 1 as one\"\n",
            quoted(db.url())
        ),
    );
    let mut server = Server::start_logging(&["--config", &path], "info");
    let address = server.address;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let hold = reqwest::get(format!("http://{address}/queries/hold"))
            .await
            .unwrap();
        assert_eq!(hold.status(), 200);
        let mut queued = Vec::new();
        for _ in 0..QUEUED {
            let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
            tokio::io::AsyncWriteExt::write_all(
                &mut socket,
                b"GET /queries/queued HTTP/1.1\r\nHost: localhost\r\n\r\n",
            )
            .await
            .unwrap();
            queued.push(socket);
        }
        wait_for_metric(
            address,
            "sluice_pool_waiting{database=\"main\"}",
            QUEUED as f64,
        )
        .await;
        // Every waiting client leaves.
        drop(queued);
        wait_for_metric(
            address,
            "sluice_http_requests_total{route=\"queries\",query=\"queued\",status=\"499\",outcome=\"client_gone\"}",
            QUEUED as f64,
        )
        .await;
        wait_for_metric(address, "sluice_pool_waiting{database=\"main\"}", 0.0).await;
        drop(hold);
        wait_for_metric(
            address,
            "sluice_http_requests_total{route=\"queries\",query=\"hold\",status=\"200\",outcome=\"client_gone\"}",
            1.0,
        )
        .await;
    });
    // And every request has its log line (polled: stderr arrives through a pipe).
    let started = Instant::now();
    let stderr = loop {
        let stderr = server.stderr();
        let logged = |query: &str| {
            stderr
                .lines()
                .filter(|line| line.contains("sluice::request") && line.contains(query))
                .count()
        };
        // The lines arrive through a pipe: wait for the last ones too.
        let all_logged = logged("query=queued") >= QUEUED && logged("query=hold") >= 1;
        if all_logged || started.elapsed() > Duration::from_secs(20) {
            break stderr;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines = |query: &str| {
        stderr
            .lines()
            .filter(|line| line.contains("sluice::request") && line.contains(query))
            .collect::<Vec<_>>()
    };
    let queued = lines("query=queued");
    assert_eq!(queued.len(), QUEUED, "{stderr}");
    for line in queued {
        assert!(
            line.contains("status=499") && line.contains("outcome=\"client_gone\""),
            "{line}"
        );
    }
    let hold = lines("query=hold");
    assert_eq!(hold.len(), 1, "{stderr}");
    assert!(hold[0].contains("outcome=\"client_gone\""), "{}", hold[0]);
}

/// Runs `sluice serve --config` on `text` and returns its exit code, stderr and
/// the file's path; fails (and stops the server) if it started instead.
fn refused_start(text: &str) -> (Option<i32>, String, String) {
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(&directory, text);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--config", &path, "--listen", "127.0.0.1:0"])
        .env("SLUICE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(pipe).unwrap());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server started: {}", reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = reader.join().unwrap();
    assert!(!stderr.contains("listening"), "{stderr}");
    (status.code(), stderr, path)
}

#[test]
fn named_queries_that_do_not_match_their_sql_and_a_privileged_sql_login_stop_the_start() {
    let db = TestDb::new();
    let (code, stderr, path) = refused_start(&format!(
        "[databases.main]\nurl = {}\n\n[queries.two]\nsql = \"select $1::int + $2::int as n\"\nparams = [{{ name = \"a\", type = \"int\" }}]\n\n[queries.ok]\nsql = \"select $1::int as n\"\nparams = [{{ name = \"a\", type = \"int\" }}]\n",
        quoted(db.url())
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "sluice: {path}:5: queries.two.params: the SQL takes 2 parameters ($1 to $2), but 1 is declared"
        )
    );

    // The test server's login is a superuser.
    let (code, stderr, path) = refused_start(&format!(
        "[databases.main]\nurl = {}\n\n[sql]\n\n[[tokens]]\nname = \"analyst\"\ntoken = \"analyst-token-0123456789\"\nscopes = [\"sql\"]\n",
        quoted(db.url())
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "sluice: {path}:4: sql: POST /sql would run on database \"main\", where the login "
        )),
        "{stderr}"
    );
    assert!(stderr.contains("is a superuser"), "{stderr}");
}

/// Copies the server certificate and key of `from` over `live`'s files.
fn install_certificate(from: &TestCertificates, live: &CertificateFiles) {
    let source = from.server();
    std::fs::copy(&source.certificate, &live.certificate).unwrap();
    std::fs::copy(&source.key, &live.key).unwrap();
}

/// GET `path` over HTTPS from a fresh client that trusts only `ca`.
async fn https_get(ca: &std::path::Path, port: u16, path: &str) -> reqwest::Result<String> {
    let pem = std::fs::read(ca).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .resolve("localhost", ([127, 0, 0, 1], port).into())
        .build()
        .unwrap()
        .get(format!("https://localhost:{port}{path}"))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

#[test]
fn https_serves_with_the_certificate_reread_on_sighup() {
    let db = TestDb::new();
    let first = TestCertificates::generate(&["localhost"]);
    let second = TestCertificates::generate(&["localhost"]);
    let directory = tempfile::tempdir().unwrap();
    let live = CertificateFiles {
        certificate: directory.path().join("live.crt"),
        key: directory.path().join("live.key"),
    };
    install_certificate(&first, &live);
    let path = write_config(
        &directory,
        &format!(
            "[server]\ntls_cert = {}\ntls_key = {}\n[databases.main]\nurl = {}\n[queries.numbers]\nsql = \"select generate_series(1, 100) as n\"\n",
            quoted(&live.certificate.display().to_string()),
            quoted(&live.key.display().to_string()),
            quoted(db.url())
        ),
    );
    let mut server = Server::start_logging(&["--config", &path], "info");
    assert!(
        server.stderr().contains("listening on https://"),
        "{}",
        server.stderr()
    );
    let port = server.address.port();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let body = runtime
        .block_on(https_get(&first.ca(), port, "/queries/numbers"))
        .unwrap();
    assert_eq!(body.lines().count(), 100);

    install_certificate(&second, &live);
    server.hang_up();
    server.wait_for_line("TLS certificate reloaded", Duration::from_secs(30));
    let body = runtime
        .block_on(https_get(&second.ca(), port, "/queries/numbers"))
        .unwrap();
    assert_eq!(body.lines().count(), 100);
    let refused = runtime.block_on(https_get(&first.ca(), port, "/health"));
    assert!(refused.unwrap_err().is_connect());

    // A broken file: logged, and the certificate in use stays.
    std::fs::write(&live.key, "not a key").unwrap();
    server.hang_up();
    let line = server.wait_for_line("TLS certificate not reloaded", Duration::from_secs(30));
    assert!(line.contains("live.key"), "{line}");
    assert!(runtime
        .block_on(https_get(&second.ca(), port, "/health"))
        .is_ok());
    server.terminate();
    assert_eq!(server.wait(Duration::from_secs(15)), Some(0));
}

#[test]
fn an_unreadable_certificate_stops_the_start_naming_the_setting_and_the_file() {
    let (code, stderr, _) = refused_start(
        "[server]\ntls_cert = \"/nonexistent/server.crt\"\ntls_key = \"/nonexistent/server.key\"\n\
         [databases.main]\nurl = \"postgres://u@127.0.0.1:1/x\"\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("sluice: [server] tls_cert /nonexistent/server.crt: cannot read:"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let mismatched = TestCertificates::generate(&["localhost"]);
    let other = TestCertificates::generate(&["localhost"]);
    let (code, stderr, _) = refused_start(&format!(
        "[server]\ntls_cert = {}\ntls_key = {}\n[databases.main]\nurl = \"postgres://u@127.0.0.1:1/x\"\n",
        quoted(&mismatched.server().certificate.display().to_string()),
        quoted(&other.server().key.display().to_string()),
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("[server] tls_cert and tls_key")
            && stderr.contains("the private key does not belong to the certificate"),
        "{stderr}"
    );
}

#[test]
fn worker_threads_follow_the_flag_then_the_file_then_the_cpus() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("demo.sqlite").display().to_string();
    let threads_of = |arguments: &[&str]| {
        let mut server = Server::start(arguments);
        let stderr = server.stderr();
        server.terminate();
        assert_eq!(server.wait(Duration::from_secs(15)), Some(0), "{stderr}");
        let line = stderr
            .lines()
            .find(|line| line.starts_with("sluice serve: listening on"))
            .unwrap()
            .to_owned();
        let part = line
            .split("; ")
            .find(|part| part.contains("worker thread"))
            .unwrap();
        part.split(' ').next().unwrap().parse::<usize>().unwrap()
    };
    let demo = ["--demo", "--demo-file", &file, "--demo-rows", "100"];
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(threads_of(&demo), cpus);
    assert_eq!(threads_of(&[&demo[..], &["--threads", "3"]].concat()), 3);

    let text = format!(
        "[server]\nthreads = 5\n[databases.main]\nsqlite = {}\n[queries.one]\nsql = \"select 1 as one\"\n",
        quoted(&file)
    );
    let path = write_config(&directory, &text);
    assert_eq!(threads_of(&["--config", &path]), 5);
    assert_eq!(threads_of(&["--config", &path, "--threads", "2"]), 2);

    let (code, stderr, path) = refused_start(&text.replace("threads = 5", "threads = 0"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "sluice: {path}:2: server.threads: must be between 1 and 1024"
        )),
        "{stderr}"
    );
}

#[test]
fn replicas_behind_a_round_robin_answer_alike_and_a_killed_one_aborts_its_stream() {
    let db = TestDb::new();
    db.execute(
        "create table t (id int primary key, name text);
         insert into t select g, 'name ' || g from generate_series(1, 50) g;",
    );
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\n[queries.names]\nsql = \"select id, name from t order by id\"\n\
             [queries.many]\nsql = \"select g, repeat('x', 200) as pad from generate_series(1, 5000000) g\"\n",
            quoted(db.url())
        ),
    );
    // Two replicas of one configuration: no state is kept between requests,
    // so any of them answers any request.
    let replicas = [
        Server::start(&["--config", &path]),
        Server::start(&["--config", &path]),
    ];
    let relay = Relay::round_robin(
        replicas
            .iter()
            .map(|replica| replica.address.to_string())
            .collect(),
    );
    let base = format!("http://{}", relay.address());
    // A connection per request, so that each goes to the next replica.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut bodies = Vec::new();
        for _ in 0..4 {
            let response = client.get(format!("{base}/queries/names")).send().await;
            bodies.push(response.unwrap().text().await.unwrap());
        }
        assert_eq!(bodies[0].lines().count(), 50);
        assert!(bodies.iter().all(|body| body == &bodies[0]));
    });
    assert_eq!(relay.chosen(), [0, 1, 0, 1]);

    // A long stream whose replica dies under it: the client sees the body
    // break off, never a shorter body that ends like a complete one.
    let (received, ending) = runtime.block_on(async {
        let mut response = client
            .get(format!("{base}/queries/many"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut received = response.chunk().await.unwrap().unwrap().len();
        let serving = *relay.chosen().last().unwrap();
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        assert_eq!(
            unsafe { libc::kill(replicas[serving].pid(), libc::SIGKILL) },
            0
        );
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => received += chunk.len(),
                Ok(None) => break (received, Ok(())),
                Err(error) => break (received, Err(error)),
            }
        }
    });
    assert!(
        ending.is_err(),
        "the cut stream ended like a complete one after {received} bytes"
    );
    assert!(received < 5_000_000 * 200, "{received} bytes arrived");
}

/// A TLS client config that trusts only `ca` and offers HTTP/2, as gRPC does.
fn h2_client_tls(ca: &std::path::Path) -> std::sync::Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let certificate = rustls::pki_types::CertificateDer::from_pem_file(ca).unwrap();
    roots.add(certificate).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    std::sync::Arc::new(config)
}

/// Raises this process's soft open-files limit to its hard one: the test
/// itself holds more than 1,024 connections.
fn raise_own_open_files(need: u64) {
    let mut limits = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: both calls read or write the struct that lives here.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limits), 0);
        limits.rlim_cur = limits.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limits), 0);
    }
    assert!(
        limits.rlim_cur >= need,
        "this test needs {need} open files; the hard limit is {} (raise it: ulimit -Hn)",
        limits.rlim_cur
    );
}

#[test]
fn idle_flight_connections_cannot_take_the_descriptors_from_https() {
    const IDLE: usize = 1_100;
    raise_own_open_files(IDLE as u64 + 200);
    let db = TestDb::new();
    let certificates = TestCertificates::generate(&["localhost"]);
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(
        &directory,
        &format!(
            "[server]\ntls_cert = {}\ntls_key = {}\nheader_read_timeout = \"3s\"\n\
             [databases.main]\nurl = {}\n\
             [queries.numbers]\nsql = \"select generate_series(1, 100) as n\"\n\
             [flight]\nlisten = \"127.0.0.1:0\"\n",
            quoted(&certificates.server().certificate.display().to_string()),
            quoted(&certificates.server().key.display().to_string()),
            quoted(db.url())
        ),
    );
    let mut server = Server::start_with_open_files(&["--config", &path], "info", 1024);
    let flight_line = server.wait_for_line("Arrow Flight on grpc+tls://", Duration::from_secs(30));
    let stderr = server.stderr();
    assert!(
        stderr.contains("open files 1024, at most 384 connections per listener"),
        "{stderr}"
    );
    let flight: std::net::SocketAddr = flight_line
        .split("grpc+tls://")
        .nth(1)
        .unwrap()
        .split([',', ' '])
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let port = server.address.port();
    let ca = certificates.ca();
    let tls = h2_client_tls(&ca);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // 1,100 clients finish a TLS handshake with Flight and say nothing.
        let mut handshakes = tokio::task::JoinSet::new();
        for _ in 0..IDLE {
            let connector = tokio_rustls::TlsConnector::from(tls.clone());
            handshakes.spawn(async move {
                let tcp = tokio::net::TcpStream::connect(flight).await.ok()?;
                let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
                let handshake = connector.connect(name, tcp);
                tokio::time::timeout(Duration::from_secs(10), handshake)
                    .await
                    .ok()?
                    .ok()
            });
        }
        let mut idle = Vec::new();
        while let Some(done) = handshakes.join_next().await {
            idle.extend(done.unwrap());
        }
        // The cap is filled (a few of its slots may still be finishing a
        // refused client's close), and not passed.
        assert!(
            (300..=384).contains(&idle.len()),
            "{} idle connections were kept (cap 384)",
            idle.len()
        );
        // HTTPS answers meanwhile, queries and health alike.
        for _ in 0..5 {
            let body = https_get(&ca, port, "/queries/numbers").await.unwrap();
            assert_eq!(body.lines().count(), 100);
        }
        https_get(&ca, port, "/health").await.unwrap();
        let metrics = https_get(&ca, port, "/metrics").await.unwrap();
        let refused: f64 = metrics
            .lines()
            .find_map(|line| {
                line.strip_prefix("sluice_connections_refused_total{listener=\"flight\"} ")
            })
            .unwrap_or_else(|| panic!("no refusals counted:\n{metrics}"))
            .parse()
            .unwrap();
        assert!(refused >= (IDLE - 384) as f64, "{refused} refusals");
        // The idle ones are closed after header_read_timeout (3 s), not before.
        let waited = Instant::now();
        let mut closes = tokio::task::JoinSet::new();
        for mut connection in idle {
            closes.spawn(async move {
                use tokio::io::AsyncReadExt;
                // The server's SETTINGS frame first, then the end.
                let mut sink = Vec::new();
                let read = connection.read_to_end(&mut sink);
                tokio::time::timeout(Duration::from_secs(15), read)
                    .await
                    .is_ok()
            });
        }
        while let Some(closed) = closes.join_next().await {
            assert!(
                closed.unwrap(),
                "an idle Flight connection was still open after 15 s"
            );
        }
        assert!(
            waited.elapsed() >= Duration::from_secs(1),
            "idle connections were closed at once, not by the timeout"
        );
        // And Flight takes connections again.
        let connector = tokio_rustls::TlsConnector::from(tls.clone());
        let tcp = tokio::net::TcpStream::connect(flight).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        connector.connect(name, tcp).await.unwrap();
    });
    let stderr = server.stderr();
    let failures = stderr.matches("accepting connections failed").count();
    assert!(
        failures <= 1,
        "accept failures logged {failures} times:\n{stderr}"
    );
    server.terminate();
    assert_eq!(server.wait(Duration::from_secs(15)), Some(0), "{stderr}");
}
