//! `oomkit monitor` on the GPUs people run, through the real binary and the
//! stand-in NVML library: a refused process list, unified memory, a child PID
//! namespace; `/metrics` privacy, address and DCGM labels (checked by the real
//! `promtool` where installed); `--alert-at` units.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::monitor::{Driver, lines_json, scrape_with, wait_limited};
use crate::support::{cli, exit_2_says};
use crate::{stderr, stdout};

#[test]
fn a_refused_process_list_keeps_the_row_the_forecast_and_up() {
    // refused-processes.json: the process list answers NO_PERMISSION (a
    // non-root user on a MIG parent, some containers); memory is read and a
    // process behind it leaks 100 MiB/s.
    let d = Driver::new();
    let o = d.run(
        "refused-processes.json",
        &["--format", "json", "--interval", "100ms", "--count", "10"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let last = lines_json(&o).pop().unwrap();
    let g = &last["gpus"][0];
    assert!(g["error"].is_null(), "{g}");
    assert_eq!(
        g["refused"],
        serde_json::json!(["processes: Insufficient Permissions"])
    );
    assert_eq!(g["memory_total_bytes"], 85899345920u64);
    assert_eq!(g["utilization_pct"], 63);
    assert!(g["oom_eta_s"].as_f64().is_some(), "forecast kept: {g}");
    assert_eq!(g["processes"], serde_json::json!([]));
    // The text says which query was refused, and goes on.
    let o = d.run("refused-processes.json", &["--once"]);
    let text = stdout(&o);
    assert!(
        text.contains("refused: processes: Insufficient Permissions"),
        "{text}"
    );
    assert!(text.contains("util 63%"), "{text}");
    // And Prometheus sees the GPU up, with its memory.
    let (body, out) = scrape_with(
        &d,
        "refused-processes.json",
        Duration::from_millis(300),
        &["--prometheus", "127.0.0.1:0"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let up = body
        .lines()
        .find(|l| l.starts_with("oomkit_gpu_up{"))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(up.ends_with(" 1"), "{up}");
    assert!(body.contains("oomkit_gpu_memory_used_bytes{"), "{body}");
}

#[test]
fn unified_memory_reads_the_host_memory_and_says_so() {
    // unified-memory.json: a GB10 whose NVML answers "Not Supported" for memory.
    let d = Driver::new();
    let o = d.run("unified-memory.json", &["--format", "json", "--once"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let g = &lines_json(&o)[0]["gpus"][0];
    assert!(g["error"].is_null(), "{g}");
    assert_eq!(g["memory_source"], "system");
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert_eq!(g["memory_total_bytes"], kib * 1024);
    let used = g["memory_used_bytes"].as_u64().unwrap();
    assert!(used > 0 && used < kib * 1024, "{g}");
    let o = d.run("unified-memory.json", &["--once"]);
    let text = stdout(&o);
    assert!(
        text.contains("(unified memory: the host's, from /proc/meminfo)"),
        "{text}"
    );
}

#[test]
fn in_a_child_pid_namespace_a_host_pid_is_never_named_from_proc() {
    // container.json lists PID 1 (a host PID) with NVML's name
    // /usr/bin/python3. In a new PID namespace, PID 1 here is oomkit itself:
    // naming the process from /proc/1 would call it "oomkit monitor".
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot create a PID namespace here (unshare needs root)");
        return;
    }
    let d = Driver::new();
    let cmd = d.cmd("container.json", &["--format", "json", "--once"]);
    // Same environment and arguments, run under unshare.
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let envs: Vec<_> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(program)
        .args(args)
        .envs(envs)
        .current_dir(d.dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    drop(cmd);
    let o = wait_limited(wrapped.spawn().unwrap(), Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = &lines_json(&o)[0]["gpus"][0]["processes"][0];
    assert_eq!(p["pid"], 1);
    assert_eq!(p["command"], "/usr/bin/python3", "{p}");
    assert!(p["user"].is_null(), "{p}");
}

#[test]
fn metrics_carry_no_command_lines_unless_asked_and_pass_promtool() {
    let d = Driver::new();
    let (plain, out) = scrape_with(
        &d,
        "leak.json",
        Duration::from_millis(900),
        &["--prometheus", ":0"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!plain.contains("command="), "{plain}");
    for help in [
        "# HELP oomkit_gpu_memory_used_bytes GPU memory in use as NVML reports it, bytes (drivers >= 510: without the driver's reserve",
        "# HELP oomkit_gpu_up 1 when the GPU answered",
    ] {
        assert!(plain.contains(help), "{plain}");
    }
    let (with, _) = scrape_with(
        &d,
        "leak.json",
        Duration::from_millis(300),
        &["--prometheus", "127.0.0.1:0", "--metrics-command-lines"],
    );
    assert!(with.contains(",pid=\"4000000\",command=\"\"}"), "{with}");
    // The real promtool, where installed (CI installs it: OOMKIT_REQUIRE_PROMTOOL=1).
    let body = plain
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        assert!(
            std::env::var_os("OOMKIT_REQUIRE_PROMTOOL").is_none(),
            "promtool is required here but missing"
        );
        eprintln!("skipped promtool: not installed");
        return;
    };
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), body.as_bytes()).unwrap();
    let checked = child.wait_with_output().unwrap();
    // promtool's one style lint that DCGM exporter's label names (UUID,
    // modelName, Hostname; dcgm-exporter's own output draws it too) cannot
    // avoid; anything else — a parse error, a bad HELP or TYPE, a unit — fails.
    const CAMEL: &str = "label names should be written in 'snake_case' not 'camelCase'";
    let report = format!("{}{}", stdout(&checked), stderr(&checked));
    let other: Vec<&str> = report
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.ends_with(CAMEL))
        .collect();
    assert!(
        checked.status.success() || (!report.is_empty() && other.is_empty()),
        "promtool check metrics: {report}\n{body}"
    );
}

#[test]
fn prometheus_alone_serves_loopback_on_the_default_port() {
    let d = Driver::new();
    let child = d
        .cmd(
            "leak.json",
            &["--format", "json", "--count", "2", "--prometheus"],
        )
        .spawn()
        .unwrap();
    let o = wait_limited(child, Duration::from_secs(30));
    let err = stderr(&o);
    if err.contains("Address already in use") {
        eprintln!("skipped: port 19180 is taken on this machine");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("serving Prometheus metrics on http://127.0.0.1:19180/metrics"),
        "{err}"
    );
}

#[test]
fn alert_at_needs_a_unit() {
    // Checked before the driver is opened: one error line, exit 2.
    exit_2_says(
        &cli(&["monitor", "--once"]),
        &[
            (&["--alert-at", "95"], "95%"),
            (&["--alert-at", "95"], "95GiB"),
            (&["--alert-at", "0.9"], "--alert-at"),
            (&["--prometheus", "example"], "--prometheus"),
        ],
    );
    // A size with a unit still works.
    let d = Driver::new();
    let o = d.run("leak.json", &["--once", "--alert-at", "70GiB"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn deploy_files_name_only_metrics_and_labels_that_are_served() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let served: Vec<&str> = oomkit_monitor::prometheus::METRICS
        .iter()
        .map(|(name, _, _)| *name)
        .collect();
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("grafana/oomkit-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect();
    assert!(exprs.len() >= 6);
    let rules = std::fs::read_to_string(root.join("prometheus/oomkit-rules.yml")).unwrap();
    exprs.extend(
        rules
            .lines()
            .filter_map(|l| l.trim().strip_prefix("expr: "))
            .map(str::to_owned),
    );
    for e in &exprs {
        for word in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("oomkit_") {
                assert!(served.contains(&word), "{word} in {e} is not served");
            }
        }
    }
    // Labels the rules use are the ones /metrics carries.
    for label in [
        "$labels.Hostname",
        "$labels.UUID",
        "$labels.modelName",
        "$labels.gpu",
    ] {
        assert!(rules.contains(label), "{label}");
    }
    let daemonset = std::fs::read_to_string(root.join("kubernetes/oomkit-daemonset.yaml")).unwrap();
    assert!(
        daemonset.contains("fieldPath: spec.nodeName")
            && daemonset.contains("--prometheus=0.0.0.0:19180")
    );
    let unit = std::fs::read_to_string(root.join("systemd/oomkit-monitor.service")).unwrap();
    assert!(unit.contains("--prometheus 127.0.0.1:19180"));
}

#[test]
fn a_driver_older_than_510_falls_back_to_the_first_memory_query() {
    // pre-510.json: no nvmlDeviceGetMemoryInfo_v2; v1's used includes the
    // 300 MiB reserve. A process leaks 100 MiB/s.
    let d = Driver::new();
    let o = d.run(
        "pre-510.json",
        &["--format", "json", "--interval", "100ms", "--count", "10"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let samples = lines_json(&o);
    let g = &samples[0]["gpus"][0];
    assert!(
        g["error"].is_null() && g["refused"] == serde_json::json!([]),
        "{g}"
    );
    assert_eq!(g["memory_source"], "nvml_v1");
    assert_eq!(g["memory_total_bytes"], 34359738368u64);
    let used = g["memory_used_bytes"].as_u64().unwrap();
    // 8 GiB + 300 MiB reserve (+ a few ms of growth).
    assert!(
        (8589934592 + 314572800..8589934592 + 314572800 + 50 * 1048576).contains(&used),
        "{used}"
    );
    assert!(samples[9]["gpus"][0]["oom_eta_s"].as_f64().is_some());
    let o = d.run("pre-510.json", &["--once"]);
    assert!(
        stdout(&o).contains("(driver < 510: used includes the driver's reserve)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn mig_instances_are_rows_under_their_parent_even_when_it_refuses() {
    // mig.json: the parent A100 refuses memory and processes (a container
    // given MIG slices); its two 3g.40gb instances answer, one leaking 50 MiB/s.
    let d = Driver::new();
    let o = d.run(
        "mig.json",
        &["--format", "json", "--interval", "100ms", "--count", "10"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let last = lines_json(&o).pop().unwrap();
    let gpus = last["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 3, "{last}");
    let parent = &gpus[0];
    assert!(
        parent["mig"].is_null() && parent["error"].is_null(),
        "{parent}"
    );
    assert!(parent["memory_used_bytes"].is_null());
    assert_eq!(
        parent["refused"],
        serde_json::json!([
            "memory: Insufficient Permissions",
            "processes: Insufficient Permissions"
        ])
    );
    for (m, g) in gpus[1..].iter().enumerate() {
        assert_eq!(g["index"], 0);
        assert_eq!(g["mig"], m);
        assert!(g["uuid"].as_str().unwrap().starts_with("MIG-"), "{g}");
        assert_eq!(g["memory_total_bytes"], 42144366592u64);
        assert_eq!(g["processes"].as_array().unwrap().len(), 1);
    }
    assert!(gpus[1]["oom_eta_s"].as_f64().is_some(), "{}", gpus[1]);
    assert!(gpus[2]["oom_eta_s"].is_null());
    let o = d.run("mig.json", &["--once"]);
    let text = stdout(&o);
    assert!(
        text.contains("GPU 0 MIG 1  NVIDIA A100-SXM4-80GB MIG 3g.40gb  MIG-00000000-0000-0000-0000-0000000000a2"),
        "{text}"
    );
    let (body, _) = scrape_with(
        &d,
        "mig.json",
        Duration::from_millis(300),
        &["--prometheus", "127.0.0.1:0"],
    );
    assert!(body.contains(",mig_index=\"1\"} "), "{body}");
    assert_eq!(body.matches("oomkit_gpu_up{").count(), 3, "{body}");
}
