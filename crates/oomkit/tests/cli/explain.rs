//! `oomkit explain` through the binary: a few fixtures print exactly what the
//! library's fixture runner snapshotted (every fixture, human and JSON, with
//! the `.expect.json` checks, runs through the library in
//! crates/oomkit_explain/tests/explain_fixtures.rs); several files, standard
//! input, exit statuses and bad input.

use std::path::Path;

use serde_json::Value;

use super::support::cli;
use super::{fixtures, json, run_in, stderr};

/// The body of a snapshot the library's fixture runner
/// (crates/oomkit_explain/tests/explain_fixtures.rs) wrote for `rel`.
fn library_snapshot(kind: &str, rel: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../oomkit_explain/tests/snapshots")
        .join(format!(
            "explain_fixtures__{kind}@{}.snap",
            rel.replace('/', "__")
        ));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    // `---` header `---` body.
    let body = text.splitn(3, "---\n").nth(2).expect("snapshot header");
    body.to_string()
}

/// A few fixtures (an OOM, a look-alike, a reading, nothing) through the
/// binary print exactly what the library's fixture runner snapshotted, in
/// human text and JSON, and exit 0 with an OOM or a reading, 1 otherwise.
/// Every fixture is explained through the library in
/// crates/oomkit_explain/tests/explain_fixtures.rs.
#[test]
fn a_few_fixtures_print_what_the_library_snapshots() {
    let root = fixtures().canonicalize().expect("fixtures folder");
    for (rel, code) in [
        ("real/005.txt", 0),
        ("vllm_v1_fixed_typo.log", 0),
        ("readings/smi_550_two_4090_new_layout.txt", 0),
        ("real/084.txt", 1),
        ("no_oom_training_log.log", 1),
    ] {
        let human = cli(&["explain", "--color", "never", rel]).cwd(&root).run();
        human.code(code).stderr_is("");
        assert_eq!(
            human.stdout().trim_end(),
            library_snapshot("human", rel).trim_end(),
            "{rel}"
        );
        let got = cli(&["explain", "--format", "json", rel])
            .cwd(&root)
            .run()
            .code(code)
            .stderr_is("")
            .json();
        let want: Value = serde_json::from_str(&library_snapshot("json", rel))
            .unwrap_or_else(|e| panic!("{rel}: snapshot: {e}"));
        assert_eq!(got, want, "{rel}");
    }
}

/// Several files: the human reports one after another with a blank line
/// between them, one JSON document with every input's events and readings;
/// exit 0 when any input had an OOM.
#[test]
fn several_files_are_one_report() {
    let root = fixtures().canonicalize().expect("fixtures folder");
    let files = [
        "real/084.txt",
        "real/005.txt",
        "readings/smi_q_memory_375.txt",
    ];
    let human = cli(&["explain", "--color", "never"])
        .args(&files)
        .cwd(&root)
        .run();
    human.code(0).stderr_is("");
    let want: Vec<String> = files
        .iter()
        .map(|f| library_snapshot("human", f).trim_end().to_string())
        .collect();
    assert_eq!(human.stdout().trim_end(), want.join("\n\n"));
    let got = cli(&["explain", "--format", "json"])
        .args(&files)
        .cwd(&root)
        .run()
        .code(0)
        .json();
    let mut events = Vec::new();
    let mut readings = Vec::new();
    for f in files {
        let one: Value = serde_json::from_str(&library_snapshot("json", f)).expect("snapshot");
        events.extend(one["events"].as_array().expect("events").iter().cloned());
        readings.extend(
            one["readings"]
                .as_array()
                .expect("readings")
                .iter()
                .cloned(),
        );
    }
    assert_eq!(got["version"], 1);
    assert_eq!(got["events"], Value::Array(events));
    assert_eq!(got["readings"], Value::Array(readings));
}

/// Bad input: one line on stderr naming the input, exit 2, never a panic.
fn assert_bad_input(out: &std::process::Output, name: &str, why: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(name), "{err}");
    assert!(err.contains(why), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("Traceback"),
        "{err}"
    );
}

#[test]
fn missing_file_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["explain", "nope.log"], None);
    assert_bad_input(&out, "nope.log", "No such file");
    assert!(out.stdout.is_empty());
}

