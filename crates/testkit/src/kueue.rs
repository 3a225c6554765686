//! Kueue's admission of batch Jobs and MultiKueue's dispatch of them, over the clusters' test API
//! servers, as one reconcile a test calls ([`reconcile`], like `cilium_mesh::sync`). What it
//! models, and from where (rows "Kueue admission" and "MultiKueue dispatch" of `kube_api.md`):
//!
//! * **Admission** (Kueue's "Admission" and "Cluster Queue" concepts, flavor fungibility's
//!   defaults): a suspended Job labelled `kueue.x-k8s.io/queue-name` is queued in that LocalQueue
//!   of its namespace, whose ClusterQueue must be `Active`. Jobs are tried oldest first. What it
//!   asks is every resource its pods request, computed as Kueue does ([`job_requests`]: cpu,
//!   memory, `nvidia.com/gpu`, anything named). A requested resource that none of the queue's
//!   resource groups covers keeps the Job out ("resource cpu unavailable in ClusterQueue",
//!   kubernetes-sigs/kueue `pkg/scheduler/flavorassigner/flavorassigner.go`
//!   `findFlavorForPodSets`; the double has no `resources.excludeResourcePrefixes`, which fabric
//!   does not set). Each group it asks of is assigned the first flavor, in order, where every
//!   requested resource of the group has room: the queue's `nominalQuota` less the usage of its
//!   admitted, unfinished Jobs on that flavor, plus what the other queues of its cohort leave
//!   unused (borrowing, which the default `whenCanBorrow` takes before trying the next flavor)
//!   ([`assign`]). Admitting unsuspends the Job and adds the flavors' `nodeLabels` to its pod
//!   template's `nodeSelector`, as Kueue does. [`why_pending`] says why a Job waits.
//! * **MultiKueue** (the MultiKueue concept's "Job Flow"; `pkg/controller/admissionchecks/
//!   multikueue` `batchjob_adapter.go` and `workload.go`): a queue with the MultiKueue check
//!   dispatches every Job it admits. The Job is `managedBy: kueue.x-k8s.io/multikueue` (Kueue's
//!   webhook sets it when the Job is created; the double sets it on its first pass) and a worker
//!   of the check's MultiKueueConfig whose MultiKueueCluster is `Active`, and whose own Kueue
//!   admits the copy, gets the Job: same name and namespace, labelled
//!   `kueue.x-k8s.io/prebuilt-workload-name` and `kueue.x-k8s.io/multikueue-origin`, without
//!   `managedBy`. MultiKueue sends the Workload to every worker and keeps the one whose quota
//!   reservation came first (`workload.go` `bestMatchByCondition`: the earliest `QuotaReserved`);
//!   here that is the first worker with room in the order the test passes the clusters to
//!   [`reconcile`] (which worker's Kueue answers first), whatever the config's order. The
//!   worker's Job status is copied to the manager's Job; once it finishes, the worker's copy is
//!   deleted.
//! * **Running**: an admitted Job that nobody else manages runs; agnhost's `entrypoint-tester`
//!   exits at once, so such a Job completes on the next pass; any other Job runs until the test
//!   calls [`finish`]. A finished Job frees its quota.
//!
//! Not modelled: LimitRange defaults (`handlePodLimitRange`), resource transformations and
//! excluded prefixes, borrowing and lending limits, preemption,
//! priorities, the Workload objects themselves (the double serves no Workload kind), and a
//! MultiKueue Job that no worker admits holding its quota at the manager (Kueue keeps that
//! reservation; here it stays suspended and counts nothing).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::kube_api::TestApiServer;

pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
pub const PREBUILT_LABEL: &str = "kueue.x-k8s.io/prebuilt-workload-name";
pub const ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";
pub const MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";
const KUEUE: &str = "kueue.x-k8s.io/v1beta2";

/// A cluster of the fabric by its MultiKueueCluster name, and its API.
pub type Cluster<'a> = (&'a str, &'a TestApiServer);

