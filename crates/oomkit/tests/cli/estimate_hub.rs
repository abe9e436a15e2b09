//! `estimate --hub` against a Hugging Face Hub stand-in on loopback
//! (tiny_http): `/{repo}/resolve/main/{file}`, HTTP Range, a gated repo that
//! needs `Authorization: Bearer`, and offline mode. No test touches the network.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::Value;

use crate::{oomkit, stderr, stdout};

/// One request the stand-in saw: path, Range header, Authorization header,
/// bytes of body it sent.
type Seen = (String, Option<String>, Option<String>, usize);

struct FakeHub {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for FakeHub {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves `files` (path → bytes); paths under `gated/` need `Bearer hf_secret`.
fn fake_hub(files: HashMap<String, Vec<u8>>) -> FakeHub {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind loopback"));
    let url = format!("http://{}", server.server_addr().to_ip().expect("ip"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, log) = (Arc::clone(&server), Arc::clone(&seen));
    let thread = std::thread::spawn(move || {
        for req in s.incoming_requests() {
            let header = |name: &str| {
                req.headers()
                    .iter()
                    .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
                    .map(|h| h.value.as_str().to_string())
            };
            let (range, auth) = (header("Range"), header("Authorization"));
            let path = req.url().to_string();
            let gated = path.starts_with("/gated/");
            let (status, body): (u16, Vec<u8>) =
                if gated && auth.as_deref() != Some("Bearer hf_secret") {
                    (401, b"unauthorized".to_vec())
                } else {
                    match files.get(&path) {
                        None => (404, b"Entry not found".to_vec()),
                        Some(data) => match range.as_deref().and_then(parse_range) {
                            Some((a, b)) => {
                                let end = (b + 1).min(data.len());
                                (206, data.get(a..end).unwrap_or_default().to_vec())
                            }
                            None => (200, data.clone()),
                        },
                    }
                };
            log.lock()
                .expect("log")
                .push((path, range, auth, body.len()));
            let _ = req.respond(tiny_http::Response::from_data(body).with_status_code(status));
        }
    });
    FakeHub {
        url,
        seen,
        server,
        thread: Some(thread),
    }
}

fn parse_range(h: &str) -> Option<(usize, usize)> {
    let (a, b) = h.strip_prefix("bytes=")?.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A safetensors file: header, then `data` bytes of (zero) tensor data.
fn safetensors(header: &str, data: usize) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.resize(v.len() + data, 0);
    v
}

const CONFIG: &str = r#"{"model_type":"llama","architectures":["LlamaForCausalLM"],
    "hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
    "num_attention_heads":4,"num_key_value_heads":4,"vocab_size":100,
    "max_position_embeddings":2048,"torch_dtype":"bfloat16"}"#;

/// A two-shard repo at `/{repo}/resolve/main/`: 1000×1000 + 500×1000 bf16
/// tensors, with 3 MB and 1 MB of data behind the headers.
fn sharded(repo: &str) -> HashMap<String, Vec<u8>> {
    let p = |f: &str| format!("/{repo}/resolve/main/{f}");
    let h1 = r#"{"a":{"dtype":"BF16","shape":[1000,1000],"data_offsets":[0,2000000]},"__metadata__":{"format":"pt"}}"#;
    let h2 = r#"{"b":{"dtype":"BF16","shape":[500,1000],"data_offsets":[0,1000000]}}"#;
    let index = r#"{"metadata":{"total_size":3000000},"weight_map":{
        "a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}"#;
    HashMap::from([
        (p("config.json"), CONFIG.as_bytes().to_vec()),
        (p("model.safetensors.index.json"), index.as_bytes().to_vec()),
        (
            p("model-00001-of-00002.safetensors"),
            safetensors(h1, 2_000_000),
        ),
        (
            p("model-00002-of-00002.safetensors"),
            safetensors(h2, 1_000_000),
        ),
    ])
}

fn est_hub(hub: &FakeHub, extra_env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut c = oomkit();
    c.arg("estimate").args(args).env("HF_ENDPOINT", &hub.url);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    c.output().expect("run oomkit")
}

#[test]
fn hub_config_and_shard_headers_give_exact_weights_without_the_data() {
    let hub = fake_hub(sharded("acme/tiny-llama-chat"));
    let out = est_hub(
        &hub,
        &[],
        &["acme/tiny-llama-chat", "--hub", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    // 1.5 M bf16 elements from the two headers, not the config's shape.
    assert_eq!(v["components"]["weights_bytes"], 3_000_000, "{v}");
    assert_eq!(
        v["model"]["config_file"],
        format!("{}/acme/tiny-llama-chat/resolve/main/config.json", hub.url)
    );
    let seen = hub.seen.lock().expect("log").clone();
    // Shards are read by Range only, a few bytes each: never the 3 MB of data.
    for (path, range, _, sent) in &seen {
        if path.ends_with("-of-00002.safetensors") {
            assert!(range.is_some(), "{path} fetched without a Range");
            assert!(*sent < 200, "{path}: {sent} bytes");
        }
    }
    assert_eq!(
        seen.iter()
            .filter(|s| s.0.ends_with(".safetensors"))
            .count(),
        4,
        "two ranges per shard: {seen:?}"
    );
}

#[test]
fn an_unsharded_repo_reads_model_safetensors_by_range() {
    let p = |f: &str| format!("/acme/one/resolve/main/{f}");
    let h = r#"{"w":{"dtype":"F32","shape":[100,100],"data_offsets":[0,40000]}}"#;
    let hub = fake_hub(HashMap::from([
        (p("config.json"), CONFIG.as_bytes().to_vec()),
        (p("model.safetensors"), safetensors(h, 40_000)),
    ]));
    let out = est_hub(&hub, &[], &["acme/one", "--hub", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    // 10,000 fp32 elements, estimated in the default bf16.
    assert_eq!(v["components"]["weights_bytes"], 20_000, "{v}");
}

#[test]
fn a_gated_repo_needs_hf_token_and_says_so() {
    let hub = fake_hub(sharded("gated/llama"));
    let out = est_hub(&hub, &[], &["gated/llama", "--hub"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("HTTP 401") && e.contains("HF_TOKEN"), "{e}");
    let out = est_hub(
        &hub,
        &[("HF_TOKEN", "hf_secret")],
        &["gated/llama", "--hub", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = hub.seen.lock().expect("log").clone();
    assert!(
        seen.iter()
            .any(|s| s.2.as_deref() == Some("Bearer hf_secret")),
        "{seen:?}"
    );
}

#[test]
fn offline_mode_and_missing_repos_are_one_line_errors() {
    let hub = fake_hub(sharded("acme/tiny"));
    let out = est_hub(&hub, &[("HF_HUB_OFFLINE", "1")], &["acme/tiny", "--hub"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("HF_HUB_OFFLINE"), "{}", stderr(&out));
    assert!(
        hub.seen.lock().expect("log").is_empty(),
        "offline: no request"
    );

    let out = est_hub(&hub, &[], &["acme/nothing-here", "--hub"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("404") && e.contains("no config.json"), "{e}");

    let out = est_hub(&hub, &[], &["../etc/passwd", "--hub"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a Hugging Face repo id"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn without_hub_an_unknown_hub_id_points_at_the_flag() {
    let out = oomkit()
        .args(["estimate", "acme/unknown-model-7b"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("add --hub"), "{}", stderr(&out));
}
