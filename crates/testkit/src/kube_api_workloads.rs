//! The API double's workload controllers (a child of `kube_api.rs`, on its state): the
//! Deployment controller keeps a ReplicaSet per pod template and rolls between them, the
//! ReplicaSet and StatefulSet controllers keep their Pods, the scheduler binds each Pod to a Node
//! and the Node's kubelet reports its status, and the pod GC removes Pods of Nodes that are gone.
//! The rules are [`crate::workloads`]'s (each cites the upstream file it follows); this file only
//! reads and writes the stored objects. See the workload rows of "Controllers (opt-in)" in
//! `kube_api.md`.

use super::*;
use crate::workloads as w;

/// The field manager of the scheduler's bindings.
const SCHEDULER: &str = "kube-scheduler";
/// Upstream's Deployment condition reasons (`pkg/controller/deployment/util/deployment_util.go`).
const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
const RS_UPDATED: &str = "ReplicaSetUpdated";
const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";

/// The Pods of `ns` whose controller is the `kind` named `name` (and of uid `uid`, when given),
/// sorted by name.
fn pods_of(st: &State, ns: &str, kind: &str, name: &str, uid: Option<&str>) -> Vec<(Key, Value)> {
    st.objects
        .iter()
        .filter(|(k, _)| k.0.is_empty() && k.1 == "Pod" && k.2 == ns)
        .filter(|(_, p)| {
            w::controller_of(&p.obj).is_some_and(|(k, n, u)| k == kind && n == name && uid.is_none_or(|want| want == u))
        })
        .map(|(k, p)| (k.clone(), p.obj.clone()))
        .collect()
}

/// The ReplicaSets of `ns` whose controller is the Deployment `name` (of uid `uid`, when given),
/// oldest revision first.
fn replicasets_of(st: &State, ns: &str, name: &str, uid: Option<&str>) -> Vec<(Key, Value)> {
    let mut out: Vec<(Key, Value)> = st
        .objects
        .iter()
        .filter(|(k, _)| k.0 == "apps" && k.1 == "ReplicaSet" && k.2 == ns)
        .filter(|(_, r)| {
            w::controller_of(&r.obj)
                .is_some_and(|(k, n, u)| k == "Deployment" && n == name && uid.is_none_or(|want| want == u))
        })
        .map(|(k, r)| (k.clone(), r.obj.clone()))
        .collect();
    out.sort_by_key(|(k, r)| (revision(r), k.3.clone()));
    out
}

fn revision(rs: &Value) -> i64 {
    meta_str(rs, "annotations", w::REVISION).parse().unwrap_or(0)
}

/// The RuntimeClass a pod template names that the cluster lacks: the RuntimeClass admission
/// plugin rejects such a pod (kubernetes/kubernetes `plugin/pkg/admission/runtimeclass/
/// admission.go`, "pod rejected: RuntimeClass %q not found").
fn missing_runtime_class(st: &State, template: &Value) -> Option<String> {
    let rc = text_at(template, "/spec/runtimeClassName");
    (!rc.is_empty() && !st.objects.contains_key(&mk_key("node.k8s.io", "RuntimeClass", "", rc))).then(|| rc.to_string())
}

fn deployment_condition(ty: &str, ok: bool, reason: &str, message: String) -> Value {
    let now = now_rfc3339();
    json!({"type": ty, "status": if ok { "True" } else { "False" }, "lastUpdateTime": now,
        "lastTransitionTime": now, "reason": reason, "message": message})
}

impl Shared {
    /// A name `<prefix>-<5 characters>` no Pod of `ns` has (`generateName`).
    fn pod_name(st: &mut State, ns: &str, prefix: &str) -> String {
        loop {
            st.uids += 1;
            let name = format!("{prefix}-{}", random_suffix(st.uids));
            if !st.objects.contains_key(&mk_key("", "Pod", ns, &name)) {
                return name;
            }
        }
    }