/// One pass of every cluster's Kueue and of MultiKueue: runs what can run, syncs dispatched
/// Jobs back, admits what fits. When several workers have room for a Job, the one first in
/// `clusters` wins (its Kueue reserved first). Returns what happened, one line per event
/// (`franca: batch/a admitted on gpu-a5500`, `franca: batch/b dispatched to sp`).
pub fn reconcile(clusters: &[Cluster<'_>]) -> Vec<String> {
    let mut events = Vec::new();
    for (name, api) in clusters {
        run(name, api, &mut events);
    }
    for c in clusters {
        sync_back(c, clusters, &mut events);
    }
    for c in clusters {
        admit_pending(c, clusters, &mut events);
    }
    events
}

/// The Job's pod exits 0: it completes (what a test does to a Job that holds quota).
pub fn finish(api: &TestApiServer, ns: &str, name: &str) {
    if let Some(job) = api.object("batch/v1", "Job", Some(ns), name) {
        complete(api, job);
    }
}

/// Whether a Job has finished (condition Complete or Failed True).
pub fn finished(job: &Value) -> bool {
    job["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
}

fn complete(api: &TestApiServer, mut job: Value) {
    job["status"] = json!({"succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]});
    api.put_raw_as(job, "job-controller");
}

fn jobs(api: &TestApiServer) -> Vec<Value> {
    let mut out: Vec<Value> = api.objects().into_iter().filter(|o| o["kind"] == "Job").collect();
    out.sort_by_key(|j| j["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse::<u64>().ok()));
    out
}

fn meta<'a>(o: &'a Value, field: &str) -> &'a str {
    o["metadata"][field].as_str().unwrap_or_default()
}

fn label<'a>(o: &'a Value, k: &str) -> &'a str {
    o["metadata"]["labels"][k].as_str().unwrap_or_default()
}

fn suspended(job: &Value) -> bool {
    job["spec"]["suspend"] == true
}

/// Admitted Jobs nobody else manages run; `entrypoint-tester` exits at once.
fn run(cluster: &str, api: &TestApiServer, events: &mut Vec<String>) {
    for job in jobs(api) {
        let quick = job["spec"]["template"]["spec"]["containers"][0]["args"][0] == "entrypoint-tester";
        if !suspended(&job) && !finished(&job) && job["spec"]["managedBy"].is_null() && quick {
            events.push(format!("{cluster}: {}/{} completed", meta(&job, "namespace"), meta(&job, "name")));
            complete(api, job);
        }
    }
}

/// A queue's view: the ClusterQueue a Job's LocalQueue points at, when both are Active.
fn cluster_queue(api: &TestApiServer, job: &Value) -> Option<Value> {
    let lq = api.object(KUEUE, "LocalQueue", Some(meta(job, "namespace")), label(job, QUEUE_LABEL))?;
    let cq = api.object(KUEUE, "ClusterQueue", None, lq["spec"]["clusterQueue"].as_str()?)?;
    (active(&lq) && active(&cq)).then_some(cq)
}

fn active(o: &Value) -> bool {
    o["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Active" && c["status"] == "True")
}

/// The MultiKueue check of a ClusterQueue, as (its MultiKueueConfig's worker names).
fn multikueue_workers(api: &TestApiServer, cq: &Value) -> Option<Vec<String>> {
    let checks = cq["spec"]["admissionChecksStrategy"]["admissionChecks"].as_array()?;
    checks.iter().find_map(|c| {
        let ac = api.object(KUEUE, "AdmissionCheck", None, c["name"].as_str()?)?;
        if ac["spec"]["controllerName"] != MULTIKUEUE {
            return None;
        }
        let config = api.object(KUEUE, "MultiKueueConfig", None, ac["spec"]["parameters"]["name"].as_str()?)?;
        Some(config["spec"]["clusters"].as_array()?.iter().filter_map(|w| w.as_str().map(str::to_string)).collect())
    })
}

/// What a Job asks of its ClusterQueue, resource by resource, in Kueue's units (cpu in
/// millicores, every other resource in whole units, rounded up: `pkg/resources`
/// `ResourceValue`). Kueue's `pkg/workload/workload.go` `totalRequestsFromPodSets` takes one
/// pod's requests with `k8s.io/component-helpers/resource` `PodRequests` (kubernetes/kubernetes
/// `staging/src/k8s.io/component-helpers/resource/helpers.go`: the containers' requests added
/// up; each init container's, plus the restartable (sidecar) init containers before it, taken
/// as a floor; restartable init containers added to the sum; pod-level `resources.requests` of
/// cpu and memory in place of the containers'; the pod's `overhead` added) after
/// `pkg/workload/resources.go` `AdjustResources` filled what is missing: the RuntimeClass's
/// `overhead.podFixed` when the pod names one and has no `overhead` (`handlePodOverhead`), and
/// a container's limits as its missing requests (`UseLimitsAsMissingRequestsInPod`, as
/// Kubernetes defaults a pod). Every resource named counts, even at 0. Times the pod count,
/// `parallelism` (default 1) or `completions` when fewer (`pkg/controller/jobs/job`
/// `podsCount`).
pub fn job_requests(api: &TestApiServer, job: &Value) -> Result<Requests, String> {
    let spec = &job["spec"]["template"]["spec"];
    let container = |c: &Value| -> Result<Requests, String> {
        let mut r = list(&c["resources"]["requests"])?;
        for (k, v) in list(&c["resources"]["limits"])? {
            r.entry(k).or_insert(v);
        }
        Ok(r)
    };
    let mut pod = Requests::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        add(&mut pod, &container(c)?);
    }
    let (mut sidecars, mut init_floor) = (Requests::new(), Requests::new());
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let r = container(c)?;
        let use_ = if c["restartPolicy"] == "Always" {
            add(&mut pod, &r);
            add(&mut sidecars, &r);
            sidecars.clone()
        } else {
            let mut u = r.clone();
            add(&mut u, &sidecars);
            u
        };
        for (k, v) in use_ {
            let e = init_floor.entry(k).or_insert(0);
            *e = (*e).max(v);
        }
    }
    for (k, v) in init_floor {
        let e = pod.entry(k).or_insert(0);
        *e = (*e).max(v);
    }
    for (k, v) in list(&spec["resources"]["requests"])? {
        if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
            pod.insert(k, v);
        }
    }
    let mut overhead = spec["overhead"].clone();
    if overhead.as_object().is_none_or(|o| o.is_empty())
        && let Some(rc) = spec["runtimeClassName"].as_str()
    {
        overhead = api
            .object("node.k8s.io/v1", "RuntimeClass", None, rc)
            .map_or(Value::Null, |r| r["overhead"]["podFixed"].clone());
    }
    add(&mut pod, &list(&overhead)?);
    let parallelism = job["spec"]["parallelism"].as_i64().unwrap_or(1);
    let count = job["spec"]["completions"].as_i64().map_or(parallelism, |c| c.min(parallelism));
    Ok(pod.into_iter().map(|(k, v)| (k, v * i128::from(count))).collect())
}

