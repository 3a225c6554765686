//! What each Kueue ClusterQueue gets besides GPUs: cpu and memory quotas, and the rule that
//! makes them exist.
//!
//! Kueue admits a Job only when its ClusterQueue covers every resource the Job's pods request
//! (kubernetes-sigs/kueue `pkg/scheduler/flavorassigner/flavorassigner.go`,
//! `findFlavorForPodSets`: "resource <name> unavailable in ClusterQueue"), with the requests
//! taken by `pkg/workload/workload.go` `totalRequestsFromPodSets` (every resource a pod names,
//! less the configuration's `resources.excludeResourcePrefixes`). Every real pod requests cpu and
//! memory, so a queue covering `nvidia.com/gpu` only admits nothing (kueue#4848, kueue#2266).
//! fabric covers cpu and memory in every queue rather than excluding them in Kueue's
//! configuration (which the chart takes only by replacing its whole `managerConfig`): the quota
//! is visible in the plan and Kueue then also stops Jobs that would not fit the GPU nodes' CPU
//! or memory. A queue's numbers are its `cpu_quota` / `memory_gib_quota`, or its share of the
//! allocatable CPU and memory of the GPU nodes its flavor selects: `gpu_quota` GPUs' worth.

use super::gpus::site_gpu;
use super::model::*;
use super::problem::Problem;
use crate::path;

/// A ClusterQueue's nominal quotas: GPUs, cpu in millicores, memory in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quota {
    pub gpus: u64,
    pub cpu_milli: u64,
    pub memory_mib: u64,
}

impl std::ops::Add for Quota {
    type Output = Quota;
    fn add(self, o: Quota) -> Quota {
        Quota {
            gpus: self.gpus + o.gpus,
            cpu_milli: self.cpu_milli + o.cpu_milli,
            memory_mib: self.memory_mib + o.memory_mib,
        }
    }
}

/// The GPU nodes a site's flavor selects (the cluster's nodes of the site's GPU model, the
/// `gpu.model` label D.1 sets and the flavor's `nodeLabels`), with their index in
/// `cluster.nodes`.
pub fn flavor_nodes(s: &Site) -> Vec<(usize, &Node)> {
    let Some(model) = site_gpu(s).map(|g| g.model.as_str()) else { return vec![] };
    s.cluster.nodes.iter().enumerate().filter(|(_, n)| n.gpu.as_ref().is_some_and(|g| g.model == model)).collect()
}

/// What the flavor's nodes offer together: their GPUs, allocatable cpu and memory; `None`
/// without GPU nodes or when one of them does not say (`allocatable`).
pub fn flavor_capacity(s: &Site) -> Option<Quota> {
    let nodes = flavor_nodes(s);
    if nodes.is_empty() {
        return None;
    }
    nodes.iter().try_fold(Quota::default(), |acc, (_, n)| {
        let a = n.allocatable.as_ref()?;
        let g = n.gpu.as_ref().map_or(0, |g| u64::from(g.count));
        Some(acc + Quota { gpus: g, cpu_milli: u64::from(a.cpus) * 1000, memory_mib: u64::from(a.memory_gib) * 1024 })
    })
}

/// A site queue's quotas: its own `cpu_quota` / `memory_gib_quota`, else `gpu_quota` GPUs'
/// worth of its flavor's nodes (rounded down to a millicore and a MiB). What the topology does
/// not give and the nodes cannot tell is 0 (`validate` refuses that: [`check`]).
pub fn site_queue_quota(s: &Site, q: &ClusterQueue) -> Quota {
    let cap = flavor_capacity(s).filter(|c| c.gpus > 0);
    let share = |total: u64| cap.map_or(0, |c| total * u64::from(q.gpu_quota) / c.gpus);
    Quota {
        gpus: u64::from(q.gpu_quota),
        cpu_milli: q.cpu_quota.map_or_else(|| share(cap.map_or(0, |c| c.cpu_milli)), |c| u64::from(c) * 1000),
        memory_mib: q.memory_gib_quota.map_or_else(|| share(cap.map_or(0, |c| c.memory_mib)), |m| u64::from(m) * 1024),
    }
}

