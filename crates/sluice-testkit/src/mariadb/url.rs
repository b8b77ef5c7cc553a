//! The parts of a `mariadb://` or `mysql://` URL that the `mariadb` client needs,
//! and the same URL pointing at another database.
//!
//! The reading follows sluice-mariadb's: `user[:password]@host[:port]/database`,
//! percent-encoded, with `socket`, `user` and `password` options in the query; a
//! host (even `localhost`) means TCP, a socket is used only when `socket=` says so.

/// MariaDB's and MySQL's port.
const DEFAULT_PORT: u16 = 3306;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A host name or address (without brackets) and a port.
    Tcp(String, u16),
    /// A Unix-domain socket file.
    Socket(String),
}

/// How to reach and log in to a server, as the command-line client is told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) target: Target,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) database: Option<String>,
}

/// `url`'s scheme, authority, path and query (without `?`).
struct Pieces<'a> {
    scheme: &'a str,
    authority: &'a str,
    path: &'a str,
    query: Option<&'a str>,
}

fn split(url: &str) -> Result<Pieces<'_>, String> {
    let (scheme, rest) = url
        .split_once("://")
        .filter(|(scheme, _)| {
            scheme.eq_ignore_ascii_case("mariadb") || scheme.eq_ignore_ascii_case("mysql")
        })
        .ok_or_else(|| format!("not a mariadb:// or mysql:// URL: {url:?}"))?;
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let (authority, path) = before_query.split_once('/').unwrap_or((before_query, ""));
    Ok(Pieces {
        scheme,
        authority,
        path,
        query,
    })
}

/// Reads `url`.
pub(crate) fn parse(url: &str) -> Result<Endpoint, String> {
    let pieces = split(url)?;
    let (credentials, host_port) = match pieces.authority.rsplit_once('@') {
        Some((credentials, host_port)) => (Some(credentials), host_port),
        None => (None, pieces.authority),
    };
    let (mut user, mut password) = match credentials.map(|c| c.split_once(':').unwrap_or((c, ""))) {
        Some((user, password)) => (decode(user)?, decode(password)?),
        None => (String::new(), String::new()),
    };
    let (host, port) = split_host_port(host_port)?;
    let mut socket = None;
    for pair in pieces
        .query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "socket" => socket = Some(decode(value)?),
            "user" => user = decode(value)?,
            "password" => password = decode(value)?,
            _ => {} // options of the code under test (connect_timeout, …)
        }
    }
    let target = match socket {
        Some(socket) => Target::Socket(socket),
        None => Target::Tcp(host.unwrap_or_else(|| "localhost".into()), port),
    };
    let database = decode(pieces.path.trim_end_matches('/'))?;
    Ok(Endpoint {
        target,
        user: Some(user).filter(|u| !u.is_empty()),
        password: Some(password).filter(|p| !p.is_empty()),
        database: Some(database).filter(|d| !d.is_empty()),
    })
}

/// Host (brackets of an IPv6 address removed, `None` when empty) and port.
fn split_host_port(host_port: &str) -> Result<(Option<String>, u16), String> {
    let (host, port) = match host_port.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| format!("unclosed [ in host {host_port:?}"))?;
            (host, after.strip_prefix(':'))
        }
        None => match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    let port = match port {
        Some(port) => port
            .parse::<u16>()
            .map_err(|_| format!("port {port:?} is not a number from 1 to 65535"))?,
        None => DEFAULT_PORT,
    };
    Ok((Some(decode(host)?).filter(|h| !h.is_empty()), port))
}

/// `url` with its database (the path) replaced by `database`; scheme, login,
/// host and query are kept as they are.
pub(crate) fn with_database(url: &str, database: &str) -> Result<String, String> {
    let pieces = split(url)?;
    let query = pieces.query.map(|q| format!("?{q}")).unwrap_or_default();
    Ok(format!(
        "{}://{}/{database}{query}",
        pieces.scheme, pieces.authority
    ))
}

/// Percent-decodes `text` (as UTF-8).
fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{text:?} is not UTF-8 once percent-decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_urls_are_read() {
        let endpoint = parse("mariadb://app:p%40ss@127.0.0.1:3307/shop?connect_timeout=5").unwrap();
        assert_eq!(endpoint.target, Target::Tcp("127.0.0.1".into(), 3307));
        assert_eq!(endpoint.user.as_deref(), Some("app"));
        assert_eq!(endpoint.password.as_deref(), Some("p@ss"));
        assert_eq!(endpoint.database.as_deref(), Some("shop"));
    }

    #[test]
    fn missing_parts_are_none_or_defaults() {
        let endpoint = parse("mysql://root@[::1]").unwrap();
        assert_eq!(endpoint.target, Target::Tcp("::1".into(), 3306));
        assert_eq!(endpoint.password, None);
        assert_eq!(endpoint.database, None);
        let endpoint = parse("mariadb://root:@/test?socket=/tmp/x.sock").unwrap();
        assert_eq!(endpoint.target, Target::Socket("/tmp/x.sock".into()));
        assert_eq!(endpoint.password, None);
        assert!(parse("postgres://u@h/db").is_err());
        assert!(parse("mariadb://h:99999/db").is_err());
    }

    #[test]
    fn the_database_is_replaced() {
        assert_eq!(
            with_database("mariadb://root@127.0.0.1:3306/test", "t_1_2_ab").unwrap(),
            "mariadb://root@127.0.0.1:3306/t_1_2_ab"
        );
        assert_eq!(
            with_database("mysql://u:p@h?socket=/s", "d").unwrap(),
            "mysql://u:p@h/d?socket=/s"
        );
    }
}
