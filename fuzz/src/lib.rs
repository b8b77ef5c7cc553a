//! What the fuzz targets share: a table schema drawn from the fuzzer's bytes,
//! a decoder driven over an input cut into arbitrary pieces (as imports read
//! it), and hostile database servers on a local socket that log the client in
//! honestly and then answer its query with the fuzzer's bytes.

pub mod decoders;
pub mod servers;

/// Reads bytes off the front of the fuzzer's input; runs out into zeros.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    /// The next byte, or 0 when the input is used up.
    pub fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((first, rest)) => {
                self.0 = rest;
                *first
            }
            None => 0,
        }
    }

    /// What is left.
    pub fn rest(&self) -> &[u8] {
        self.0
    }
}
