//! Hostile and odd input to `oomkit explain`, through the binary:
//! every case ends within seconds with the right answer or a one-line
//! error and exit 2, never a panic or a hang. Big inputs are generated here.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{json, run_in, run_within, stderr, stdout};

const TF_LINE: &str = "2024-01-01 12:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.00GiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available.";
const TF_ERROR: &str = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[128,128,109,109] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc";
const TORCH: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.27 GiB is free. Including non-PyTorch memory, this process has 22.36 GiB memory in use. Of the allocated memory 16.93 GiB is allocated by PyTorch, and 4.84 GiB is reserved by PyTorch but unallocated.";

/// Runs `oomkit explain ARGS…` (paths absolute), killed past `limit`.
fn explain_within(args: &[&str], limit: Duration) -> (Option<i32>, String, String) {
    let mut all = vec!["explain"];
    all.extend_from_slice(args);
    let out = run_within(Path::new("."), &all, limit);
    (out.status.code(), stdout(&out), stderr(&out))
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write input");
    p.to_string_lossy().into_owned()
}

/// Accented and CJK text right after a message used to panic (byte slicing
/// inside a character).
#[test]
fn non_ascii_text_after_a_message_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    for tail in ["é", "éééééé àààà", "清理显存", "👍"] {
        // The message as detectors see it starts at "Allocator" (the log
        // prefix is stripped); put the multi-byte text across its byte 400.
        let message_len = TF_LINE.len() - TF_LINE.find("Allocator").unwrap();
        for cut in 0..4 {
            let pad = "x".repeat(400 - message_len - cut);
            let log = format!("{TF_LINE}{pad}{tail} {tail}\n{TORCH}{tail}\n");
            let path = write(dir.path(), "accents.log", log.as_bytes());
            let (code, out, err) = explain_within(&[&path], Duration::from_secs(20));
            assert_eq!(code, Some(0), "{err}");
            assert!(out.contains("asked for 2.00 GiB"), "{out}");
        }
    }
}

/// Thousands of errors back to back used to take quadratic time (the whole
/// region searched again for every message).
#[test]
fn a_dense_error_log_is_linear() {
    let dir = tempfile::tempdir().unwrap();
    let block = format!("{TF_LINE}\n{TF_ERROR}\n");
    let small = block.repeat(1000);
    let big = block.repeat(4000);
    let time = |name: &str, text: &str| {
        let path = write(dir.path(), name, text.as_bytes());
        let start = Instant::now();
        let (code, _, err) = explain_within(&[&path, "--format", "json"], Duration::from_secs(60));
        assert_eq!(code, Some(0), "{err}");
        start.elapsed()
    };
    let t1 = time("small.log", &small);
    let t4 = time("big.log", &big);
    // Four times the input: linear is ~4×, quadratic ~16×. Generous for a
    // busy CI machine, and a floor so start-up noise does not decide it.
    assert!(
        t4 <= t1 * 8 + Duration::from_millis(500),
        "1× took {t1:?}, 4× took {t4:?}"
    );
}