#[test]
fn directory_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("logs")).unwrap();
    let out = run_in(dir.path(), &["explain", "logs"], None);
    assert_bad_input(&out, "logs", "is a directory");
}

#[test]
fn checkpoints_and_binaries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut st = 20u64.to_le_bytes().to_vec();
    st.extend_from_slice(b"{\"__metadata__\":{}}\0\0\0\0");
    let cases: &[(&str, Vec<u8>, &str)] = &[
        (
            "model.pt",
            b"PK\x03\x04\x14\x00\x00\x00archive/data.pkl".to_vec(),
            "checkpoint",
        ),
        ("model.safetensors", st, "safetensors"),
        (
            "model.gguf",
            b"GGUF\x03\x00\x00\x00\x00\x00".to_vec(),
            "GGUF",
        ),
        ("snap.pickle", b"\x80\x04\x95\x00\x00".to_vec(), "pickle"),
        ("blob.bin", vec![0u8; 4096], "binary"),
        ("log.gz", b"\x1f\x8b\x08\x00".to_vec(), "zcat"),
    ];
    for (name, bytes, why) in cases {
        std::fs::write(dir.path().join(name), bytes).unwrap();
        let out = run_in(dir.path(), &["explain", name], None);
        assert_bad_input(&out, name, why);
    }
}

#[test]
fn a_bad_file_does_not_stop_the_others() {
    let root = fixtures().canonicalize().unwrap();
    let out = run_in(
        &root,
        &["explain", "--format", "json", "missing.log", "real/005.txt"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let got = json(&out);
    assert_eq!(got["events"][0]["cause"], "fragmentation");
    assert_eq!(got["events"][0]["source"], "real/005.txt");
    assert!(stderr(&out).contains("missing.log"));
}

#[test]
fn empty_input_is_no_oom() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.log"), b"").unwrap();
    let out = run_in(dir.path(), &["explain", "empty.log"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "no out-of-memory error found in empty.log\n"
    );
    let out = run_in(dir.path(), &["explain", "--format", "json"], Some(b""));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json(&out),
        serde_json::json!({"version": 1, "events": [], "readings": []})
    );
}

#[test]
fn reads_standard_input_with_or_without_dash() {
    let msg = b"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 21.58 GiB already allocated; 1.45 GiB free; 22.00 GiB reserved in total by PyTorch)\n";
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["explain", "--format", "json"],
        vec!["explain", "--format", "json", "-"],
    ] {
        let out = run_in(dir.path(), &args, Some(msg));
        assert_eq!(out.status.code(), Some(0));
        let got = json(&out);
        let e = &got["events"][0];
        assert_eq!(e["requested_bytes"], 2u64 << 30);
        assert_eq!(e["source"], "standard input");
    }
}

#[test]
fn human_headline_names_gpu_request_and_free() {
    let msg = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.45 GiB is free. Including non-PyTorch memory, this process has 22.18 GiB memory in use. Of the allocated memory 21.58 GiB is allocated by PyTorch, and 120.00 MiB is reserved by PyTorch but unallocated.\n";
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["explain", "--color", "never"], Some(msg));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().next().unwrap(),
        "CUDA out of memory on GPU 0 (likely RTX 4090, 23.65 GiB): asked for 2.00 GiB, 1.45 GiB free"
    );
    assert!(!text.contains('\u{1b}'), "no colour off a terminal");
    let out = run_in(dir.path(), &["explain", "--color", "always"], Some(msg));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains('\u{1b}'),
        "colour when asked"
    );
}

