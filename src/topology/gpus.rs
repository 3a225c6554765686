//! The GPU services' rules: what KAI Scheduler's sharing can do (`topology::gpu-sharing`) and
//! whether the services fit the GPUs of the sites they are placed on (`topology::gpu-capacity`).
//!
//! How the GPUs of a site are split (docs/design.md, "GPUs: Kueue and KAI Scheduler"): each
//! queue's `gpu_quota` is guaranteed to that queue (Kueue's ClusterQueue and KAI's queue of the
//! same name); a service that names a `queue` runs on that queue's GPUs, placed by KAI (whole
//! GPUs or shares of one); a GPU service without a queue runs on the GPUs no quota holds. The
//! external GPU hosts carry a `NoSchedule` taint and count only for services that tolerate it.

use super::model::*;
use super::problem::Problem;
use super::tree::Path;
use crate::path;

/// GPUs a site has in its cluster (external hosts are not schedulable by Kueue).
pub fn site_gpus(s: &Site) -> u32 {
    s.cluster.nodes.iter().filter_map(|n| n.gpu.as_ref()).map(|g| g.count).sum()
}

/// The first GPU of a site's cluster: its model is the one the GPU services select there.
pub fn site_gpu(s: &Site) -> Option<&Gpu> {
    s.cluster.nodes.iter().find_map(|n| n.gpu.as_ref())
}

/// Whether KAI Scheduler is installed at a site (step D.5: pinned, and the site has GPU nodes).
pub fn kai_installed(t: &Topology, s: &Site) -> bool {
    t.versions.kai_scheduler.is_some() && site_gpu(s).is_some()
}

/// The most replicas of `svc` a site gets, by its class: all of them where the class runs
/// replicas at every site or prefers the site; for `spread`, the site's share of the weights,
/// rounded up (Karmada hands the remainder of a division to some site; fabric assumes the worst).
pub fn replicas_at(t: &Topology, svc: &Service, site: &str) -> u32 {
    let Some(c) = t.placement.iter().find(|c| c.name == svc.class) else { return 0 };
    let sites: Vec<&str> = if c.sites.is_empty() {
        t.sites.iter().map(|s| s.name.as_str()).collect()
    } else {
        c.sites.iter().map(String::as_str).collect()
    };
    if !sites.contains(&site) {
        return 0;
    }
    match c.strategy {
        PlacementStrategy::Replicas => svc.replicas,
        PlacementStrategy::Affinity => {
            if c.prefer.as_deref() == Some(site) {
                svc.replicas
            } else {
                0
            }
        }
        PlacementStrategy::Spread => {
            let weight = |s: &str| c.weights.get(s).copied().unwrap_or(0).max(0) as u64;
            let total: u64 = sites.iter().map(|s| weight(s)).sum();
            if total == 0 {
                return 0;
            }
            (u64::from(svc.replicas) * weight(site)).div_ceil(total) as u32
        }
    }
}

/// The sites a service runs at (index in `sites`, the site, its replicas there).
fn placed<'a>(t: &'a Topology, svc: &Service) -> Vec<(usize, &'a Site, u32)> {
    t.sites.iter().enumerate().map(|(i, s)| (i, s, replicas_at(t, svc, &s.name))).filter(|(_, _, r)| *r > 0).collect()
}

/// The path of the field that makes a service use GPUs: the sharing form, else `gpus`.
fn gpu_field(i: usize, svc: &Service) -> Path {
    let key = match (svc.gpu_fraction, svc.gpu_memory_mib) {
        (Some(_), _) => "gpu_fraction",
        (None, Some(_)) => "gpu_memory_mib",
        (None, None) => "gpus",
    };
    path!["services", i, key]
}

