//! `oomkit explain` v3, second part, through the binary: every reading
//! people paste read in full (a `--query-gpu` CSV by its header alone,
//! `nvidia-smi -q` whole, unified-memory GPUs, GPU numbers never invented,
//! repeated process rows once), and the ranks of one DeepSpeed or torchrun
//! job folded into one event with the launcher's lines kept apart.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test's failure

use serde_json::Value;

use super::{fixtures, json, run_in};

const MIB: u64 = 1 << 20;

/// Explains `input` from standard input; returns the exit status, the
/// JSON report and the human report.
fn explain(input: &str) -> (Option<i32>, Value, String) {
    let dir = tempfile::tempdir().unwrap();
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
    let human = run_in(
        dir.path(),
        &["explain", "--color", "never"],
        Some(input.as_bytes()),
    );
    (
        out.status.code(),
        json(&out),
        String::from_utf8_lossy(&human.stdout).into_owned(),
    )
}

fn only_reading(input: &str) -> (Value, String) {
    let (code, got, human) = explain(input);
    assert_eq!(code, Some(0), "a reading exits 0: {got}");
    let r = got["readings"].as_array().unwrap();
    assert_eq!(r.len(), 1, "{got}");
    (r[0].clone(), human)
}

fn fixture_json(rel: &str) -> Value {
    let root = fixtures();
    let out = run_in(&root, &["explain", "--format", "json", rel], None);
    assert_eq!(out.status.code(), Some(0), "{rel}");
    json(&out)
}