#[test]
fn json_contract_has_every_field_with_integer_bytes() {
    let root = fixtures().canonicalize().unwrap();
    let out = run_in(
        &root,
        &[
            "explain",
            "--format",
            "json",
            "real/005.txt",
            "real/057.txt",
            "real/084.txt",
        ],
        None,
    );
    let got = json(&out);
    assert_eq!(got["version"], 1);
    for e in got["events"].as_array().unwrap() {
        for k in [
            "line",
            "is_oom",
            "framework",
            "backend",
            "device",
            "cause",
            "evidence",
            "fixes",
        ] {
            assert!(e.get(k).is_some(), "missing {k} in {e}");
        }
        for k in [
            "requested_bytes",
            "total_bytes",
            "free_bytes",
            "allocated_bytes",
            "reserved_bytes",
        ] {
            assert!(
                e[k].is_null() || e[k].is_u64(),
                "{k} must be an integer or null: {}",
                e[k]
            );
        }
        for f in e["fixes"].as_array().unwrap() {
            assert!(f["id"].is_string() && f["title"].is_string() && f["code"].is_string());
            assert!(oomkit_core::remedies::find(f["id"].as_str().unwrap()).is_some());
        }
    }
    let lookalike = &got["events"][2];
    assert_eq!(lookalike["is_oom"], false);
    assert_eq!(lookalike["cause"], "not_oom");
}

#[test]
fn lists_formats_with_examples() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["explain", "--list-formats"], None);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for id in [
        "pytorch-caching-allocator-2.1",
        "tensorflow-oom-when-allocating",
        "vllm-v1-kv-cache-needed",
        "ggml-failed-to-allocate-buffer",
        "cuda-illegal-memory-access",
    ] {
        assert!(text.contains(id), "{id} missing");
    }
    let out = run_in(
        dir.path(),
        &["explain", "--list-formats", "--format", "json"],
        None,
    );
    let got = json(&out);
    assert!(got["formats"].as_array().unwrap().len() >= 30);
}

#[test]
fn streams_a_large_log_and_keeps_exact_line_numbers() {
    // 40 MB of ordinary output with two OOMs, one near a chunk boundary.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    let mut text = String::with_capacity(41 << 20);
    let mut line = 0u64;
    let mut oom_lines = Vec::new();
    while text.len() < 40 << 20 {
        line += 1;
        if line == 12_345 || line == 400_000 {
            text.push_str("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of 79.25 GiB of which 3.75 MiB is free. Of the allocated memory 77.90 GiB is allocated by PyTorch, and 310.29 MiB is reserved by PyTorch but unallocated.\n");
            oom_lines.push(line);
        } else {
            text.push_str(&format!("2025-01-01 12:00:00,000 INFO step {line} loss 0.{line:04} lr 3e-4 memory_allocated=70.1GB\n"));
        }
    }
    std::fs::write(&path, &text).unwrap();
    let out = run_in(
        dir.path(),
        &["explain", "--format", "json", "big.log"],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let got = json(&out);
    let events = got["events"].as_array().unwrap();
    // The same error 387,655 lines later is a new event (only
    // copies within FOLD_WINDOW lines fold).
    assert_eq!(events.len(), 2, "far-apart copies are distinct events");
    for (e, line) in events.iter().zip(&oom_lines) {
        assert_eq!(e["line"], *line);
        assert_eq!(e["repeats"], 1);
        assert_eq!(e["device"], 1);
        assert_eq!(e["gpu"]["id"], "a100-80gb");
    }
}

#[test]
fn invalid_utf8_and_utf16_logs_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let msg = "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 21.58 GiB already allocated; 1.45 GiB free; 22.00 GiB reserved in total by PyTorch)\n";
    let mut latin = b"100%|\xdb\xdb\xdb| 5/5 [00:01<00:00] caf\xe9\n".to_vec();
    latin.extend_from_slice(msg.as_bytes());
    std::fs::write(dir.path().join("latin.log"), latin).unwrap();
    let mut utf16 = vec![0xFF, 0xFE];
    for u in msg.encode_utf16() {
        utf16.extend_from_slice(&u.to_le_bytes());
    }
    std::fs::write(dir.path().join("ps.log"), utf16).unwrap();
    for name in ["latin.log", "ps.log"] {
        let out = run_in(dir.path(), &["explain", "--format", "json", name], None);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert_eq!(
            json(&out)["events"][0]["free_bytes"],
            1556925645u64,
            "{name}"
        );
    }
}

