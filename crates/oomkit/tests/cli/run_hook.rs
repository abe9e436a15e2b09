//! `run --snapshot-on-oom`'s Python hook changes nothing the program sees
//! (checked with the fake torch, which keeps PyTorch's initialisation rules),
//! and its snapshot is this run's, per rank, removed unless kept.

use std::path::Path;
use std::process::{Output, Stdio};

use crate::probe::{probe_fixtures, python};
use crate::{oomkit, stderr, stdout};

fn train(dir: &Path, oomkit_args: &[&str], args: &[&str], env: &[(&str, &str)]) -> Output {
    let fake = probe_fixtures().join("fake_torch");
    let mut c = oomkit();
    c.current_dir(dir)
        .args(["run"])
        .args(oomkit_args)
        .args(["--", python()]);
    c.arg(fake.join("train.py")).args(args).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run oomkit")
}

/// No CUDA initialisation at `import torch`: the CUDA driver first runs when
/// the program allocates, after it chose its GPUs; the output is the same
/// as without the hook.
#[test]
fn the_hook_does_not_initialise_cuda_at_import() {
    let dir = tempfile::tempdir().unwrap();
    let with = train(dir.path(), &["--snapshot-on-oom"], &["2", "1"], &[]);
    assert_eq!(with.status.code(), Some(0), "{}", stderr(&with));
    let out = stdout(&with);
    assert!(
        out.contains("after import: cuda initialised False, driver read None"),
        "{out}"
    );
    assert!(
        out.contains("driver read CUDA_VISIBLE_DEVICES='1'"),
        "{out}"
    );
    let without = train(dir.path(), &[], &["2", "1"], &[]);
    assert_eq!(stdout(&without), out);
    // The snapshot still starts with CUDA: an OOM after the late choice dumps one.
    let o = train(dir.path(), &["--snapshot-on-oom"], &["9", "1"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("driver read CUDA_VISIBLE_DEVICES='1'"));
    assert!(stderr(&o).contains("train.py:42 forward"), "{}", stderr(&o));
}

/// One file per rank in a private folder; removed after the analysis
/// unless --keep-snapshot.
#[test]
fn the_snapshot_is_per_rank_and_removed_unless_kept() {
    let dir = tempfile::tempdir().unwrap();
    let o = train(dir.path(), &["--snapshot-on-oom"], &["9"], &[("RANK", "3")]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.starts_with("memory snapshot"))
        .unwrap_or_else(|| panic!("{err}"));
    let path = Path::new(line.rsplit(": ").next().unwrap().trim());
    let name = path.file_name().unwrap().to_string_lossy();
    assert!(name.starts_with("oom-snapshot-rank3-pid"), "{name}");
    assert!(err.contains("train.py:42 forward"), "{err}");
    assert!(
        err.contains("the snapshot was removed after this analysis; --keep-snapshot keeps it"),
        "{err}"
    );
    assert!(
        !path.exists() && !path.parent().unwrap().exists(),
        "{path:?}"
    );
    // --keep-snapshot needs --snapshot-on-oom: a usage error, 125.
    let o = train(dir.path(), &["--keep-snapshot"], &["1"], &[]);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
}