fn findings(r: &Value) -> String {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

// ---- the query CSV ----------------------------------------------------------

#[test]
fn a_query_csv_is_read_by_its_header_alone_in_any_order_and_subset() {
    // The header and rows without the command line that printed them, the
    // columns in an order of the user's choosing.
    let (r, human) = only_reading(
        "memory.total [MiB], name, memory.used [MiB], utilization.gpu [%]\n\
         81920 MiB, NVIDIA A100-SXM4-80GB, 80000 MiB, 100 %\n\
         81920 MiB, NVIDIA A100-SXM4-80GB, 4 MiB, 0 %\n",
    );
    assert_eq!(r["source"], "nvidia-smi-query");
    let g = r["gpus"].as_array().unwrap();
    assert_eq!(g.len(), 2);
    assert_eq!(g[0]["memory_used_bytes"], 80000 * MIB);
    assert_eq!(g[0]["memory_total_bytes"], 81920 * MIB);
    assert_eq!(g[0]["utilization_pct"], 100);
    assert_eq!(g[1]["memory_used_bytes"], 4 * MIB);
    // No index column and no command: the rows are not GPU 0 and 1.
    assert_eq!(g[0]["index"], Value::Null);
    assert_eq!(g[1]["position"], 2);
    let f = findings(&r);
    assert!(f.contains("GPU #1 as listed"), "{f}");
    assert!(!f.contains("CUDA_VISIBLE_DEVICES"), "{f}");
    assert!(
        human.contains("GPU #2 as listed NVIDIA A100-SXM4-80GB"),
        "{human}"
    );

    // `nounits`: the same figures without their unit.
    let (r, _) = only_reading("name, memory.used, memory.total\nTesla T4, 15000, 15360\n");
    assert_eq!(r["gpus"][0]["memory_used_bytes"], 15000 * MIB);
    assert_eq!(r["gpus"][0]["memory_total_bytes"], 15360 * MIB);
    assert_eq!(r["gpus"][0]["name"], "Tesla T4");

    // A compute-apps table with its command.
    let (r, _) = only_reading(
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv\n\
         pid, process_name, used_gpu_memory [MiB]\n4242, python train.py, 60000 MiB\n",
    );
    assert_eq!(r["processes"][0]["pid"], 4242);
    assert_eq!(r["processes"][0]["used_bytes"], 60000 * MIB);
}

#[test]
fn a_printed_index_is_kept_and_the_command_without_dash_i_numbers_the_rows() {
    // `-i 2,3` with an index column: the GPUs are 2 and 3.
    let (r, _) = only_reading(
        "$ nvidia-smi -i 2,3 --query-gpu=index,name,memory.used,memory.total --format=csv\n\
         index, name, memory.used [MiB], memory.total [MiB]\n\
         2, NVIDIA A100-SXM4-80GB, 80000 MiB, 81920 MiB\n\
         3, NVIDIA A100-SXM4-80GB, 4 MiB, 81920 MiB\n",
    );
    assert_eq!(r["gpus"][0]["index"], 2);
    assert_eq!(r["gpus"][1]["index"], 3);
    assert!(findings(&r).contains("CUDA_VISIBLE_DEVICES=3"), "{r}");

    // The command without -i lists every GPU in index order.
    let (r, _) = only_reading(
        "nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv\n\
         name, memory.used [MiB], memory.total [MiB]\n\
         Tesla V100-SXM2-16GB, 16000 MiB, 16160 MiB\n\
         Tesla V100-SXM2-16GB, 10 MiB, 16160 MiB\n",
    );
    assert_eq!(r["gpus"][1]["index"], 1);
    // `-i 3` and one row: GPU 3.
    let (r, _) = only_reading(
        "nvidia-smi -i 3 --query-gpu=memory.used,memory.total --format=csv,noheader\n\
         1234 MiB, 16384 MiB\n",
    );
    assert_eq!(r["gpus"][0]["index"], 3);
}

#[test]
fn dash_i_with_several_gpus_and_no_index_column_is_as_listed_and_names_no_device() {
    // What `-i 2,3` prints without an index column: two rows that are not
    // GPUs 0 and 1. The OOM on GPU 0 next to it is not joined to either,
    // and no fix names CUDA_VISIBLE_DEVICES=1.
    let input = "\
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use. Of the allocated memory 76.50 GiB is allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but unallocated.
$ nvidia-smi -i 2,3 --query-gpu=name,memory.used,memory.total --format=csv
name, memory.used [MiB], memory.total [MiB]
NVIDIA A100-SXM4-80GB, 80000 MiB, 81920 MiB
NVIDIA A100-SXM4-80GB, 4 MiB, 81920 MiB
";
    let (code, got, human) = explain(input);
    assert_eq!(code, Some(0));
    let r = &got["readings"][0];
    assert_eq!(r["gpus"][0]["index"], Value::Null, "{r}");
    assert_eq!(r["gpus"][1]["position"], 2);
    let e = &got["events"][0];
    assert_eq!(e["reading_lines"].as_array().unwrap().len(), 0, "{e}");
    assert!(!got.to_string().contains("CUDA_VISIBLE_DEVICES=1"), "{got}");
    assert!(
        human.contains("GPU #2 as listed has 80.00 GiB free"),
        "{human}"
    );
}

#[test]
fn noheader_rows_without_their_command_are_not_guessed() {
    // Which figure is used and which is total is not stated: nothing read.
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(
        dir.path(),
        &["explain"],
        Some(b"NVIDIA A100-SXM4-80GB, 80000 MiB, 81920 MiB\n"),
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn loop_output_is_read_as_samples_of_the_same_gpus() {
    let got = fixture_json("readings/smi_query_loop_gb10.txt");
    let r = &got["readings"][0];
    assert_eq!(r["gpus"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["gpus"][0]["index"], 0);
    assert_eq!(r["samples"], 5);
    // With an index column, a GPU seen again starts the next sample.
    let (r, _) = only_reading(
        "index, memory.used [MiB], memory.total [MiB]\n\
         0, 1000 MiB, 16384 MiB\n1, 2000 MiB, 16384 MiB\n\
         0, 15000 MiB, 16384 MiB\n1, 2100 MiB, 16384 MiB\n",
    );
    assert_eq!(r["gpus"].as_array().unwrap().len(), 2);
    assert_eq!(r["gpus"][0]["memory_used_bytes"], 15000 * MIB);
    assert_eq!(r["samples"], 2);
}

// ---- unified memory ---------------------------------------------------------

#[test]
fn a_gb10_keeps_its_gpu_row_with_unknown_memory_in_the_table_and_the_query() {
    for rel in [
        "readings/smi_580_gb10_not_supported.txt",
        "readings/smi_query_gb10_na.txt",
    ] {
        let got = fixture_json(rel);
        let r = &got["readings"][0];
        let g = &r["gpus"][0];
        assert_eq!(g["index"], 0, "{rel}");
        assert_eq!(g["memory_used_bytes"], Value::Null, "{rel}");
        assert_eq!(g["memory_total_bytes"], Value::Null, "{rel}");
        let f = findings(r);
        assert!(f.contains("memory not reported"), "{rel}: {f}");
        assert!(!f.contains("no GPU here is near full"), "{rel}: {f}");
    }
    let got = fixture_json("readings/smi_580_gb10_not_supported.txt");
    assert_eq!(got["readings"][0]["gpus"][0]["name"], "NVIDIA GB10");
}

// ---- nvidia-smi -q ------------------------------------------------------------

#[test]
fn a_two_gpu_q_report_is_read_whole() {
    let got = fixture_json("readings/smi_q_550_two_h100_nvl_whole.txt");
    let r = &got["readings"][0];
    let g = r["gpus"].as_array().unwrap();
    assert_eq!(g.len(), 2, "{r}");
    for (i, (temp, power)) in [(32, 61.62), (31, 62.11)].into_iter().enumerate() {
        assert_eq!(g[i]["index"], i, "{r}");
        assert_eq!(g[i]["name"], "NVIDIA H100 NVL");
        assert_eq!(g[i]["memory_total_bytes"], 95830 * MIB);
        assert_eq!(g[i]["memory_reserved_bytes"], 594 * MIB);
        assert_eq!(g[i]["utilization_pct"], 0);
        assert_eq!(g[i]["temperature_c"], temp);
        assert_eq!(g[i]["power_w"], power);
    }
    // `Processes : None` under both GPUs: a process list with nobody on it.
    assert_eq!(r["processes"].as_array().unwrap().len(), 0);
    assert_eq!(g[1]["unattributed_bytes"], 0);
}

#[test]
fn a_driver_580_q_report_reads_its_names_and_the_processes_far_below() {
    let got = fixture_json("readings/smi_q_580_laptop_processes.txt");
    let r = &got["readings"][0];
    let g = &r["gpus"][0];
    assert_eq!(g["name"], "NVIDIA GeForce RTX 5080 Laptop GPU");
    // `GPU : 0 %` and `Instantaneous Power Draw` (not the average, and not
    // the memory's or the module's `N/A`).
    assert_eq!(g["utilization_pct"], 0);
    assert_eq!(g["power_w"], 14.47);
    assert_eq!(g["temperature_c"], 49);
    // The Conf Compute section's Total/Used are not the framebuffer's.
    assert_eq!(g["memory_total_bytes"], 16303 * MIB);
    let p = r["processes"].as_array().unwrap();
    assert_eq!(p.len(), 7, "{r}");
    assert_eq!(p[6]["pid"], 44735);
    assert_eq!(g["unattributed_bytes"], 79 * MIB);
}

#[test]
fn a_q_report_of_some_gpus_is_as_listed() {
    // `nvidia-smi -q -i 2 -d MEMORY`: the report counts four GPUs and shows one.
    let (r, human) = only_reading(
        "==============NVSMI LOG==============\n\
         Driver Version                            : 535.104.05\n\
         Attached GPUs                             : 4\n\
         GPU 00000000:41:00.0\n\
         \x20   FB Memory Usage\n\
         \x20       Total                             : 24564 MiB\n\
         \x20       Reserved                          : 346 MiB\n\
         \x20       Used                              : 23000 MiB\n\
         \x20       Free                              : 1218 MiB\n",
    );
    assert_eq!(r["gpus"][0]["index"], Value::Null, "{r}");
    assert_eq!(r["gpus"][0]["position"], 1);
    assert!(human.contains("GPU #1 as listed"), "{human}");
}

// ---- repeated process rows ------------------------------------------------------

#[test]
fn a_process_row_printed_twice_is_counted_once() {
    // WSL's nvidia-smi, and a process in both the compute and the graphics
    // list (wookayin/gpustat#84), print the same PID twice on one GPU.
    let table = "\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.163.01             Driver Version: 550.163.01     CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        Off |   00000000:4E:00.0 Off |                  Off |
| 30%   29C    P2            300W /  450W |   23000MiB /  24564MiB |     99%      Default |
+-----------------------------------------+------------------------+----------------------+
+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A      4242      C   /python3.11                                 22000MiB |
|    0   N/A  N/A      4242      C   /python3.11                                 22000MiB |
+-----------------------------------------------------------------------------------------+
";
    let (r, human) = only_reading(table);
    let p = r["processes"].as_array().unwrap();
    assert_eq!(p.len(), 1, "{r}");
    assert_eq!(r["duplicate_rows"], 1);
    // 23000 − 22000, not 23000 − 44000 (saturated to 0).
    assert_eq!(r["gpus"][0]["unattributed_bytes"], 1000 * MIB);
    assert!(human.contains("1 process row repeated"), "{human}");
}

// ---- ranks of one job -------------------------------------------------------------

fn detail<'a>(e: &'a Value, key: &str) -> Vec<&'a str> {
    e["details"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d[0] == key)
        .filter_map(|d| d[1].as_str())
        .collect()
}

#[test]
fn a_deepspeed_job_of_two_ranks_is_one_event_with_each_ranks_gpu_and_the_launcher_apart() {
    let got = fixture_json("v3/deepspeed_two_ranks_launcher.log");
    let events = got["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{got}");
    let e = &events[0];
    assert_eq!(e["ranks"], serde_json::json!([0, 1]));
    assert_eq!(e["repeats"], 2);
    assert_eq!(e["app"], "deepspeed");
    let copies = detail(e, "rank_copy");
    assert!(
        copies.contains(&"rank 1: GPU 1, 1.02 GiB free"),
        "{copies:?}"
    );
    assert!(
        copies.contains(&"rank 0: GPU 0, 1.10 GiB free"),
        "{copies:?}"
    );
    let launcher = detail(e, "launcher");
    assert!(
        launcher[0].contains("local rank 1 exited with return code 1"),
        "{launcher:?}"
    );
    // The rank's quote holds none of the launcher's lines.
    let message = e["message"].as_str().unwrap();
    assert!(!message.contains("sigkill_handler"), "{message}");
    // A DeepSpeed training step: sharding and offload before a smaller batch.
    assert_eq!(e["fixes"][0]["id"], "zero-sharding");
}

#[test]
fn torchrun_ranks_fold_and_torchelastics_summary_is_a_detail() {
    let got = fixture_json("v3/torchrun_ranks_childfailed.log");
    let events = got["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{got}");
    let e = &events[0];
    assert_eq!(e["ranks"], serde_json::json!([1, 3]));
    // The first rank's figures are the event's; the other's are listed.
    assert_eq!(e["device"], 3);
    assert!(detail(e, "rank_copy").contains(&"rank 1: GPU 1, 464.56 MiB free"));
    let launcher = detail(e, "launcher")[0];
    assert!(
        launcher.contains("first failure rank 2 (exit code 1)"),
        "{launcher}"
    );
    assert!(
        launcher.contains("3 other rank(s) sent SIGTERM"),
        "{launcher}"
    );
}

#[test]
fn a_ranks_message_stops_where_the_launchers_lines_begin() {
    let (code, got, human) = explain(
        "[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB (GPU 1; 39.56 GiB total capacity; 38.49 GiB already allocated; 96.56 MiB free; 38.78 GiB reserved in total by PyTorch)\n\
         W0320 01:57:20.295000 2699931 site-packages/torch/distributed/elastic/multiprocessing/api.py:1010] Sending process 2700003 closing signal SIGTERM\n\
         W0320 01:57:20.297000 2699931 site-packages/torch/distributed/elastic/multiprocessing/api.py:1010] Sending process 2700004 closing signal SIGTERM\n",
    );
    assert_eq!(code, Some(0));
    let message = got["events"][0]["message"].as_str().unwrap();
    assert!(
        message.ends_with("reserved in total by PyTorch)"),
        "{message}"
    );
    assert!(!human.contains("> torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB (GPU 1; 39.56 GiB total capacity; 38.49 GiB already allocated; 96.56 MiB free; 38.78 GiB reserved in total by PyTorch) Sending"), "{human}");
}

#[test]
fn a_rank_whose_gpu_another_process_shares_stays_its_own_event() {
    let root = fixtures();
    let out = run_in(
        &root,
        &[
            "explain",
            "--format",
            "json",
            "trap_two_gpus_two_events.log",
        ],
        None,
    );
    let got = json(&out);
    let events = got["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{got}");
    assert_eq!(events[1]["cause"], "other_processes");
}
