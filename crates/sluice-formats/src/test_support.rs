//! For the decoders' tests: decoding an input whole and in two reads split at
//! every position must give the same rows, lines and rejections (the fuzz
//! targets check this on generated inputs; these tests keep what they found).

use sluice_core::{Decoded, Decoder};

/// Rows (line and values) and rejections (line and reason) of one decoding.
type Outcome = (Vec<(u64, Vec<Option<Vec<u8>>>)>, Vec<(u64, String)>);

fn collect(decoded: &Decoded, outcome: &mut Outcome) {
    for (index, row) in decoded.batch.rows().enumerate() {
        let values = (0..row.len())
            .map(|column| row.get(column).map(<[u8]>::to_vec))
            .collect();
        outcome.0.push((decoded.lines[index], values));
    }
    for rejected in &decoded.rejected {
        outcome
            .1
            .push((rejected.error.line, rejected.error.reason.clone()));
    }
}

/// Decodes `reads` one after another, keeping what each call leaves, as the
/// import loop does.
fn decode_in_reads(mut decoder: Box<dyn Decoder>, reads: &[&[u8]]) -> Outcome {
    let mut outcome = Outcome::default();
    let mut pending = Vec::new();
    for (index, read) in reads.iter().enumerate() {
        pending.extend_from_slice(read);
        let mut decoded = Decoded::default();
        let end = index + 1 == reads.len();
        let consumed = decoder.decode(&pending, end, &mut decoded).unwrap();
        pending.drain(..consumed);
        collect(&decoded, &mut outcome);
    }
    outcome
}

/// Panics, naming the split, when reading `input` in two pieces differs from
/// reading it whole.
pub(crate) fn assert_split_reads_agree(make: impl Fn() -> Box<dyn Decoder>, input: &[u8]) {
    let whole = decode_in_reads(make(), &[input]);
    for split in 0..=input.len() {
        let (first, second) = input.split_at(split);
        let pieces = decode_in_reads(make(), &[first, second]);
        assert_eq!(pieces, whole, "reads split at byte {split} of {input:?}");
    }
}