/// Resource name → quantity in Kueue's units.
pub type Requests = BTreeMap<String, i128>;

fn add(to: &mut Requests, r: &Requests) {
    for (k, v) in r {
        *to.entry(k.clone()).or_insert(0) += v;
    }
}

fn list(v: &Value) -> Result<Requests, String> {
    let mut out = Requests::new();
    for (k, q) in v.as_object().into_iter().flatten() {
        out.insert(k.clone(), units(k, q)?);
    }
    Ok(out)
}

/// A quantity of `resource` in Kueue's units: millicores for cpu, else whole units rounded up.
fn units(resource: &str, q: &Value) -> Result<i128, String> {
    let milli = milli(q).ok_or_else(|| format!("{resource}: {q} is not a Kubernetes quantity"))?;
    Ok(if resource == "cpu" { milli } else { (milli + 999).div_euclid(1000) })
}

/// A Kubernetes quantity (`k8s.io/apimachinery/pkg/api/resource` `quantity.go`: a decimal
/// number, then a binary suffix `Ki`..`Ei`, a decimal one `n`, `u`, `m`, `k`, `M`..`E`, or an
/// exponent `e<n>`/`E<n>`) in thousandths, rounded up.
pub fn milli(q: &Value) -> Option<i128> {
    if let Some(i) = q.as_i64() {
        return Some(i128::from(i) * 1000);
    }
    let s = q.as_str()?;
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let (neg, num) = match num.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() || !(int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())) {
        return None;
    }
    // The number as digits / 10^scale, times the suffix's 2^b · 10^d, times 1000.
    let digits: i128 = format!("{int}{frac}").parse().ok()?;
    let (two, ten): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        e if e.starts_with(['e', 'E']) => (0, e[1..].parse().ok()?),
        _ => return None,
    };
    let exp = ten + 3 - i32::try_from(frac.len()).ok()?;
    let mut v = digits.checked_mul(1i128.checked_shl(two)?)?;
    if exp >= 0 {
        v = v.checked_mul(10i128.checked_pow(exp.unsigned_abs())?)?;
    } else {
        let d = 10i128.checked_pow(exp.unsigned_abs())?;
        v = (v + d - 1).div_euclid(d);
    }
    Some(if neg { -v } else { v })
}

