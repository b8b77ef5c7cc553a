//! What the authority of a request (`host`, `host:port`, `[v6]:port`) names:
//! the one reading of `Host` headers that the gateway and the proxy's control
//! API check against DNS rebinding, where a page's name is re-pointed at
//! 127.0.0.1 and its requests arrive saying `Host: evil.example`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The host part of an authority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host<'a> {
    /// A name, without a trailing dot.
    Name(&'a str),
    /// An IP address.
    Address(IpAddr),
}

/// The host of `authority`, with or without a port; `None` when it is
/// malformed (a port that is no number, an unclosed `[`).
pub fn parse_authority(authority: &str) -> Option<Host<'_>> {
    let is_port = |text: &str| {
        !text.is_empty() && text.len() <= 5 && text.bytes().all(|byte| byte.is_ascii_digit())
    };
    if let Some(rest) = authority.strip_prefix('[') {
        let (address, after) = rest.split_once(']')?;
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        let address = address.parse::<Ipv6Addr>().ok()?;
        return port_ok.then_some(Host::Address(IpAddr::V6(address)));
    }
    let name = match authority.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        Some(_) => return None,
        None => authority,
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    Some(match name.parse::<Ipv4Addr>() {
        Ok(address) => Host::Address(IpAddr::V4(address)),
        Err(_) => Host::Name(name),
    })
}

/// A loopback address, an IPv4 one mapped into IPv6 included.
pub fn is_loopback(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(address) => address.is_loopback(),
        IpAddr::V6(address) => {
            address.is_loopback() || address.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// True when `authority` names this machine in a way no DNS answer can
/// re-point: `localhost` (any case) or a loopback address, with or without a
/// port.
pub fn is_local(authority: &str) -> bool {
    match parse_authority(authority) {
        Some(Host::Name(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(Host::Address(address)) => is_loopback(address),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_localhost_and_loopback_addresses_are_local() {
        for local in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "127.0.0.1",
            "127.1.2.3:9",
            "[::1]",
            "[::1]:6433",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(is_local(local), "{local}");
        }
        for foreign in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "10.0.0.1",
            "[::2]",
            "localhost:http",
            "[::1",
            "[::1]x",
            "",
        ] {
            assert!(!is_local(foreign), "{foreign}");
        }
        assert_eq!(
            parse_authority("db.example:5432"),
            Some(Host::Name("db.example"))
        );
    }
}
