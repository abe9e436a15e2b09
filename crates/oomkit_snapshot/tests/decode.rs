//! The decoder against hostile bytes: arbitrary input, mutated real fixtures and
//! every prefix of real files must give an answer or an error, never a panic,
//! and decoding stays bounded (depth, claimed lengths).

#![allow(clippy::unwrap_used)]
use std::path::Path;

use oomkit_snapshot::{Options, analyze, load};
use proptest::prelude::*;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// Decodes and, when that works, analyses: neither may panic.
fn run(bytes: &[u8]) -> bool {
    match load(|| Ok(bytes), bytes.len() as u64) {
        Ok(snap) => analyze(&snap, &Options::default()).is_ok(),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            false
        }
    }
}

#[test]
fn every_prefix_of_a_real_file_is_an_error_or_an_answer() {
    for name in ["no-trace.pickle", "small-training-step.pickle"] {
        let bytes = fixture(name);
        // Every prefix of the small file; a spread of 1,200 of the larger one
        // (the binary test covers it too), to keep debug-mode CI fast.
        let step = if bytes.len() > 20_000 { 61 } else { 1 };
        for len in (0..bytes.len()).step_by(step) {
            // No prefix of these files is itself a whole pickle (STOP is last).
            assert!(!run(&bytes[..len]), "{name}: prefix {len} decoded");
        }
        assert!(run(&bytes), "{name}: whole file");
    }
}

#[test]
fn a_huge_claimed_string_is_an_error_not_an_allocation() {
    // BINUNICODE claiming 4 GiB, in a 100-byte file.
    let mut b = b"\x80\x04X\xff\xff\xff\xff".to_vec();
    b.resize(100, b'a');
    let e = load(|| Ok(&b[..]), b.len() as u64).unwrap_err();
    assert!(e.to_string().contains("needs 4294967295 more bytes"), "{e}");
    // BINBYTES8 claiming 2^63.
    let b = b"\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x80.";
    assert!(load(|| Ok(&b[..]), b.len() as u64).is_err());
}

#[test]
fn deep_nesting_is_refused_with_the_limit() {
    let mut b = b"\x80\x04".to_vec();
    b.extend(std::iter::repeat_n(b'(', 100_000));
    b.extend(std::iter::repeat_n(b'l', 100_000));
    b.push(b'.');
    let e = load(|| Ok(&b[..]), b.len() as u64).unwrap_err();
    assert!(e.to_string().contains("deeper than 64 levels"), "{e}");
}

#[test]
fn a_line_number_of_u64_max_survives() {
    // {'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'blocks': [
    //   {'size': 512, 'requested_size': 500, 'state': 'active_allocated',
    //    'frames': [{'filename': 'train.py', 'line': 2**64-1, 'name': 'f'}]}]}]}
    let b = b"\x80\x04}(\x8c\x08segments](}(\x8c\x06deviceK\x00\x8c\x07addressK\x00\x8c\ntotal_sizeM\x00\x02\x8c\x06blocks](}(\x8c\x04sizeM\x00\x02\x8c\x0erequested_sizeM\xf4\x01\x8c\x05state\x8c\x10active_allocated\x8c\x06frames](}(\x8c\x08filename\x8c\x08train.py\x8c\x04line\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00\x8c\x04name\x8c\x01fuaeuaeuaeu.";
    let snap = load(|| Ok(&b[..]), b.len() as u64).unwrap();
    assert_eq!(snap.frames[0].line, Some(u64::MAX));
    let r = analyze(&snap, &Options::default()).unwrap();
    assert_eq!(r.devices[0].top_sites[0].frame, "train.py:? f");
    assert_eq!(r.devices[0].fragmentation.rounding_waste_bytes, 12);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut b = b"\x80\x04".to_vec();
        b.extend(body);
        run(&b);
        run(&b[2..]);
    }

    #[test]
    fn mutated_real_files_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut b = fixture("no-trace.pickle");
        for (at, byte) in edits {
            let i = at.index(b.len());
            b[i] = byte;
        }
        run(&b);
        let keep = cut.index(b.len());
        run(&b[..keep]);
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn mutated_trace_files_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut b = fixture("small-training-step.pickle");
        for (at, byte) in edits {
            let i = at.index(b.len());
            b[i] = byte;
        }
        run(&b);
    }
}
