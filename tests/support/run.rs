//! Running the `fabric` binary from integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// `fabric -f TOPOLOGY --ssh-config SSH_CONFIG ARGS…` in `dir`, without colors.
pub fn fabric_in(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fabric"))
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

/// stdout and stderr together, for assertions and failure messages.
pub fn out(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}
