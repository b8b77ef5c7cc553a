//! Array literals (`{1,NULL,"a b"}`, `{{1,2},{3,4}}`, `[0:1]={5,6}`) and
//! record literals (`(1,"a b",)`), read in one pass without building a
//! tree: the reader hands each piece to a visitor, which writes JSON, fills
//! Arrow buffers or encodes PostgreSQL's binary array form as it goes.
//!
//! Hand-written because no crate reads these text forms. The grammar is the
//! server's `array_out`/`record_out`: an element is quoted when it holds a
//! special character, `\` escapes inside quotes (and `""` inside record
//! quotes), an unquoted `NULL` (any case) is a null array element and an
//! empty unquoted record field a null field; a bare array element holds no
//! blank (`array_out` quotes one that does). Lenient array reading adds what
//! `array_in` also takes: blanks between tokens and around (and inside)
//! unquoted elements, backslash escapes outside quotes. Records are read canonically
//! only: no importer reads record text.

use super::reading::{is_blank, trim_blanks, Strictness};

/// PostgreSQL allows six dimensions.
pub const MAX_DIMENSIONS: usize = 6;

/// What an array literal's reader hands over as it reads.
pub trait ArrayVisitor {
    /// Why the visitor stops the read.
    type Error;

    /// A `{` opening a sub-array at `depth` (0 the outermost), the
    /// `index`th item of the sub-array around it (0 for the outermost).
    fn open(&mut self, depth: usize, index: usize) -> Result<(), Self::Error>;

    /// An element of a sub-array at `depth`, its `index`th item; `None` is
    /// NULL. Every element of a literal stands at the same depth.
    fn element(
        &mut self,
        depth: usize,
        index: usize,
        value: Option<&[u8]>,
    ) -> Result<(), Self::Error>;

    /// The `}` closing the sub-array at `depth` after its `items` items.
    fn close(&mut self, depth: usize, items: usize) -> Result<(), Self::Error>;
}

/// Why a literal was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiteralError<E> {
    /// The text is not a literal; the words say where it went wrong.
    Malformed(&'static str),
    /// The visitor refused a piece.
    Visitor(E),
}

/// An array literal's dimensions: the length and lower bound of each (none
/// for an empty array), as PostgreSQL's binary array form carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArrayShape {
    dimensions: usize,
    lengths: [i32; MAX_DIMENSIONS],
    lower_bounds: [i32; MAX_DIMENSIONS],
}

impl ArrayShape {
    /// The length of each dimension, outermost first.
    pub fn lengths(&self) -> &[i32] {
        &self.lengths[..self.dimensions]
    }

    /// The lower bound of each dimension: 1 unless the literal declared
    /// bounds (`[0:1]={5,6}`).
    pub fn lower_bounds(&self) -> &[i32] {
        &self.lower_bounds[..self.dimensions]
    }
}

