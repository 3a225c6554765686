//! The workloads the kueue, kai-scheduler, argo-cd and nvidia-device-plugin charts create, for
//! [`crate::helm_charts::render`]: the controller Deployments, DaemonSets, StatefulSets and
//! Services `fabric verify` and its waits read, with the values that decide them (names,
//! replicas, where the pods may run), and the values on which the charts' templates fail or
//! whose rendered objects the API server refuses (then the install Job fails). `values` here are
//! the chart's defaults with the release's values over them. Names and rules come from the
//! upstream templates cited beside each function, never from fabric's modules.

use serde_json::{Value, json};

use crate::helm_charts::{at, copy_nonempty, copy_nonempty_from, deployment, flag, replicas, text};

/// The usual `<chart>.fullname` helper (kueue's, argo-cd's and the device plugin's
/// `_helpers.tpl` alike): `fullnameOverride`, else the release name when it contains the chart's
/// name (`nameOverride` or the chart's), else `<release>-<name>`; truncated to 63.
fn fullname(release: &str, chart: &str, v: &Value) -> String {
    let over = text(v, &["fullnameOverride"], "");
    let name = match text(v, &["nameOverride"], "") {
        "" => chart,
        n => n,
    };
    let full = if !over.is_empty() {
        over.to_string()
    } else if release.contains(name) {
        release.to_string()
    } else {
        format!("{release}-{name}")
    };
    full.chars().take(63).collect::<String>().trim_end_matches('-').to_string()
}

fn service(name: &str, ns: &str, ty: &str, selector: &Value, ports: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
        "spec": {"type": ty, "selector": selector, "ports": ports}})
}

fn with_pod_spec(mut workload: Value, v: &Value, prefix: &[&str], keys: &[&str]) -> Value {
    copy_nonempty_from(v, prefix, &mut workload["spec"]["template"]["spec"], keys);
    workload
}

/// kubernetes-sigs/kueue charts/kueue (defaults: `../shared/specs/helm/kueue/values.yaml`):
/// templates/manager/manager.yaml, Deployment `<fullname>-controller-manager` with `replicas:
/// .Values.controllerManager.replicas`, selector `kueue.selectorLabels` (`app.kubernetes.io/name`,
/// `app.kubernetes.io/instance`, `control-plane: controller-manager`), `nodeSelector` and
/// `tolerations` from `controllerManager`; templates/webhook/service.yaml `<fullname>-webhook-service`
/// and templates/manager/auth_proxy_service.yaml `<fullname>-controller-manager-metrics-service`,
/// both selecting those labels, of `webhookService.type` / `metricsService.type` with their
/// `ports`. `kueue.featureGates` (templates/_helpers.tpl) ranges over
/// `controllerManager.featureGates` and reads `.name` of each: a non-list or an entry that is not
/// a mapping fails the template.
pub fn kueue(release: &str, ns: &str, v: &Value) -> Result<Vec<Value>, String> {
    let full = fullname(release, "kueue", v);
    let name = match text(v, &["nameOverride"], "") {
        "" => "kueue",
        n => n,
    };
    let gates = at(v, &["controllerManager", "featureGates"]).cloned().unwrap_or_else(|| json!([]));
    let Some(gates) = gates.as_array() else {
        return Err(format!(
            "template: kueue/templates/_helpers.tpl: executing \"kueue.featureGates\": range can't iterate over {gates}"
        ));
    };
    if let Some(bad) = gates.iter().find(|g| !g.is_object()) {
        return Err(format!(
            "template: kueue/templates/_helpers.tpl: executing \"kueue.featureGates\": can't evaluate field name in type {bad}"
        ));
    }
    let deploy = format!("{full}-controller-manager");
    let n = replicas(v, &["controllerManager", "replicas"], 1, &format!("Deployment.apps \"{deploy}\""))?;
    let selector = json!({"app.kubernetes.io/name": name, "app.kubernetes.io/instance": release, "control-plane": "controller-manager"});
    let d = with_pod_spec(
        deployment(&deploy, ns, n, selector.clone(), "manager"),
        v,
        &["controllerManager"],
        &["nodeSelector", "tolerations"],
    );
    let ports = |k: &str| at(v, &[k, "ports"]).cloned().unwrap_or_else(|| json!([]));
    Ok(vec![
        d,
        service(
            &format!("{full}-webhook-service"),
            ns,
            text(v, &["webhookService", "type"], "ClusterIP"),
            &selector,
            ports("webhookService"),
        ),
        service(
            &format!("{full}-controller-manager-metrics-service"),
            ns,
            text(v, &["metricsService", "type"], "ClusterIP"),
            &selector,
            ports("metricsService"),
        ),
    ])
}

/// NVIDIA/KAI-Scheduler deployments/kai-scheduler (defaults:
/// `../shared/specs/helm/kai-scheduler/values.yaml`): templates/services/operator.yaml, Deployment
/// `kai-operator` (a fixed name) labelled `app: kai-operator`, `replicas:
/// .Values.operator.replicaCount`, with `global.affinity`, `global.tolerations` and
/// `global.nodeSelector` when set. The scheduler, binder, pod grouper and the rest are created
/// by that operator from the chart's `Config`, not by the chart: not simulated.
pub fn kai(ns: &str, v: &Value) -> Result<Vec<Value>, String> {
    let n = replicas(v, &["operator", "replicaCount"], 1, "Deployment.apps \"kai-operator\"")?;
    let d = deployment("kai-operator", ns, n, json!({"app": "kai-operator"}), "operator");
    Ok(vec![with_pod_spec(d, v, &["global"], &["affinity", "tolerations", "nodeSelector"])])
}

