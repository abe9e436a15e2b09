//! `oomkit explain` on memory readings, through the binary: every
//! format read with its numbers, readings joined to the OOM of the same
//! paste, the JSON contract, exit statuses, and hostile tables. The real
//! readings in `fixtures/readings/` are also run by the explain crate's
//! fixture runner (`oomkit_explain/tests/explain_fixtures.rs`) against their
//! `.expect.json`.

use serde_json::Value;

use super::{fixtures, json, run_in};

const MIB: u64 = 1 << 20;

fn explain_json(input: &str) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = run_in(
        dir.path(),
        &["explain", "--format", "json"],
        Some(input.as_bytes()),
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), json(&out))
}

/// The ids of a reading's fixes, in rank order.
fn fix_ids(r: &Value) -> Vec<&str> {
    r["fixes"]
        .as_array()
        .expect("a fixes array")
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect()
}

fn only_reading(input: &str) -> Value {
    let (code, got) = explain_json(input);
    assert_eq!(code, Some(0), "a reading alone exits 0: {got}");
    let r = got["readings"].as_array().expect("a readings array");
    assert_eq!(r.len(), 1, "{got}");
    r[0].clone()
}

#[test]
fn the_seed_guides_table_reads_although_its_line_breaks_were_lost() {
    // A troubleshooting guide's nvidia-smi example (its "Step 1"), as
    // extracted from the web page: padding collapsed, borders glued to the
    // prose before and after.
    let seed = "\
# One-time check
nvidia-smiOutput explanation:
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 535.104.05 Driver Version: 535.104.05 CUDA Version: 12.2 |
|-------------------------------+----------------------+----------------------+
| GPU Name Persistence-M| Bus-Id Disp.A | Volatile Uncorr. ECC |
| Fan Temp Perf Pwr:Usage/Cap| Memory-Usage | GPU-Util Compute M. |
|===============================+======================+======================|
| 0 NVIDIA RTX 4090 On | 00000000:01:00.0 Off | Off |
| 30% 45C P2 75W / 450W | 18432MiB / 24564MiB | 85% Default |
+-------------------------------+----------------------+----------------------+Key metric: 18432MiB / 24564MiB = 75% memory used
Step 2: Check Memory in Python
";
    let (_, got) = explain_json(seed);
    let r = got["readings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["source"] == "nvidia-smi")
        .expect("the seed's table is read")
        .clone();
    assert_eq!(r["gpus"][0]["memory_used_bytes"], 18432 * MIB);
    assert_eq!(r["gpus"][0]["memory_total_bytes"], 24564 * MIB);
    assert_eq!(r["gpus"][0]["utilization_pct"], 85);
    assert!(r["findings"][0].as_str().unwrap().contains("(75%)"), "{r}");
    // One line of the table with every line break gone still reads.
    let flat = "| NVIDIA-SMI 535.104.05 Driver Version: 535.104.05 CUDA Version: 12.2 ||---+---+---|| 0 NVIDIA RTX 4090 On | 00000000:01:00.0 Off | Off || 30% 45C P2 75W / 450W | 18432MiB / 24564MiB | 85% Default |+---+";
    let r = only_reading(flat);
    assert_eq!(r["gpus"][0]["name"], "NVIDIA RTX 4090");
    assert_eq!(r["gpus"][0]["memory_used_bytes"], 18432 * MIB);
}

#[test]
fn a_table_with_prefixes_and_several_gpus_reads_every_gpu_and_process() {
    let t = "\
worker-1 | | NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |
worker-1 | |   0  NVIDIA A100-SXM...  On   | 00000000:07:00.0 Off |                    0 |
worker-1 | | N/A   31C    P0    60W / 400W |  79000MiB / 81251MiB |     99%      Default |
worker-1 | |   1  NVIDIA A100-SXM...  On   | 00000000:0F:00.0 Off |                    0 |
worker-1 | | N/A   29C    P0    58W / 400W |      3MiB / 81251MiB |      0%      Default |
worker-1 | | Processes:                                                                  |
worker-1 | |    0   N/A  N/A     11111      C   python                          45000MiB |
worker-1 | |    0   N/A  N/A     22222      C   python                          33000MiB |
";
    let r = only_reading(t);
    assert_eq!(r["source"], "nvidia-smi");
    assert_eq!(r["gpus"].as_array().unwrap().len(), 2);
    assert_eq!(r["gpus"][0]["unattributed_bytes"], 1000 * MIB);
    assert_eq!(r["gpus"][1]["unattributed_bytes"], 3 * MIB);
    assert_eq!(r["processes"][1]["pid"], 22222);
    assert_eq!(r["processes"][1]["gpu"], 0);
    let ids = fix_ids(&r);
    assert_eq!(ids[0], "free-other-processes", "{ids:?}");
    assert!(ids.contains(&"model-parallel"), "GPU 1 is idle: {ids:?}");
}

#[test]
fn query_csv_with_and_without_header_and_units() {
    let with_units = "\
$ nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw --format=csv
index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%], temperature.gpu, power.draw [W]
0, NVIDIA H100 80GB HBM3, 80123 MiB, 81559 MiB, 100 %, 61, 512.33 W
";
    let r = only_reading(with_units);
    assert_eq!(r["source"], "nvidia-smi-query");
    assert_eq!(r["line"], 1);
    let g = &r["gpus"][0];
    assert_eq!(g["memory_used_bytes"], 80123 * MIB);
    assert_eq!(g["memory_total_bytes"], 81559 * MIB);
    assert_eq!(g["utilization_pct"], 100);
    assert_eq!(g["temperature_c"], 61);
    assert_eq!(g["power_w"], 512.33);
    let bare = "\
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits
7000, 8192
12, 8192
";
    let r = only_reading(bare);
    assert_eq!(r["gpus"][1]["index"], 1);
    assert_eq!(r["gpus"][0]["memory_used_bytes"], 7000 * MIB);
    let na = "\
nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu --format=csv
index, memory.used [MiB], memory.total [MiB], utilization.gpu [%]
0, [N/A], [N/A], [N/A]
";
    let r = only_reading(na);
    assert_eq!(r["gpus"][0]["memory_used_bytes"], Value::Null);
    assert_eq!(r["gpus"][0]["utilization_pct"], Value::Null);
    // A noheader CSV without its command is just numbers.
    let (code, got) = explain_json("7000, 8192\n12, 8192\n");
    assert_eq!(code, Some(1));
    assert_eq!(got["readings"], serde_json::json!([]));
}