/// Reads an array literal, handing its pieces to `visitor` in order, and
/// returns its shape. Sub-arrays of one level must have one length and
/// elements must all stand at one depth (as in any PostgreSQL array);
/// declared bounds must match the elements.
///
/// ```
/// use sluice_core::canonical::{read_array, ArrayVisitor, Strictness};
///
/// /// Collects the elements.
/// struct Elements(Vec<Option<String>>);
///
/// impl ArrayVisitor for Elements {
///     type Error = ();
///     fn open(&mut self, _depth: usize, _index: usize) -> Result<(), ()> { Ok(()) }
///     fn element(&mut self, _depth: usize, _index: usize, value: Option<&[u8]>) -> Result<(), ()> {
///         self.0.push(value.map(|value| String::from_utf8_lossy(value).into_owned()));
///         Ok(())
///     }
///     fn close(&mut self, _depth: usize, _items: usize) -> Result<(), ()> { Ok(()) }
/// }
///
/// let mut elements = Elements(Vec::new());
/// let shape = read_array(br#"{{a,NULL},{"b \"c\"",""}}"#, Strictness::Canonical, &mut elements).unwrap();
/// assert_eq!(shape.lengths(), [2, 2]);
/// let expected = [Some("a"), None, Some("b \"c\""), Some("")];
/// assert_eq!(elements.0, expected.map(|value| value.map(str::to_owned)));
/// ```
pub fn read_array<V: ArrayVisitor>(
    text: &[u8],
    strictness: Strictness,
    visitor: &mut V,
) -> Result<ArrayShape, LiteralError<V::Error>> {
    let body = match strictness {
        Strictness::Canonical => text,
        Strictness::Lenient => trim_blanks(text),
    };
    let (declared, body) = split_bounds(body)?;
    let mut reader = ArrayReader {
        text: body,
        at: 0,
        strictness,
        scratch: Vec::new(),
        shape: ArrayShape::default(),
        leaf_depth: None,
    };
    reader.level(0, 0, visitor)?;
    if reader.at != body.len() {
        return Err(LiteralError::Malformed("text after the closing brace"));
    }
    let mut shape = reader.shape;
    if reader.leaf_depth.is_none() {
        // `{}` (or sub-arrays without elements) is an empty array: no
        // dimensions at all.
        return Ok(ArrayShape::default());
    }
    match declared {
        None => shape.lower_bounds[..shape.dimensions].fill(1),
        Some((count, bounds)) => {
            let fits = count == shape.dimensions
                && bounds[..count]
                    .iter()
                    .zip(shape.lengths())
                    .all(|((lower, upper), length)| {
                        i64::from(*upper) - i64::from(*lower) + 1 == i64::from(*length)
                    });
            if !fits {
                return Err(LiteralError::Malformed(
                    "the dimensions do not match the elements",
                ));
            }
            for (slot, (lower, _)) in shape.lower_bounds.iter_mut().zip(&bounds[..count]) {
                *slot = *lower;
            }
        }
    }
    Ok(shape)
}

/// Declared bounds: how many, and `(lower, upper)` of each.
type Declared = (usize, [(i32, i32); MAX_DIMENSIONS]);

/// Optional explicit bounds `[1:3][0:1]=` before the braces, and the rest.
fn split_bounds<E>(body: &[u8]) -> Result<(Option<Declared>, &[u8]), LiteralError<E>> {
    if body.first() != Some(&b'[') {
        return Ok((None, body));
    }
    let bad = || LiteralError::Malformed("bad dimensions");
    let equals = body
        .iter()
        .position(|&byte| byte == b'=')
        .ok_or(LiteralError::Malformed("dimensions without \"=\""))?;
    let mut bounds = [(0, 0); MAX_DIMENSIONS];
    let mut count = 0;
    for part in body[..equals].split(|&byte| byte == b']') {
        let part = trim_blanks(part);
        if part.is_empty() {
            continue;
        }
        let inner = part.strip_prefix(b"[").ok_or_else(bad)?;
        let text = std::str::from_utf8(inner).map_err(|_| bad())?;
        let (lower, upper) = text.split_once(':').ok_or_else(bad)?;
        let slot = bounds.get_mut(count).ok_or_else(bad)?;
        *slot = (
            lower.trim().parse().map_err(|_| bad())?,
            upper.trim().parse().map_err(|_| bad())?,
        );
        count += 1;
    }
    Ok((Some((count, bounds)), trim_blanks(&body[equals + 1..])))
}

/// A dimension whose length no sub-array has set yet.
const UNSET: i32 = -1;

struct ArrayReader<'t> {
    text: &'t [u8],
    at: usize,
    strictness: Strictness,
    /// A quoted or escaped element, its escapes undone.
    scratch: Vec<u8>,
    shape: ArrayShape,
    /// The depth elements stand at, once one is read.
    leaf_depth: Option<usize>,
}

