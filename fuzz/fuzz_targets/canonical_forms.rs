//! The canonical value readers (`sluice_core::canonical`) on arbitrary text:
//! no panic; whatever the canonical reader takes, the lenient one reads as
//! the same value; and a value read, written back and read again is the
//! same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::canonical::{
    read_array, read_bool, read_date, read_interval, read_interval_lenient, read_record, read_time,
    read_time_tz, read_timestamp, read_uuid, write_clock, write_date, write_offset,
    write_timestamp, write_uuid, ArrayVisitor, IntervalSigns, Moment, Strictness, Zone,
};

/// Counts an array literal's pieces.
#[derive(Default, PartialEq, Debug)]
struct Count {
    opened: usize,
    elements: Vec<Option<Vec<u8>>>,
}

impl ArrayVisitor for Count {
    type Error = ();
    fn open(&mut self, _depth: usize, _index: usize) -> Result<(), ()> {
        self.opened += 1;
        Ok(())
    }
    fn element(&mut self, _depth: usize, _index: usize, value: Option<&[u8]>) -> Result<(), ()> {
        self.elements.push(value.map(<[u8]>::to_vec));
        Ok(())
    }
    fn close(&mut self, _depth: usize, _items: usize) -> Result<(), ()> {
        Ok(())
    }
}

/// The canonical reading, if any, agrees with the lenient one.
fn agree<T: PartialEq + std::fmt::Debug, E>(read: impl Fn(Strictness) -> Result<T, E>) -> Option<T> {
    let canonical = read(Strictness::Canonical).ok();
    let lenient = read(Strictness::Lenient).ok();
    if let Some(value) = &canonical {
        assert_eq!(lenient.as_ref(), Some(value), "the lenient reader disagrees");
    }
    canonical.or(lenient)
}

fn again<T: PartialEq + std::fmt::Debug, E: std::fmt::Debug>(
    value: T,
    written: &[u8],
    read: impl Fn(&[u8]) -> Result<T, E>,
) {
    assert_eq!(read(written).unwrap(), value, "{:?}", String::from_utf8_lossy(written));
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let mut written = Vec::new();
    match which % 8 {
        0 => {
            let _ = agree(|strictness| read_bool(text, strictness));
        }
        1 => {
            if let Some(bytes) = agree(|strictness| read_uuid(text, strictness)) {
                write_uuid(&bytes, &mut written);
                again(bytes, &written, |text| read_uuid(text, Strictness::Canonical));
            }
        }
        2 => {
            if let Some(Moment::Finite(days)) = agree(|strictness| read_date(text, strictness)) {
                write_date(days, &mut written);
                again(Moment::Finite(days), &written, |text| read_date(text, Strictness::Canonical));
            }
        }
        3 => {
            if let Some(micros) = agree(|strictness| read_time(text, strictness)) {
                write_clock(micros * 1000, &mut written);
                again(micros, &written, |text| read_time(text, Strictness::Canonical));
            }
        }
        4 => {
            if let Some((micros, offset)) = agree(|strictness| read_time_tz(text, strictness)) {
                write_clock(micros * 1000, &mut written);
                write_offset(offset, &mut written);
                again((micros, offset), &written, |text| read_time_tz(text, Strictness::Canonical));
            }
        }
        5 | 6 => {
            let zone = if which % 8 == 5 { Zone::With } else { Zone::Without };
            let read = agree(|strictness| read_timestamp(text, zone, strictness));
            if let Some(Moment::Finite(micros)) = read {
                let offset = (zone == Zone::With).then_some(0);
                if write_timestamp(micros * 1000, offset, &mut written).is_ok() {
                    again(Moment::Finite(micros), &written, |text| {
                        read_timestamp(text, zone, Strictness::Canonical)
                    });
                }
            }
        }
        _ => {
            let _ = read_interval(text);
            let _ = read_interval_lenient(text, IntervalSigns::PerField);
            let _ = read_interval_lenient(text, IntervalSigns::Leading);
            let _ = read_record::<()>(text, |_, _| Ok(()));
            let _ = agree(|strictness| {
                let mut count = Count::default();
                read_array(text, strictness, &mut count).map(|shape| (shape, count))
            });
        }
    }
});
