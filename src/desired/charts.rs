//! The charts fabric installs: where each is published (in a form K3s's helm-controller can
//! fetch), and the topology's pin of each (`versions.<key>`), which plan checks against the
//! chart's published index (`providers::charts`).

use crate::topology::Topology;

/// Where a HelmChart's chart comes from, in one of the two forms K3s's helm-controller and its
/// install image can fetch (the wrong mix does not compile: the constructors are `const` and
/// refuse it).
///
/// helm-controller hands `spec.repo` to the install Job as `REPO` and, when `repo` is set,
/// `CHART=<HelmChart name>/<spec.chart>` (k3s-io/helm-controller
/// `pkg/controllers/chart/chart.go`, `job()`); klipper-helm's `entry` (`helm_repo_init`) runs
/// `helm repo add <name> $REPO` when `REPO` is set, and Helm's `repo add` downloads
/// `<url>/index.yaml` (helm/helm `cmd/helm/repo_add.go`), which an OCI registry does not serve:
/// the install fails. An OCI chart is given whole in `spec.chart` with no `repo`: `entry` then
/// adds no repository and runs `helm install … oci://…`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChartSource {
    repo: Option<&'static str>,
    chart: &'static str,
}

const fn is_oci(s: &str) -> bool {
    let (s, p) = (s.as_bytes(), b"oci://");
    if s.len() < p.len() {
        return false;
    }
    let mut i = 0;
    while i < p.len() {
        if s[i] != p[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl ChartSource {
    /// A chart `chart` of the HTTP(S) chart repository at `url` (which serves `index.yaml`).
    pub const fn repo(url: &'static str, chart: &'static str) -> Self {
        assert!(!is_oci(url), "an OCI registry is no chart repository: use ChartSource::oci");
        assert!(!is_oci(chart), "a chart of a repository is named, not an oci:// reference");
        ChartSource { repo: Some(url), chart }
    }

    /// An OCI chart: its whole reference, `oci://<registry>/<repository>`.
    pub const fn oci(reference: &'static str) -> Self {
        assert!(is_oci(reference), "an OCI chart reference starts with oci://");
        ChartSource { repo: None, chart: reference }
    }

    /// The HTTP chart repository (None for an OCI chart).
    pub fn repo_url(&self) -> Option<&'static str> {
        self.repo
    }

    /// `spec.chart`: the chart's name in its repository, or the whole `oci://` reference.
    pub fn chart(&self) -> &'static str {
        self.chart
    }

    /// The chart's name (the last segment of an OCI reference).
    pub fn name(&self) -> &'static str {
        self.chart.rsplit('/').next().unwrap_or(self.chart)
    }
}

/// The charts fabric installs, where each is published.
pub const CILIUM_CHART: ChartSource = ChartSource::repo("https://helm.cilium.io/", "cilium");
/// Karmada's chart repository is its Git repository's `charts/` folder (`charts/index.yaml`).
pub const KARMADA_CHART: ChartSource =
    ChartSource::repo("https://raw.githubusercontent.com/karmada-io/karmada/master/charts", "karmada");
pub const ARGOCD_CHART: ChartSource = ChartSource::repo("https://argoproj.github.io/argo-helm", "argo-cd");
pub const NVIDIA_DEVICE_PLUGIN_CHART: ChartSource =
    ChartSource::repo("https://nvidia.github.io/k8s-device-plugin", "nvidia-device-plugin");
/// Pushed by kubernetes-sigs/kueue `hack/helm-chart-package.sh` (`helm push … oci://…`), tagged
/// with the release without its `v` (`0.15.2`); installed as its README says.
pub const KUEUE_CHART: ChartSource = ChartSource::oci("oci://registry.k8s.io/kueue/charts/kueue");
/// Pushed by NVIDIA/KAI-Scheduler `.github/workflows/push-artifacts.yaml`, tagged with the
/// release tag (`v0.10.2`); installed as its README says.
pub const KAI_CHART: ChartSource = ChartSource::oci("oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler");

/// One chart version the topology pins: `versions.<key>` in the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartPin {
    pub source: ChartSource,
    pub version: String,
    /// The key under `versions:` that pins it.
    pub key: &'static str,
    /// The name of the HelmChart that installs it.
    pub helm_chart: &'static str,
}

/// Every chart version the topology pins, each once, with the HelmChart that installs it (the
/// test `every_helm_chart_has_its_pin` holds the two together).
pub fn pins(t: &Topology) -> Vec<ChartPin> {
    let v = &t.versions;
    let pin =
        |source, version: &str, key, helm_chart| ChartPin { source, version: version.to_string(), key, helm_chart };
    let mut out = vec![
        pin(CILIUM_CHART, &v.cilium, "cilium", "cilium"),
        pin(KARMADA_CHART, &v.karmada, "karmada", "karmada"),
        pin(KUEUE_CHART, &v.kueue, "kueue", "kueue"),
    ];
    out.extend(v.argocd.as_deref().map(|x| pin(ARGOCD_CHART, x, "argocd", "argocd")));
    out.extend(
        v.nvidia_device_plugin
            .as_deref()
            .map(|x| pin(NVIDIA_DEVICE_PLUGIN_CHART, x, "nvidia_device_plugin", "nvidia-device-plugin")),
    );
    out.extend(v.kai_scheduler.as_deref().map(|x| pin(KAI_CHART, x, "kai_scheduler", "kai-scheduler")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_say_where_helm_controller_looks() {
        assert_eq!(KUEUE_CHART.repo_url(), None);
        assert_eq!(KUEUE_CHART.chart(), "oci://registry.k8s.io/kueue/charts/kueue");
        assert_eq!(KUEUE_CHART.name(), "kueue");
        assert_eq!(KAI_CHART.name(), "kai-scheduler");
        assert_eq!(CILIUM_CHART.repo_url(), Some("https://helm.cilium.io/"));
        assert_eq!(CILIUM_CHART.name(), "cilium");
        assert!(is_oci("oci://x") && !is_oci("oci:/x") && !is_oci("https://x") && !is_oci(""));
    }

    #[test]
    #[should_panic(expected = "an OCI registry is no chart repository")]
    fn an_oci_repository_is_refused() {
        // At run time for the test; in a `const` it does not compile.
        let url = String::from("oci://registry.k8s.io/kueue/charts").leak();
        let _ = ChartSource::repo(url, "kueue");
    }

    #[test]
    #[should_panic(expected = "starts with oci://")]
    fn an_oci_chart_needs_its_whole_reference() {
        let _ = ChartSource::oci(String::from("kueue").leak());
    }
}