impl ArrayReader<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn skip_blanks(&mut self) {
        if self.strictness == Strictness::Lenient {
            while self.peek().is_some_and(is_blank) {
                self.at += 1;
            }
        }
    }

    /// One `{…}` at `depth`, the `index`th item of its parent.
    fn level<V: ArrayVisitor>(
        &mut self,
        depth: usize,
        index: usize,
        visitor: &mut V,
    ) -> Result<(), LiteralError<V::Error>> {
        if depth >= MAX_DIMENSIONS {
            return Err(LiteralError::Malformed("more than six dimensions"));
        }
        self.skip_blanks();
        if self.peek() != Some(b'{') {
            return Err(LiteralError::Malformed("expected \"{\""));
        }
        self.at += 1;
        visitor.open(depth, index).map_err(LiteralError::Visitor)?;
        self.skip_blanks();
        let mut items = 0;
        if self.peek() == Some(b'}') {
            self.at += 1;
        } else {
            loop {
                self.skip_blanks();
                self.item(depth, items, visitor)?;
                items += 1;
                self.skip_blanks();
                match self.peek() {
                    Some(b',') => self.at += 1,
                    Some(b'}') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(LiteralError::Malformed("expected \",\" or \"}\"")),
                }
            }
        }
        self.count(depth, items)?;
        visitor.close(depth, items).map_err(LiteralError::Visitor)?;
        self.skip_blanks();
        Ok(())
    }

    /// One item of a sub-array at `depth`: a deeper sub-array or an element.
    fn item<V: ArrayVisitor>(
        &mut self,
        depth: usize,
        index: usize,
        visitor: &mut V,
    ) -> Result<(), LiteralError<V::Error>> {
        let nested = self.peek() == Some(b'{');
        let fits = match self.leaf_depth {
            None => true,
            Some(leaf) if nested => leaf > depth,
            Some(leaf) => leaf == depth,
        };
        if !fits {
            return Err(LiteralError::Malformed("sub-arrays of different depths"));
        }
        if nested {
            return self.level(depth + 1, index, visitor);
        }
        self.leaf_depth = Some(depth);
        let value = match self.strictness {
            Strictness::Canonical => self.canonical_element()?,
            Strictness::Lenient => self.lenient_element()?,
        };
        visitor
            .element(depth, index, value)
            .map_err(LiteralError::Visitor)
    }

    /// Records that a sub-array at `depth` held `items`: the first sets the
    /// dimension's length, the rest must match it.
    fn count<E>(&mut self, depth: usize, items: usize) -> Result<(), LiteralError<E>> {
        let items =
            i32::try_from(items).map_err(|_| LiteralError::Malformed("too many elements"))?;
        let shape = &mut self.shape;
        if shape.dimensions <= depth {
            shape.lengths[shape.dimensions..=depth].fill(UNSET);
            shape.dimensions = depth + 1;
        }
        match shape.lengths[depth] {
            UNSET => {
                shape.lengths[depth] = items;
                Ok(())
            }
            length if length == items => Ok(()),
            _ => Err(LiteralError::Malformed("sub-arrays of different lengths")),
        }
    }

    /// A quoted element (escapes undone into `scratch`), or `None` when the
    /// next byte is no quote.
    fn quoted<E>(&mut self, doubled_quotes: bool) -> Result<Option<()>, LiteralError<E>> {
        if self.peek() != Some(b'"') {
            return Ok(None);
        }
        self.at += 1;
        self.scratch.clear();
        let unterminated = || LiteralError::Malformed("unterminated quoted element");
        loop {
            let byte = self.peek().ok_or_else(unterminated)?;
            self.at += 1;
            match byte {
                b'\\' => {
                    self.scratch.push(self.peek().ok_or_else(unterminated)?);
                    self.at += 1;
                }
                b'"' if doubled_quotes && self.peek() == Some(b'"') => {
                    self.scratch.push(b'"');
                    self.at += 1;
                }
                b'"' => return Ok(Some(())),
                other => self.scratch.push(other),
            }
        }
    }

    /// An element as `array_out` writes it: quoted, or bare up to `,` or
    /// `}` without quotes, braces, backslashes or blanks in it (`array_out`
    /// quotes an element holding any of them, so a bare one is not its text).
    fn canonical_element<E>(&mut self) -> Result<Option<&[u8]>, LiteralError<E>> {
        if self.quoted(false)?.is_some() {
            return Ok(Some(&self.scratch));
        }
        let start = self.at;
        while let Some(byte) = self.peek() {
            match byte {
                b',' | b'}' => break,
                b'{' | b'"' | b'\\' => {
                    return Err(LiteralError::Malformed(
                        "unexpected character in an element",
                    ))
                }
                byte if is_blank(byte) => {
                    return Err(LiteralError::Malformed("a blank outside quotes"))
                }
                _ => self.at += 1,
            }
        }
        match &self.text[start..self.at] {
            b"" => Err(LiteralError::Malformed("an empty element")),
            token if token.eq_ignore_ascii_case(b"NULL") => Ok(None),
            token => Ok(Some(token)),
        }
    }

    /// An element as `array_in` reads it: quoted (never NULL) or bare
    /// (blanks around it dropped, `NULL` in any case a null); a backslash
    /// takes the next byte as it is.
    fn lenient_element<E>(&mut self) -> Result<Option<&[u8]>, LiteralError<E>> {
        if self.quoted(false)?.is_some() {
            return Ok(Some(&self.scratch));
        }
        self.scratch.clear();
        let mut escaped = false;
        // The length of the element up to its last byte that is not a bare blank.
        let mut kept = 0;
        while let Some(byte) = self.peek() {
            match byte {
                b',' | b'}' => break,
                b'{' | b'"' => {
                    return Err(LiteralError::Malformed(
                        "unexpected character in an element",
                    ))
                }
                b'\\' => {
                    self.at += 1;
                    let next = self
                        .peek()
                        .ok_or(LiteralError::Malformed("unterminated element"))?;
                    self.scratch.push(next);
                    escaped = true;
                    kept = self.scratch.len();
                }
                byte => {
                    self.scratch.push(byte);
                    if !is_blank(byte) {
                        kept = self.scratch.len();
                    }
                }
            }
            self.at += 1;
        }
        self.scratch.truncate(kept);
        if self.scratch.is_empty() && !escaped {
            return Err(LiteralError::Malformed("an empty element"));
        }
        if !escaped && self.scratch.eq_ignore_ascii_case(b"NULL") {
            return Ok(None);
        }
        Ok(Some(&self.scratch))
    }
}

