//! Reserved memory over time through the binary: the segment-event replay's
//! baseline, peak and its event in JSON and text, and the reserved line of the
//! HTML timeline.

use std::path::{Path, PathBuf};

use super::{json, run_in, stderr, stdout};

fn snap_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_snapshot/tests/fixtures")
}

#[test]
fn the_reserved_peak_comes_from_segment_events() {
    // (file, reserved at the dump, before the first event, peak, its event, segment events)
    for (name, end, base, peak, at, n) in [
        // The OOM run: the allocator unmapped free pages before raising, so
        // the peak is above the dump's reserved.
        (
            "h100-oom-expandable.pickle",
            37731958784u64,
            1071644672u64,
            39661338624u64,
            674,
            34,
        ),
        (
            "h100-hook-leak.pickle",
            1769996288,
            186646528,
            1769996288,
            1579,
            23,
        ),
        (
            "small-training-step.pickle",
            3781165056,
            0,
            3781165056,
            51,
            9,
        ),
        // No segment events: reserved is the dump's throughout.
        (
            "synthetic-inconsistent.pickle",
            262144000,
            262144000,
            262144000,
            -1,
            0,
        ),
    ] {
        let o = run_in(
            &snap_fixtures(),
            &["snapshot", "--format", "json", name],
            None,
        );
        let d = &json(&o)["devices"][0];
        assert_eq!(d["reserved_bytes"], end, "{name}");
        assert_eq!(d["reserved_baseline_bytes"], base, "{name}");
        assert_eq!(d["reserved_peak_bytes"], peak, "{name}");
        assert_eq!(d["reserved_peak_event"], at, "{name}");
        assert_eq!(d["segment_events"], n, "{name}");
    }
    let o = run_in(
        &snap_fixtures(),
        &["snapshot", "h100-oom-expandable.pickle"],
        None,
    );
    assert!(
        stdout(&o).contains(
            "\n  reserved     peak 36.94 GiB  at event 674 (1022.00 MiB before the first event, 34 segment events)\n"
        ),
        "{}",
        stdout(&o)
    );
    let o = run_in(
        &snap_fixtures(),
        &["snapshot", "synthetic-inconsistent.pickle"],
        None,
    );
    assert!(
        stdout(&o)
            .contains("\n  reserved     250.00 MiB throughout (no segment events in the trace)\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn the_html_timeline_draws_reserved_memory() {
    let dir = tempfile::tempdir().expect("test setup");
    let page = dir.path().join("r.html");
    let o = run_in(
        &snap_fixtures(),
        &[
            "snapshot",
            "h100-oom-expandable.pickle",
            "--html",
            page.to_str().expect("test setup"),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).expect("test setup");
    assert!(
        html.contains("<div class=\"fig\"><span>reserved peak</span><b>36.94 GiB</b><span>at event 674; 1022.00 MiB before the trace, 34 segment events</span></div>"),
        "no reserved peak figure"
    );
    assert!(
        html.contains("<title>reserved (segments): peak 36.94 GiB</title></polyline>"),
        "no reserved line in the timeline"
    );
}