/// The dispatching queue's quotas at the manager: the workers' queues of that name together
/// (Kueue's MultiKueue concept asks the manager for "the total quotas in the worker clusters";
/// the quota there only bounds how many Jobs are out for dispatch), with a manager site's own
/// `gpu_quota`, `cpu_quota` and `memory_gib_quota` in their place where it sets them.
pub fn dispatch_quota(t: &Topology, mk: &MultiKueue, manager_queue: Option<&ClusterQueue>) -> Quota {
    let workers = mk
        .workers
        .iter()
        .filter_map(|w| t.sites.iter().find(|s| s.name == *w))
        .filter_map(|s| s.queues.iter().find(|q| q.name == mk.queue).map(|q| site_queue_quota(s, q)))
        .fold(Quota::default(), |a, b| a + b);
    let Some(q) = manager_queue else { return workers };
    Quota {
        gpus: u64::from(q.gpu_quota),
        cpu_milli: q.cpu_quota.map_or(workers.cpu_milli, |c| u64::from(c) * 1000),
        memory_mib: q.memory_gib_quota.map_or(workers.memory_mib, |m| u64::from(m) * 1024),
    }
}

/// Every site queue can have cpu and memory quotas (`topology::queue-resources`): a queue that
/// leaves one unset needs the site's GPU nodes to say what they offer (`allocatable`; a site
/// without GPU nodes derives 0), and the site's
/// queues together (the MultiKueue manager's dispatching queue apart: it holds nothing of the
/// site) may not guarantee more cpu or memory than those nodes offer.
pub fn check(t: &Topology, out: &mut Vec<Problem>) {
    for (i, s) in t.sites.iter().enumerate() {
        let dispatch =
            |q: &ClusterQueue| t.multikueue.as_ref().is_some_and(|m| m.manager == s.name && m.queue == q.name);
        let local: Vec<(usize, &ClusterQueue)> = s.queues.iter().enumerate().filter(|(_, q)| !dispatch(q)).collect();
        let derived = local.iter().find(|(_, q)| q.cpu_quota.is_none() || q.memory_gib_quota.is_none());
        let nodes = flavor_nodes(s);
        if let Some((j, q)) = derived {
            let qp = path!["sites", i, "queues", *j, "name"];
            // Without GPU nodes there is nothing to derive from: unset quotas are 0 (and the
            // site's GPU quotas are 0 too, `topology::quota`).
            if let Some((k, n)) = nodes.iter().find(|(_, n)| n.allocatable.is_none()) {
                out.push(
                    Problem::error(
                        "topology::queue-resources",
                        path!["sites", i, "cluster", "nodes", *k, "name"],
                        format!(
                            "GPU node `{}` does not say its allocatable cpu and memory, from which queue `{}`'s quotas are derived",
                            n.name, q.name
                        ),
                    )
                    .label("no `allocatable`")
                    .related(qp, "a queue without `cpu_quota` or `memory_gib_quota`")
                    .help("add `allocatable: { cpus: N, memory_gib: M }` as `kubectl get node <name> -o jsonpath='{.status.allocatable}'` reports it (or set the queue's `cpu_quota` and `memory_gib_quota`): Kueue admits only Jobs whose every requested resource the queue covers, and every pod asks cpu and memory"),
                );
            }
        }
        let Some(cap) = flavor_capacity(s) else { continue };
        let (mut cpu, mut mem) = (0u64, 0u64);
        let mut reported = [false, false];
        for (j, q) in &local {
            let quota = site_queue_quota(s, q);
            cpu += quota.cpu_milli;
            mem += quota.memory_mib;
            let checks = [
                ("cpu", cpu, cap.cpu_milli, "cpu_quota", q.cpu_quota.is_some(), 1000),
                ("memory", mem, cap.memory_mib, "memory_gib_quota", q.memory_gib_quota.is_some(), 1024),
            ];
            for (r, (what, total, have, field, set, unit)) in checks.into_iter().enumerate() {
                if total <= have || reported[r] {
                    continue;
                }
                reported[r] = true;
                let at =
                    if set { path!["sites", i, "queues", *j, field] } else { path!["sites", i, "queues", *j, "name"] };
                out.push(
                    Problem::error(
                        "topology::queue-resources",
                        at,
                        format!(
                            "the queues of site `{}` guarantee {} of {what} together but its GPU nodes offer {}",
                            s.name,
                            show(total, unit),
                            show(have, unit)
                        ),
                    )
                    .label(format!("total so far {}", show(total, unit)))
                    .help("nominal quotas are guarantees: lower the queue's quota, or leave it unset for its share of the nodes"),
                );
            }
        }
    }
}

