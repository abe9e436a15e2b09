//! `oomkit snapshot` through the binary: the reference figures of every real
//! fixture (`docs/reference/snapshot-fixtures.md` and
//! `docs/reference/memory-snapshots.md` §2.5, copied into
//! `crates/oomkit_snapshot/tests/fixtures/`), JSON and human snapshots, leak
//! candidates, the HTML report, `diff`, and hostile or broken inputs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{json, run_in, stderr, stdout};

fn snap_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_snapshot/tests/fixtures")
}

fn fixture(name: &str) -> String {
    snap_fixtures().join(name).to_string_lossy().into_owned()
}

/// Runs `oomkit snapshot ARGS` in the fixtures folder.
fn snapshot(args: &[&str]) -> std::process::Output {
    let mut all = vec!["snapshot"];
    all.extend_from_slice(args);
    run_in(&snap_fixtures(), &all, None)
}

/// The reference table: file, reserved, allocated, requested, segments,
/// blocks, events, baseline, peak, peak event, end (device 0).
const REFERENCE: [(&str, [i64; 10]); 7] = [
    (
        "h100-annotated-steps.pickle",
        [
            2046820352, 678237184, 678237184, 30, 91, 1030, 173951488, 1980699656, 414, 678237184,
        ],
    ),
    (
        "h100-hook-leak.pickle",
        [
            1769996288, 841687040, 841686532, 30, 129, 3716, 173951488, 1467751944, 3392, 841686532,
        ],
    ),
    (
        "h100-oom-expandable.pickle",
        [
            37731958784,
            37665026048,
            37665025540,
            5,
            133,
            680,
            1067858432,
            37665025540,
            675,
            37665025540,
        ],
    ),
    // memory-snapshots.md §2.5: sil `mem_snapshot`.
    (
        "small-training-step.pickle",
        [
            3781165056, 31719936, 31719428, 9, 20, 97, 0, 3249143816, 52, 31719428,
        ],
    ),
    // DocuBox: no trace, so peak = baseline = end and peak_event = -1.
    (
        "no-trace.pickle",
        [
            109051904, 90861056, 90861056, 12, 116, 0, 90861056, 90861056, -1, 90861056,
        ],
    ),
    // ftcourse.
    (
        "older-format-no-time.pickle",
        [
            6471811072, 2297283072, 2285408452, 215, 1079, 10307, 1095725248, 5876132840, 3697,
            2285408452,
        ],
    ),
    // mosaic test (synthetic).
    (
        "synthetic-inconsistent.pickle",
        [262144000, 8704, 466, 5, 17, 1040, 466, 2255398598, 999, 466],
    ),
];

const FIELDS: [&str; 10] = [
    "reserved_bytes",
    "allocated_bytes",
    "requested_bytes",
    "segments",
    "blocks",
    "events",
    "baseline_bytes",
    "peak_bytes",
    "peak_event",
    "end_bytes",
];

fn device0(v: &Value) -> &Value {
    let devs = v["devices"].as_array().expect("devices");
    assert_eq!(devs.len(), 1, "one device expected");
    &devs[0]
}

#[test]
fn reproduces_the_reference_figures_of_every_fixture() {
    for (name, want) in REFERENCE {
        let out = snapshot(&["--format", "json", name]);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{name}: {}",
            stderr(&out)
        );
        let j = json(&out);
        assert_eq!(j["version"], 1);
        let d = device0(&j);
        assert_eq!(d["device"], 0, "{name}");
        for (field, w) in FIELDS.iter().zip(want) {
            assert_eq!(d[field].as_i64(), Some(w), "{name}: {field}");
        }
    }
}

