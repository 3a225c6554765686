//! Kueue's admission of batch Jobs and MultiKueue's dispatch of them, over the clusters' test API
//! servers, as one reconcile a test calls ([`reconcile`], like `cilium_mesh::sync`). What it
//! models, and from where (rows "Kueue admission" and "MultiKueue dispatch" of `kube_api.md`):
//!
//! * **Admission** (Kueue's "Admission" and "Cluster Queue" concepts, flavor fungibility's
//!   defaults): a suspended Job labelled `kueue.x-k8s.io/queue-name` is queued in that LocalQueue
//!   of its namespace, whose ClusterQueue must be `Active`. Jobs are tried oldest first. Its
//!   `nvidia.com/gpu` (limits, else requests, times `parallelism`) is assigned the first flavor of
//!   the queue's resource group, in order, whose quota has room: the queue's `nominalQuota` less
//!   the usage of its admitted, unfinished Jobs on that flavor, plus what the other queues of its
//!   cohort leave unused (borrowing, which the default `whenCanBorrow` takes before trying the
//!   next flavor). Admitting unsuspends the Job and adds the flavor's `nodeLabels` to its pod
//!   template's `nodeSelector`, as Kueue does.
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
//! Not modelled: quota other than `nvidia.com/gpu`, borrowing and lending limits, preemption,
//! priorities, the Workload objects themselves (the double serves no Workload kind), and a
//! MultiKueue Job that no worker admits holding its quota at the manager (Kueue keeps that
//! reservation; here it stays suspended and counts nothing).

use serde_json::{Value, json};

use crate::kube_api::TestApiServer;

pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
pub const PREBUILT_LABEL: &str = "kueue.x-k8s.io/prebuilt-workload-name";
pub const ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";
pub const MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";
const KUEUE: &str = "kueue.x-k8s.io/v1beta2";
const GPU: &str = "nvidia.com/gpu";

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

/// GPUs a Job asks for: each container's limit (else request), times `parallelism`.
fn gpus(job: &Value) -> i64 {
    let spec = &job["spec"]["template"]["spec"];
    let per_pod: i64 = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            quantity(&c["resources"]["limits"][GPU]).or_else(|| quantity(&c["resources"]["requests"][GPU])).unwrap_or(0)
        })
        .sum();
    per_pod * job["spec"]["parallelism"].as_i64().unwrap_or(1)
}

fn quantity(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// The queue's flavors for `nvidia.com/gpu`, in order, with their nominal quota.
fn gpu_flavors(cq: &Value) -> Vec<(String, i64)> {
    let groups = cq["spec"]["resourceGroups"].as_array().cloned().unwrap_or_default();
    let Some(rg) =
        groups.iter().find(|rg| rg["coveredResources"].as_array().is_some_and(|r| r.iter().any(|x| x == GPU)))
    else {
        return vec![];
    };
    rg["flavors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let r = f["resources"].as_array().into_iter().flatten().find(|r| r["name"] == GPU);
            (
                f["name"].as_str().unwrap_or_default().to_string(),
                r.and_then(|r| quantity(&r["nominalQuota"])).unwrap_or(0),
            )
        })
        .collect()
}

/// The flavor an admitted Job was given: the first of its queue whose `nodeLabels` its pod
/// template's `nodeSelector` carries (what admission injected).
fn flavor_of(api: &TestApiServer, cq: &Value, job: &Value) -> Option<String> {
    let selector = &job["spec"]["template"]["spec"]["nodeSelector"];
    gpu_flavors(cq).into_iter().map(|(f, _)| f).find(|f| {
        let labels = api.object(KUEUE, "ResourceFlavor", None, f).map(|rf| rf["spec"]["nodeLabels"].clone());
        labels.and_then(|l| l.as_object().cloned()).unwrap_or_default().iter().all(|(k, v)| &selector[k] == v)
    })
}

/// GPUs of `flavor` held by the admitted, unfinished Jobs of ClusterQueue `cq_name`.
fn usage(api: &TestApiServer, cq_name: &str, flavor: &str) -> i64 {
    jobs(api)
        .iter()
        .filter(|j| !suspended(j) && !finished(j) && !label(j, QUEUE_LABEL).is_empty())
        .filter_map(|j| {
            let lq = api.object(KUEUE, "LocalQueue", Some(meta(j, "namespace")), label(j, QUEUE_LABEL))?;
            let cq = api.object(KUEUE, "ClusterQueue", None, lq["spec"]["clusterQueue"].as_str()?)?;
            (meta(&cq, "name") == cq_name && flavor_of(api, &cq, j).as_deref() == Some(flavor)).then(|| gpus(j))
        })
        .sum()
}

/// The first flavor with room for `want` GPUs: the queue's own unused quota, with what its
/// cohort's queues leave unused of the same flavor.
fn fitting_flavor(api: &TestApiServer, cq: &Value, want: i64) -> Option<String> {
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
    gpu_flavors(cq).into_iter().find_map(|(f, nominal)| {
        // Without borrowing or lending limits (fabric sets none), what the queue may still take
        // is what its cohort as a whole has left: every member's nominal quota less its usage
        // (a queue that borrowed counts against the others).
        let own = nominal - usage(api, name, &f);
        let rest: i64 = others
            .iter()
            .map(|o| {
                let n = gpu_flavors(o).into_iter().find(|(of, _)| *of == f).map_or(0, |(_, n)| n);
                n - usage(api, meta(o, "name"), &f)
            })
            .sum();
        (want <= own + rest).then_some(f)
    })
}

/// Unsuspends the Job on `flavor`: its `nodeLabels` go into the pod template's `nodeSelector`.
fn admit(api: &TestApiServer, mut job: Value, flavor: &str, managed_by: Option<&str>) {
    if let Some(labels) =
        api.object(KUEUE, "ResourceFlavor", None, flavor).and_then(|rf| rf["spec"]["nodeLabels"].as_object().cloned())
    {
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
        let Some(flavor) = fitting_flavor(api, &cq, gpus(&job)) else { continue };
        let what = format!("{}/{}", meta(&job, "namespace"), meta(&job, "name"));
        match multikueue_workers(api, &cq) {
            None => {
                events.push(format!("{name}: {what} admitted on {flavor}"));
                admit(api, job, &flavor, None);
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
                admit(api, job, &flavor, Some(MULTIKUEUE));
                admit_pending(&(w.as_str(), wapi), clusters, events);
            }
        }
    }
}

/// Whether the worker's own Kueue would admit the Job's copy: its LocalQueue of the same name
/// and namespace leads to an Active ClusterQueue, without MultiKueue, with room.
fn worker_admits(wapi: &TestApiServer, job: &Value) -> bool {
    cluster_queue(wapi, job)
        .is_some_and(|cq| multikueue_workers(wapi, &cq).is_none() && fitting_flavor(wapi, &cq, gpus(job)).is_some())
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
