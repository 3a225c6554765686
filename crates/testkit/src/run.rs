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
    // Plan and apply read the charts' indexes on the Internet unless told otherwise: not in tests
    // (a test that checks pins serves them from loopback with `fabric_in_env`).
    c.env("FABRIC_CHART_INDEXES", "off");
    // Tests reach loopback and the lab's hosts only: no proxy a machine's environment names may
    // carry a fetch elsewhere.
    for v in ["ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        c.env_remove(v);
    }
    c
}

/// Runs `fabric` (see [`command`]) to its end.
pub fn fabric_in(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str]) -> Output {
    command(dir, topology, ssh_config, args).output().expect("run fabric")
}

/// `fabric_in` with more environment variables (set after the defaults, so they win).
pub fn fabric_in_env(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command(dir, topology, ssh_config, args);
    c.envs(env.iter().copied());
    c.output().expect("run fabric")
}

/// `fabric_in`, started and left running (to be signalled), its output piped.
pub fn fabric_spawn(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str]) -> std::process::Child {
    command(dir, topology, ssh_config, args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fabric")
}

/// `fabric` (see [`command`]) at a terminal, as an operator runs it: its stdin, stdout and stderr
/// a pseudo-terminal made by util-linux's `script`, `answer` typed at its prompt. The output is
/// the terminal's (stdout and stderr together, the typed answer echoed), its `\r\n` made `\n`.
pub fn fabric_at_terminal(dir: &Path, topology: &Path, ssh_config: &Path, args: &[&str], answer: &str) -> Output {
    use std::io::Write as _;
    let inner = command(dir, topology, ssh_config, args);
    let quote = |a: &std::ffi::OsStr| format!("'{}'", a.to_string_lossy().replace('\'', r"'\''"));
    let line: Vec<String> = std::iter::once(inner.get_program()).chain(inner.get_args()).map(quote).collect();
    let mut c = Command::new("script");
    c.args(["-qec", &line.join(" "), "/dev/null"]).current_dir(dir);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fabric under script(1) (util-linux)");
    child.stdin.take().expect("piped").write_all(format!("{answer}\n").as_bytes()).expect("type the answer");
    let mut o = child.wait_with_output().expect("run fabric under script(1)");
    o.stdout = String::from_utf8_lossy(&o.stdout).replace("\r\n", "\n").into_bytes();
    o
}

/// stdout, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout and stderr together, for assertions and failure messages.
pub fn out(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A `fabric` run started with the test hook `FABRIC_TEST_PAUSE=<point>:<seconds>` (see
/// `fabric::apply::pause`): it stops at `point` and says so on stderr, and the test acts there.
pub struct Paused {
    child: std::process::Child,
    reached: std::sync::mpsc::Receiver<()>,
    stderr: std::thread::JoinHandle<String>,
}

/// Starts `fabric` (see [`command`]) to pause `seconds` at `point`.
pub fn fabric_paused(
    dir: &Path,
    topology: &Path,
    ssh_config: &Path,
    args: &[&str],
    point: &str,
    seconds: u32,
) -> Paused {
    use std::io::BufRead;
    let mut child = command(dir, topology, ssh_config, args)
        .env("FABRIC_TEST_PAUSE", format!("{point}:{seconds}"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fabric");
    let (tx, reached) = std::sync::mpsc::channel();
    let err = child.stderr.take().expect("piped stderr");
    let marker = format!("fabric: test pause at {point}");
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if line == marker {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    Paused { child, reached, stderr }
}

impl Paused {
    /// Waits until the run is paused at its point; false if it ended or took `within` first.
    pub fn wait_for_pause(&self, within: std::time::Duration) -> bool {
        self.reached.recv_timeout(within).is_ok()
    }

    /// SIGKILL: no handler of the run gets to act.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// SIGINT, as Ctrl-C at the operator's terminal sends it.
    pub fn interrupt(&self) {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill").args(["-INT", &pid]).status().is_ok_and(|s| s.success());
        assert!(ok, "kill -INT {pid}");
    }

    /// Waits for the run's end: its output, stderr included.
    pub fn finish(mut self) -> Output {
        use std::io::Read;
        let mut stdout = Vec::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_end(&mut stdout);
        }
        let status = self.child.wait().expect("wait for fabric");
        let stderr = self.stderr.join().unwrap_or_default().into_bytes();
        Output { status, stdout, stderr }
    }
}
