//! Leak candidates through the binary on the generated training loops of
//! `make_leaks.py`: a leak is found whatever its length (50 and 500 steps,
//! iterations from the trace's own period), and a loop that keeps only the
//! last step's tensor is not flagged.

use std::path::{Path, PathBuf};

use super::support::cli;

fn snap_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_snapshot/tests/fixtures")
}

/// The device's leaks, checking the exit status (1: leaks found, 0: none).
fn leaks(name: &str, code: i32) -> serde_json::Value {
    let ran = cli(&["snapshot", "--format", "json", name])
        .cwd(snap_fixtures())
        .run();
    ran.code(code).stderr_is("");
    ran.json()["devices"][0]["leaks"].clone()
}

#[test]
fn a_leak_is_found_at_50_and_at_500_steps() {
    for (name, steps) in [("leak-50-steps.pickle", 50), ("leak-500-steps.pickle", 500)] {
        let leaks = leaks(name, 1);
        let all = leaks.as_array().expect("leaks is a list");
        assert_eq!(all.len(), 1, "{name}: {leaks}");
        let l = &all[0];
        assert_eq!(l["frame"], "/w/train.py:30 <module>", "{name}");
        assert_eq!(l["iterations"], steps, "{name}");
        assert_eq!(l["count"], steps, "{name}");
        assert_eq!(l["bytes_per_iteration"], 20 << 20, "{name}");
        assert_eq!(
            l["iterations_from"],
            format!(
                "the trace's period: {steps} steps, each starting at an allocation by /w/train.py:30 <module>"
            ),
            "{name}"
        );
    }
}

#[test]
fn keeping_only_the_last_step_is_not_a_leak() {
    assert_eq!(
        leaks("leak-lookalike-500-steps.pickle", 0),
        serde_json::json!([])
    );
}