#[test]
fn compute_apps_alone_are_listed_without_a_gpu() {
    let t = "\
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
pid, process_name, used_gpu_memory [MiB]
4242, /usr/bin/python3, 20480 MiB
";
    let r = only_reading(t);
    assert_eq!(r["gpus"], serde_json::json!([]));
    assert_eq!(r["processes"][0]["gpu"], Value::Null);
    assert_eq!(r["processes"][0]["pid"], 4242);
    assert_eq!(r["processes"][0]["used_bytes"], 20480 * MIB);
}

#[test]
fn memory_stats_dict_and_json_read_their_counters() {
    let t = "{'active.all.current': 12, 'allocated_bytes.all.current': 8589934592, 'allocated_bytes.all.peak': 17179869184, 'inactive_split_bytes.all.current': 1073741824, 'num_alloc_retries': 4, 'num_ooms': 1, 'reserved_bytes.all.current': 12884901888, 'reserved_bytes.all.peak': 19327352832, 'requested_bytes.all.current': 8589000000}";
    let r = only_reading(t);
    assert_eq!(r["source"], "torch-memory-stats");
    assert_eq!(r["device"], Value::Null);
    assert_eq!(r["allocated_bytes"], 8u64 << 30);
    assert_eq!(r["allocated_peak_bytes"], 16u64 << 30);
    assert_eq!(r["reserved_bytes"], 12u64 << 30);
    assert_eq!(r["reserved_peak_bytes"], 18u64 << 30);
    assert_eq!(r["non_releasable_bytes"], 1u64 << 30);
    assert_eq!(r["oom_count"], 1);
    assert_eq!(r["alloc_retries"], 4);
    assert!(r.get("gpus").is_none(), "PyTorch sources have no gpus: {r}");
    let ids = fix_ids(&r);
    assert_eq!(ids[0], "expandable-segments", "{ids:?}");
    let as_json = r#"{"allocated_bytes.all.current": 1024, "reserved_bytes.all.current": 2097152}"#;
    assert_eq!(only_reading(as_json)["reserved_bytes"], 2u64 << 20);
}

