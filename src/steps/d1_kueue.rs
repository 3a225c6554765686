//! D.1 — Kueue in each cluster (seed: "Kueue local"): the chart, the GPU nodes' labels, the
//! site's GPU flavor, and its ClusterQueues and LocalQueues (the MultiKueue queue comes with its
//! admission check in D.3).

use std::collections::BTreeSet;

use futures::future::BoxFuture;

use super::verify::{conditions, id};
use super::{CheckResult, Step, VerifyCx, sites_of};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::nvidia;
use crate::desired::kueue;
use crate::topology::model::LocalQueue;
use crate::desired::{
    DISPATCH_FLAVOR, Out, cohort, dispatch_queue, flavor, is_dispatch_queue, multikueue_manager, quota_summary, yaml,
};
use crate::topology::queues::site_queue_quota;

pub struct D1;

impl Step for D1 {
    fn id(&self) -> &'static str {
        "D.1"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.2"]
    }

    fn desired(&self, inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        for s in sites_of(t, inst) {
            let site = Some(s.name.as_str());
            let queues_file = Some(format!("apps/kueue/cluster-queues/gpu-{}.yaml", s.name));
            let chart_file = Some(format!("apps/kueue/helmchart-{}.yaml", s.name));
            let manager = t.multikueue.as_ref().is_some_and(|m| m.manager == s.name);
            out.kube(site, kueue::kueue_helm_chart(t, manager), format!("Kueue {}", t.versions.kueue), chart_file);
            out.extra(format!("apps/kueue/values-{}.yaml", s.name), yaml::to_string(&kueue::kueue_values(manager)));
            let lqs = s.queues.iter().flat_map(|q| &q.local_queues);
            namespaces(out, Target::api(site), site, lqs);
            // The GPU nodes' labels, which the flavor below, C.6's overriders and the GPU
            // services select on (and their taint, when the cluster keeps them for GPU work).
            let nodes_file = Some(format!("apps/kueue/gpu-nodes-{}.yaml", s.name));
            for n in &s.cluster.nodes {
                let Some(g) = &n.gpu else { continue };
                let labels = o::gpu_labels(g);
                let summary = labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()));
                let mut summary = format!("labels {}", summary.collect::<Vec<_>>().join(", "));
                if s.cluster.gpu_taint {
                    summary.push_str(&format!(", taint {}", o::GPU_TAINT));
                }
                out.kube(site, o::gpu_node(s, &n.name, labels), summary, nodes_file.clone());
            }
            // What makes `nvidia.com/gpu` exist on those nodes: the `nvidia` runtime and the
            // device plugin. K3s configures containerd's `nvidia` runtime when it starts on a host
            // with the NVIDIA container toolkit (k3s-io/k3s pkg/agent/containerd/nvidia.go) and
            // ships the `nvidia` RuntimeClass itself (k3s-io/k3s manifests/runtimes.yaml, a K3s
            // addon it keeps as it ships it): fabric does not write that object, it relies on it.
            if let (true, Some(v)) = (s.cluster.nodes.iter().any(|n| n.gpu.is_some()), &t.versions.nvidia_device_plugin) {
                let file = Some(format!("apps/nvidia/device-plugin-{}.yaml", s.name));
                out.kube(site, nvidia::nvidia_device_plugin_chart(t, v), format!("NVIDIA device plugin {v}"), file);
            }
            let fl = flavor(s);
            out.kube(site, kueue::resource_flavor(t, s, &fl), "GPU flavor of the site", queues_file.clone());
            let cohort = cohort(s);
            for q in s.queues.iter().filter(|q| !is_dispatch_queue(t, s, q)) {
                // cpu and memory too: Kueue admits a Job only when its queue covers every
                // resource the Job requests (`topology::queues`).
                let quota = site_queue_quota(s, q);
                let cq = kueue::cluster_queue(t, Some(&cohort), &q.name, &quota, &fl, None);
                out.kube(site, cq, quota_summary(&quota), queues_file.clone());
                for l in &q.local_queues {
                    let summary = format!("→ {}: its Jobs run at {}", q.name, s.name);
                    out.kube(site, kueue::local_queue(t, l, &q.name), summary, queues_file.clone());
                }
            }
            // A manager site's dispatching queue (D.3) is on a flavor of its own, without node
            // labels, outside the site's cohort: it holds none of the site's GPUs, and in the
            // cohort its dispatch budget would be lent to the site's own queues beyond the GPUs
            // the site has.
            let manager_site = t.multikueue.as_ref().is_some_and(|m| m.manager == s.name);
            if manager_site && fl != DISPATCH_FLAVOR {
                let summary = "flavor of the dispatching queue (its Jobs run in the workers)";
                out.kube(site, kueue::dispatch_flavor(t), summary, queues_file.clone());
            }
            if t.multikueue_vm().is_some() && s.name == t.federation.karmada.host_site {
                manager_vm(out);
            }
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        // The dispatching ClusterQueue at Karmada's VM is D.3's check.
        let mut objs = Vec::new();
        for s in cx.sites() {
            for q in &s.queues {
                objs.push((Target::cluster(&s.name), id("kueue.x-k8s.io/v1beta2", "ClusterQueue", &q.name, None)));
            }
        }
        Box::pin(conditions(cx.targets, cx.key, "ClusterQueue Active", objs, "Active"))
    }
}

/// Kueue at Karmada's VM when it is MultiKueue's manager (counted as Karmada's host site, whose
/// D.1 renders it, as C.1 counts the VM): the chart with MultiKueue on, its namespace and those
/// of the dispatching queue's LocalQueues, and the queue's flavor. Its queue and check are D.2's
/// and D.3's, as at a manager site.
fn manager_vm(out: &mut Out<'_>) {
    let t = out.t;
    let (Some(vm), Some((target, site)), Some(q)) = (t.multikueue_vm(), multikueue_manager(t), dispatch_queue(t)) else {
        return;
    };
    let site = Some(site);
    let chart_file = Some(format!("apps/kueue/helmchart-{}.yaml", vm.name));
    let summary = format!("Kueue {}, MultiKueue's manager", t.versions.kueue);
    out.kube_at(target.clone(), site, kueue::kueue_helm_chart(t, true), summary, chart_file);
    out.extra(format!("apps/kueue/values-{}.yaml", vm.name), yaml::to_string(&kueue::kueue_values(true)));
    namespaces(out, target.clone(), site, q.local_queues.iter());
    let file = Some(format!("apps/kueue/cluster-queues/{}.yaml", vm.name));
    out.kube_at(target, site, kueue::dispatch_flavor(t), "flavor of the dispatching queue (no GPUs here)", file);
}

/// Kueue's namespace (the chart creates it too) and those of the LocalQueues, each once.
fn namespaces<'q>(out: &mut Out<'_>, target: Target, site: Option<&str>, lqs: impl Iterator<Item = &'q LocalQueue>) {
    let t = out.t;
    let mut seen = BTreeSet::new();
    let nss = std::iter::once("kueue-system").chain(lqs.map(|l| l.namespace.as_str()));
    for ns in nss.filter(|n| seen.insert(*n)) {
        out.kube_at(target.clone(), site, o::namespace(t, ns), "namespace", None);
    }
}
