//! The seed's steps, one module each. A module says, in one place, what its step makes (the
//! desired resources), which steps it needs, its check after apply (before the change is
//! confirmed) and its `fabric verify` checks.
//!
//! The catalog in `phases/` stays the seed's table (titles, risks, conditions, decisions); the
//! tests below tie the two together: every step of the table has exactly one module here, and
//! the dependencies a module declares include the table's. Adding a step is one module, its line
//! in the `steps!` list below, and its line in `phases/`.

pub mod verify;

mod join;
mod k3s;

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use petgraph::graph::NodeIndex;

use crate::catalog::graph::GraphError;
use crate::catalog::{Catalog, Instance, StepGraph};
use crate::desired::{Out, Produced, Resource, refs};
use crate::live::observe::Targets;
use crate::live::pool::Pool;
use crate::topology::Topology;
use crate::topology::model::Site;
use crate::transport::ssh::SshError;
pub use verify::{CheckResult, Verdict};

/// One step of the seed. Implemented by a unit struct in the step's module.
pub trait Step: Sync {
    /// The catalog id (`B.1`) this module implements.
    fn id(&self) -> &'static str;

    /// Steps whose every instance must be applied first (the same site's when both are per site).
    fn needs(&self) -> &'static [&'static str] {
        &[]
    }

    /// At least one of these, at the same site (the seed's "A.1 ou A.2").
    fn needs_any(&self) -> &'static [&'static str] {
        &[]
    }

    /// What the step makes at this instance, in a stable order.
    fn desired(&self, inst: &Instance, out: &mut Out<'_>);

    /// The check run after the step is applied and before it is confirmed; a failure reverts the
    /// step. None when the step has no such check.
    fn check<'a>(&'a self, _cx: &'a CheckCx<'a>) -> Option<BoxFuture<'a, Result<String, CheckError>>> {
        None
    }

    /// `fabric verify`: the seed's validation against live state (changes nothing).
    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>>;
}

/// Declares each step's module and lists its unit struct in [`ALL`]: one line per step.
macro_rules! steps {
    ($($module:ident :: $step:ident),* $(,)?) => {
        $(mod $module;)*
        /// Every step, in catalog order.
        pub const ALL: &[&dyn Step] = &[$(&$module::$step),*];
    };
}

pub mod costs;

steps! {
    a1_new_cluster::A1,
    a2_existing_cluster::A2,
    a3_vms::A3,
    a4_bare_metal::A4,
    a5_cutover::A5,
    b1_tunnel::B1,
    b2_cluster_mesh::B2,
    b3_global_services::B3,
    c1_karmada::C1,
    c2_members::C2,
    c3_argocd::C3,
    c4_estimators::C4,
    c5_propagation::C5,
    c6_overrides::C6,
    c7_failover::C7,
    d1_kueue::D1,
    d2_multikueue::D2,
    d3_dispatch_queue::D3,
    d4_test_job::D4,
    d5_gpu_sharing::D5,
    g1_gateway::G1,
}

/// The module of a catalog step.
pub fn get(id: &str) -> Option<&'static dyn Step> {
    ALL.iter().copied().find(|s| s.id() == id)
}

/// What a step's post-apply check needs.
pub struct CheckCx<'a> {
    pub t: &'a Topology,
    pub pool: &'a Pool,
    pub targets: &'a Targets,
    /// The step's resources in this run (the targets it touched).
    pub resources: &'a [Resource],
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{0}")]
    Ssh(#[from] SshError),
    #[error("{from} cannot reach {site} ({addr}) through the tunnel")]
    NoPath { from: String, site: String, addr: String },
    #[error(
        "{from} reaches {site} ({addr}), but not with a full-size packet: {mtu} bytes with don't-fragment \
         set did not pass the tunnel (its MTU); lower sites[].router.wireguard.mtu, or open ICMP \
         'fragmentation needed' on the path"
    )]
    Mtu { from: String, site: String, addr: String, mtu: u16 },
}

/// What a step's verify needs.
pub struct VerifyCx<'a> {
    pub t: &'a Topology,
    pub targets: &'a Targets,
    /// The instance's key (`A.3@sp`), which results carry.
    pub key: &'a str,
    /// The instance's site, for per-site steps.
    pub site: Option<&'a str>,
}

