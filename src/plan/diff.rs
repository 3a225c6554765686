//! From desired and live state to the changes of a plan.

use similar::TextDiff;

use crate::desired::Resource;
use crate::live::observe::Live;
use crate::plan::model::{Action, Change};
use crate::providers::{self, Observed};

/// What a placeholder shows until the key exists (terraform's "known after apply").
pub const KNOWN_AFTER_APPLY: &str = "(known after apply)";

/// The change `r` needs given `live`; None when its target could not be read.
pub fn change(r: &Resource, live: &Live) -> Option<Change> {
    if live.unreachable.contains_key(r.target()) {
        return None;
    }
    let observed = live.observed.get(&r.address).cloned().unwrap_or(Observed::Absent);
    let desired = desired_with_keys(r, live, &observed);
    let pruned = matches!(r.desired, crate::desired::Desired::Prune(_));
    let (action, before) = match &observed {
        Observed::Absent if pruned => (Action::NoOp, String::new()),
        Observed::Present(t) if pruned => (Action::Delete, t.clone()),
        Observed::Absent => (Action::Create, String::new()),
        Observed::Present(t) if *t == desired => (Action::NoOp, t.clone()),
        Observed::Present(t) => (Action::Update, t.clone()),
    };
    let diff = (action != Action::NoOp && !r.sensitive).then(|| {
        let shown = show_placeholders(&desired);
        TextDiff::from_lines(&before, &shown).unified_diff().context_radius(3).header("live", "desired").to_string()
    });
    let mut c = Change::create(r);
    c.action = action;
    c.diff = diff;
    c.refused = live.refusals.get(&r.address).filter(|_| action != Action::NoOp).cloned();
    c.left_to_controllers = live.left_to_controllers.get(&r.address).cloned().unwrap_or_default();
    if action == Action::Update {
        c.upgrade = chart_upgrade(r, &observed);
    }
    Some(c)
}

/// The lines of a HelmChart whose version changes over the one that runs (empty otherwise).
fn chart_upgrade(r: &Resource, observed: &Observed) -> Vec<String> {
    let Some(obj) = r.kube_object().filter(|o| o["kind"] == "HelmChart") else { return vec![] };
    let Some((running, wanted)) = crate::desired::upgrade::version_change(observed, obj) else { return vec![] };
    let chart = obj["metadata"]["name"].as_str().unwrap_or_default();
    crate::desired::upgrade::chart_upgrade_lines(chart, &running, &wanted)
}

/// The desired text with peers' keys: as read from the peers, else as the resource's live state
/// already names them (a peer that cannot be read keeps its last known key).
pub fn desired_with_keys(r: &Resource, live: &Live, observed: &Observed) -> String {
    let known = match observed {
        Observed::Present(t) => providers::keys_in(t),
        Observed::Absent => Default::default(),
    };
    providers::desired_text(r, &|t| {
        live.key(t).or_else(|| if live.unreachable.contains_key(t) { known.get(t).cloned() } else { None })
    })
}

/// `<public-key:router.x>` as terraform shows values it cannot know yet.
fn show_placeholders(text: &str) -> String {
    providers::resolve_keys(text, &|t| Some(format!("{KNOWN_AFTER_APPLY}: public key of {t}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::{Desired, ProviderKind};

    fn file(text: &str) -> Resource {
        Resource {
            address: "host.a/file:/etc/x".into(),
            site: Some("s".into()),
            provider: ProviderKind::File,
            summary: "x".into(),
            sensitive: false,
            desired: Desired::File(text.into()),
            file: None,
        }
    }

    #[test]
    fn create_update_noop_and_unreachable() {
        let r = file("a\nb\n");
        let mut live = Live::default();
        let c = change(&r, &live).unwrap();
        assert_eq!(c.action, Action::Create);
        assert!(c.diff.as_deref().unwrap().contains("+a\n+b\n"));
        live.observed.insert(r.address.clone(), Observed::Present("a\nb\n".into()));
        assert_eq!(change(&r, &live).unwrap().action, Action::NoOp);
        live.observed.insert(r.address.clone(), Observed::Present("a\nc\n".into()));
        let c = change(&r, &live).unwrap();
        assert_eq!(c.action, Action::Update);
        let d = c.diff.unwrap();
        assert!(d.contains("-c\n") && d.contains("+b\n") && d.contains("--- live"), "{d}");
        live.unreachable.insert("host.a".into(), "down".into());
        assert!(change(&r, &live).is_none());
    }

    #[test]
    fn secrets_have_no_diff() {
        let mut r = file("");
        r.desired = Desired::Secret(Some("host.b/file:/token".into()));
        r.sensitive = true;
        let c = change(&r, &Live::default()).unwrap();
        assert_eq!(c.action, Action::Create);
        assert!(c.diff.is_none());
    }
}
