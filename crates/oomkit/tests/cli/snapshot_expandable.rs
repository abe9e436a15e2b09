//! `expandable_recoverable_bytes` through the binary: free whole pages inside
//! partly used segments only (a wholly free segment the allocator releases
//! itself before an OOM), and the text line and fix that go with it.

use std::path::{Path, PathBuf};

use super::support::cli;

fn snap_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_snapshot/tests/fixtures")
}

#[test]
fn only_holes_between_live_blocks_count() {
    for (name, free, recoverable) in [
        // All 885 MiB free lie in wholly free segments.
        ("h100-hook-leak.pickle", 928309248u64, 0u64),
        ("small-training-step.pickle", 3749445120, 480 << 20),
        ("h100-annotated-steps.pickle", 1368583168, 200 << 20),
        // Expandable segments already on.
        ("h100-oom-expandable.pickle", 66932736, 0),
    ] {
        let j = cli(&["snapshot", "--format", "json", name])
            .cwd(snap_fixtures())
            .run()
            .json();
        let f = &j["devices"][0]["fragmentation"];
        assert_eq!(f["free_bytes"], free, "{name}");
        assert_eq!(f["expandable_recoverable_bytes"], recoverable, "{name}");
    }
    cli(&["snapshot", "small-training-step.pickle"])
        .cwd(snap_fixtures())
        .run()
        .code(0)
        .stdout_has("\n    480.00 MiB of it is whole pages between live blocks that expandable_segments:True would unmap and reuse for any request\n    fix: Let the caching allocator grow segments instead of splitting them [expandable-segments]\n");
    let ran = cli(&["snapshot", "h100-hook-leak.pickle"])
        .cwd(snap_fixtures())
        .run();
    assert!(!ran.stdout().contains("expandable"), "{}", ran.stdout());
}
