//! The machine view of a run: `fabric apply --json` and `fabric rollback --json` print one JSON
//! object per line on stdout, as terraform's `-json` (docs/errors.md, "Machine-readable output").
//! Every object has `type` and `timestamp`; the others only when they say something: `step`,
//! `address`, `action`, `outcome`, `message`. The stream starts with `start` and ends with one
//! `summary`, whatever the outcome. The JSON names are mapped from fabric's types here, one match
//! each, so that a change inside fabric cannot change them unseen.

use std::time::Duration;

use miette::Report;
use serde_json::{Map, Value, json};

use super::Done;
use crate::apply::Hooks;
use crate::apply::event::{Action, Event};
use crate::plan::model::{self, Plan};

/// The version of the stream's format, in its `start` event: the minor grows when types or
/// fields are added, the major when a reader must change.
pub const FORMAT_VERSION: &str = "1.0";

/// One run's stream.
pub struct Stream {
    command: &'static str,
}

/// How a run ended, for its `summary`.
pub struct Summary {
    /// `applied`, `no-changes`, `rolled-back`, `nothing-to-roll-back`.
    pub outcome: &'static str,
    pub run: Option<String>,
    /// The steps changed (apply) or put back (rollback).
    pub steps: Vec<String>,
    pub message: String,
}

/// Runs `body`, a run of `command` on the topology `file`: with `json`, its events go to a stream
/// that starts before it and ends with its summary, whatever the outcome.
pub fn streamed(
    json: bool,
    command: &'static str,
    file: &str,
    body: impl FnOnce(Option<&Stream>) -> Result<(Done, Summary), Report>,
) -> Result<Done, Report> {
    if !json {
        return body(None).map(|(done, _)| done);
    }
    let stream = Stream::start(command, file);
    let result = body(Some(&stream));
    stream.summary(result.as_ref().map(|(_, s)| s));
    result.map(|(done, _)| done)
}

/// The hooks of a run whose progress lines go to `progress` and whose typed events go to
/// `stream`'s JSON (when there is one) through `events`, a closure made by [`sink`].
pub fn hooks<'a>(
    progress: &'a (dyn Fn(&str) + Sync),
    events: &'a (dyn Fn(&Event) + Sync),
    stream: Option<&Stream>,
    lock_timeout: Duration,
) -> Hooks<'a> {
    Hooks { progress, events: stream.is_some().then_some(events), lock_timeout }
}

/// What sends a run's typed events to `stream`, when there is one.
pub fn sink(stream: Option<&Stream>) -> impl Fn(&Event) + Sync + '_ {
    move |e| {
        if let Some(s) = stream {
            s.event(e);
        }
    }
}

impl Stream {
    /// Starts the stream of `command` (`apply`, `rollback`) on the topology `file`.
    pub fn start(command: &'static str, file: &str) -> Stream {
        let s = Stream { command };
        s.write(
            "start",
            json!({ "command": command, "format_version": FORMAT_VERSION, "fabric_version": env!("CARGO_PKG_VERSION"),
                    "topology": file }),
        );
        s
    }

    /// A typed event of the run.
    pub fn event(&self, e: &Event) {
        let (kind, fields) = match e {
            Event::StepStart { step } => ("step_start", json!({ "step": step })),
            Event::StepNoChanges { step } => ("step_complete", json!({ "step": step, "outcome": "no-changes" })),
            Event::ApplyStart { step, address, action } => {
                ("apply_start", json!({ "step": step, "address": address, "action": action_name(*action) }))
            }
            Event::CheckPassed { step, evidence } => {
                ("check", json!({ "step": step, "outcome": "passed", "message": evidence }))
            }
            Event::StepErrored { step, reason } => {
                ("step_errored", json!({ "step": step, "outcome": "reverting", "message": reason }))
            }
            Event::StepDone { step } => ("step_complete", json!({ "step": step, "outcome": "applied" })),
            Event::StepRolledBack { step } => ("step_complete", json!({ "step": step, "outcome": "rolled-back" })),
        };
        self.write(kind, fields);
    }

    /// A progress line that is no typed event (a wait, a Lease taken, a retry, a warning).
    pub fn message(&self, line: &str) {
        self.write("message", json!({ "message": line }));
    }

    /// The changes the run is about to make (every change of `plan` but its no-ops), one
    /// `planned_change` each; never a diff (a Secret's content could be in one).
    pub fn planned(&self, plan: &Plan) {
        for step in &plan.steps {
            for c in step.changes.iter().filter(|c| c.action != model::Action::NoOp) {
                let action = match c.action {
                    model::Action::Create => "create",
                    model::Action::Update => "update",
                    model::Action::Delete => "delete",
                    model::Action::NoOp => "no-op",
                };
                self.write(
                    "planned_change",
                    json!({ "step": step.key, "address": c.address.to_string(), "action": action }),
                );
            }
        }
    }

    /// The last event: how the run ended, or the error that ended it (its message, code and
    /// help, as stderr shows them).
    pub fn summary(&self, result: Result<&Summary, &Report>) {
        let fields = match result {
            Ok(s) => json!({ "command": self.command, "outcome": s.outcome, "run": s.run, "steps": s.steps,
                              "message": s.message }),
            Err(e) => json!({ "command": self.command, "outcome": "failed", "message": e.to_string(),
                               "code": code(e), "help": e.help().map(|h| h.to_string()) }),
        };
        self.write("summary", fields);
    }

    fn write(&self, kind: &str, fields: Value) {
        let mut o = Map::new();
        o.insert("type".into(), kind.into());
        o.insert("timestamp".into(), now().into());
        if let Value::Object(f) = fields {
            o.extend(f.into_iter().filter(|(_, v)| !v.is_null()));
        }
        crate::outln!("{}", Value::Object(o));
    }
}

/// An error's code (`apply::approve`): a command's own error carries it as a field.
fn code(e: &Report) -> Option<String> {
    match e.downcast_ref::<super::UsageError>() {
        Some(u) => u.code.clone(),
        None => e.code().map(|c| c.to_string()),
    }
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::Create => "create",
        Action::Update => "update",
        Action::Delete => "delete",
    }
}

/// Now, in RFC 3339 (UTC, milliseconds): `2026-12-06T04:12:09.123Z`.
fn now() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (secs, ms) = (t.as_secs(), t.subsec_millis());
    let (y, m, d) = crate::apply::journal::civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc_3339() {
        let t = now();
        assert_eq!(t.len(), "2026-12-06T04:12:09.123Z".len(), "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }
}
