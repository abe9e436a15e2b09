//! Any bytes, to every command that reads a file (explain, lint,
//! estimate, snapshot): exit 0, 1 or 2
//! only, one-line errors, never a panic, within seconds. Property-based: the
//! inputs are random bytes and real fixtures with random damage.

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;

use super::{fixtures, lint_fixtures, run_within, stderr};

/// Runs `oomkit ARGS` in `dir` and checks the contract.
fn contract(args: &[&str], dir: &Path, limit: Duration) {
    let out = run_within(dir, args, limit);
    let err = stderr(&out);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "oomkit {args:?} exited {code:?}: {err}"
    );
    assert!(!err.contains("panicked"), "oomkit {args:?}: {err}");
    if code == Some(2) {
        assert!(err.starts_with("error: "), "oomkit {args:?}: {err}");
    }
}

/// Real inputs of every kind the commands read, to damage.
fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in [fixtures(), lint_fixtures()] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.path().is_file() {
                out.extend(std::fs::read(e.path()).ok().filter(|b| b.len() < 64 << 10));
            }
        }
    }
    let pickles = Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_snapshot/tests/fixtures");
    for e in std::fs::read_dir(pickles).into_iter().flatten().flatten() {
        if e.path().extension().is_some_and(|x| x == "pickle") {
            out.extend(std::fs::read(e.path()).ok().filter(|b| b.len() < 256 << 10));
        }
    }
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_estimate/models");
    for e in std::fs::read_dir(models).into_iter().flatten().flatten() {
        if e.path().extension().is_some_and(|x| x == "json") {
            out.extend(std::fs::read(e.path()).ok());
        }
    }
    out.sort();
    out
}

fn damage(
    mut bytes: Vec<u8>,
    edits: &[(prop::sample::Index, u8)],
    cut: prop::sample::Index,
) -> Vec<u8> {
    for (at, b) in edits {
        if !bytes.is_empty() {
            let i = at.index(bytes.len());
            bytes[i] = *b;
        }
    }
    let keep = cut.index(bytes.len() + 1);
    bytes.truncate(keep.max(bytes.len() / 2));
    bytes
}

fn every_command(bytes: &[u8]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let limit = Duration::from_secs(20);
    for name in ["input.log", "input.py", "config.json"] {
        std::fs::write(dir.path().join(name), bytes).expect("write input");
    }
    contract(&["explain", "input.log"], dir.path(), limit);
    contract(
        &["explain", "--format", "json", "input.log"],
        dir.path(),
        limit,
    );
    contract(&["lint", "input.py"], dir.path(), limit);
    contract(
        &["estimate", "config.json", "--gpu", "rtx-4090"],
        dir.path(),
        limit,
    );
    contract(&["snapshot", "input.log"], dir.path(), limit);
    contract(
        &["snapshot", "--format", "json", "input.log"],
        dir.path(),
        limit,
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_bytes_get_a_verdict(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        every_command(&bytes);
    }

    #[test]
    fn damaged_real_inputs_get_a_verdict(
        pick in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..16),
        cut in any::<prop::sample::Index>(),
    ) {
        let all = seeds();
        prop_assume!(!all.is_empty());
        every_command(&damage(pick.get(&all).clone(), &edits, cut));
    }
}