/// What KAI Scheduler's GPU sharing cannot do, each at the field that asks for it.
pub fn gpu_sharing(t: &Topology, out: &mut Vec<Problem>) {
    for (i, svc) in t.services.iter().enumerate() {
        let p = path!["services", i];
        if let Some(f) = svc.gpu_fraction
            && !(f > 0.0 && f <= 1.0)
        {
            out.push(
                Problem::error(
                    "topology::gpu-sharing",
                    p.key("gpu_fraction"),
                    format!("gpu_fraction {f} is outside (0, 1]"),
                )
                .label("not a share of one GPU")
                .help("a share of one device: 0.5 is half a GPU; whole GPUs go in `gpus`"),
            );
        }
        if svc.gpu_fraction.is_some() && svc.gpu_memory_mib.is_some() {
            out.push(
                Problem::error(
                    "topology::gpu-sharing",
                    p.key("gpu_memory_mib"),
                    format!("service `{}` asks for a GPU fraction and an amount of GPU memory", svc.name),
                )
                .label("second form")
                .related(p.key("gpu_fraction"), "first form")
                .help("KAI Scheduler takes one of `gpu-fraction` and `gpu-memory`: keep one"),
            );
        }
        if svc.shares_gpu() && svc.gpus > 0 {
            out.push(
                Problem::error(
                    "topology::gpu-sharing",
                    p.key("gpus"),
                    format!("service `{}` asks for whole GPUs and a shared one at once", svc.name),
                )
                .label("whole GPUs")
                .related(gpu_field(i, svc), "shared GPU")
                .help("a shared pod requests no `nvidia.com/gpu`: remove `gpus`, or the sharing field"),
            );
        }
        if svc.shares_gpu() && svc.queue.is_none() {
            out.push(
                Problem::error(
                    "topology::gpu-sharing",
                    gpu_field(i, svc),
                    format!("service `{}` shares a GPU but names no `queue`", svc.name),
                )
                .label("no queue")
                .help(
                    "KAI Scheduler schedules a pod only in a (leaf) queue: add `queue: <a queue of the sites' queues>`",
                ),
            );
        }
        if svc.queue.is_some() && !svc.uses_gpu() {
            out.push(
                Problem::error(
                    "topology::gpu-sharing",
                    p.key("queue"),
                    format!("service `{}` names a queue but asks for no GPU", svc.name),
                )
                .label("queue without GPUs")
                .help("a queue holds GPUs: add `gpus`, `gpu_fraction` or `gpu_memory_mib`, or remove `queue`"),
            );
            continue;
        }
        for (si, s, _) in placed(t, svc) {
            at_site(t, i, svc, si, s, out);
        }
    }
}

/// The sharing rules of one service at one site it runs at.
fn at_site(t: &Topology, i: usize, svc: &Service, si: usize, s: &Site, out: &mut Vec<Problem>) {
    let p = path!["services", i];
    let wants_kai = svc.shares_gpu() || (svc.uses_gpu() && svc.queue.is_some());
    if wants_kai && !kai_installed(t, s) {
        let why = if t.versions.kai_scheduler.is_none() {
            "`versions.kai_scheduler` is not pinned"
        } else {
            "the site has no GPU nodes"
        };
        let at = if svc.shares_gpu() { gpu_field(i, svc) } else { p.key("queue") };
        out.push(
            Problem::error(
                "topology::gpu-sharing",
                at,
                format!("service `{}` needs KAI Scheduler at site `{}`, which has none: {why}", svc.name, s.name),
            )
            .label("needs KAI Scheduler")
            .related(path!["sites", si, "name"], "runs here")
            .help("pin `versions.kai_scheduler` (step D.5 installs it where a site has GPU nodes), or use whole `gpus` without a queue"),
        );
    }
    if let (Some(mib), Some(g)) = (svc.gpu_memory_mib, site_gpu(s))
        && u64::from(mib) > u64::from(g.memory_gib) * 1024
    {
        let node = s.cluster.nodes.iter().position(|n| n.gpu.is_some()).unwrap_or(0);
        out.push(
            Problem::error(
                "topology::gpu-sharing",
                p.key("gpu_memory_mib"),
                format!(
                    "service `{}` asks for {mib} MiB of one GPU, but a {} at site `{}` has {} MiB",
                    svc.name,
                    g.model,
                    s.name,
                    u64::from(g.memory_gib) * 1024
                ),
            )
            .label(format!("more than {} GiB", g.memory_gib))
            .related(path!["sites", si, "cluster", "nodes", node, "gpu", "memory_gib"], "one GPU's memory (GiB)")
            .help("KAI's `gpu-memory` is MiB of one device: at most `memory_gib` × 1024; more needs whole `gpus`"),
        );
    }
    if let Some(q) = &svc.queue {
        let queues: Vec<&str> = s.queues.iter().map(|q| q.name.as_str()).collect();
        let dispatch = t.multikueue.as_ref().is_some_and(|m| m.manager == s.name && &m.queue == q);
        if !queues.contains(&q.as_str()) {
            out.push(
                Problem::error(
                    "topology::reference",
                    p.key("queue"),
                    format!("queue `{q}` does not exist at site `{}`, where `{}` runs", s.name, svc.name),
                )
                .label("unknown queue at that site")
                .related(path!["sites", si, "queues"], "the site's queues")
                .help(format!("add `{q}` to the site's queues, or use one of: {}", queues.join(", "))),
            );
        } else if dispatch {
            out.push(
                Problem::error(
                    "topology::gpu-sharing",
                    p.key("queue"),
                    format!("queue `{q}` dispatches batch Jobs to other sites: at `{}` it holds no GPUs", s.name),
                )
                .label("the MultiKueue queue")
                .related(path!["multikueue", "queue"], "dispatches")
                .help("name a queue whose quota holds GPUs at every site of the service (e.g. the interactive one)"),
            );
        }
    }
}

