//! Flags every subcommand shares: the global ones, output formats, the step selection. Kept
//! apart from `cli` (which names every subcommand) so that subcommands import these without
//! importing each other.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

#[derive(Debug, Args)]
pub struct Global {
    /// Topology file [default: ./topology.yaml]
    #[arg(short = 'f', long = "topology", global = true, env = "FABRIC_TOPOLOGY", value_name = "FILE")]
    pub topology: Option<PathBuf>,
    /// Use the embedded example topology (the whole seed); only offline work is allowed with it
    #[arg(long, global = true, conflicts_with = "topology")]
    pub example: bool,
    /// ssh_config file for hosts' addresses, users, keys, known_hosts [default: ~/.ssh/config]
    #[arg(long, global = true, env = "FABRIC_SSH_CONFIG", value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// Directory for run journals [default: ./.fabric]
    #[arg(long, global = true, env = "FABRIC_STATE_DIR", value_name = "DIR", default_value = ".fabric")]
    pub state_dir: PathBuf,
    /// Never color output (NO_COLOR is honoured too)
    #[arg(long, global = true)]
    pub no_color: bool,
    /// More output: -v what was read and how long it took, -vv every resource's state
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less output: errors and the result only
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// Output formats shared by commands that machines read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people at a terminal (also spelled `text`)
    #[value(alias = "text")]
    Human,
    /// For machines (docs/plan-format.md for plans)
    Json,
    /// For pull-request comments
    Markdown,
}

/// The step selection shared by plan and apply.
#[derive(Debug, Clone, Args)]
pub struct SelectionArgs {
    /// Only steps of this phase (A, B, C, D, G); repeatable
    #[arg(long = "phase", value_name = "P")]
    pub phases: Vec<String>,
    /// Only this step (A.3) or step instance (A.3@sp); repeatable
    #[arg(long = "step", value_name = "S")]
    pub steps: Vec<String>,
    /// Only this site's steps and resources; repeatable
    #[arg(long = "site", value_name = "NAME")]
    pub sites: Vec<String>,
    /// Also select every step the selected ones need
    #[arg(long)]
    pub with_deps: bool,
}

impl From<SelectionArgs> for crate::plan::select::Selection {
    fn from(a: SelectionArgs) -> Self {
        crate::plan::select::Selection { phases: a.phases, steps: a.steps, sites: a.sites, with_deps: a.with_deps }
    }
}

/// How a run (apply, rollback) reports and meets other runs: flags both commands share.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Wait up to DURATION for a lock another run holds (a cluster's Lease, a host's lock)
    /// instead of failing: `30s`, `5m`, `1h30m`; the operator is told once who holds it; `0`
    /// fails at once, naming the holder
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = duration)]
    pub lock_timeout: Duration,
    /// How progress is reported: `human` lines on stderr, or `json`, one event per line on
    /// stdout (docs/errors.md, "Machine-readable output"); json needs no terminal
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = EventFormat::Human)]
    pub format: EventFormat,
    /// Short for --format json (terraform's -json)
    #[arg(long)]
    pub json: bool,
}

impl RunArgs {
    /// Whether events go to stdout as JSON lines.
    pub fn json(&self) -> bool {
        self.json || self.format == EventFormat::Json
    }
}

/// How a run's progress is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EventFormat {
    /// Lines for people, on stderr (also spelled `text`)
    #[value(alias = "text")]
    Human,
    /// One JSON object per line on stdout
    Json,
}

/// A value of `--lock-timeout` that is no duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is no duration: write it like 30s, 5m or 1h30m")]
pub struct BadDuration(pub String);

/// A duration as `--lock-timeout` takes it: numbers with a unit each (`ms`, `s`, `m`, `h`),
/// one after the other (`1m30s`), or a bare number of seconds (`0`, `90`).
pub fn duration(s: &str) -> Result<Duration, BadDuration> {
    let bad = || BadDuration(s.to_string());
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let one = match &rest[..unit] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        total =
            one.checked_mul(u32::try_from(n).map_err(|_| bad())?).and_then(|d| total.checked_add(d)).ok_or_else(bad)?;
        rest = &rest[unit..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_terraform_writes_them() {
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        assert_eq!(duration("0s"), Ok(Duration::ZERO));
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("90"), Ok(Duration::from_secs(90)));
        for bad in ["", "m", "5x", "-5s", "5 m", "1.5s"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }
}
