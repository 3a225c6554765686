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
fn command(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(fabric_bin());
    c.arg("-f").arg(topology).arg("--ssh-config").arg(ssh_config).args(args).env("NO_COLOR", "1").current_dir(dir);
    c
}

/// Runs `fabric` (see [`command`]) to its end.
pub fn fabric_in(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str]) -> Output {
    command(dir, topology, ssh_config, args).output().expect("run fabric")
}

/// `fabric_in`, started and left running (to be signalled), its output piped.
pub fn fabric_spawn(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str]) -> std::process::Child {
    command(dir, topology, ssh_config, args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fabric")
}

/// stdout and stderr together, for assertions and failure messages.
pub fn out(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}