/// With the MultiKueue manager one of the GPU sites, every Job of its dispatching queue goes to a
/// worker (Kueue 0.15 runs none at the manager, docs/design.md "Local first"): a namespace whose
/// only LocalQueue at the manager is the dispatching queue's has no way to use the manager's own
/// GPUs (`topology::multikueue-local`, a warning: the operator may mean it).
pub fn manager_local_queue(t: &Topology, out: &mut Vec<Problem>) {
    let Some(mk) = &t.multikueue else { return };
    let Some((i, s)) = t.sites.iter().enumerate().find(|(_, s)| s.name == mk.manager) else { return };
    if flavor_nodes(s).is_empty() {
        return;
    }
    let (dispatch, own): (Vec<&ClusterQueue>, Vec<&ClusterQueue>) = s.queues.iter().partition(|q| q.name == mk.queue);
    for l in dispatch.iter().flat_map(|q| &q.local_queues) {
        if own.iter().flat_map(|q| &q.local_queues).any(|o| o.namespace == l.namespace) {
            continue;
        }
        let j = s.queues.iter().position(|q| q.name == mk.queue).unwrap_or(0);
        out.push(
            Problem::warning(
                "topology::multikueue-local",
                path!["multikueue", "manager"],
                format!(
                    "every Job of namespace `{}` at `{}` goes to the workers ({}): no queue of `{}` runs that namespace's Jobs on its own GPUs",
                    l.namespace,
                    s.name,
                    mk.workers.join(", "),
                    s.name
                ),
            )
            .label("a GPU site as MultiKueue's manager")
            .related(path!["sites", i, "queues", j, "name"], "the dispatching queue")
            .help(format!(
                "add a queue beside `{}` with a LocalQueue in `{}` (e.g. `{}-local`) for the Jobs that should run at `{}`, or make Karmada's VM the manager (docs/design.md, \"Local first\")",
                mk.queue, l.namespace, l.name, s.name
            )),
        );
    }
}

fn show(v: u64, unit: u64) -> String {
    let whole = v / unit;
    match (unit, v % unit) {
        (1000, 0) => format!("{whole} cores"),
        (1000, _) => format!("{v}m cores"),
        (_, 0) => format!("{whole} GiB"),
        _ => format!("{v} MiB"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota_of(text: &str) -> Vec<Quota> {
        let t = crate::topology::load_str("t.yaml", text.to_string()).unwrap().topology;
        t.sites[0].queues.iter().map(|q| site_queue_quota(&t.sites[0], q)).collect()
    }

    #[test]
    fn a_queue_gets_its_gpus_worth_of_its_nodes() {
        let text = include_str!("../../topology.example.yaml");
        let q = quota_of(text);
        // The example's Franca GPU nodes (placeholders): 3 × (1 GPU, 16 cores, 62 GiB).
        let per_gpu = Quota { gpus: 1, cpu_milli: 16_000, memory_mib: 62 * 1024 };
        assert_eq!(q[0], per_gpu, "gpu-interactive, 1 GPU");
        assert_eq!(q[1], per_gpu + per_gpu, "gpu-batch-local, 2 GPUs");
    }
}
