//! The decoder's time and memory stay proportional to the input on crafted
//! pickles (the layouts `tests/fixtures/make_hostile.py` writes, built here at
//! larger sizes). Time is bounded through the decoder's work count (opcodes,
//! items moved, memo slots examined), which a quadratic path makes grow with
//! the square of the input; memory through the process's peak resident size
//! (Linux: reset through `/proc/self/clear_refs`, read from `VmHWM`).
#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]

use std::path::Path;
use std::sync::Mutex;

use oomkit_snapshot::pickle::{self, FIELDS, Hook, Raw, Value};

/// Memory is measured for the whole process: one measurement at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A field of `/proc/self/status` in bytes (Linux only).
fn status_bytes(field: &str) -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak resident size to the current one; false where the
/// kernel does not offer it.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok() && status_bytes("VmHWM:").is_some()
}

/// Takes flat dicts with an `action` on the fast path, as the snapshot loader
/// does with trace entries.
struct TakeRecords;

impl Hook for TakeRecords {
    fn take(&mut self, _list: usize, _item: &Value) -> bool {
        false
    }
    fn field(&mut self, key: &str) -> Option<usize> {
        ["action", "addr", "size"].iter().position(|k| *k == key)
    }
    fn record(&mut self, fields: &[Raw<'_>; FIELDS]) -> bool {
        !matches!(fields[0], Raw::Absent)
    }
}

fn long_binput(out: &mut Vec<u8>, i: u32) {
    out.push(b'r');
    out.extend_from_slice(&i.to_le_bytes());
}

fn long_binget(out: &mut Vec<u8>, i: u32) {
    out.push(b'j');
    out.extend_from_slice(&i.to_le_bytes());
}

fn binunicode(out: &mut Vec<u8>, s: &str) {
    out.push(b'X');
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn binint(out: &mut Vec<u8>, v: i32) {
    out.push(b'J');
    out.extend_from_slice(&v.to_le_bytes());
}

/// `far_put` of make_hostile.py: a PUT far past every other memo index, then
/// `entries` trace entries, each with its own LONG_BINPUT and APPENDS.
fn far_put(entries: u32) -> Vec<u8> {
    let mut o = b"\x80\x02}".to_vec();
    long_binput(&mut o, 0);
    o.push(b'(');
    binunicode(&mut o, "segments");
    long_binput(&mut o, 0xFFFF_FFF0);
    o.push(b']');
    long_binput(&mut o, 1);
    binunicode(&mut o, "device_traces");
    long_binput(&mut o, 2);
    o.push(b']');
    long_binput(&mut o, 3);
    o.push(b']');
    long_binput(&mut o, 4);
    let (action, alloc, addr, size) = (5, 6, 7, 8);
    let mut n = 9;
    o.extend_from_slice(b"(}");
    long_binput(&mut o, n);
    n += 1;
    o.push(b'(');
    binunicode(&mut o, "action");
    long_binput(&mut o, action);
    binunicode(&mut o, "alloc");
    long_binput(&mut o, alloc);
    binunicode(&mut o, "addr");
    long_binput(&mut o, addr);
    binint(&mut o, 0);
    binunicode(&mut o, "size");
    long_binput(&mut o, size);
    binint(&mut o, 512);
    o.extend_from_slice(b"ue");
    for e in 1..entries {
        o.extend_from_slice(b"(}");
        long_binput(&mut o, n);
        n += 1;
        o.push(b'(');
        long_binget(&mut o, action);
        long_binget(&mut o, alloc);
        long_binget(&mut o, addr);
        binint(&mut o, 512 * e as i32);
        long_binget(&mut o, size);
        binint(&mut o, 512);
        o.extend_from_slice(b"ue");
    }
    o.extend_from_slice(b"au.");
    o
}

/// `huge_memo_index` of make_hostile.py: one LONG_BINPUT of an index just
/// below the file's length, then NONE/POP pairs.
fn huge_memo_index(pairs: usize) -> Vec<u8> {
    let total = 2 + 1 + 5 + 2 * pairs + 1;
    let mut o = b"\x80\x02]".to_vec();
    long_binput(&mut o, (total - 16) as u32);
    for _ in 0..pairs {
        o.extend_from_slice(b"N0");
    }
    o.push(b'.');
    assert_eq!(o.len(), total);
    o
}

/// Decodes `b`: (whether it decoded, work count).
fn measure(b: &[u8]) -> (bool, u64) {
    let (r, work) = pickle::decode_counting(|| Ok(b), b.len() as u64, &mut TakeRecords);
    (r.is_ok(), work)
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

#[test]
fn a_put_past_the_taken_entries_keeps_decoding_linear() {
    let small = far_put(2_000);
    let large = far_put(16_000);
    let (ok_s, work_s) = measure(&small);
    let (ok_l, work_l) = measure(&large);
    assert!(ok_s && ok_l);
    // Linear: at most a few units of work per byte, and 8× the entries cost
    // 8× the work (a rescan per APPENDS would cost 64×).
    assert!(
        work_l <= 4 * large.len() as u64,
        "{work_l} for {} bytes",
        large.len()
    );
    let ratio = work_l as f64 / work_s as f64;
    assert!(ratio < 9.0, "8x the entries took {ratio:.1}x the work");
}

#[test]
fn a_huge_memo_index_costs_no_memory_beyond_the_input() {
    let _serial = SERIAL.lock().unwrap();
    let b = huge_memo_index(4_000_000);
    let (ok, work) = measure(&b);
    assert!(ok);
    assert!(work <= 2 * b.len() as u64);
    if !reset_peak() {
        eprintln!("no /proc/self/clear_refs: the memory half of this test is skipped");
        return;
    }
    let before = status_bytes("VmRSS:").unwrap();
    let (ok, _) = measure(&b);
    assert!(ok);
    let grew = status_bytes("VmHWM:").unwrap().saturating_sub(before);
    // The read-ahead buffers (about 1 MiB) and a few small vectors; a dense
    // memo up to the index would take 16 bytes per byte of input (128 MiB).
    assert!(
        grew < b.len() / 2 + (8 << 20),
        "decoding {} bytes grew the resident size by {grew} bytes",
        b.len()
    );
}

#[test]
fn committed_crafted_and_real_files_stay_within_linear_work() {
    for name in [
        "crafted-far-put.pickle",
        "crafted-huge-memo-index.pickle",
        "small-training-step.pickle",
        "h100-hook-leak.pickle",
        "h100-annotated-steps.pickle",
    ] {
        let b = fixture(name);
        let (ok, work) = measure(&b);
        assert!(ok, "{name}");
        assert!(
            work <= 4 * b.len() as u64,
            "{name}: {work} for {} bytes",
            b.len()
        );
    }
}
