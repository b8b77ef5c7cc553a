//! Booleans and UUIDs.

use super::reading::{trim_blanks, FormError, Strictness};

/// A boolean: `t` or `f`; lenient, also what PostgreSQL's `boolin` reads
/// (`true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`, in any case, any
/// unambiguous prefix, blanks around).
///
/// ```
/// use sluice_core::canonical::{read_bool, Strictness};
/// assert_eq!(read_bool(b"t", Strictness::Canonical), Ok(true));
/// assert!(read_bool(b"yes", Strictness::Canonical).is_err());
/// assert_eq!(read_bool(b" Yes ", Strictness::Lenient), Ok(true));
/// ```
pub fn read_bool(text: &[u8], strictness: Strictness) -> Result<bool, FormError> {
    match (strictness, text) {
        (_, b"t") => return Ok(true),
        (_, b"f") => return Ok(false),
        (Strictness::Canonical, _) => return Err(FormError::Syntax),
        (Strictness::Lenient, _) => {}
    }
    let word = trim_blanks(text);
    let prefix_of = |full: &[u8], shortest: usize| {
        word.len() >= shortest
            && word.len() <= full.len()
            && full[..word.len()].eq_ignore_ascii_case(word)
    };
    if prefix_of(b"true", 1) || prefix_of(b"yes", 1) || prefix_of(b"on", 2) || word == b"1" {
        Ok(true)
    } else if prefix_of(b"false", 1) || prefix_of(b"no", 1) || prefix_of(b"off", 2) || word == b"0"
    {
        Ok(false)
    } else {
        Err(FormError::Syntax)
    }
}

/// A UUID's 16 bytes from its 32 hex digits in any case, a hyphen allowed
/// after any group of four (`a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11`, as
/// `uuid_in` reads it); lenient, also inside braces and with blanks around.
///
/// ```
/// use sluice_core::canonical::{read_uuid, Strictness};
/// let bytes = read_uuid(b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", Strictness::Canonical).unwrap();
/// assert_eq!((bytes[0], bytes[15]), (0xa0, 0x11));
/// assert!(read_uuid(b"{a0eebc999c0b4ef8bb6d6bb9bd380a11}", Strictness::Canonical).is_err());
/// assert_eq!(read_uuid(b"{a0eebc999c0b4ef8bb6d6bb9bd380a11}", Strictness::Lenient), Ok(bytes));
/// ```
pub fn read_uuid(text: &[u8], strictness: Strictness) -> Result<[u8; 16], FormError> {
    let body = strictness.trim(text);
    let body = match (strictness, body) {
        (Strictness::Lenient, [b'{', inner @ .., b'}']) => inner,
        _ => body,
    };
    let mut bytes = [0u8; 16];
    let mut digits = 0;
    for (index, &byte) in body.iter().enumerate() {
        let hyphen_allowed =
            digits % 4 == 0 && digits > 0 && digits < 32 && body[index - 1] != b'-';
        if byte == b'-' && hyphen_allowed {
            continue;
        }
        let value = hex_digit(byte).ok_or(FormError::Syntax)?;
        let slot = bytes.get_mut(digits / 2).ok_or(FormError::Syntax)?;
        *slot = (*slot << 4) | value;
        digits += 1;
    }
    if digits != 32 || body.last() == Some(&b'-') {
        return Err(FormError::Syntax);
    }
    Ok(bytes)
}

/// The value of one hex digit, in either case.
pub fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// The bytes of pairs of hex digits: the body of `bytea`'s hex form after its
/// `\x` (`None` for an odd count or a byte that is no hex digit).
///
/// ```
/// use sluice_core::canonical::read_hex_pairs;
/// assert_eq!(read_hex_pairs(b"0aFF"), Some(vec![0x0a, 0xff]));
/// assert_eq!(read_hex_pairs(b"0aF"), None);
/// ```
pub fn read_hex_pairs(digits: &[u8]) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| Some((hex_digit(pair[0])? << 4) | hex_digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Strictness::{Canonical, Lenient};

    #[test]
    fn booleans() {
        for (text, value) in [(&b"t"[..], true), (b"f", false)] {
            assert_eq!(read_bool(text, Canonical), Ok(value));
        }
        for text in [&b"true"[..], b"1", b"T", b"TRUE", b"", b" t"] {
            assert_eq!(
                read_bool(text, Canonical),
                Err(FormError::Syntax),
                "{text:?}"
            );
        }
        for (text, value) in [
            (&b"TRUE"[..], true),
            (b"tr", true),
            (b"y", true),
            (b"on", true),
            (b" 1 ", true),
            (b"of", false),
            (b"No", false),
            (b"0", false),
        ] {
            assert_eq!(read_bool(text, Lenient), Ok(value), "{text:?}");
        }
        for text in [&b"o"[..], b"truer", b"2", b"", b"yess"] {
            assert!(read_bool(text, Lenient).is_err(), "{text:?}");
        }
    }

    #[test]
    fn uuids() {
        let bytes = read_uuid(b"A0EEBC999C0B4EF8BB6D6BB9BD380A11", Canonical).unwrap();
        assert_eq!(
            read_uuid(b"a0ee-bc99-9c0b4ef8bb6d6bb9bd380a11", Canonical),
            Ok(bytes)
        );
        for bad in [
            &b""[..],
            b"a0eebc99",
            b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
            b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1100",
            b"a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
            b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            b"-a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            b"a0e-ebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            b" a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        ] {
            assert!(read_uuid(bad, Canonical).is_err(), "{bad:?}");
        }
        assert_eq!(
            read_uuid(b" {a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11} ", Lenient),
            Ok(bytes)
        );
    }
}
