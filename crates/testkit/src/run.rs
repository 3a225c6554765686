//! Running the `fabric` binary from integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `fabric` binary: Cargo sets `CARGO_BIN_EXE_fabric` when it runs a test or bench (`env!`
/// cannot see it: this crate is not built as one); a test run by hand looks beside its `deps/`.
fn fabric_bin() -> PathBuf {
    std::env::var_os("CARGO_BIN_EXE_fabric").map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("the running test's path");
        exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").join("fabric")
    })
}

/// `fabric -f TOPOLOGY --ssh-config SSH_CONFIG ARGS…` in `dir`, without colors.
pub fn fabric_in(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str]) -> Output {
    Command::new(fabric_bin())
        .arg("-f")
        .arg(topology)
        .arg("--ssh-config")
        .arg(ssh_config)
        .args(args)
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("run fabric")
}

/// `fabric_in`, started and left running (to be signalled), its output piped.
pub fn fabric_spawn(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str]) -> std::process::Child {
    Command::new(fabric_bin())
        .arg("-f")
        .arg(topology)
        .arg("--ssh-config")
        .arg(ssh_config)
        .args(args)
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fabric")
}

/// stdout and stderr together, for assertions and failure messages.
pub fn out(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}