/// Room left for rounding (0.1 + 0.2 in floats is just above 0.3).
const EPS: f64 = 1e-9;

/// Places one replica on `devices`: `whole` empty devices, or a share of one (first fit, as KAI
/// places a fraction on a device that has room). False when it does not fit.
fn place(devices: &mut [&mut f64], whole: u32, share: f64) -> bool {
    if whole > 0 {
        let free: Vec<usize> = (0..devices.len()).filter(|d| *devices[*d] == 0.0).take(whole as usize).collect();
        if free.len() < whole as usize {
            return false;
        }
        for d in free {
            *devices[d] = 1.0;
        }
        return true;
    }
    match devices.iter_mut().find(|d| ***d + share <= 1.0 + EPS) {
        Some(d) => {
            **d += share;
            true
        }
        None => false,
    }
}

/// The share of one device a replica of `svc` takes at a site whose GPUs are `g`.
fn share(svc: &Service, g: Option<&Gpu>) -> f64 {
    match (svc.gpu_fraction, svc.gpu_memory_mib, g) {
        (Some(f), _, _) => f,
        (None, Some(mib), Some(g)) if g.memory_gib > 0 => f64::from(mib) / (f64::from(g.memory_gib) * 1024.0),
        _ => 1.0,
    }
}

/// GPU services whose replicas do not fit their site's GPUs, at the service's GPU field.
pub fn gpu_capacity(t: &Topology, out: &mut Vec<Problem>) {
    for (si, s) in t.sites.iter().enumerate() {
        let is_dispatch =
            |q: &ClusterQueue| t.multikueue.as_ref().is_some_and(|m| m.manager == s.name && m.queue == q.name);
        let local: Vec<&ClusterQueue> = s.queues.iter().filter(|q| !is_dispatch(q)).collect();
        let quotas: u32 = local.iter().map(|q| q.gpu_quota).sum();
        let unqueued = site_gpus(s).saturating_sub(quotas);
        let g = site_gpu(s);
        let external: u32 = s
            .external_workloads
            .iter()
            .filter_map(|w| w.gpu.as_ref())
            .filter(|w| g.is_some_and(|g| g.model == w.model))
            .map(|w| w.count)
            .sum();
        // Each pool's devices (a queue's quota, or the GPUs no quota holds), how much of each
        // is taken; the external hosts' devices are shared by the pods that tolerate them.
        let mut pools: Vec<(Option<&str>, Vec<f64>)> =
            local.iter().map(|q| (Some(q.name.as_str()), vec![0.0; q.gpu_quota as usize])).collect();
        pools.push((None, vec![0.0; unqueued as usize]));
        let mut outside = vec![0.0; external as usize];
        for (i, svc) in t.services.iter().enumerate().filter(|(_, x)| x.uses_gpu()) {
            let r = replicas_at(t, svc, &s.name);
            let Some((_, pool)) = pools.iter_mut().find(|(q, _)| *q == svc.queue.as_deref()) else { continue };
            if r == 0 {
                continue;
            }
            let x = share(svc, g);
            let fits = (0..r).all(|_| {
                let mut devices: Vec<&mut f64> = pool.iter_mut().collect();
                if svc.tolerate_external {
                    devices.extend(outside.iter_mut());
                }
                place(&mut devices, if svc.shares_gpu() { 0 } else { svc.gpus }, x)
            });
            if !fits {
                out.push(overflow(i, svc, si, s, r, unqueued, external));
            }
        }
    }
}

