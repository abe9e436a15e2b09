//! `oomkit explain` through the binary: every fixture (the 30 real messages
//! users pasted, plus one per family and per messy-log trap) is explained in
//! human and JSON form and snapshotted; where a fixture has a hand-written
//! `.expect.json`, the JSON must agree with it field by field.

use std::path::Path;

use oomkit_core::Bytes;
use serde_json::Value;

use super::{fixtures, run_in};

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("stdout is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout))
    })
}

/// Expected byte fields may be written as integers or as printed sizes.
fn expected_bytes(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => Some(s.parse::<Bytes>().unwrap_or_else(|e| panic!("{e}")).get()),
        _ => None,
    }
}

fn check_expectations(name: &str, got: &Value, want: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let got_events = got["events"].as_array().cloned().unwrap_or_default();
    let want_events = want["events"].as_array().cloned().unwrap_or_default();
    if got_events.len() != want_events.len() {
        errs.push(format!(
            "{name}: expected {} events, got {}: {:?}",
            want_events.len(),
            got_events.len(),
            got_events.iter().map(|e| (e["line"].clone(), e["format"].clone())).collect::<Vec<_>>()
        ));
        return errs;
    }
    for (i, (g, w)) in got_events.iter().zip(&want_events).enumerate() {
        let Some(obj) = w.as_object() else { continue };
        for (k, wv) in obj {
            let gv = &g[k];
            let ok = if k.ends_with("_bytes") {
                match (expected_bytes(wv), gv) {
                    (None, Value::Null) => wv.is_null(),
                    (Some(x), Value::Number(n)) => n.as_u64() == Some(x),
                    _ => false,
                }
            } else {
                gv == wv
            };
            if !ok {
                errs.push(format!("{name} event {i}: {k}: expected {wv}, got {gv}"));
            }
        }
    }
    errs
}

fn is_fixture(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("log" | "txt"))
}

#[test]
fn explains_every_fixture_as_expected() {
    let root = fixtures().canonicalize().expect("fixtures folder");
    let mut errs = Vec::new();
    let mut checked = 0;
    insta::glob!("../../../oomkit_explain/tests/fixtures", "**/*.*", |path| {
        if !is_fixture(path) {
            return;
        }
        let rel = path.strip_prefix(&root).unwrap_or(path).to_string_lossy().replace('\\', "/");
        let human = run_in(&root, &["explain", "--color", "never", &rel], None);
        let json = run_in(&root, &["explain", "--format", "json", &rel], None);
        assert!(human.stderr.is_empty(), "{rel}: stderr {}", String::from_utf8_lossy(&human.stderr));
        let got = json_of(&json);
        // Exit status follows the events: 0 with an OOM, 1 without.
        let any_oom = got["events"].as_array().is_some_and(|a| a.iter().any(|e| e["is_oom"] == true));
        assert_eq!(json.status.code(), Some(if any_oom { 0 } else { 1 }), "{rel}");
        assert_eq!(human.status.code(), json.status.code(), "{rel}");
        insta::assert_snapshot!("human", String::from_utf8_lossy(&human.stdout));
        insta::assert_json_snapshot!("json", got);
        let expect = path.with_extension("expect.json");
        if expect.exists() {
            let want: Value = serde_json::from_str(&std::fs::read_to_string(&expect).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", expect.display()));
            errs.extend(check_expectations(&rel, &got, &want));
            checked += 1;
        }
    });
    assert!(checked >= 30, "only {checked} fixtures have expectations");
    assert!(errs.is_empty(), "{} mismatches:\n{}", errs.len(), errs.join("\n"));
}