/// Reads a record literal, handing each field to `field` with its index
/// (`None` for NULL), and returns how many fields it had. `()` is one NULL
/// field, as `record_out` writes a one-field record whose field is NULL.
///
/// ```
/// use sluice_core::canonical::read_record;
/// let mut fields = Vec::new();
/// let count = read_record::<()>(br#"(1,"say ""hi""",)"#, |_index, value| {
///     fields.push(value.map(<[u8]>::to_vec));
///     Ok(())
/// });
/// assert_eq!(count, Ok(3));
/// assert_eq!(fields, [Some(b"1".to_vec()), Some(br#"say "hi""#.to_vec()), None]);
/// ```
pub fn read_record<E>(
    text: &[u8],
    mut field: impl FnMut(usize, Option<&[u8]>) -> Result<(), E>,
) -> Result<usize, LiteralError<E>> {
    let body = text
        .strip_prefix(b"(")
        .ok_or(LiteralError::Malformed("expected \"(\""))?;
    let mut reader = ArrayReader {
        text: body,
        at: 0,
        strictness: Strictness::Canonical,
        scratch: Vec::new(),
        shape: ArrayShape::default(),
        leaf_depth: None,
    };
    let mut index = 0;
    loop {
        let value = match reader.quoted(true)? {
            Some(()) => Some(&reader.scratch[..]),
            None => {
                let start = reader.at;
                while let Some(byte) = reader.peek() {
                    match byte {
                        b',' | b')' => break,
                        b'"' | b'\\' => {
                            return Err(LiteralError::Malformed("unexpected character in a field"))
                        }
                        _ => reader.at += 1,
                    }
                }
                Some(&body[start..reader.at]).filter(|token| !token.is_empty())
            }
        };
        field(index, value).map_err(LiteralError::Visitor)?;
        index += 1;
        match reader.peek() {
            Some(b',') => reader.at += 1,
            Some(b')') if reader.at + 1 == body.len() => return Ok(index),
            _ => return Err(LiteralError::Malformed("expected \",\" or \")\"")),
        }
    }
}