/// argoproj/argo-helm charts/argo-cd: `argo-cd.fullname` (templates/_common.tpl) with the
/// chart's `nameOverride: argocd`, components named `<fullname>-<component.name>`
/// (templates/_helpers.tpl), selector labels `app.kubernetes.io/name: <name>-<component.name>`,
/// `app.kubernetes.io/instance: <release>`: templates/argocd-application-controller/statefulset.yaml
/// (`replicas: .Values.controller.replicas`), templates/argocd-server/deployment.yaml and
/// service.yaml (`server.replicas`, `server.service.type`), templates/argocd-repo-server/
/// deployment.yaml and service.yaml (`repoServer.replicas`), templates/redis/deployment.yaml and
/// service.yaml (only `if and .Values.redis.enabled (not .Values.redis-ha.enabled)`). Not
/// rendered: dex, notifications, applicationset, redis-ha.
pub fn argocd(release: &str, ns: &str, v: &Value) -> Result<Vec<Value>, String> {
    let full = fullname(release, "argo-cd", v);
    let name = match text(v, &["nameOverride"], "") {
        "" => "argo-cd",
        n => n,
    };
    let mut out = Vec::new();
    let labels =
        |c: &str| json!({"app.kubernetes.io/name": format!("{name}-{c}"), "app.kubernetes.io/instance": release});
    let global = |w: Value| with_pod_spec(w, v, &["global"], &["nodeSelector", "tolerations"]);
    let c = text(v, &["controller", "name"], "application-controller");
    let sts = format!("{full}-{c}");
    let n = replicas(v, &["controller", "replicas"], 1, &format!("StatefulSet.apps \"{sts}\""))?;
    let mut s = deployment(&sts, ns, n, labels(c), c);
    s["kind"] = json!("StatefulSet");
    s["spec"]["serviceName"] = json!(sts);
    out.push(global(s));
    let mut components = vec![("server", 8080), ("repoServer", 8081)];
    if flag(v, &["redis", "enabled"], true) && !flag(v, &["redis-ha", "enabled"], false) {
        components.push(("redis", 6379));
    }
    for (key, port) in components {
        let default = match key {
            "repoServer" => "repo-server",
            k => k,
        };
        let c = text(v, &[key, "name"], default);
        let obj = format!("{full}-{c}");
        let n = replicas(v, &[key, "replicas"], 1, &format!("Deployment.apps \"{obj}\""))?;
        out.push(global(deployment(&obj, ns, n, labels(c), c)));
        let ty = text(v, &[key, "service", "type"], "ClusterIP");
        out.push(service(&obj, ns, ty, &labels(c), json!([{"port": port}])));
    }
    Ok(out)
}

/// NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin: templates/validation.yml
/// fails the install on a `namespace` value, on the release namespace `default` without
/// `allowDefaultNamespace`, and on both `config.name` and `config.map`;
/// templates/daemonset-device-plugin.yml, `if .Values.devicePlugin.enabled`, DaemonSet
/// `nvidia-device-plugin.fullname` (templates/_helpers.tpl) in `namespaceOverride` or the
/// release namespace, selector `app.kubernetes.io/name`/`app.kubernetes.io/instance`, container
/// `nvidia-device-plugin-ctr`, `runtimeClassName` when set, and `nodeSelector`, `affinity`,
/// `tolerations` when not empty.
pub fn nvidia_device_plugin(release: &str, ns: &str, v: &Value) -> Result<Vec<Value>, String> {
    let fail = |m: &str| Err(format!("execution error at (nvidia-device-plugin/templates/validation.yml): \n{m}"));
    if let Some(n) = at(v, &["namespace"]).filter(|n| n.as_str() != Some("")) {
        return fail(&format!(
            "Value 'namespace' set to {n}\nSetting an explicit 'namespace' in values.yaml or via --set on the command line is no longer supported."
        ));
    }
    let target = match text(v, &["namespaceOverride"], "") {
        "" => ns,
        o => o,
    };
    if target == "default" && !flag(v, &["allowDefaultNamespace"], false) {
        return fail(
            "Running in the 'default' namespace is not recommended.\nSet 'allowDefaultNamespace=true' to bypass this error.",
        );
    }
    let map_set = at(v, &["config", "map"]).and_then(Value::as_object).is_some_and(|m| !m.is_empty());
    if !text(v, &["config", "name"], "").is_empty() && map_set {
        return fail("Only one of 'config.name' or 'config.map' should ever be set for a given deployment.");
    }
    if !flag(v, &["devicePlugin", "enabled"], true) {
        return Ok(Vec::new());
    }
    let full = fullname(release, "nvidia-device-plugin", v);
    let name = match text(v, &["nameOverride"], "") {
        "" => "nvidia-device-plugin",
        n => n,
    };
    let labels = json!({"app.kubernetes.io/name": name, "app.kubernetes.io/instance": release});
    let mut spec = json!({"containers": [{"name": "nvidia-device-plugin-ctr", "image": "nvidia-device-plugin"}]});
    copy_nonempty(v, &mut spec, &["runtimeClassName", "nodeSelector", "affinity", "tolerations"]);
    Ok(vec![json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": full, "namespace": target, "labels": labels.clone()},
        "spec": {"selector": {"matchLabels": labels.clone()},
            "template": {"metadata": {"labels": labels}, "spec": spec}}})])
}
