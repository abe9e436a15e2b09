//! `oomkit monitor` end to end against the stand-in NVML library: the real
//! binary `dlopen`s `libnvidia-ml.so.1` from LD_LIBRARY_PATH, which here is a
//! temporary folder holding a link to `oomkit_nvml_standin`'s cdylib (built
//! because it is a dev-dependency), driven by a scenario file from
//! `crates/oomkit_nvml_standin/scenarios/`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Cli, cli, exit_2_says, exit_2_usage};
use crate::{oomkit, stderr, stdout};

/// A folder with `libnvidia-ml.so.1` → the stand-in.
pub(crate) struct Driver {
    pub(crate) dir: tempfile::TempDir,
}

fn standin() -> PathBuf {
    // Test binaries live in target/<profile>/deps/, next to the dev-dependency's cdylib.
    let exe = std::env::current_exe().expect("test setup");
    let deps = exe.parent().expect("test setup");
    let so = deps.join("liboomkit_nvml_standin.so");
    assert!(so.exists(), "stand-in not built at {}", so.display());
    so
}

impl Driver {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("test setup");
        std::os::unix::fs::symlink(standin(), dir.path().join("libnvidia-ml.so.1"))
            .expect("test setup");
        Driver { dir }
    }

    pub(crate) fn cmd(&self, scenario: &str, args: &[&str]) -> Command {
        let mut c = oomkit();
        // NODE_NAME names the node in /metrics; the tests expect the hostname.
        c.env_remove("NODE_NAME")
            .env("LD_LIBRARY_PATH", self.dir.path())
            .env("OOMKIT_NVML_SCENARIO", scenario_path(scenario))
            .arg("monitor")
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// `oomkit monitor ARGS` on the stand-in playing `scenario`, killed past a minute.
    fn cli(&self, scenario: &str, args: &[&str]) -> Cli {
        cli(&["monitor"])
            .args(args)
            .env_remove("NODE_NAME")
            .env("LD_LIBRARY_PATH", self.dir.path())
            .env("OOMKIT_NVML_SCENARIO", scenario_path(scenario))
            .cwd(self.dir.path())
            .within(Duration::from_secs(60))
    }

    pub(crate) fn run(&self, scenario: &str, args: &[&str]) -> Output {
        let child = self.cmd(scenario, args).spawn().expect("test setup");
        wait_limited(child, Duration::from_secs(60))
    }
}

pub(crate) fn scenario_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../oomkit_nvml_standin/scenarios")
        .join(name)
}

pub(crate) fn wait_limited(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    let out = child.stdout.take();
    let err = child.stderr.take();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(mut p) = out {
            p.read_to_end(&mut b)?;
        }
        Ok::<_, std::io::Error>(b)
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(mut p) = err {
            p.read_to_end(&mut b)?;
        }
        Ok::<_, std::io::Error>(b)
    });
    while child.try_wait().expect("test setup").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("oomkit monitor ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut output = child.wait_with_output().expect("test setup");
    output.stdout = o.join().expect("test setup").expect("test setup");
    output.stderr = e.join().expect("test setup").expect("test setup");
    output
}

/// Asserts that `keys` appear in this order in `text` (first occurrences after
/// `from`); `serde_json::Value` sorts keys, so order is checked on the raw line.
fn assert_key_order(text: &str, from: usize, keys: &[&str]) {
    let mut at = from;
    for k in keys {
        let needle = format!("\"{k}\":");
        let pos = text[at..]
            .find(&needle)
            .unwrap_or_else(|| panic!("{k} missing or out of order in {text}"));
        at += pos + needle.len();
    }
}