    /// Deployment controller (`crate::workloads`: `rollout`, `deployment_counts`): a ReplicaSet
    /// `<name>-<pod-template-hash>` for the current template, the rollout's sizes for it and the
    /// older ones, the status summed from them. A deleted Deployment's ReplicaSets go (the garbage
    /// collector, by owner reference).
    pub(super) fn deployment_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let (ns, name) = (key.2.as_str(), key.3.as_str());
        let mut written = Vec::new();
        let Some(d) = st.objects.get(key).map(|s| s.obj.clone()) else {
            for (k, _) in replicasets_of(st, ns, name, None) {
                written.extend(Shared::ctl_delete(st, &k));
            }
            return Some(written);
        };
        // The API refuses such a Deployment; one written with `put_raw` makes nothing.
        if w::selector_problem(&d).is_some() {
            return None;
        }
        let uid = text_at(&d, "/metadata/uid").to_string();
        let hash = template_hash(d.pointer("/spec/template"));
        let mut sets = replicasets_of(st, ns, name, Some(&uid));
        let is_new = |r: &Value| meta_str(r, "labels", w::POD_TEMPLATE_HASH) == hash;
        let mut created = false;
        if !sets.iter().any(|(_, r)| is_new(r)) {
            let rev = sets.iter().map(|(_, r)| revision(r)).max().unwrap_or(0) + 1;
            let k = self.ctl_put(st, w::new_replicaset(&d, &hash, rev, 0), KCM)?;
            written.push(k.clone());
            created = true;
            sets.push((k.clone(), st.objects.get(&k)?.obj.clone()));
        }
        let (new_key, new_rs) = sets.iter().find(|(_, r)| is_new(r)).cloned()?;
        let old: Vec<(Key, Value)> = sets.iter().filter(|(_, r)| !is_new(r)).cloned().collect();
        let old_values: Vec<Value> = old.iter().map(|(_, r)| r.clone()).collect();
        let (new_size, old_sizes) = w::rollout(&d, &new_rs, &old_values);
        let max = (w::replicas(&d) + if w::recreate(&d) { 0 } else { w::fenceposts(&d).0 }).to_string();
        let everyone = std::iter::once(new_rs).chain(old.into_iter().map(|(_, r)| r));
        for (mut rs, size) in everyone.zip(std::iter::once(new_size).chain(old_sizes)) {
            let annotations = [
                ("deployment.kubernetes.io/desired-replicas", w::replicas(&d).to_string()),
                ("deployment.kubernetes.io/max-replicas", max.clone()),
            ];
            let unchanged =
                w::size(&rs) == size && annotations.iter().all(|(a, v)| meta_str(&rs, "annotations", a) == v);
            if unchanged {
                continue;
            }
            rs["spec"]["replicas"] = json!(size);
            for (a, v) in annotations {
                rs["metadata"]["annotations"][a] = json!(v);
            }
            written.extend(self.ctl_put(st, rs, KCM));
        }
        let sets: Vec<Value> = replicasets_of(st, ns, name, Some(&uid)).into_iter().map(|(_, r)| r).collect();
        let new_rs = st.objects.get(&new_key).map(|s| s.obj.clone());
        let before = status_of(&d);
        let mut status = before.clone();
        let counts = w::deployment_counts(&d, new_rs.as_ref(), &sets);
        if let Some(m) = status.as_object_mut() {
            for f in ["replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"] {
                m.remove(f);
            }
            for (f, v) in counts.as_object().into_iter().flatten() {
                m.insert(f.clone(), v.clone());
            }
        }
        let available = status["availableReplicas"].as_i64().unwrap_or(0);
        let mut conditions = vec![if available >= w::replicas(&d) - w::max_unavailable(&d) {
            deployment_condition(
                "Available",
                true,
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
            )
        } else {
            deployment_condition(
                "Available",
                false,
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
            )
        }];
        let rs_name = new_key.3.clone();
        let n = |s: &Value, f: &str| s[f].as_i64().unwrap_or(0);
        let progressed = n(&status, "updatedReplicas") > n(&before, "updatedReplicas")
            || n(&status, "replicas") - n(&status, "updatedReplicas")
                < n(&before, "replicas") - n(&before, "updatedReplicas")
            || n(&status, "readyReplicas") > n(&before, "readyReplicas")
            || n(&status, "availableReplicas") > n(&before, "availableReplicas");
        if created {
            let m = format!("Created new replica set \"{rs_name}\"");
            conditions.push(deployment_condition("Progressing", true, NEW_RS_CREATED, m));
        } else if w::complete(&d, &status) {
            let m = format!("ReplicaSet \"{rs_name}\" has successfully progressed.");
            conditions.push(deployment_condition("Progressing", true, NEW_RS_AVAILABLE, m));
        } else if progressed || find_condition(&d, "Progressing").is_none() {
            let m = format!("ReplicaSet \"{rs_name}\" is progressing.");
            conditions.push(deployment_condition("Progressing", true, RS_UPDATED, m));
        }
        // A ReplicaSet's ReplicaFailure becomes the Deployment's (`getReplicaFailures`).
        let failure = sets.iter().find_map(|r| find_condition(r, "ReplicaFailure").cloned());
        match failure {
            Some(f) => conditions.push(deployment_condition(
                "ReplicaFailure",
                true,
                text_at(&f, "/reason"),
                text_at(&f, "/message").to_string(),
            )),
            None => {
                if let Some(list) = status.get_mut("conditions").and_then(Value::as_array_mut) {
                    list.retain(|c| c.get("type").and_then(Value::as_str) != Some("ReplicaFailure"));
                }
            }
        }
        set_conditions(&mut status, conditions);
        written.extend(self.write_status(st, key, status, KCM));
        Some(written)
    }

    /// ReplicaSet controller (`crate::workloads`: `pod_from_template`, `pods_to_delete`,
    /// `replicaset_status`): `spec.replicas` Pods from the template, each bound and run
    /// ([`Shared::run_pods`]). A pod the RuntimeClass admission plugin rejects is not created and
    /// the ReplicaSet says `ReplicaFailure` (`FailedCreate`). A ReplicaSet whose Deployment is gone
    /// is deleted, and a deleted ReplicaSet's Pods go (the garbage collector).
    pub(super) fn replicaset_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let (ns, name) = (key.2.clone(), key.3.clone());
        let mut written = Vec::new();
        let Some(rs) = st.objects.get(key).map(|s| s.obj.clone()) else {
            for (k, _) in pods_of(st, &ns, "ReplicaSet", &name, None) {
                written.extend(Shared::ctl_delete(st, &k));
            }
            return Some(written);
        };
        let owner = w::controller_of(&rs);
        if let Some((kind, owner_name, owner_uid)) = &owner
            && kind == "Deployment"
        {
            let alive = st
                .objects
                .get(&mk_key("apps", "Deployment", &ns, owner_name))
                .is_some_and(|o| text_at(&o.obj, "/metadata/uid") == owner_uid);
            if !alive {
                written.extend(Shared::ctl_delete(st, key));
                return Some(written);
            }
        }
        if w::selector_problem(&rs).is_some() {
            return None;
        }
        let uid = text_at(&rs, "/metadata/uid").to_string();
        let want = w::replicas(&rs);
        let pods = pods_of(st, &ns, "ReplicaSet", &name, Some(&uid));
        let template = rs.pointer("/spec/template").cloned().unwrap_or_default();
        let mut failure = None;
        if (pods.len() as i64) < want {
            match missing_runtime_class(st, &template) {
                Some(rc) => {
                    let message =
                        format!("pods \"{name}-\" is forbidden: pod rejected: RuntimeClass \"{rc}\" not found");
                    failure = Some(condition("ReplicaFailure", true, "FailedCreate", &message, None));
                }
                None => {
                    for _ in pods.len() as i64..want {
                        let pod_name = Shared::pod_name(st, &ns, &name);
                        written.extend(self.ctl_put(st, w::pod_from_template(&rs, "ReplicaSet", &pod_name, &[]), KCM));
                    }
                }
            }
        } else {
            let values: Vec<Value> = pods.iter().map(|(_, p)| p.clone()).collect();
            for gone in w::pods_to_delete(&values, want) {
                written.extend(Shared::ctl_delete(st, &mk_key("", "Pod", &ns, &gone)));
            }
        }
        // KAI Scheduler places the pods of a KAI Deployment (`crate::kai`).
        let kai = owner.filter(|(k, _, _)| k == "Deployment" && crate::kai::is_kai(&rs)).map(|(_, d, _)| d);
        let pods = pods_of(st, &ns, "ReplicaSet", &name, Some(&uid));
        written.extend(self.run_pods(st, pods, kai.as_deref()));
        let pods: Vec<Value> = pods_of(st, &ns, "ReplicaSet", &name, Some(&uid)).into_iter().map(|(_, p)| p).collect();
        let mut status = w::replicaset_status(&rs, &pods, None);
        if let Some(c) = failure {
            status["conditions"] = status_of(&rs).get("conditions").cloned().unwrap_or_else(|| json!([]));
            set_conditions(&mut status, vec![c]);
        }
        written.extend(self.write_status(st, key, status, KCM));
        Some(written)
    }

    /// StatefulSet controller (`crate::workloads`: `stateful_pod`, `ordered`,
    /// `statefulset_status`): Pods `<name>-0..N-1`, one at a time while the earlier ones are not
    /// Running and Ready (`OrderedReady`), the highest ordinal first when scaling down or
    /// replacing a Pod of an older revision (`RollingUpdate`, once every Pod is Ready).
    pub(super) fn statefulset_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let (ns, name) = (key.2.clone(), key.3.clone());
        let mut written = Vec::new();
        let Some(s) = st.objects.get(key).map(|o| o.obj.clone()) else {
            for (k, _) in pods_of(st, &ns, "StatefulSet", &name, None) {
                written.extend(Shared::ctl_delete(st, &k));
            }
            return Some(written);
        };
        if w::selector_problem(&s).is_some() {
            return None;
        }
        let uid = text_at(&s, "/metadata/uid").to_string();
        let revision = format!("{name}-{}", template_hash(s.pointer("/spec/template")));
        let want = w::replicas(&s);
        let ordered = w::ordered(&s);
        let by_ordinal = |st: &State| -> Vec<(i64, Key, Value)> {
            let mut v: Vec<(i64, Key, Value)> = pods_of(st, &ns, "StatefulSet", &name, Some(&uid))
                .into_iter()
                .filter_map(|(k, p)| w::ordinal(&name, &k.3).map(|i| (i, k, p)))
                .collect();
            v.sort_by_key(|(i, _, _)| *i);
            v
        };
        let pods = by_ordinal(st);
        // Scale down, highest ordinal first (one at a time when ordered).
        let extra: Vec<&(i64, Key, Value)> = pods.iter().rev().filter(|(i, _, _)| *i >= want).collect();
        for (_, k, _) in extra.iter().take(if ordered { 1 } else { usize::MAX }) {
            written.extend(Shared::ctl_delete(st, k));
        }
        // Create the missing ordinals.
        let template = s.pointer("/spec/template").cloned().unwrap_or_default();
        if missing_runtime_class(st, &template).is_none() {
            for i in 0..want {
                let pods = by_ordinal(st);
                if pods.iter().any(|(o, _, _)| *o == i) {
                    continue;
                }
                if ordered && !pods.iter().filter(|(o, _, _)| *o < i).all(|(_, _, p)| crate::daemonset::ready(p)) {
                    break;
                }
                written.extend(self.ctl_put(st, w::stateful_pod(&s, i, &revision), KCM));
                if ordered {
                    break;
                }
            }
        }
        written.extend(self.run_pods(st, by_ordinal(st).into_iter().map(|(_, k, p)| (k, p)).collect(), None));
        // RollingUpdate: the highest-ordinal Pod of an older revision, once all are Ready.
        let pods = by_ordinal(st);
        let rolling = text_at(&s, "/spec/updateStrategy/type") != "OnDelete";
        if rolling && pods.len() as i64 == want && pods.iter().all(|(_, _, p)| crate::daemonset::ready(p)) {
            let stale = pods.iter().rev().find(|(_, _, p)| meta_str(p, "labels", w::REVISION_HASH) != revision);
            if let Some((_, k, _)) = stale {
                written.extend(Shared::ctl_delete(st, k));
            }
        }
        let pods: Vec<Value> = by_ordinal(st).into_iter().map(|(_, _, p)| p).collect();
        let before = text_at(&s, "/status/currentRevision").to_string();
        let status = w::statefulset_status(&s, &pods, &revision, &before);
        written.extend(self.write_status(st, key, status, KCM));
        Some(written)
    }

    /// The scheduler, the kubelets and the pod GC for `pods`: a Pod bound to a Node that is gone
    /// is deleted; an unbound Pod is bound where [`w::schedule`] says (a KAI Deployment's Pods
    /// where KAI Scheduler placed its replicas, `kai_deployment`); each Pod's status is its
    /// kubelet's ([`crate::daemonset::pod_status`]) or Pending with the scheduler's reason.
    fn run_pods(&self, st: &mut State, mut pods: Vec<(Key, Value)>, kai_deployment: Option<&str>) -> Vec<Key> {
        let mut written = Vec::new();
        let nodes: Vec<Value> =
            st.objects.iter().filter(|(k, _)| k.0.is_empty() && k.1 == "Node").map(|(_, n)| n.obj.clone()).collect();
        let node = |name: &str| nodes.iter().find(|n| text_at(n, "/metadata/name") == name);
        let kai: Option<Vec<String>> = kai_deployment.map(|d| {
            let ns = pods.first().map(|(k, _)| k.2.clone()).unwrap_or_default();
            let mut places: Vec<crate::kai::Placement> =
                kai_placements(st).into_iter().filter(|p| p.namespace == ns && p.deployment == d).collect();
            places.sort_by_key(|p| p.replica);
            places.into_iter().map(|p| p.node).collect()
        });
        pods.sort_by(|a, b| a.0.3.cmp(&b.0.3));
        for (i, (k, mut pod)) in pods.into_iter().enumerate() {
            let bound = text_at(&pod, "/spec/nodeName").to_string();
            if !bound.is_empty() && node(&bound).is_none() {
                written.extend(Shared::ctl_delete(st, &k));
                continue;
            }
            let scheduler = text_at(&pod, "/spec/schedulerName");
            let target = match &kai {
                Some(places) => places
                    .get(i)
                    .cloned()
                    .ok_or_else(|| "KAI Scheduler: no node has room for the pod in its queue".to_string()),
                None if !bound.is_empty() => Ok(bound.clone()),
                None if scheduler.is_empty() || scheduler == "default-scheduler" => {
                    let placed: Vec<Value> = st
                        .objects
                        .iter()
                        .filter(|(k, _)| k.0.is_empty() && k.1 == "Pod")
                        .map(|(_, p)| p.obj.clone())
                        .collect();
                    w::schedule(pod.get("spec").unwrap_or(&Value::Null), &nodes, &placed)
                }
                None => Err(format!("no scheduler named {scheduler} runs in the cluster")),
            };
            let status = match target {
                Ok(to) => {
                    if to != bound {
                        pod["spec"]["nodeName"] = json!(to);
                        written.extend(self.ctl_put(st, pod.clone(), SCHEDULER));
                    }
                    let crashing: Vec<String> =
                        st.crashing.iter().filter(|(n, _)| *n == to).map(|(_, c)| c.clone()).collect();
                    let mut status =
                        crate::daemonset::pod_status(&pod, node(&to).is_some_and(w::node_ready), &crashing);
                    with_pod_ip(&mut status, &k);
                    status
                }
                Err(why) => {
                    if !bound.is_empty() {
                        if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
                            spec.remove("nodeName");
                        }
                        written.extend(self.ctl_put(st, pod.clone(), SCHEDULER));
                    }
                    w::pending_status(&why)
                }
            };
            written.extend(self.write_status(st, &k, status, "kubelet"));
        }
        written
    }
}