/// Protocol 2 (BINPUT/LONG_BINPUT memo, as the TorchScript pickler writes) and
/// protocol 5 (Python 3.14's default) re-dumps of a real file, written by
/// `make_redumps.py`, decode to the same report.
#[test]
fn protocol_2_and_5_redumps_give_the_same_report() {
    let want = device0(&json(&snapshot(&[
        "--format",
        "json",
        "small-training-step.pickle",
    ])))
    .clone();
    for name in [
        "small-training-step-p2.pickle",
        "small-training-step-p5.pickle",
    ] {
        let out = snapshot(&["--format", "json", name]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert_eq!(device0(&json(&out)), &want, "{name}");
    }
}

/// Real files keep the invariants; only the synthetic one gets warnings.
#[test]
fn warns_only_on_the_file_that_breaks_the_invariants() {
    for (name, _) in REFERENCE {
        let d = device0(&json(&snapshot(&["--format", "json", name]))).clone();
        let warnings = d["warnings"].as_array().unwrap();
        if name.starts_with("synthetic") {
            let all = warnings
                .iter()
                .map(|w| w.as_str().unwrap())
                .collect::<Vec<_>>()
                .join("\n");
            assert!(all.contains("do not tile"), "{all}");
            assert!(all.contains("allocated_size"), "{all}");
        } else {
            assert!(warnings.is_empty(), "{name}: {warnings:?}");
        }
    }
}

/// Everything alive at the peak, summed over all sites, is the peak.
#[test]
fn sites_at_the_peak_add_up_to_the_peak() {
    for (name, _) in REFERENCE {
        let d = device0(&json(&snapshot(&[
            "--format", "json", "--top", "100000", name,
        ])))
        .clone();
        let sum: u64 = d["top_sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(Some(sum), d["peak_bytes"].as_u64(), "{name}");
        if d["ooms"].as_array().unwrap().is_empty() {
            continue;
        }
        let oom = &d["ooms"][0];
        assert!(oom["requested_bytes"].as_u64().unwrap() > 0, "{name}");
    }
}

#[test]
fn finds_the_hook_leak_and_nothing_in_clean_loops() {
    let out = snapshot(&["--format", "json", "h100-hook-leak.pickle"]);
    assert_eq!(out.status.code(), Some(1), "leaks exit 1");
    let d = device0(&json(&out)).clone();
    let leaks = d["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    assert_eq!(leaks[0]["iterations"], 10, "one per step of 10");
    assert!(
        leaks[0]["frame"].as_str().unwrap().starts_with("<string>:"),
        "{leaks:?}"
    );
    assert!(leaks[0]["bytes_per_iteration"].as_u64().unwrap() > 16 << 20);
    for clean in [
        "h100-annotated-steps.pickle",
        "small-training-step.pickle",
        "h100-oom-expandable.pickle",
        "older-format-no-time.pickle",
        "no-trace.pickle",
    ] {
        let out = snapshot(&["--format", "json", clean]);
        assert_eq!(out.status.code(), Some(0), "{clean}");
        assert_eq!(
            device0(&json(&out))["leaks"],
            Value::Array(vec![]),
            "{clean}"
        );
    }
}

#[test]
fn reports_the_oom_and_what_was_alive() {
    let d = device0(&json(&snapshot(&[
        "--format",
        "json",
        "h100-oom-expandable.pickle",
    ])))
    .clone();
    let ooms = d["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 1);
    assert_eq!(ooms[0]["requested_bytes"], 137438953472u64);
    assert_eq!(ooms[0]["device_free_bytes"], 46498250752u64);
    assert!(!ooms[0]["top_sites"].as_array().unwrap().is_empty());
    assert_eq!(d["fragmentation"]["expandable_segments"], true);
    assert_eq!(d["fragmentation"]["expandable_recoverable_bytes"], 0);
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("oom.html");
    let out = snapshot(&[
        "--html",
        html.to_str().unwrap(),
        "h100-oom-expandable.pickle",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.contains("Out of memory at event 679: asked for 128.00 GiB"),
        "OOM in the page"
    );
}

#[test]
fn annotations_land_on_the_event_axis() {
    let d = device0(&json(&snapshot(&[
        "--format",
        "json",
        "h100-annotated-steps.pickle",
    ])))
    .clone();
    let spans = d["annotations"].as_array().unwrap();
    assert_eq!(
        spans.len(),
        15,
        "3 steps × forward/backward/optimizer (+ optimizer internals)"
    );
    for s in spans {
        assert!(s["start_event"].as_i64().unwrap() <= s["end_event"].as_i64().unwrap() + 1);
    }
    assert!(spans.iter().any(|s| s["name"] == "forward_0"));
}

#[test]
fn json_and_human_output_are_stable() {
    for (name, _) in REFERENCE {
        let j = json(&snapshot(&["--format", "json", name]));
        insta::assert_json_snapshot!(format!("json_{name}"), j);
        let human = snapshot(&["--color", "never", name]);
        insta::assert_snapshot!(format!("human_{name}"), stdout(&human));
    }
}

#[test]
fn html_report_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let out = snapshot(&[
        "--html",
        html.to_str().unwrap(),
        "h100-annotated-steps.pickle",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>"));
    assert!(
        text.contains("<svg") && text.contains("<polygon"),
        "timeline drawn"
    );
    assert!(text.contains("Segment map") && text.contains("forward_0"));
    for banned in ["http:", "https:", "src=", "<script", "@import", "url("] {
        assert!(!text.contains(banned), "external reference {banned:?}");
    }
}

#[test]
fn diff_lists_growth_by_site() {
    let out = snapshot(&[
        "diff",
        "--format",
        "json",
        "h100-annotated-steps.pickle",
        "h100-hook-leak.pickle",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = json(&out);
    let d = &j["devices"][0];
    assert_eq!(
        d["allocated_bytes"],
        serde_json::json!([678237184u64, 841687040u64])
    );
    let sites = d["sites"].as_array().unwrap();
    let growth: Vec<i64> = sites
        .iter()
        .map(|s| s["growth_bytes"].as_i64().unwrap())
        .collect();
    assert!(growth.windows(2).all(|w| w[0] >= w[1]), "sorted by growth");
    let total: i64 = growth.iter().sum();
    assert_eq!(total, 841687040 - 678237184);
    insta::assert_json_snapshot!("diff_annotated_to_leak", j);
    let same = snapshot(&[
        "diff",
        "--format",
        "json",
        "no-trace.pickle",
        "no-trace.pickle",
    ]);
    let sites = json(&same)["devices"][0]["sites"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        sites
            .iter()
            .all(|s| s["growth_bytes"] == 0 && s["a_bytes"] == s["b_bytes"])
    );
    let human = snapshot(&[
        "diff",
        "h100-annotated-steps.pickle",
        "h100-hook-leak.pickle",
    ]);
    insta::assert_snapshot!("diff_human", stdout(&human));
}

/// A hostile pickle's payload never runs: exit 2, the opcode is named, and the
/// marker file the payload would create does not exist.
#[test]
fn hostile_pickles_are_refused_and_never_run() {
    let dir = tempfile::tempdir().unwrap();
    for (name, opcode) in [
        ("hostile-os-system-p2.pickle", "GLOBAL (0x63) at byte 2"),
        ("hostile-os-system-p4.pickle", "STACK_GLOBAL"),
        ("hostile-build.pickle", "STACK_GLOBAL"),
    ] {
        let out = run_in(dir.path(), &["snapshot", &fixture(name)], None);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = stderr(&out);
        assert!(
            err.contains(opcode) && err.contains("refused"),
            "{name}: {err}"
        );
        assert!(err.contains(name), "names the file: {err}");
        assert!(
            !dir.path().join("oomkit-pwned-marker").exists(),
            "payload ran"
        );
        assert!(stdout(&out).is_empty());
    }
}

#[test]
fn broken_inputs_exit_2_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "CUDA out of memory\n").unwrap();
    let png = dir.path().join("plot.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let empty = dir.path().join("empty.pickle");
    std::fs::write(&empty, b"").unwrap();
    let cases = [
        (text.to_string_lossy().into_owned(), "not a pickle"),
        (png.to_string_lossy().into_owned(), "not a pickle"),
        (empty.to_string_lossy().into_owned(), "empty"),
        (fixture("wrong-shape-int.pickle"), "the top level is an int"),
        (fixture("wrong-shape-dict.pickle"), "no `segments`"),
        (fixture("wrong-shape-trace.pickle"), "has no `action`"),
        (
            dir.path()
                .join("missing.pickle")
                .to_string_lossy()
                .into_owned(),
            "cannot read",
        ),
        (dir.path().to_string_lossy().into_owned(), "is a directory"),
    ];
    for (path, why) in cases {
        let out = run_in(dir.path(), &["snapshot", &path], None);
        assert_eq!(out.status.code(), Some(2), "{path}");
        let err = stderr(&out);
        assert!(err.contains(why), "{path}: {err}");
        assert!(err.contains(&path), "{path}: names the file: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
}

/// Prefixes of a real file: exit 2 with a message (or, if the prefix happens to
/// be a whole pickle, a valid answer), never a panic. The library test
/// `decode.rs` checks every prefix length; here a spread of them goes through
/// the binary.
#[test]
fn truncated_files_exit_2_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(snap_fixtures().join("small-training-step.pickle")).unwrap();
    let cut = dir.path().join("cut.pickle");
    for len in (0..bytes.len())
        .step_by(bytes.len() / 40)
        .chain([1, 2, 3, bytes.len() - 1])
    {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let out = run_in(dir.path(), &["snapshot", "cut.pickle"], None);
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{len}: {err}");
        assert_eq!(out.status.code(), Some(2), "{len}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.contains("truncated") || err.contains("not a pickle"),
            "{len}: {err}"
        );
    }
}

/// `oomkit snapshot … | head -1`: the reader goes away; exit 0, nothing on stderr.
#[test]
fn closed_pipe_is_not_an_error() {
    use std::process::Stdio;
    let file = fixture("older-format-no-time.pickle");
    for format in ["json", "human"] {
        let mut child = super::oomkit()
            .args(["snapshot", "--top", "100000", "--format", format, &file])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{format}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{format}");
    }
}

#[test]
fn unknown_device_is_an_error() {
    let out = snapshot(&["--device", "3", "no-trace.pickle"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no device 3 (devices: 0)"),
        "{}",
        stderr(&out)
    );
    let out = snapshot(&["--device", "0", "--format", "json", "no-trace.pickle"]);
    assert_eq!(out.status.code(), Some(0));
}