/// A ClusterQueue's resource groups: (covered resources, flavors in order with each covered
/// resource's `nominalQuota` in Kueue's units).
type Group = (Vec<String>, Vec<(String, Requests)>);

fn groups(cq: &Value) -> Vec<Group> {
    cq["spec"]["resourceGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|rg| {
            let covered = rg["coveredResources"].as_array().into_iter().flatten();
            let covered: Vec<String> = covered.filter_map(|r| r.as_str().map(str::to_string)).collect();
            let flavors = rg["flavors"].as_array().into_iter().flatten().map(|f| {
                let quota = f["resources"].as_array().into_iter().flatten().filter_map(|r| {
                    let name = r["name"].as_str()?;
                    Some((name.to_string(), units(name, &r["nominalQuota"]).unwrap_or(0)))
                });
                (f["name"].as_str().unwrap_or_default().to_string(), quota.collect())
            });
            (covered, flavors.collect())
        })
        .collect()
}

/// The flavor an admitted Job was given in each of its queue's resource groups it asks of: the
/// first of the group whose `nodeLabels` its pod template's `nodeSelector` carries (what
/// admission injected).
fn flavors_of(api: &TestApiServer, cq: &Value, job: &Value) -> Vec<String> {
    let selector = &job["spec"]["template"]["spec"]["nodeSelector"];
    let asks = job_requests(api, job).unwrap_or_default();
    groups(cq)
        .into_iter()
        .filter(|(covered, _)| covered.iter().any(|r| asks.contains_key(r)))
        .filter_map(|(_, flavors)| {
            flavors.into_iter().map(|(f, _)| f).find(|f| {
                let labels = api.object(KUEUE, "ResourceFlavor", None, f).map(|rf| rf["spec"]["nodeLabels"].clone());
                labels.and_then(|l| l.as_object().cloned()).unwrap_or_default().iter().all(|(k, v)| &selector[k] == v)
            })
        })
        .collect()
}

/// What the admitted, unfinished Jobs of ClusterQueue `cq_name` hold of `flavor`, by resource.
fn usage(api: &TestApiServer, cq_name: &str, flavor: &str) -> Requests {
    let mut used = Requests::new();
    for j in jobs(api).iter().filter(|j| !suspended(j) && !finished(j) && !label(j, QUEUE_LABEL).is_empty()) {
        let Some(lq) = api.object(KUEUE, "LocalQueue", Some(meta(j, "namespace")), label(j, QUEUE_LABEL)) else {
            continue;
        };
        let Some(cq) = lq["spec"]["clusterQueue"].as_str().and_then(|n| api.object(KUEUE, "ClusterQueue", None, n))
        else {
            continue;
        };
        if meta(&cq, "name") != cq_name || !flavors_of(api, &cq, j).iter().any(|f| f == flavor) {
            continue;
        }
        let covered: Vec<String> = groups(&cq)
            .into_iter()
            .filter(|(_, fl)| fl.iter().any(|(f, _)| f == flavor))
            .flat_map(|(c, _)| c)
            .collect();
        let asks = job_requests(api, j).unwrap_or_default();
        add(&mut used, &asks.into_iter().filter(|(k, _)| covered.contains(k)).collect());
    }
    used
}