/// The problem of a service that does not fit: what it asks for, what holds its GPUs there.
fn overflow(i: usize, svc: &Service, si: usize, s: &Site, r: u32, unqueued: u32, ext: u32) -> Problem {
    let each = if svc.shares_gpu() {
        format!("{:.3} of a GPU", share(svc, site_gpu(s)))
    } else {
        format!("{} GPU(s)", svc.gpus)
    };
    let (pool, related) = match &svc.queue {
        Some(q) => {
            let j = s.queues.iter().position(|x| &x.name == q).unwrap_or(0);
            let quota = s.queues.get(j).map_or(0, |x| x.gpu_quota);
            (format!("queue `{q}`'s quota of {quota} GPU(s)"), path!["sites", si, "queues", j, "gpu_quota"])
        }
        None => (
            format!("the {unqueued} GPU(s) of site `{}` that no queue's quota holds", s.name),
            path!["sites", si, "queues"],
        ),
    };
    let external = match (ext, svc.tolerate_external) {
        (0, _) => String::new(),
        (n, true) => format!(" and {n} GPU(s) of external hosts"),
        (n, false) => format!(" ({n} GPU(s) of external hosts not counted: the service does not tolerate their taint)"),
    };
    Problem::error(
        "topology::gpu-capacity",
        gpu_field(i, svc),
        format!(
            "service `{}` does not fit at site `{}`: {r} replica(s) of {each} each, on {pool}{external}, after the services before it",
            svc.name, s.name
        ),
    )
    .label("does not fit")
    .related(related, "these GPUs")
    .help("share GPUs (`gpu_fraction`, `gpu_memory_mib`), lower `replicas`, raise the queue's quota (within the site's GPUs), or set `tolerate_external: true` to use the external GPU hosts")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Topology {
        crate::topology::load_str("t.yaml", include_str!("../../topology.example.yaml").to_string()).unwrap().topology
    }

    #[test]
    fn spread_rounds_up_and_affinity_goes_to_the_preferred_site() {
        let mut t = example();
        let vllm = t.services.iter().find(|s| s.name == "vllm").unwrap().clone();
        assert_eq!((replicas_at(&t, &vllm, "franca"), replicas_at(&t, &vllm, "sp")), (1, 1));
        let three = Service { replicas: 3, ..vllm };
        assert_eq!((replicas_at(&t, &three, "franca"), replicas_at(&t, &three, "sp")), (2, 2), "the worst case");
        let qdrant = t.services.iter().find(|s| s.name == "qdrant").unwrap().clone();
        assert_eq!((replicas_at(&t, &qdrant, "franca"), replicas_at(&t, &qdrant, "sp")), (1, 0));
        t.placement.retain(|c| c.name != "web-services");
        let web = t.services.iter().find(|s| s.name == "open-webui").unwrap();
        assert_eq!(replicas_at(&t, web, "sp"), 0, "no class: nowhere");
    }

    #[test]
    fn two_halves_share_a_device_and_a_third_share_needs_another() {
        let mut d = [0.0, 0.0];
        let mut one = [0.0];
        for _ in 0..2 {
            assert!(place(&mut one.iter_mut().collect::<Vec<_>>(), 0, 0.5));
        }
        assert!(!place(&mut one.iter_mut().collect::<Vec<_>>(), 0, 0.5), "a third half does not fit one GPU");
        assert!(place(&mut d.iter_mut().collect::<Vec<_>>(), 0, 0.6));
        assert!(place(&mut d.iter_mut().collect::<Vec<_>>(), 0, 0.6), "0.6 + 0.6 takes two devices");
        assert!(!place(&mut d.iter_mut().collect::<Vec<_>>(), 1, 1.0), "no empty device is left");
        assert!(place(&mut d.iter_mut().collect::<Vec<_>>(), 0, 0.4));
        assert_eq!(d, [1.0, 0.6]);
    }
}