#[test]
fn endless_and_random_devices_are_refused_quickly() {
    for dev in ["/dev/urandom", "/dev/zero"] {
        if !std::path::Path::new(dev).exists() {
            continue;
        }
        let (code, out, err) = explain_within(&[dev], Duration::from_secs(10));
        assert_eq!(code, Some(2), "{dev}: {out}");
        assert!(
            err.starts_with(&format!("error: {dev} is not a text log")),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn binary_files_are_not_text_logs() {
    let dir = tempfile::tempdir().unwrap();
    let mut x: u32 = 0x2545_F491;
    let random: Vec<u8> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x.to_le_bytes()[1]
        })
        .collect();
    let cases: [(&str, &[u8], &str); 4] = [
        ("random.bin", &random, "binary data"),
        ("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "a PNG image"),
        (
            "paper.pdf",
            b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n",
            "a PDF document",
        ),
        ("logs.tar.xz", b"\xfd7zXZ\x00\x00\x04", "xz-compressed"),
    ];
    for (name, bytes, kind) in cases {
        let path = write(dir.path(), name, bytes);
        let (code, _, err) = explain_within(&[&path], Duration::from_secs(10));
        assert_eq!(code, Some(2), "{name}");
        assert!(
            err.contains("is not a text log") && err.contains(kind),
            "{err}"
        );
    }
}

/// A log cut short by a crash ends in zero-filled blocks: still a log.
#[test]
fn a_few_nul_bytes_after_text_are_tolerated() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = format!("step 1\n{TORCH}\n").into_bytes();
    log.extend_from_slice(&[0u8; 4096]);
    let path = write(dir.path(), "crashed.log", &log);
    let (code, out, err) = explain_within(&[&path], Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("asked for 2.00 GiB"), "{out}");
}

#[test]
fn prose_that_mentions_an_oom_is_not_an_oom() {
    let dir = tempfile::tempdir().unwrap();
    for text in [
        "to avoid CUDA out of memory errors, use smaller batches",
        "Tips: CUDA out of memory errors can often be fixed with a smaller batch",
        "I keep getting CUDA out of memory when training",
    ] {
        let out = run_in(dir.path(), &["explain", "-"], Some(text.as_bytes()));
        assert_eq!(out.status.code(), Some(1), "{text}");
    }
    for text in [
        "RuntimeError: CUDA out of memory.",
        "[WARNING] CUDA out of memory, retrying with batch 8",
    ] {
        let out = run_in(dir.path(), &["explain", "-"], Some(text.as_bytes()));
        assert_eq!(out.status.code(), Some(0), "{text}");
    }
}

/// A message anywhere in a line of any length is found, with its line number.
#[test]
fn a_message_in_a_very_long_line_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for (len, filler) in [(300 << 10, "loss=0.5 "), (2 << 20, "#")] {
        let mut log = String::from("epoch 1\n");
        while log.len() < len {
            log.push_str(filler);
        }
        log.push(' ');
        log.push_str(TORCH);
        log.push_str("\nepoch 2\n");
        let path = write(dir.path(), "long.log", log.as_bytes());
        let (code, out, err) =
            explain_within(&[&path, "--format", "json"], Duration::from_secs(30));
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["events"].as_array().unwrap().len(), 1);
        assert_eq!(v["events"][0]["line"], 2);
        assert_eq!(v["events"][0]["requested_bytes"], 2u64 << 30);
        assert_eq!(v["events"][0]["free_bytes"], 1_363_652_116u64);
    }
}

/// The same OOM far apart is several events; copies close together (every
/// rank of one crash) are one event with a count.
#[test]
fn distinct_occurrences_far_apart_stay_distinct() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for _ in 0..5 {
        for r in 0..4 {
            log.push_str(&format!("[rank{r}]: {TORCH}\n"));
        }
        for i in 0..20_000 {
            log.push_str(&format!("step {i} loss 0.5\n"));
        }
    }
    let path = write(dir.path(), "five.log", log.as_bytes());
    let (code, out, err) = explain_within(&[&path, "--format", "json"], Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let events = v["events"].as_array().unwrap();
    assert_eq!(events.len(), 5, "{out}");
    for e in events {
        assert_eq!(e["repeats"], 4);
        assert_eq!(e["ranks"], serde_json::json!([0, 1, 2, 3]));
    }
    assert_eq!(events[1]["line"], 20_005);
}

/// Process substitution and pipes are read as streams (FIFOs), not refused.
#[test]
fn fifos_and_pipes_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("log.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo on this system: nothing to test
    }
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            writeln!(f, "{TORCH}").unwrap();
        })
    };
    let (code, out, err) = explain_within(&[&fifo.to_string_lossy()], Duration::from_secs(10));
    writer.join().unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("asked for 2.00 GiB"));
    let piped = run_in(
        dir.path(),
        &["explain", "--format", "json"],
        Some(TORCH.as_bytes()),
    );
    assert_eq!(json(&piped)["events"][0]["requested_bytes"], 2u64 << 30);
}