/// The flavors Kueue assigns the Job in its ClusterQueue `cq`, one per resource group it asks
/// of, or why it cannot be admitted now. Kueue's `pkg/scheduler/flavorassigner/flavorassigner.go`
/// (`findFlavorForPodSets`): a requested resource that no resource group covers is "resource
/// <name> unavailable in ClusterQueue", and nothing is admitted; else, in each group, the first
/// flavor in order where every requested resource of the group fits: the queue's unused
/// `nominalQuota` plus what its cohort's other queues leave unused of that flavor (borrowing,
/// which the default `whenCanBorrow: MayStopSearch` takes before trying the next flavor).
pub fn assign(api: &TestApiServer, cq: &Value, job: &Value) -> Result<Vec<String>, String> {
    let asks = job_requests(api, job)?;
    let groups = groups(cq);
    if let Some(r) = asks.keys().find(|r| !groups.iter().any(|(c, _)| c.contains(r))) {
        return Err(format!("resource {r} unavailable in ClusterQueue"));
    }
    let name = meta(cq, "name");
    let cohort = cq["spec"]["cohortName"].as_str().unwrap_or_default();
    let others: Vec<Value> = if cohort.is_empty() {
        vec![]
    } else {
        api.objects()
            .into_iter()
            .filter(|o| o["kind"] == "ClusterQueue" && o["spec"]["cohortName"] == cohort && meta(o, "name") != name)
            .collect()
    };
    let mut chosen = Vec::new();
    for (covered, flavors) in groups.iter().filter(|(c, _)| c.iter().any(|r| asks.contains_key(r))) {
        let fits = |f: &str, nominal: &Requests| {
            // Without borrowing or lending limits (fabric sets none), what the queue may still
            // take is what its cohort as a whole has left: every member's nominal quota less its
            // usage (a queue that borrowed counts against the others).
            let own = usage(api, name, f);
            let rest: Vec<(Requests, Requests)> = others
                .iter()
                .map(|o| {
                    let n = groups_flavor(o, f);
                    (n, usage(api, meta(o, "name"), f))
                })
                .collect();
            covered.iter().filter(|r| asks.contains_key(*r)).all(|r| {
                let left = nominal.get(r).copied().unwrap_or(0) - own.get(r).copied().unwrap_or(0)
                    + rest
                        .iter()
                        .map(|(n, u)| n.get(r).copied().unwrap_or(0) - u.get(r).copied().unwrap_or(0))
                        .sum::<i128>();
                asks[r] <= left
            })
        };
        let Some((f, _)) = flavors.iter().find(|(f, nominal)| fits(f, nominal)) else {
            let names: Vec<&str> = covered.iter().filter(|r| asks.contains_key(*r)).map(String::as_str).collect();
            return Err(format!("insufficient unused quota for {} in every flavor", names.join(", ")));
        };
        chosen.push(f.clone());
    }
    Ok(chosen)
}

/// A ClusterQueue's nominal quota of `flavor`, by resource, whatever its group.
fn groups_flavor(cq: &Value, flavor: &str) -> Requests {
    groups(cq).into_iter().flat_map(|(_, fl)| fl).filter(|(f, _)| f == flavor).flat_map(|(_, q)| q).collect()
}

/// Why Kueue keeps the Job `ns/name` of `api` suspended, as its Workload's `QuotaReserved`
/// message would say; `None` when it is not waiting in a queue.
pub fn why_pending(api: &TestApiServer, ns: &str, name: &str) -> Option<String> {
    let job = api.object("batch/v1", "Job", Some(ns), name)?;
    if !suspended(&job) || finished(&job) {
        return None;
    }
    let Some(cq) = cluster_queue(api, &job) else {
        return Some(format!("LocalQueue {ns}/{} missing or inactive", label(&job, QUEUE_LABEL)));
    };
    Some(match assign(api, &cq, &job) {
        Err(e) => format!("couldn't assign flavors: {e} {}", meta(&cq, "name")),
        Ok(_) => "waiting for a worker with room".to_string(),
    })
}

/// Unsuspends the Job on `flavors`: their `nodeLabels` go into the pod template's `nodeSelector`.
fn admit(api: &TestApiServer, mut job: Value, flavors: &[String], managed_by: Option<&str>) {
    for labels in flavors.iter().filter_map(|f| {
        api.object(KUEUE, "ResourceFlavor", None, f).and_then(|rf| rf["spec"]["nodeLabels"].as_object().cloned())
    }) {
        let spec = &mut job["spec"]["template"]["spec"];
        if !spec["nodeSelector"].is_object() {
            spec["nodeSelector"] = json!({});
        }
        for (k, v) in labels {
            spec["nodeSelector"][k] = v;
        }
    }
    job["spec"]["suspend"] = json!(false);
    if let Some(m) = managed_by {
        job["spec"]["managedBy"] = json!(m);
    }
    api.put_raw_as(job, "kueue");
}

