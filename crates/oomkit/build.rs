//! Sets `OOMKIT_VERSION` for `oomkit --version`: the crate version, plus the
//! git commit when building from a checkout. Builds from a source archive or a
//! wheel's sdist (no `.git`) get the plain crate version; the variable is set
//! either way, so nothing here can fail the build.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=7", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit()));
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    match commit {
        Some(c) => println!("cargo:rustc-env=OOMKIT_VERSION={version} ({c})"),
        None => println!("cargo:rustc-env=OOMKIT_VERSION={version}"),
    }
    // Rebuild when HEAD moves (a commit or a checkout), not on every build.
    if let Ok(out) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
        && out.status.success()
        && let Ok(dir) = String::from_utf8(out.stdout)
    {
        let dir = dir.trim();
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/refs/heads");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