#[test]
fn a_mixed_paste_is_one_diagnosis_with_who_else_holds_memory() {
    let root = fixtures().canonicalize().unwrap();
    let out = run_in(
        &root,
        &[
            "explain",
            "--format",
            "json",
            "readings/mixed_legacy_oom_with_smi_table.log",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let got = json(&out);
    let e = &got["events"][0];
    // The legacy message names no process; the table beside it does.
    assert_eq!(e["cause"], "other_processes");
    assert_eq!(e["reading_lines"], serde_json::json!([9]));
    assert_eq!(e["numbers"]["other_processes_bytes"], 13562 * MIB);
    assert_eq!(e["fixes"][0]["id"], "free-other-processes");
    assert!(e["fixes"][0]["why"].as_str().unwrap().contains("5151"));
    assert_eq!(
        got["readings"][0]["input"],
        "readings/mixed_legacy_oom_with_smi_table.log"
    );
    assert_eq!(got["readings"][0]["source"], "nvidia-smi");
    let human = run_in(
        &root,
        &[
            "explain",
            "--color",
            "never",
            "readings/mixed_legacy_oom_with_smi_table.log",
        ],
        None,
    );
    insta::assert_snapshot!(String::from_utf8_lossy(&human.stdout));
}

#[test]
fn the_message_wins_and_a_table_of_another_gpu_is_not_joined() {
    // PyTorch 2.1 lists its own processes: the table adds nothing to them.
    let own = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.27 GiB is free. Process 77 has 22.36 GiB memory in use. Of the allocated memory 16.93 GiB is allocated by PyTorch, and 4.84 GiB is reserved by PyTorch but unallocated.\n\
| NVIDIA-SMI 535.104.05 Driver Version: 535.104.05 CUDA Version: 12.2 |\n\
| 0 NVIDIA RTX 4090 On | 00000000:01:00.0 Off | Off |\n\
| 30% 45C P2 75W / 450W | 23000MiB / 24564MiB | 85% Default |\n\
| Processes: |\n\
| 0 N/A N/A 99 C python 23000MiB |\n";
    let (_, got) = explain_json(own);
    let e = &got["events"][0];
    assert_eq!(e["processes"][0]["pid"], 77);
    assert_eq!(e["processes"].as_array().unwrap().len(), 1);
    // A table of GPU 1 says nothing about an OOM on GPU 0.
    let other = own
        .replace("| 0 NVIDIA", "| 1 NVIDIA")
        .replace("| 0 N/A", "| 1 N/A");
    let (_, got) = explain_json(&other);
    assert_eq!(got["events"][0]["reading_lines"], serde_json::json!([]));
}

#[test]
fn exit_status_is_zero_for_a_reading_and_one_for_nothing() {
    let (code, got) = explain_json("just a training log\nepoch 1 loss 0.3\n");
    assert_eq!(code, Some(1));
    assert_eq!(
        got,
        serde_json::json!({"version": 1, "events": [], "readings": []})
    );
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(
        dir.path(),
        &["explain", "--color", "never"],
        Some(b"| 0 NVIDIA RTX 4090 On | 00000000:01:00.0 Off | Off |\n| 30% 45C P2 75W / 450W | 18432MiB / 24564MiB | 85% Default |\n"),
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("Memory reading (nvidia-smi): 1 GPU(s)"),
        "{text}"
    );
    assert!(!text.contains("no out-of-memory error found"), "{text}");
}

#[test]
fn hostile_tables_never_panic_and_stay_bounded() {
    let mut t = String::from("| NVIDIA-SMI 1 Driver Version: 1 CUDA Version: 1 |\n");
    for i in 0..3000 {
        t.push_str(&format!(
            "| {i} X On | 00000000:01:00.0 Off | Off |\n| 30% 45C P2 75W / 450W | 99999999999MiB / 18446744073709551615MiB | 999% Default |\n"
        ));
    }
    t.push_str("| Processes: |\n");
    for i in 0..5000 {
        t.push_str(&format!("| 0 N/A N/A {i} C p 4294967295MiB |\n"));
    }
    t.push_str("{'allocated_bytes.all.current': 99999999999999999999999, 'reserved_bytes.all.current': 18446744073709551615}\n");
    t.push_str("PyTorch CUDA memory summary, device ID 999 | Allocated memory | 999999999999999 PiB | 1 B |\n");
    let (code, got) = explain_json(&t);
    assert_eq!(code, Some(0));
    for r in got["readings"].as_array().unwrap() {
        assert!(r["gpus"].as_array().map_or(0, Vec::len) <= 64);
        assert!(r["processes"].as_array().map_or(0, Vec::len) <= 1024);
    }
}
