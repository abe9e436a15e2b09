//! `probe`'s answers through the binary: an OOM counts whatever the exit
//! status, the boundary is confirmed by a second run (exact or flaky), and
//! "no out-of-memory up to --max" is its own outcome with its own status.

use std::process::Output;

use crate::probe::{probe_fixtures, python};
use crate::{fixtures, json, run_in, stderr, stdout};

fn probe(args: &[&str], script: &[&str]) -> Output {
    let fake = probe_fixtures().join("fake_train.py");
    let fake = fake.to_string_lossy();
    let mut all = vec!["probe"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", python(), &fake, "--batch", "{batch}"]);
    all.extend_from_slice(script);
    run_in(&probe_fixtures(), &all, None)
}

fn oom_log() -> String {
    fixtures()
        .join("pytorch_2_3_non_pytorch_memory.log")
        .to_string_lossy()
        .into_owned()
}

/// A program that catches its OOM, prints it and exits 0 still ran out of
/// memory at that size; the trial line says the status was 0.
#[test]
fn an_oom_with_exit_status_0_counts_as_out_of_memory() {
    let log = oom_log();
    let args = ["--threshold", "6", "--oom-log", &log, "--catch-oom"];
    let o = probe(&["--max", "16", "--format", "json"], &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["max_batch"], 6, "{j}");
    assert_eq!(j["result"], "exact");
    let oom = j["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["outcome"] == "oom")
        .expect("an oom trial");
    assert_eq!(oom["exit_code"], 0, "{oom}");
    assert!(
        oom["detail"]
            .as_str()
            .unwrap()
            .ends_with("(exit status 0: the program caught the out-of-memory error)"),
        "{oom}"
    );
    let o = probe(&["--max", "16"], &args);
    assert!(
        stdout(&o).contains("(exit status 0: the program caught the out-of-memory error)"),
        "{}",
        stdout(&o)
    );
}

/// One transient OOM right above the answer: the second run fits, so the
/// boundary is reported as flaky (exit 4), with both runs listed.
#[test]
fn a_transient_oom_at_the_boundary_is_reported_as_flaky() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("ran-once");
    let log = oom_log();
    let state = state.to_string_lossy();
    let script = [
        "--threshold",
        "9",
        "--oom-log",
        &log,
        "--fits-on-retry",
        &state,
    ];
    let o = probe(&["--max", "16", "--format", "json"], &script);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["result"], "flaky", "{j}");
    assert_eq!(j["exact"], false);
    assert_eq!(j["max_batch"], 9);
    assert_eq!(j["min_oom_batch"], 10);
    let tens: Vec<_> = j["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["batch"] == 10)
        .map(|t| {
            (
                t["outcome"].as_str().unwrap(),
                t["confirmation"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(tens, [("oom", false), ("ok", true)], "{j}");
    // In words too.
    std::fs::remove_file(&*state).unwrap();
    let o = probe(&["--max", "16"], &script);
    assert_eq!(o.status.code(), Some(4));
    assert!(
        stdout(&o).contains("flaky boundary: 10 ran out of memory once and fit once; 9 fit"),
        "{}",
        stdout(&o)
    );
}

/// A command that never runs out of memory: doubling stops at the default
/// --max (65536, 17 trials), with its own outcome and status 3 — no
/// bisection up to 2^64.
#[test]
fn no_out_of_memory_up_to_the_default_max_is_its_own_outcome() {
    let o = probe(&["--format", "json"], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["result"], "no_oom_up_to_max", "{j}");
    assert_eq!(j["max"], 65536);
    assert_eq!(j["max_batch"], 65536);
    assert_eq!(j["exact"], false);
    assert_eq!(j["trials"].as_array().unwrap().len(), 17);
    let o = probe(&["--max", "4"], &[]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stdout(&o).contains("no out-of-memory up to 4 (--max): the limit is higher"),
        "{}",
        stdout(&o)
    );
}