fn admit_pending(c: &Cluster<'_>, clusters: &[Cluster<'_>], events: &mut Vec<String>) {
    let (name, api) = *c;
    for job in jobs(api) {
        if !suspended(&job) || finished(&job) || label(&job, QUEUE_LABEL).is_empty() {
            continue;
        }
        let Some(cq) = cluster_queue(api, &job) else { continue };
        let Ok(flavors) = assign(api, &cq, &job) else { continue };
        let flavor = flavors.join(", ");
        let what = format!("{}/{}", meta(&job, "namespace"), meta(&job, "name"));
        match multikueue_workers(api, &cq) {
            None => {
                events.push(format!("{name}: {what} admitted on {flavor}"));
                admit(api, job, &flavors, None);
            }
            Some(workers) => {
                // Every worker of the config gets the Workload (AllAtOnce; Incremental too with
                // at most three workers); the first whose Kueue reserves quota wins. Which that is
                // depends on the workers' Kueues, not on the config's order: here, the order the
                // test passes the clusters in.
                let Some((w, wapi)) = clusters.iter().find_map(|(w, wapi)| {
                    let mkc = api.object(KUEUE, "MultiKueueCluster", None, w)?;
                    let listed = workers.iter().any(|x| x == w);
                    (listed && active(&mkc) && worker_admits(wapi, &job)).then_some((w.to_string(), *wapi))
                }) else {
                    continue;
                };
                let mut copy = json!({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": meta(&job, "name"), "namespace": meta(&job, "namespace"),
                        "labels": job["metadata"]["labels"].clone()},
                    "spec": job["spec"].clone()});
                copy["metadata"]["labels"][PREBUILT_LABEL] = json!(format!("job-{}", meta(&job, "name")));
                copy["metadata"]["labels"][ORIGIN_LABEL] = json!("multikueue");
                if let Some(spec) = copy["spec"].as_object_mut() {
                    spec.remove("managedBy");
                    spec.remove("selector");
                }
                wapi.put_raw_as(copy, "kueue-multikueue");
                events.push(format!("{name}: {what} dispatched to {w}"));
                admit(api, job, &flavors, Some(MULTIKUEUE));
                admit_pending(&(w.as_str(), wapi), clusters, events);
            }
        }
    }
}

/// Whether the worker's own Kueue would admit the Job's copy: its LocalQueue of the same name
/// and namespace leads to an Active ClusterQueue, without MultiKueue, with room.
fn worker_admits(wapi: &TestApiServer, job: &Value) -> bool {
    cluster_queue(wapi, job).is_some_and(|cq| multikueue_workers(wapi, &cq).is_none() && assign(wapi, &cq, job).is_ok())
}

/// MultiKueue follows its dispatched Jobs: the worker's status is copied to the manager's Job,
/// and a finished one's copy is deleted from the worker.
fn sync_back(c: &Cluster<'_>, clusters: &[Cluster<'_>], events: &mut Vec<String>) {
    let (name, api) = *c;
    for mut job in jobs(api).into_iter().filter(|j| j["spec"]["managedBy"] == MULTIKUEUE) {
        let (ns, jname) = (meta(&job, "namespace").to_string(), meta(&job, "name").to_string());
        for (w, wapi) in clusters.iter().filter(|(w, _)| *w != name) {
            let Some(remote) = wapi.object("batch/v1", "Job", Some(&ns), &jname) else { continue };
            if label(&remote, ORIGIN_LABEL).is_empty() {
                continue;
            }
            if job["status"] != remote["status"] {
                job["status"] = remote["status"].clone();
                api.put_raw_as(job.clone(), "kueue-multikueue");
            }
            if finished(&remote) {
                wapi.delete_raw("batch/v1", "Job", Some(&ns), &jname);
                events.push(format!("{name}: {ns}/{jname} finished in {w}; its copy there removed"));
            }
        }
    }
}
