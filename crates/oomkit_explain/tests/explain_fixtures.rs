//! Every fixture of `tests/fixtures/` (the real messages users pasted, plus one
//! per family and per messy-log trap) explained through the library, as
//! `oomkit explain` does: the human text (styles stripped, as the binary does
//! off a terminal) and the JSON contract (each event tagged with its `source`,
//! each reading with its `input`) are snapshotted, and where a fixture has a
//! hand-written `.expect.json`, the JSON must agree with it field by field.
//! A new fixture is picked up by the glob. The binary's own reading of files,
//! standard input, exit statuses and errors is tested in the CLI tests
//! (`crates/oomkit/tests/cli/explain.rs`).
#![allow(clippy::indexing_slicing, clippy::string_slice)] // test code: a bad index is a failed test

use std::path::Path;

use oomkit_core::Bytes;
use oomkit_explain::{Explainer, Report, render};
use serde_json::{Value, json};

/// Expected byte fields may be written as integers or as printed sizes.
fn expected_bytes(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => Some(s.parse::<Bytes>().unwrap_or_else(|e| panic!("{e}")).get()),
        _ => None,
    }
}

/// Whether `got` has every key of `want` with the same value (recursively:
/// objects by key, arrays element by element and of the same length; `_bytes`
/// fields may be printed sizes).
fn subset(path: &str, got: &Value, want: &Value, errs: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), _) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                let gv = &got[k];
                if k.ends_with("_bytes") && !wv.is_object() {
                    let ok = match (expected_bytes(wv), gv) {
                        (None, Value::Null) => wv.is_null(),
                        (Some(x), Value::Number(n)) => n.as_u64() == Some(x),
                        _ => false,
                    };
                    if !ok {
                        errs.push(format!("{p}: expected {wv}, got {gv}"));
                    }
                } else {
                    subset(&p, gv, wv, errs);
                }
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                subset(&format!("{path}[{i}]"), gv, wv, errs);
            }
        }
        (Value::Array(w), _) => errs.push(format!(
            "{path}: expected {} items, got {}",
            w.len(),
            got.as_array().map_or(0, Vec::len)
        )),
        _ if got != want => errs.push(format!("{path}: expected {want}, got {got}")),
        _ => {}
    }
}

fn check_expectations(name: &str, got: &Value, want: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    if let Some(readings) = want.get("readings") {
        subset(
            &format!("{name} readings"),
            &got["readings"],
            readings,
            &mut errs,
        );
    }
    let got_events = got["events"].as_array().cloned().unwrap_or_default();
    let want_events = want["events"].as_array().cloned().unwrap_or_default();
    if got_events.len() != want_events.len() {
        errs.push(format!(
            "{name}: expected {} events, got {}: {:?}",
            want_events.len(),
            got_events.len(),
            got_events
                .iter()
                .map(|e| (e["line"].clone(), e["format"].clone()))
                .collect::<Vec<_>>()
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

/// The report as `oomkit explain --format json` prints it for one input.
fn json_report(report: &Report, name: &str) -> Value {
    let tag = |items: Value, key: &str| -> Value {
        let Value::Array(items) = items else {
            panic!("{name}: not an array: {items}")
        };
        Value::Array(
            items
                .into_iter()
                .map(|mut item| {
                    item.as_object_mut()
                        .unwrap_or_else(|| panic!("{name}: an item is not an object"))
                        .insert(key.to_string(), Value::from(name));
                    item
                })
                .collect(),
        )
    };
    let events = serde_json::to_value(&report.events).expect("events serialize");
    let readings = serde_json::to_value(&report.readings).expect("readings serialize");
    json!({
        "version": 1,
        "events": tag(events, "source"),
        "readings": tag(readings, "input"),
    })
}

/// What the binary reads from a file: a UTF-8 byte-order mark is dropped
/// (crates/oomkit/src/input.rs); UTF-16 logs are decoded only by the binary,
/// so a UTF-16 fixture belongs in the CLI tests.
fn input_bytes(path: &Path, rel: &str) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert!(
        !bytes.starts_with(&[0xFF, 0xFE]) && !bytes.starts_with(&[0xFE, 0xFF]),
        "{rel}: a UTF-16 log is decoded by the binary: test it in crates/oomkit/tests/cli/"
    );
    match bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        Some(rest) => rest.to_vec(),
        None => bytes,
    }
}

#[test]
fn explains_every_fixture_as_expected() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .canonicalize()
        .expect("fixtures folder");
    let explainer = Explainer::new();
    let mut errs = Vec::new();
    let mut checked = 0;
    let mut seen = 0;
    insta::glob!("fixtures", "**/*.*", |path| {
        if !is_fixture(path) {
            return;
        }
        seen += 1;
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/");
        let report = explainer
            .explain_reader(std::io::Cursor::new(input_bytes(path, &rel)))
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        let got = json_report(&report, &rel);
        // `oomkit explain` exits 0 with an OOM or a memory reading, 1 with neither.
        let any_oom = got["events"]
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["is_oom"] == true));
        let any_reading = got["readings"].as_array().is_some_and(|a| !a.is_empty());
        assert_eq!(report.explained(), any_oom || any_reading, "{rel}");
        let human = render::human(&report, &rel);
        insta::assert_snapshot!("human", anstream::adapter::strip_str(&human).to_string());
        insta::assert_json_snapshot!("json", got);
        let expect = path.with_extension("expect.json");
        if expect.exists() {
            let want: Value = serde_json::from_str(&std::fs::read_to_string(&expect).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", expect.display()));
            errs.extend(check_expectations(&rel, &got, &want));
            checked += 1;
        }
    });
    assert!(seen >= 100, "only {seen} fixtures found");
    assert!(checked >= 30, "only {checked} fixtures have expectations");
    assert!(
        errs.is_empty(),
        "{} mismatches:\n{}",
        errs.len(),
        errs.join("\n")
    );
}