/// Waits (up to 30 s) until a process whose command line matches `pattern`
/// (`pgrep -f`) exists.
fn wait_for_process(pattern: &str) {
    let start = Instant::now();
    while !Command::new("pgrep")
        .args(["-f", pattern])
        .stdout(Stdio::null())
        .status()
        .expect("pgrep")
        .success()
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no process matching {pattern} started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn lines_json(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn once_prints_gpu_and_processes_in_pytorch_units() {
    let d = Driver::new();
    let o = d.run("leak.json", &["--once"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains("driver 580.65.06"), "{s}");
    assert!(
        s.contains("GPU 0  NVIDIA H100 80GB HBM3  GPU-5f3b6c1e"),
        "{s}"
    );
    // 540 MiB reserve + 10 GiB + 2 GiB (+ a few ms of growth) of 79.65 GiB.
    assert!(s.contains("/ 79.65 GiB used"), "{s}");
    assert!(s.contains("util 87%   temp 54 °C   power 412.0 W"), "{s}");
    assert!(s.contains("(not in this PID namespace)"), "{s}");
    // 540 MiB outside the processes, less what process 1 grew (100 MiB/s)
    // between the memory call and the process call: the two NVML calls are
    // not one atomic read, on the real driver either.
    let outside: f64 = s
        .lines()
        .find_map(|l| l.trim().strip_prefix('(')?.split_once(" MiB used outside"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no 'used outside' line in {s}"));
    assert!((520.0..=540.0).contains(&outside), "{outside} in {s}");
    // Free is total − the driver's reserve − used, and the reserve is named.
    assert!(s.contains(", 488.00 MiB reserved by the driver"), "{s}");
}

#[test]
fn json_lines_follow_the_contract() {
    let d = Driver::new();
    let o = d.run(
        "leak.json",
        &["--format", "json", "--interval", "100ms", "--count", "3"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let samples = lines_json(&o);
    assert_eq!(samples.len(), 3);
    let s = &samples[2];
    let raw = stdout(&o);
    let line = raw.lines().nth(2).unwrap();
    assert_key_order(line, 0, &["version", "time", "gpus"]);
    assert_eq!(s.as_object().unwrap().len(), 3);
    assert_eq!(s["version"], 2);
    let time = s["time"].as_str().unwrap();
    assert!(
        time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
        "{time}"
    );
    let g = &s["gpus"][0];
    assert_eq!(g.as_object().unwrap().len(), 16);
    assert_key_order(
        line,
        0,
        &[
            "index",
            "mig",
            "name",
            "uuid",
            "memory_source",
            "memory_total_bytes",
            "memory_used_bytes",
            "utilization_pct",
            "temperature_c",
            "power_w",
            "growth_bytes_per_s",
            "oom_eta_s",
            "forecast",
            "error",
            "refused",
            "processes",
        ],
    );
    assert!(g["mig"].is_null());
    assert_eq!(g["memory_source"], "nvml");
    assert_eq!(g["refused"], serde_json::json!([]));
    assert_eq!(g["memory_total_bytes"], 85520809984u64);
    assert_eq!(g["utilization_pct"], 87);
    assert_eq!(g["power_w"], 412.0);
    // Three samples are too few for a slope: null, never zero.
    assert!(g["growth_bytes_per_s"].is_null());
    let p = &g["processes"][0];
    assert_eq!(p.as_object().unwrap().len(), 8);
    let procs_at = line.find("\"processes\":").unwrap();
    assert_key_order(
        line,
        procs_at,
        &[
            "pid",
            "container_pid",
            "user",
            "command",
            "used_bytes",
            "growth_bytes_per_s",
            "oom_eta_s",
            "forecast",
        ],
    );
    assert_eq!(p["pid"], 1);
    assert!(p["command"].is_string());
    let hidden = &g["processes"][1];
    assert_eq!(hidden["pid"], 4000000);
    assert!(hidden["command"].is_null() && hidden["user"].is_null());
    assert_eq!(hidden["used_bytes"], 2147483648u64);
}

#[test]
fn forecast_matches_the_scenario_growth() {
    // leak.json: PID 1 grows 100 MiB/s; PID 4000000 is flat.
    let d = Driver::new();
    let o = d.run(
        "leak.json",
        &["--format", "json", "--interval", "100ms", "--count", "15"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let last = lines_json(&o).pop().unwrap();
    let g = &last["gpus"][0];
    let rate = g["growth_bytes_per_s"].as_f64().unwrap();
    let want = 100.0 * 1048576.0;
    assert!((rate - want).abs() / want < 0.02, "rate {rate}");
    let used = g["memory_used_bytes"].as_f64().unwrap();
    let total = g["memory_total_bytes"].as_f64().unwrap();
    let eta = g["oom_eta_s"].as_f64().unwrap();
    // leak.json: the driver reserves 488 MiB, which is never free.
    let expected = (total - 511705088.0 - used) / want;
    assert!(
        (eta - expected).abs() / expected < 0.02,
        "eta {eta} vs {expected}"
    );
    // The evidence: 10 MiB steps every 100 ms.
    let f = &g["forecast"];
    let frate = f["growth_bytes_per_s"].as_f64().unwrap();
    assert!((frate - want).abs() / want < 0.05, "forecast rate {frate}");
    assert!(f["steps"].as_u64().unwrap() >= 3, "{f}");
    assert!(f["regime_s"].as_f64().unwrap() > 0.5, "{f}");
    let leak = &g["processes"][0];
    assert_eq!(leak["pid"], 1);
    let prate = leak["growth_bytes_per_s"].as_f64().unwrap();
    assert!((prate - want).abs() / want < 0.02, "process rate {prate}");
    assert!(leak["oom_eta_s"].as_f64().is_some());
    let flat = &g["processes"][1];
    assert_eq!(flat["growth_bytes_per_s"].as_f64(), Some(0.0));
    assert!(flat["oom_eta_s"].is_null());
    // And the human view says it in words.
    let o = d.run("leak.json", &["--interval", "100ms", "--count", "8"]);
    let s = stdout(&o);
    let last_block = s.rsplit("\n\n").next().unwrap();
    assert!(last_block.contains("growth   +"), "{last_block}");
    assert!(
        last_block.contains("forecast out of memory in"),
        "{last_block}"
    );
    assert!(last_block.contains(" steps over "), "{last_block}");
    assert!(
        last_block.contains("GiB/min"),
        "100 MiB/s is 5.86 GiB/min: {last_block}"
    );
}

#[test]
fn unsupported_fields_are_null_not_zero() {
    let d = Driver::new();
    let o = d.run("unsupported.json", &["--format", "json", "--once"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = &lines_json(&o)[0];
    let g = &s["gpus"][0];
    for k in ["utilization_pct", "temperature_c", "power_w"] {
        assert!(g[k].is_null(), "{k}: {g}");
    }
    assert!(g["error"].is_null());
    // A graphics context whose size the driver cannot give (WDDM-style).
    let gfx = g["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 1)
        .unwrap();
    assert!(gfx["used_bytes"].is_null(), "{gfx}");
    let o = d.run("unsupported.json", &["--once"]);
    let text = stdout(&o);
    assert!(text.contains("util n/a   temp n/a   power n/a"), "{text}");
    assert!(text.contains("n/a  "), "{text}");
}

#[test]
fn csv_has_one_row_per_gpu_per_sample() {
    let d = Driver::new();
    let o = d.run(
        "lost.json",
        &["--format", "csv", "--interval", "100ms", "--count", "2"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 1 + 2 * 2, "{s}");
    assert!(lines[0].starts_with("time,gpu,uuid,name,memory_used_bytes,memory_total_bytes"));
    assert!(
        lines[1].contains(",0,GPU-00000000-0000-0000-0000-00000000000a,NVIDIA A100-SXM4-40GB,")
    );
    assert!(lines[1].contains(",42949672960,12,33,61,"), "{}", lines[1]);
}

#[test]
fn lost_gpu_carries_the_error_and_the_others_go_on() {
    let d = Driver::new();
    let o = d.run(
        "lost.json",
        &["--format", "json", "--interval", "100ms", "--count", "8"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let samples = lines_json(&o);
    let first = &samples[0]["gpus"][1];
    assert!(first["error"].is_null(), "{first}");
    assert_eq!(first["memory_used_bytes"], 445644800u64 + 30064771072);
    let last = &samples[7]["gpus"];
    assert!(last[1]["error"].as_str().unwrap().contains("GPU is lost"));
    // The lost GPU keeps the name and UUID seen before, and no made-up figures.
    assert_eq!(last[1]["name"], "NVIDIA A100-SXM4-40GB");
    assert_eq!(last[1]["uuid"], "GPU-00000000-0000-0000-0000-00000000000b");
    assert!(last[1]["memory_used_bytes"].is_null());
    assert!(last[0]["error"].is_null());
    assert_eq!(last[0]["memory_used_bytes"], 445644800u64 + 1073741824);
}

#[test]
fn log_appends_whole_lines_and_rotates() {
    let d = Driver::new();
    let log = d.dir.path().join("gpu.jsonl");
    let log_arg = log.to_str().unwrap();
    let o = d.run(
        "leak.json",
        &[
            "--format",
            "csv",
            "--interval",
            "50ms",
            "--count",
            "40",
            "--log",
            log_arg,
            "--log-max-size",
            "8KiB",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cur = std::fs::read_to_string(&log).unwrap();
    let old = std::fs::read_to_string(format!("{log_arg}.1")).unwrap();
    let mut n = 0;
    for text in [&old, &cur] {
        assert!(text.len() <= 8192);
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["version"], 2);
            n += 1;
        }
    }
    assert!(n > 0 && n <= 40, "{n}");
    // Appends to what is there.
    let before = cur.lines().count();
    let o = d.run(
        "leak.json",
        &["--once", "--format", "json", "--log", log_arg],
    );
    assert_eq!(o.status.code(), Some(0));
    let after = std::fs::read_to_string(&log).unwrap().lines().count();
    assert!(after == before + 1 || after == 1, "{before} -> {after}");
}

/// Starts the monitor with `--prometheus` on a free loopback port, waits
/// `after`, scrapes `/metrics` once, then stops it with SIGTERM.
fn scrape(d: &Driver, scenario: &str, after: Duration) -> (String, Output) {
    scrape_with(d, scenario, after, &["--prometheus", "127.0.0.1:0"])
}

/// Runs the monitor with `extra` (which starts the server), scrapes
/// `/metrics` once after `after`, and stops it with SIGTERM.
pub(crate) fn scrape_with(
    d: &Driver,
    scenario: &str,
    after: Duration,
    extra: &[&str],
) -> (String, Output) {
    let mut args = vec!["--format", "json", "--interval", "100ms"];
    args.extend_from_slice(extra);
    let mut child = d.cmd(scenario, &args).spawn().expect("test setup");
    let err = child.stderr.take().expect("test setup");
    let mut lines = BufReader::new(err).lines();
    let first = lines.next().expect("a first line").expect("a first line");
    let url = first
        .split("http://")
        .nth(1)
        .unwrap_or_else(|| panic!("{first}"));
    let addr = url.trim_end_matches("/metrics").to_owned();
    std::thread::sleep(after);
    let mut body = String::new();
    let mut s = TcpStream::connect(&addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("test setup");
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    s.read_to_string(&mut body).expect("response");
    // SIGTERM ends it cleanly.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("kill");
    (body, wait_limited(child, Duration::from_secs(10)))
}

#[test]
fn prometheus_metrics_scraped_over_loopback() {
    let d = Driver::new();
    // Let a few samples in so growth appears.
    let (body, out) = scrape(&d, "leak.json", Duration::from_millis(900));
    assert_eq!(out.status.code(), Some(0));
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("text/plain; version=0.0.4"), "{body}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let labels = format!(
        "gpu=\"0\",UUID=\"GPU-5f3b6c1e-8d2a-4c7e-9b1f-0a2d3e4f5a6b\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"{}\"",
        host.trim()
    );
    assert!(
        body.contains(&format!(
            "oomkit_gpu_memory_total_bytes{{{labels}}} 85520809984\n"
        )),
        "{body}"
    );
    assert!(body.contains(&format!("oomkit_gpu_utilization_ratio{{{labels}}} 0.87\n")));
    assert!(body.contains(&format!("oomkit_gpu_memory_used_bytes{{{labels}}} ")));
    assert!(body.contains(&format!(
        "oomkit_process_gpu_memory_bytes{{{labels},pid=\"4000000\"}} 2147483648\n"
    )));
    // No command lines unless asked for.
    assert!(!body.contains("command="), "{body}");
    assert!(body.contains("oomkit_process_gpu_memory_growth_bytes_per_second{"));
    assert!(body.contains("# TYPE oomkit_gpu_memory_used_bytes gauge"));
    let growth = body
        .lines()
        .find(|l| l.starts_with("oomkit_gpu_memory_growth_bytes_per_second{"))
        .unwrap();
    let v: f64 = growth.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((v - 104857600.0).abs() / 104857600.0 < 0.02, "{growth}");
    // The JSON lines kept coming while it served.
    assert!(lines_json(&out).len() >= 5);
}

#[test]
fn prometheus_reports_a_lost_gpu_as_down() {
    let d = Driver::new();
    // lost.json: GPU 1 falls off the bus 0.35 s after start.
    let (body, out) = scrape(&d, "lost.json", Duration::from_millis(900));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let up = |gpu: &str, uuid: &str| {
        format!(
            "oomkit_gpu_up{{gpu=\"{gpu}\",UUID=\"GPU-00000000-0000-0000-0000-00000000000{uuid}\",modelName=\"NVIDIA A100-SXM4-40GB\",Hostname=\"{}\"}}",
            host.trim()
        )
    };
    assert!(body.contains(&format!("{} 1\n", up("0", "a"))), "{body}");
    assert!(body.contains(&format!("{} 0\n", up("1", "b"))), "{body}");
}

#[test]
fn alert_at_an_absolute_size() {
    let d = Driver::new();
    // GPU 1 holds 28.42 GiB, GPU 0 1.4 GiB: only GPU 1 crosses 28 GiB.
    let o = d.run(
        "lost.json",
        &["--format", "json", "--count", "1", "--alert-at", "28GiB"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("warning: GPU").count(), 1, "{err}");
    assert!(
        err.contains("warning: GPU 1 (NVIDIA A100-SXM4-40GB)"),
        "{err}"
    );
}

#[test]
fn a_process_with_compute_and_graphics_contexts_is_listed_once() {
    let d = Driver::new();
    let scenario = d.dir.path().join("both.json");
    std::fs::write(
        &scenario,
        r#"{"driver_version": "580.65.06", "devices": [{
            "name": "NVIDIA RTX 6000 Ada Generation",
            "uuid": "GPU-00000000-0000-0000-0000-0000000000c0",
            "total_bytes": 51527024640, "base_used_bytes": 445644800,
            "processes": [
                {"pid": 4000002, "used_bytes": 2147483648},
                {"pid": 4000002, "used_bytes": 2147483648, "kind": "graphics"},
                {"pid": 4000003, "used_bytes": 1073741824, "kind": "graphics"}
            ]}]}"#,
    )
    .expect("test setup");
    let o = d.run(
        scenario.to_str().expect("utf-8 path"),
        &["--format", "json", "--count", "1"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = lines_json(&o);
    let procs = v[0]["gpus"][0]["processes"].as_array().unwrap();
    let pids: Vec<u64> = procs.iter().map(|p| p["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids, vec![4000002, 4000003], "{procs:?}");
    assert_eq!(procs[0]["used_bytes"], 2147483648u64);
}

#[test]
fn alert_fires_once_per_gpu_and_runs_the_command() {
    let d = Driver::new();
    let mark = d.dir.path().join("alerts.txt");
    let cmd = format!(
        "echo \"$OOMKIT_ALERT_GPU $OOMKIT_ALERT_USED_BYTES $OOMKIT_ALERT_TOTAL_BYTES\" >> '{}'",
        mark.display()
    );
    let o = d.run(
        "lost.json",
        &[
            "--format",
            "json",
            "--interval",
            "50ms",
            "--count",
            "4",
            "--alert-at",
            "50%",
            "--alert-cmd",
            &cmd,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    // GPU 1 holds 28.42 GiB of 40 GiB (71 %); GPU 0 3.4 %.
    assert_eq!(err.matches("warning: GPU").count(), 1, "{err}");
    assert!(
        err.contains("warning: GPU 1 (NVIDIA A100-SXM4-40GB) memory at 71.0%"),
        "{err}"
    );
    let start = Instant::now();
    let text = loop {
        let t = std::fs::read_to_string(&mark).unwrap_or_default();
        if !t.is_empty() || start.elapsed() > Duration::from_secs(10) {
            break t;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(text, "1 30510415872 42949672960\n");
}

#[test]
fn faults_give_one_line_and_exit_2() {
    let d = Driver::new();
    for (scenario, needle) in [
        (
            "no-permission.json",
            "permission denied by the NVIDIA driver",
        ),
        ("driver-not-loaded.json", "the NVIDIA driver is not loaded"),
    ] {
        d.cli(scenario, &["--once"])
            .run()
            .code(2)
            .one_error_line()
            .stderr_has(&format!("error: {needle}"))
            .stdout_is("");
        let v = d
            .cli(scenario, &["--format", "json", "--count", "3"])
            .run()
            .code(2)
            .json();
        assert_eq!(v["version"], 2);
        assert!(v["error"].as_str().unwrap().contains(needle), "{v}");
    }
}

#[test]
fn no_library_says_what_to_do() {
    // Only meaningful where no real driver is installed (CI, this machine).
    let has_real = Command::new("sh")
        .args(["-c", "ldconfig -p 2>/dev/null | grep -q libnvidia-ml.so.1"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if has_real {
        eprintln!("skipped: a real libnvidia-ml.so.1 is installed");
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    cli(&["monitor", "--once"])
        .env("LD_LIBRARY_PATH", empty.path())
        .run()
        .code(2)
        .stderr_one_line()
        .stderr_has("cannot load libnvidia-ml.so.1")
        .stderr_has("LD_LIBRARY_PATH");
}

#[test]
fn bad_arguments_exit_2() {
    let d = Driver::new();
    let base = d.cli("leak.json", &["--once"]);
    exit_2_says(
        &base,
        &[
            (&["--interval", "10ms"], "shorter than 50ms"),
            (&["--interval", "soon"], "invalid duration \"soon\""),
            (&["--alert-at", "150%"], "must be in (0, 100]"),
            (&["--alert-at", "95"], "95%"),
            (&["--window", "0s"], "invalid duration \"0s\""),
            (&["--log-max-size", "12"], "too small"),
            (&["--prometheus", "not-an-address"], "not-an-address"),
        ],
    );
    // Refused by the argument parser (usage errors are several lines).
    exit_2_usage(
        &base,
        &[
            (&["--alert-cmd", "true"], "--alert-at"),
            (&["--count", "0"], "--count"),
        ],
    );
}

/// `oomkit monitor --interval 100ms MARKER` on a pseudo-terminal made by
/// `script` (30 × 120; a pty made from a pipe has no size), keys fed through
/// its stdin, once the monitor process itself is up and has had a second to
/// enter raw mode and draw. Returns the child (`script`), its stdin, and the
/// `pgrep -f` pattern of the monitor (anchored at the binary, so the `sh -c`
/// that execs it, whose command line also holds the marker, never matches).
/// `None` when `script` or procps is missing here (the test is skipped).
#[allow(clippy::print_stderr)] // a skipped test says why, as the #[test]s do
fn tui_on_a_pty(
    d: &Driver,
    marker: &str,
) -> Option<(std::process::Child, std::process::ChildStdin, String)> {
    if ["script", "pgrep", "pkill"]
        .iter()
        .any(|t| Command::new(t).arg("--version").output().is_err())
    {
        eprintln!("skipped: no `script` (util-linux) or `pgrep`/`pkill` (procps) here");
        return None;
    }
    let bin = env!("CARGO_BIN_EXE_oomkit");
    let monitor = format!("{bin} monitor --interval 100ms {marker}");
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!(
            "stty rows 30 cols 120; exec {}",
            monitor.trim_end()
        ))
        .arg("/dev/null")
        .env("LD_LIBRARY_PATH", d.dir.path())
        .env("OOMKIT_NVML_SCENARIO", scenario_path("demo.json"))
        .env("TERM", "xterm-256color")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn script");
    let keys = child.stdin.take().expect("stdin");
    let pattern = format!("^{}$", monitor.trim_end());
    wait_for_process(&pattern);
    std::thread::sleep(Duration::from_millis(1000));
    Some((child, keys, pattern))
}

#[test]
fn tui_runs_on_a_real_terminal_and_quits_on_q() {
    // `script` gives the monitor a pseudo-terminal; its stdin (a pipe) feeds keys.
    let d = Driver::new();
    let Some((child, mut keys, _)) = tui_on_a_pty(&d, "") else {
        return;
    };
    keys.write_all(b"q").unwrap();
    keys.flush().unwrap();
    let o = wait_limited(child, Duration::from_secs(20));
    drop(keys);
    let screen = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{screen}{}", stderr(&o));
    assert!(screen.contains("oomkit monitor"), "{screen}");
    // Words are placed with cursor moves, so check them one by one.
    for word in [
        "GPU-5f3b6c1e-8d2a-4c7e-9b1f-0a2d3e4f5a6b",
        "HBM3",
        "79.65 GiB",
        "PID",
    ] {
        assert!(screen.contains(word), "{word}: {screen}");
    }
    // The alternate screen was left (terminal restored).
    assert!(screen.contains("\x1b[?1049l"), "{screen:?}");
}

/// A scenario where the process is whatever PID `pid_file` holds: 1 GiB at
/// first, growing 256 MiB/s; PID 1 (outside any test's tree) holds 40 GiB, so
/// counting it by mistake cannot hide under timing noise.
fn tree_scenario(dir: &Path, pid_file: &Path) -> PathBuf {
    let path = dir.join("tree.json");
    let s = serde_json::json!({
        "devices": [{
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-tree",
            "total_bytes": 85520809984u64,
            "processes": [
                { "pid_file": pid_file, "used_bytes": 1073741824u64, "growth_bytes_per_s": 268435456.0 },
                { "pid": 1, "used_bytes": 42949672960u64 }
            ]
        }]
    });
    std::fs::write(&path, s.to_string()).expect("write scenario");
    path
}

#[test]
fn run_samples_the_process_tree_through_nvml() {
    let d = Driver::new();
    let pid_file = d.dir.path().join("helper.pid");
    let scenario = tree_scenario(d.dir.path(), &pid_file);
    let fake = crate::probe::probe_fixtures().join("fake_train.py");
    let log = crate::fixtures().join("real/002.txt");
    // The GPU process is the script's helper (a child): the tree, not just the PID.
    let o = oomkit()
        .env("LD_LIBRARY_PATH", d.dir.path())
        .env("OOMKIT_NVML_SCENARIO", &scenario)
        .args(["run", "--", crate::probe::python()])
        .arg(&fake)
        .args([
            "--batch",
            "8",
            "--threshold",
            "4",
            "--leak",
            "5",
            "--step-seconds",
            "0.3",
        ])
        .arg("--helper")
        .arg(&pid_file)
        .arg("--oom-log")
        .arg(&log)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("NVML sample(s) of the GPU memory of the command's process tree"),
        "{err}"
    );
    assert!(err.contains("memory climbed steadily: +"), "{err}");
    assert!(err.contains(" per sample ("), "{err}");
    assert!(!err.contains("figure(s) the program printed"), "{err}");
    // PID 1's 40 GiB is not in the tree and must not be counted: the last
    // sample is the tree's 1 GiB plus its growth.
    let last = err
        .split(" per sample (")
        .nth(1)
        .and_then(|s| s.split(" → ").nth(1))
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!((1.0..40.0).contains(&last), "{err}");
}

#[test]
fn probe_reports_nvml_peaks_per_trial() {
    let d = Driver::new();
    let pid_file = d.dir.path().join("trial.pid");
    let scenario = tree_scenario(d.dir.path(), &pid_file);
    let fake = crate::probe::probe_fixtures().join("fake_train.py");
    let log = crate::fixtures().join("real/002.txt");
    let o = oomkit()
        .env("LD_LIBRARY_PATH", d.dir.path())
        .env("OOMKIT_NVML_SCENARIO", &scenario)
        .args([
            "probe", "--min", "1", "--max", "4", "--format", "json", "--",
        ])
        .arg(crate::probe::python())
        .arg(&fake)
        .args([
            "--batch",
            "{batch}",
            "--threshold",
            "2",
            "--leak",
            "2",
            "--step-seconds",
            "0.4",
        ])
        .arg("--pidfile")
        .arg(&pid_file)
        .arg("--oom-log")
        .arg(&log)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["max_batch"], 2);
    let trials = v["trials"].as_array().unwrap();
    assert!(!trials.is_empty());
    for t in trials {
        let peak = t["gpu_peak_bytes"]
            .as_u64()
            .unwrap_or_else(|| panic!("{t}"));
        // 1 GiB and growing; never PID 1's 40 GiB.
        assert!((1u64 << 30..40u64 << 30).contains(&peak), "{t}");
    }
}

#[test]
fn tui_restores_the_terminal_on_sigterm() {
    let d = Driver::new();
    // A window value no other test uses, to find this monitor's PID.
    let Some((child, keys, pattern)) = tui_on_a_pty(&d, "--window 61s") else {
        return;
    };
    let killed = Command::new("pkill")
        .args(["-TERM", "-f", &pattern])
        .status()
        .unwrap();
    assert!(killed.success(), "no monitor process found");
    let o = wait_limited(child, Duration::from_secs(20));
    drop(keys);
    let screen = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{screen}");
    assert!(
        screen.contains("\x1b[?1049h"),
        "entered the alternate screen"
    );
    // Left the alternate screen and showed the cursor again.
    let end = screen.rfind("\x1b[?1049l").expect("alternate screen left");
    assert!(screen[end..].contains("\x1b[?25h"), "{:?}", &screen[end..]);
}

#[test]
fn docs_list_exactly_the_metrics_served() {
    let readme = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/monitor.md"),
    )
    .unwrap();
    let section = readme
        .split("## Prometheus (`--prometheus ADDR`)")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let documented: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `oomkit_"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let served: Vec<String> = oomkit_monitor::prometheus::METRICS
        .iter()
        .map(|(name, _, _)| name.trim_start_matches("oomkit_").to_owned())
        .collect();
    assert_eq!(documented, served);
}

#[test]
fn tui_exits_when_its_terminal_goes_away() {
    // An SSH drop or `tmux kill-session`: the pty's master side closes under the
    // monitor. It must exit, not spin on the dead terminal (crossterm's reader
    // busy-loops on a hung-up tty; the monitor must not wait inside it).
    let d = Driver::new();
    let Some((mut child, keys, pattern)) = tui_on_a_pty(&d, "--window 62s") else {
        return;
    };
    // Close the master side: kill `script` outright.
    child.kill().unwrap();
    let _ = child.wait();
    drop(keys);
    let start = Instant::now();
    let gone = loop {
        let alive = Command::new("pgrep")
            .args(["-f", &pattern])
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        if !alive {
            break true;
        }
        if start.elapsed() > Duration::from_secs(15) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !gone {
        let _ = Command::new("pkill").args(["-9", "-f", &pattern]).status();
    }
    assert!(gone, "the monitor outlived its terminal");
}