impl VerifyCx<'_> {
    /// The sites of the instance: its own, or every site for a fabric-wide step.
    pub fn sites(&self) -> Vec<&Site> {
        self.t.sites.iter().filter(|s| self.site.is_none_or(|n| n == s.name)).collect()
    }
}

/// The sites of an instance: its own, or every site for a fabric-wide step.
pub fn sites_of<'a>(t: &'a Topology, inst: &Instance) -> Vec<&'a Site> {
    t.sites.iter().filter(|s| inst.site.as_ref().is_none_or(|n| *n == s.name)).collect()
}

/// Resources and extra files of `inst`. A step missing from [`ALL`] makes nothing (the tests
/// below make sure none is).
pub fn produce(inst: &Instance, t: &Topology) -> Produced {
    let mut out = Out::new(t);
    if let Some(step) = get(&inst.spec.id) {
        step.desired(inst, &mut out);
    }
    out.done()
}

/// The resources `inst` produces, in a stable order.
pub fn for_instance(inst: &Instance, t: &Topology) -> Vec<Resource> {
    produce(inst, t).resources
}

/// What every instance of the graph makes, computed once per run.
pub fn desired_state(g: &StepGraph, t: &Topology) -> BTreeMap<NodeIndex, Produced> {
    g.order.iter().map(|&n| (n, produce(&g.graph[n], t))).collect()
}

/// The step graph of `t` with every edge: the table's, the steps' own, and those derived from
/// what the resources refer to (`desired::refs`); and what each instance makes.
pub fn resolve(catalog: &Catalog, t: &Topology) -> Result<(StepGraph, BTreeMap<NodeIndex, Produced>), GraphError> {
    let mut g = StepGraph::build(catalog, t)?;
    let desired = desired_state(&g, t);
    g.add_derived(&refs::wants(t, &g.order, &desired))?;
    Ok((g, desired))
}