/// Every `oomkit SUBCOMMAND` a fix, an evidence sentence or a remedy
/// mentions is a real subcommand of this binary (`oomkit SUB --help` exits 0),
/// and fixes written for one event carry that event's numbers.
#[test]
fn every_oomkit_command_a_fix_mentions_exists() {
    let mut texts: Vec<String> = Vec::new();
    for r in oomkit_core::remedies::REMEDIES {
        texts.push(r.why.to_string());
        for s in r.snippets {
            texts.push(s.code.to_string());
        }
    }
    let root = fixtures().canonicalize().unwrap();
    for name in [
        "pytorch_2_1_capacty_typo_other_process.log",
        "real/002.txt",
        "nccl_unhandled_no_detail.log",
    ] {
        let got = json(&run_in(&root, &["explain", "--format", "json", name], None));
        for e in got["events"].as_array().unwrap() {
            texts.push(e["evidence"].as_str().unwrap().to_string());
            for f in e["fixes"].as_array().unwrap() {
                texts.push(f["why"].as_str().unwrap().to_string());
                texts.push(f["code"].as_str().unwrap().to_string());
            }
        }
    }
    let mut subs: Vec<String> = Vec::new();
    for t in &texts {
        let mut words = t.split(|c: char| c.is_whitespace() || c == '`' || c == '(');
        while let Some(w) = words.next() {
            if w == "oomkit"
                && let Some(sub) = words.next()
                && sub.chars().all(|c| c.is_ascii_lowercase())
                && !sub.is_empty()
                && !subs.iter().any(|s| s == sub)
            {
                subs.push(sub.to_string());
            }
        }
    }
    for want in ["monitor", "snapshot", "probe"] {
        assert!(
            subs.iter().any(|s| s == want),
            "no fix mentions oomkit {want}: {subs:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    for sub in &subs {
        let out = run_in(dir.path(), &[sub, "--help"], None);
        assert_eq!(
            out.status.code(),
            Some(0),
            "oomkit {sub} --help: {}",
            stderr(&out)
        );
    }
}

/// The fix for other processes names the PIDs the message lists, and
/// the vLLM fix pastes the length the message estimates.
#[test]
fn fixes_carry_the_numbers_of_the_message() {
    let root = fixtures().canonicalize().unwrap();
    let got = json(&run_in(
        &root,
        &["explain", "--format", "json", "vllm_v1_fixed_typo.log"],
        None,
    ));
    let fixes = got["events"][0]["fixes"].as_array().unwrap();
    let len = fixes
        .iter()
        .find(|f| f["id"] == "vllm-max-model-len")
        .unwrap();
    assert!(
        len["code"]
            .as_str()
            .unwrap()
            .contains("--max-model-len 21584")
    );
    assert!(len["why"].as_str().unwrap().contains("21584"));
    let got = json(&run_in(
        &root,
        &["explain", "--format", "json", "real/035.txt"],
        None,
    ));
    let batch = got["events"][0]["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "reduce-batch")
        .unwrap();
    assert!(batch["code"].as_str().unwrap().contains("batch_size=64"));
    assert!(batch["code"].as_str().unwrap().contains("was 128"));
}

/// JAX and TensorFlow users get their framework's code (or shell commands),
/// never PyTorch's.
#[test]
fn fixes_are_in_the_framework_that_raised_the_error() {
    let root = fixtures().canonicalize().unwrap();
    for (name, fw, wanted) in [
        (
            "jax_tiny_request_preallocation.log",
            "jax",
            "XLA_PYTHON_CLIENT_PREALLOCATE",
        ),
        ("jax_2024_human_size.log", "jax", "XLA_PYTHON_CLIENT_"),
        (
            "tensorflow_cudnn_handle.log",
            "tensorflow",
            "tf.config.experimental.set_memory_growth",
        ),
        ("real/035.txt", "tensorflow", "model.fit("),
    ] {
        let got = json(&run_in(&root, &["explain", "--format", "json", name], None));
        let e = &got["events"][0];
        assert_eq!(e["framework"], fw, "{name}");
        let codes: Vec<&str> = e["fixes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        for c in &codes {
            for banned in ["torch", "DataLoader", "PYTORCH_", "from_pretrained"] {
                assert!(!c.contains(banned), "{name}: {banned} in {c}");
            }
        }
        assert!(
            codes.iter().any(|c| c.contains(wanted)),
            "{name}: {codes:?}"
        );
    }
}