/// The catalog with the dependencies the modules declare added to the table's: the graph's
/// edges come from the code.
pub fn with_code_needs(mut c: Catalog) -> Catalog {
    for p in &mut c.phases {
        for spec in &mut p.steps {
            let Some(step) = get(&spec.id) else { continue };
            for n in step.needs() {
                if !spec.needs.iter().any(|x| x == n) {
                    spec.needs.push((*n).to_string());
                }
            }
            for n in step.needs_any() {
                if !spec.needs_any.iter().any(|x| x == n) {
                    spec.needs_any.push((*n).to_string());
                }
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_catalog_step_has_one_module_and_every_module_a_catalog_step() {
        let c = Catalog::embedded().unwrap();
        let table: Vec<String> = c.phases.iter().flat_map(|p| p.steps.iter().map(|s| s.id.clone())).collect();
        let code: Vec<&str> = ALL.iter().map(|s| s.id()).collect();
        let unique: BTreeSet<&str> = code.iter().copied().collect();
        assert_eq!(unique.len(), code.len(), "a step has two modules: {code:?}");
        for id in &table {
            assert!(get(id).is_some(), "step {id} of phases/ has no module in src/steps/");
        }
        for id in &code {
            assert!(table.iter().any(|t| t == id), "module for {id} has no line in phases/");
        }
        assert_eq!(table, code, "ALL lists the steps in catalog order");
    }

    fn example() -> Topology {
        crate::topology::load_str("example.yaml", include_str!("../../topology.example.yaml").to_string())
            .unwrap()
            .topology
    }

    /// Every object of `id`'s instances in the example.
    fn objects_of(t: &Topology, id: &str) -> Vec<(Resource, serde_json::Value)> {
        let g = crate::catalog::StepGraph::build(&with_code_needs(Catalog::embedded().unwrap()), t).unwrap();
        g.order
            .iter()
            .filter(|&&n| g.graph[n].spec.id == id)
            .flat_map(|&n| for_instance(&g.graph[n], t))
            .filter_map(|r| r.kube_object().cloned().map(|o| (r, o)))
            .collect()
    }

    /// Issue 12, item 7: callers at every site reach the gateway, so each cluster has its
    /// Service (global, selecting the gateway's pods on its port).
    #[test]
    fn the_gateway_has_a_global_service_in_every_cluster() {
        let t = example();
        let objects = objects_of(&t, "G.1");
        let deploy = objects.iter().find(|(_, o)| o["kind"] == "Deployment").map(|(_, o)| o.clone()).unwrap();
        for s in &t.sites {
            let svc = objects
                .iter()
                .find(|(r, o)| {
                    o["kind"] == "Service"
                        && o["metadata"]["name"] == "tensorzero-gateway"
                        && r.site.as_deref() == Some(&s.name)
                })
                .map(|(_, o)| o.clone())
                .unwrap_or_else(|| panic!("no gateway Service at {}", s.name));
            assert_eq!(svc["metadata"]["annotations"]["service.cilium.io/global"], "true");
            assert_eq!(svc["spec"]["selector"], deploy["spec"]["template"]["metadata"]["labels"]);
            let port = &deploy["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"];
            assert_eq!(&svc["spec"]["ports"][0]["port"], port);
            let ns = objects.iter().any(|(r, o)| {
                o["kind"] == "Namespace" && o["metadata"]["name"] == "tensorzero" && r.site.as_deref() == Some(&s.name)
            });
            assert!(ns, "the Service's namespace exists at {}", s.name);
        }
    }

    /// Issue 12, item 2: ArgoCD is installed where it runs and syncs only the services' folder;
    /// option A sends it to Karmada, option B gives each cluster its own ArgoCD syncing the
    /// site's folder into that cluster, with nothing of it in Karmada.
    #[test]
    fn argocd_is_installed_and_syncs_only_the_services() {
        let single = example();
        let objs = objects_of(&single, "C.3");
        let apps: Vec<&serde_json::Value> =
            objs.iter().map(|(_, o)| o).filter(|o| o["kind"] == "Application").collect();
        assert_eq!(apps.len(), 1);
        assert_eq!(apps[0]["spec"]["destination"]["name"], "karmada");
        assert_eq!(apps[0]["spec"]["source"]["path"], "services");
        let charts = objs.iter().filter(|(_, o)| o["kind"] == "HelmChart" && o["spec"]["chart"] == "argo-cd").count();
        assert_eq!(charts, 1, "ArgoCD is installed with its Application");

        let text = include_str!("../../topology.example.yaml").replace("  argocd: single", "  argocd: per-cluster");
        let per = crate::topology::load_str("t.yaml", text).unwrap().topology;
        let objs = objects_of(&per, "C.3");
        for s in &per.sites {
            let at = |kind: &str| {
                objs.iter().filter(|(r, o)| o["kind"] == kind && r.site.as_deref() == Some(s.name.as_str())).count()
            };
            assert_eq!((at("Application"), at("HelmChart")), (1, 1), "{}", s.name);
        }
        for (r, o) in &objs {
            assert!(*r.target() != crate::addr::Target::Karmada, "option B puts nothing in Karmada: {}", r.address);
            if o["kind"] == "Application" {
                assert_eq!(o["spec"]["destination"]["server"], "https://kubernetes.default.svc");
                let site = r.site.as_deref().unwrap();
                assert_eq!(o["spec"]["source"]["path"], format!("services/{site}"));
            }
        }
    }

    /// Issue 13, parts 1 and 2: the NVIDIA runtime and device plugin on the GPU nodes (D.1),
    /// and KAI Scheduler with GPU sharing on and queues that match Kueue's quotas (D.5).
    #[test]
    fn gpus_are_exposed_and_shared_with_queues_matching_kueues() {
        let t = example();
        for s in &t.sites {
            let here = |(r, _): &(Resource, serde_json::Value)| r.site.as_deref() == Some(s.name.as_str());
            let d1: Vec<_> = objects_of(&t, "D.1").into_iter().filter(here).collect();
            let plugin = d1.iter().find(|(_, o)| o["spec"]["chart"] == "nvidia-device-plugin").map(|(_, o)| o).unwrap();
            let values = plugin["spec"]["valuesContent"].as_str().unwrap();
            assert!(values.contains("key: gpu.model") && values.contains("runtimeClassName: nvidia"), "{values}");
            // K3s ships the `nvidia` RuntimeClass: fabric does not co-own it.
            assert!(d1.iter().all(|(_, o)| o["kind"] != "RuntimeClass"));
            // Every GPU service's pods at this site run with it (C.6's overriders).
            let c6: Vec<_> = objects_of(&t, "C.6").into_iter().filter(|(_, o)| o["kind"] == "OverridePolicy").collect();
            let gpu = c6.iter().filter(|(_, o)| {
                o["spec"]["overrideRules"][0]["targetCluster"]["clusterNames"][0] == s.cluster.name.as_str()
            });
            let mut n = 0;
            for (_, o) in gpu.filter(|(_, o)| o["spec"]["overrideRules"][0]["overriders"]["plaintext"].is_array()) {
                let plain = o["spec"]["overrideRules"][0]["overriders"]["plaintext"].as_array().unwrap();
                let rc = plain.iter().find(|p| p["path"] == "/spec/template/spec/runtimeClassName");
                assert_eq!(rc.map(|p| p["value"].clone()), Some(serde_json::json!("nvidia")), "{o}");
                n += 1;
            }
            assert!(n > 0, "the example has GPU services at {}", s.name);
            let d5: Vec<_> = objects_of(&t, "D.5").into_iter().filter(here).collect();
            let chart = d5.iter().find(|(_, o)| o["kind"] == "HelmChart").map(|(_, o)| o).unwrap();
            assert!(chart["spec"]["valuesContent"].as_str().unwrap().contains("gpuSharing: true"));
            let queue = |name: &str| {
                d5.iter().find(|(_, o)| o["kind"] == "Queue" && o["metadata"]["name"] == name).map(|(_, o)| o.clone())
            };
            let parent = queue(&s.name).unwrap();
            assert_eq!(parent["spec"]["resources"]["gpu"]["quota"], crate::topology::gpus::site_gpus(s));
            for q in &s.queues {
                if crate::desired::is_dispatch_queue(&t, s, q) {
                    assert!(queue(&q.name).is_none(), "the dispatching queue holds no GPUs of {}", s.name);
                    continue;
                }
                let child = queue(&q.name).unwrap();
                assert_eq!(child["spec"]["parentQueue"], s.name.as_str());
                assert_eq!(child["spec"]["resources"]["gpu"]["quota"], q.gpu_quota, "{}", q.name);
            }
        }
    }

    /// Issue 12, item 8: D.4's test Job ends by itself, never retries, and cannot hold a GPU
    /// past its deadline.
    #[test]
    fn the_test_job_finishes() {
        let t = example();
        let (_, job) = objects_of(&t, "D.4").into_iter().find(|(_, o)| o["kind"] == "Job").unwrap();
        let spec = &job["spec"];
        assert_eq!(spec["backoffLimit"], 0);
        assert!(spec["activeDeadlineSeconds"].as_u64().is_some_and(|s| s > 0 && s <= 3600), "{spec}");
        let c = &spec["template"]["spec"]["containers"][0];
        assert_ne!(c["args"][0], "pause", "a test Job that waits forever holds a GPU forever");
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");
    }

    #[test]
    fn the_dependencies_the_code_declares_include_the_tables() {
        let c = Catalog::embedded().unwrap();
        for spec in c.phases.iter().flat_map(|p| &p.steps) {
            let step = get(&spec.id).unwrap();
            for n in &spec.needs {
                assert!(step.needs().contains(&n.as_str()), "{}: phases/ needs {n}, the module does not", spec.id);
            }
            for n in &spec.needs_any {
                assert!(step.needs_any().contains(&n.as_str()), "{}: phases/ needs any of {n}", spec.id);
            }
        }
        // And the merged catalog is still a valid one (no cycle, nothing dangling).
        let merged = with_code_needs(c);
        merged.check().unwrap();
    }

    /// Needs of the seed's table that no resource shows, each with why (the table is right, but
    /// the order comes from outside the objects, or the table is coarse).
    const NOT_IN_THE_OBJECTS: &[(&str, &str, &str)] = &[
        ("A.3", "A.1", "a host joins a running cluster: the cluster's existence is no object reference"),
        ("A.3", "A.2", "a host joins a running cluster: the cluster's existence is no object reference"),
        ("A.4", "A.1", "a host joins a running cluster: the cluster's existence is no object reference"),
        ("A.4", "A.2", "a host joins a running cluster: the cluster's existence is no object reference"),
        ("B.2", "B.1", "Cluster Mesh needs the tunnel's routes, which no Kubernetes object names"),
        ("C.1", "B.2", "the seed orders the federation after the mesh; Karmada's objects do not use it"),
        ("C.4", "C.3", "coarse: the estimators use C.1's chart and C.2's members, not ArgoCD"),
        ("B.3", "B.2", "a global service needs Cluster Mesh, which its annotation does not name"),
        ("C.3", "C.2", "coarse: ArgoCD needs the Karmada API (C.1); members matter to what it deploys, not to C.3"),
        ("D.2", "C.1", "coarse: MultiKueue's objects are Kueue's, in the manager cluster, not Karmada's"),
        ("D.3", "C.1", "coarse: the dispatching queue is Kueue's, in the manager cluster"),
        ("D.4", "C.1", "coarse: the test Job is Kueue's, in the manager cluster"),
        ("C.7", "C.3", "coarse: the taint policy is cluster-scoped and names no ArgoCD object"),
        ("D.1", "C.2", "coarse: Kueue in a cluster does not need Karmada's members"),
        ("D.5", "D.1", "KAI places pods on the GPUs D.1's device plugin advertises, which no object names"),
        ("G.1", "B.3", "the gateway relies on global services working, which B.3 tests, not makes"),
    ];

    /// The graph with no edge but the derived ones: what the objects alone say.
    fn derived_only(t: &Topology) -> StepGraph {
        let mut c = Catalog::embedded().unwrap();
        for spec in c.phases.iter_mut().flat_map(|p| p.steps.iter_mut()) {
            spec.needs.clear();
            spec.needs_any.clear();
        }
        let mut g = StepGraph::build(&c, t).unwrap();
        let desired = desired_state(&g, t);
        g.add_derived(&refs::wants(t, &g.order, &desired)).unwrap();
        g
    }

    #[test]
    fn for_every_step_the_derived_needs_include_the_tables_where_the_objects_can_show_them() {
        let t = example();
        let table = Catalog::embedded().unwrap();
        let g = derived_only(&t);
        let mut missing = Vec::new();
        for &n in &g.order {
            let inst = &g.graph[n];
            let ancestors = g.with_ancestors(&BTreeSet::from([n]));
            let spec = table.step(&inst.spec.id).unwrap();
            let met = |need: &String| ancestors.iter().any(|a| g.graph[*a].spec.id == *need && *a != n);
            let excused = |need: &String| NOT_IN_THE_OBJECTS.iter().any(|(s, d, _)| *s == spec.id && d == need);
            // "One of": met when one alternative is (the others need no excuse then).
            let any_met = spec.needs_any.iter().any(met);
            for need in spec.needs.iter().chain(spec.needs_any.iter().filter(|_| !any_met)) {
                let (met, excused) = (met(need), excused(need));
                if !met && !excused {
                    missing.push(format!("{} needs {need} in phases/, the objects do not show it", inst.key()));
                }
                if met && excused {
                    missing.push(format!("{} -> {need} is excused but derived: drop the excuse", inst.key()));
                }
            }
        }
        assert!(missing.is_empty(), "{missing:#?}");
    }

    #[test]
    fn d4_needs_the_queue_d3_makes_and_the_gateway_the_label_c6_sets() {
        let t = example();
        let (g, _) = resolve(&with_code_needs(Catalog::embedded().unwrap()), &t).unwrap();
        let key = |k: &str| g.find(k).unwrap();
        let deps = |k: &str| g.with_ancestors(&BTreeSet::from([key(k)]));
        assert!(deps("D.4").contains(&key("D.3")) && deps("D.4").contains(&key("D.2")));
        assert!(g.derived_why(key("D.3"), key("D.4")).unwrap().starts_with("LocalQueue "));
        assert!(g.derived_why(key("D.2"), key("D.3")).unwrap().starts_with("AdmissionCheck multikueue"));
        let why = g.derived_why(key("C.6"), key("G.1")).unwrap();
        assert!(why.contains("fabric.io/site="), "{why}");
        // Without the derived edges D.4 did not need D.3 (the bug of issue 12, item 4).
        let plain = StepGraph::build(&with_code_needs(Catalog::embedded().unwrap()), &t).unwrap();
        let n = plain.find("D.4").unwrap();
        assert!(!plain.with_ancestors(&BTreeSet::from([n])).contains(&plain.find("D.3").unwrap()));
    }
}
