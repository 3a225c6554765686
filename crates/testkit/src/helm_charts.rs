//! What the charts fabric installs create, for the simulated helm-controller of
//! [`crate::kube_api`]: once a HelmChart's install Job completes, the release's workloads appear,
//! rendered from the HelmChart's values by the rules of the chart's own templates, and on install
//! what its `pre-install` hooks make ([`pre_install`]). Only the objects fabric's waits, verifies
//! and plan's checks read are rendered (see the release row of "Controllers (opt-in)" in `kube_api.md` for the list and
//! the limits). Names, conditions and defaults come from the upstream templates cited beside each
//! rule, never from fabric's modules: a value fabric gets wrong makes the object missing here as
//! it would be in a real cluster.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// Helm's release annotations and label on every object it creates (helm/helm
/// pkg/action/validate.go, `setMetadataVisitor`): the simulated helm-controller finds a release's
/// objects by them, to delete what an upgrade no longer renders.
pub const RELEASE_NAME: &str = "meta.helm.sh/release-name";
pub const RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The release's values as klipper-helm hands them to Helm: helm-controller writes the
/// HelmChart's `spec.valuesContent` as `values-01_HelmChart.yaml` and the HelmChartConfig's as
/// `values-10_HelmChartConfig.yaml` (k3s-io/helm-controller pkg/controllers/chart/chart.go,
/// `valuesSecret` / `valuesSecretAddConfig`); klipper-helm's `entry` passes each as `--values`
/// in that order, and Helm merges a later file into the earlier (maps key by key, anything else
/// replaced, `null` removes the key: helm/helm v3 pkg/chartutil/coalesce.go). `spec.set` is not
/// simulated (fabric sets none).
pub fn values(chart_spec: &Value, config_spec: Option<&Value>) -> Result<Value, String> {
    let mut out = json!({});
    for (file, spec) in
        [("values-01_HelmChart.yaml", Some(chart_spec)), ("values-10_HelmChartConfig.yaml", config_spec)]
    {
        let text = spec.and_then(|s| s.get("valuesContent")).and_then(Value::as_str).unwrap_or_default();
        if text.trim().is_empty() {
            continue;
        }
        let v: Value = serde_saphyr::from_str(text).map_err(|e| format!("{file}: {e}"))?;
        if !v.is_object() && !v.is_null() {
            return Err(format!("{file}: not a YAML mapping"));
        }
        coalesce(&mut out, &v);
    }
    Ok(out)
}

fn coalesce(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                if v.is_null() {
                    x.remove(k);
                } else {
                    coalesce(x.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (a, b) => *a = b.clone(),
    }
}

/// The chart's name in a HelmChart's `spec.chart`: the name in its repository (the two charts the
/// double renders are repository charts), or the last path segment of an `oci://` reference.
pub fn chart_name(spec_chart: &str) -> &str {
    let last = spec_chart.rsplit('/').next().unwrap_or(spec_chart);
    last.split(':').next().unwrap_or(last)
}

/// The objects the chart renders for release `release` in `namespace` with `values`, when the
/// double knows the chart; `Ok(None)` when it does not (nothing is created: see `kube_api.md`);
/// `Err` when the chart's templates fail on these values (the install fails).
pub fn render(spec_chart: &str, release: &str, namespace: &str, values: &Value) -> Result<Option<Vec<Value>>, String> {
    let mut objs = match chart_name(spec_chart) {
        "cilium" => cilium(namespace, &with_defaults(cilium_defaults(), values)?)?,
        "karmada" => karmada(release, namespace, values),
        "kueue" => {
            crate::helm_workloads::kueue(release, namespace, &with_defaults(shared_defaults("kueue")?, values)?)?
        }
        "kai-scheduler" => {
            crate::helm_workloads::kai(namespace, &with_defaults(shared_defaults("kai-scheduler")?, values)?)?
        }
        "argo-cd" => crate::helm_workloads::argocd(release, namespace, &with_defaults(argocd_defaults(), values)?)?,
        "nvidia-device-plugin" => crate::helm_workloads::nvidia_device_plugin(
            release,
            namespace,
            &with_defaults(nvidia_device_plugin_defaults(), values)?,
        )?,
        _ => return Ok(None),
    };
    for o in &mut objs {
        let m = &mut o["metadata"];
        m["annotations"][RELEASE_NAME] = json!(release);
        m["annotations"][RELEASE_NAMESPACE] = json!(namespace);
        m["labels"][MANAGED_BY] = json!("Helm");
    }
    Ok(Some(objs))
}

/// What the chart's `pre-install` hooks leave in the cluster beside the release (not part of it:
/// no Helm annotations, so an upgrade never deletes it), for release `release` in `namespace`.
/// Helm runs them only when the release does not exist yet: klipper-helm's `entry`
/// (`helm_update`) installs when `helm ls` finds no release of that name and upgrades it
/// otherwise, and Helm runs `pre-install` hooks on install only (helm/helm
/// `pkg/action/install.go`, `upgrade.go` runs `pre-upgrade`).
pub fn pre_install(spec_chart: &str, release: &str, namespace: &str, values: &Value) -> Result<Vec<Value>, String> {
    match chart_name(spec_chart) {
        "karmada" => karmada_pre_install(release, namespace, values),
        _ => Ok(Vec::new()),
    }
}

/// The kinds [`render`] makes (the helm-controller deletes a release's objects of these kinds
/// that an upgrade no longer renders).
pub const RENDERED_KINDS: [(&str, &str); 5] =
    [("apps", "DaemonSet"), ("apps", "Deployment"), ("apps", "StatefulSet"), ("", "Service"), ("", "Secret")];

/// The chart's defaults with the release's values over them, as Helm coalesces them (the same
/// rule as [`values`]: maps key by key, anything else replaced, `null` removes the default).
fn with_defaults(mut defaults: Value, values: &Value) -> Result<Value, String> {
    coalesce(&mut defaults, values);
    Ok(defaults)
}

/// A chart's own `values.yaml` as `../shared/specs/helm/<chart>/` holds it (the pinned version's).
fn shared_defaults(chart: &str) -> Result<Value, String> {
    let path = crate::repo_root().join("../shared/specs/helm").join(chart).join("values.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The defaults of cilium/cilium install/kubernetes/cilium/values.yaml that decide where the
/// agent runs: `nodeSelector: {kubernetes.io/os: linux}`, `tolerations: [{operator: Exists}]`,
/// and the `affinity` that keeps one agent per node (podAntiAffinity on `k8s-app: cilium`,
/// topology `kubernetes.io/hostname`, which one Pod per Node satisfies).
fn cilium_defaults() -> Value {
    json!({"nodeSelector": {"kubernetes.io/os": "linux"}, "tolerations": [{"operator": "Exists"}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"k8s-app": "cilium"}}, "topologyKey": "kubernetes.io/hostname"}]}}})
}

/// argoproj/argo-helm charts/argo-cd/values.yaml, the defaults that name and size its
/// workloads: `nameOverride: argocd`; `controller.name: application-controller`,
/// `controller.replicas: 1`; `server.name: server`, `server.replicas: 1`; `repoServer.name:
/// repo-server`, `repoServer.replicas: 1`; `redis.enabled: true`, `redis.name: redis`;
/// `redis-ha.enabled: false`; `global.nodeSelector: {}`, `global.tolerations: []`.
fn argocd_defaults() -> Value {
    json!({"nameOverride": "argocd", "fullnameOverride": "",
        "global": {"nodeSelector": {}, "tolerations": []},
        "controller": {"name": "application-controller", "replicas": 1},
        "server": {"name": "server", "replicas": 1, "service": {"type": "ClusterIP"}},
        "repoServer": {"name": "repo-server", "replicas": 1},
        "redis": {"enabled": true, "name": "redis"}, "redis-ha": {"enabled": false}})
}

/// NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/values.yaml, the defaults that
/// decide its DaemonSet: `devicePlugin.enabled: true`; `nodeSelector: {}`; the `affinity` to
/// nodes NFD or GFD labelled (`feature.node.kubernetes.io/pci-10de.present`,
/// `feature.node.kubernetes.io/cpu-model.vendor_id: NVIDIA`, `nvidia.com/gpu.present`); the
/// `tolerations` of `CriticalAddonsOnly` and `nvidia.com/gpu:NoSchedule`; `runtimeClassName:
/// null`; `allowDefaultNamespace: false`; `config.name: ""`, `config.map: {}`.
fn nvidia_device_plugin_defaults() -> Value {
    let term = |k: &str, v: &str| json!({"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]});
    json!({"nameOverride": "", "fullnameOverride": "", "namespace": null, "namespaceOverride": "",
        "allowDefaultNamespace": false, "config": {"name": "", "map": {}},
        "devicePlugin": {"enabled": true}, "nodeSelector": {}, "runtimeClassName": null,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            term("feature.node.kubernetes.io/pci-10de.present", "true"),
            term("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
            term("nvidia.com/gpu.present", "true")]}}},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]})
}

pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k)).filter(|v| !v.is_null())
}

pub(crate) fn flag(v: &Value, path: &[&str], default: bool) -> bool {
    at(v, path).and_then(Value::as_bool).unwrap_or(default)
}

fn int(v: &Value, path: &[&str], default: i64) -> i64 {
    at(v, path).and_then(Value::as_i64).unwrap_or(default)
}

pub(crate) fn text<'a>(v: &'a Value, path: &[&str], default: &'a str) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or(default)
}

/// A workload's `replicas` value as the API server takes the rendered object: a template writes
/// `replicas: {{ value }}`, and anything but a non-negative integer makes the object invalid
/// (kubernetes/kubernetes `pkg/apis/apps/validation/validation.go`
/// `ValidateNonnegativeField`; a string does not even decode into the int32 field), so Helm's
/// install fails.
pub(crate) fn replicas(v: &Value, path: &[&str], default: i64, object: &str) -> Result<i64, String> {
    match at(v, path) {
        None => Ok(default),
        Some(n) => match n.as_i64() {
            Some(i) if i >= 0 => Ok(i),
            Some(i) => Err(format!(
                "{object} is invalid: spec.replicas: Invalid value: {i}: must be greater than or equal to 0"
            )),
            None => Err(format!(
                "error validating data: {object}: spec.replicas ({}): expected integer, got {n}",
                path.join(".")
            )),
        },
    }
}

pub(crate) fn deployment(name: &str, ns: &str, replicas: i64, labels: Value, container: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels.clone()},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels.clone()},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": container, "image": container}]}}}})
}

/// cilium/cilium install/kubernetes/cilium (defaults from its `values.yaml`: `agent: true`,
/// `operator.enabled: true`, `operator.replicas: 2`, `clustermesh.useAPIServer: false`,
/// `clustermesh.config.enabled: false`, `clustermesh.apiserver.replicas: 1`,
/// `clustermesh.apiserver.service.type: NodePort`, `externalWorkloads.enabled: false`).
fn cilium(ns: &str, v: &Value) -> Result<Vec<Value>, String> {
    schema_check("cilium", cilium_schema()?, v)?;
    let mut out = Vec::new();
    // templates/cilium-agent/daemonset.yaml: `if and .Values.agent (not .Values.preflight.enabled)`,
    // DaemonSet `cilium` in the release namespace, selector `k8s-app: cilium`, `hostNetwork:
    // true`, and `with .Values.affinity` / `.Values.nodeSelector` / `.Values.tolerations`
    // copied into the pod spec (an empty one leaves the field out).
    if flag(v, &["agent"], true) && !flag(v, &["preflight", "enabled"], false) {
        let labels = json!({"k8s-app": "cilium"});
        let mut spec = json!({"hostNetwork": true, "containers": [{"name": "cilium-agent", "image": "cilium"}]});
        copy_nonempty(v, &mut spec, &["affinity", "nodeSelector", "tolerations"]);
        out.push(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "cilium", "namespace": ns, "labels": labels.clone()},
            "spec": {"selector": {"matchLabels": labels.clone()},
                "template": {"metadata": {"labels": labels}, "spec": spec}}}));
    }
    // templates/cilium-operator/deployment.yaml: `if .Values.operator.enabled`, Deployment
    // `cilium-operator`, `replicas: .Values.operator.replicas`.
    if flag(v, &["operator", "enabled"], true) {
        let labels = json!({"io.cilium/app": "operator", "name": "cilium-operator"});
        out.push(deployment("cilium-operator", ns, int(v, &["operator", "replicas"], 2), labels, "cilium-operator"));
    }
    // templates/clustermesh-apiserver/deployment.yaml and service.yaml: both only
    // `if (or .Values.externalWorkloads.enabled .Values.clustermesh.useAPIServer)`; the Service's
    // port 2379 gets `nodePort` only when the type is NodePort and a nodePort is set.
    let use_api = flag(v, &["clustermesh", "useAPIServer"], false);
    if use_api || flag(v, &["externalWorkloads", "enabled"], false) {
        let labels = json!({"k8s-app": "clustermesh-apiserver"});
        let replicas = int(v, &["clustermesh", "apiserver", "replicas"], 1);
        out.push(deployment("clustermesh-apiserver", ns, replicas, labels.clone(), "apiserver"));
        let ty = text(v, &["clustermesh", "apiserver", "service", "type"], "NodePort");
        let mut port = json!({"port": 2379});
        if let (true, Some(np)) = (ty == "NodePort", at(v, &["clustermesh", "apiserver", "service", "nodePort"])) {
            port["nodePort"] = np.clone();
        }
        out.push(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "clustermesh-apiserver", "namespace": ns, "labels": labels.clone()},
            "spec": {"type": ty, "selector": labels, "ports": [port]}}));
    }
    // templates/clustermesh-config/clustermesh-secret.yaml:
    // `if and .Values.clustermesh.useAPIServer .Values.clustermesh.config.enabled`, Secret
    // `cilium-clustermesh` with one key per `clustermesh.config.clusters[].name`, its value the
    // peer's etcd configuration by `clustermesh-config-generate-etcd-cfg`
    // (templates/clustermesh-config/_helpers.tpl): endpoint `https://<name>.<domain>:<port>` when
    // the cluster has `ips`, else `https://<address>:<port>`, where a missing `address` fails the
    // install (`required "missing clustermesh.apiserver.config.clusters.address"`); the
    // certificate files are the common ones (`common-etcd-client*`) without a per-cluster
    // `tls.cert`/`tls.key` (the custom-CA variants are not simulated).
    if use_api && flag(v, &["clustermesh", "config", "enabled"], false) {
        let domain = text(v, &["clustermesh", "config", "domain"], "mesh.cilium.io");
        let mut data = Map::new();
        for c in at(v, &["clustermesh", "config", "clusters"]).and_then(Value::as_array).into_iter().flatten() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let port = c.get("port").map(|p| p.to_string()).unwrap_or_default();
            let has_ips = c.get("ips").is_some_and(|i| i.as_array().is_some_and(|a| !a.is_empty()));
            let endpoint = if has_ips {
                format!("https://{name}.{domain}:{port}")
            } else {
                match c.get("address").and_then(Value::as_str).filter(|a| !a.is_empty()) {
                    Some(a) => format!("https://{a}:{port}"),
                    None => {
                        return Err(
                            "execution error at (cilium/templates/clustermesh-config/clustermesh-secret.yaml): \
                            missing clustermesh.apiserver.config.clusters.address"
                                .into(),
                        );
                    }
                }
            };
            let tls = c.get("tls");
            let own = tls.is_some_and(|t| {
                [t.get("cert"), t.get("key")].iter().all(|x| x.and_then(Value::as_str).is_some_and(|s| !s.is_empty()))
            });
            let prefix = if own { format!("{name}.") } else { "common-".to_string() };
            let dir = "/var/lib/cilium/clustermesh";
            let cfg = format!(
                "endpoints:\n- {endpoint}\ntrusted-ca-file: {dir}/{prefix}etcd-client-ca.crt\nkey-file: {dir}/{prefix}etcd-client.key\ncert-file: {dir}/{prefix}etcd-client.crt\n"
            );
            data.insert(name.to_string(), json!(base64::engine::general_purpose::STANDARD.encode(cfg)));
        }
        out.push(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "cilium-clustermesh", "namespace": ns}, "data": data}));
    }
    Ok(out)
}

/// karmada-io/karmada charts/karmada: with `installMode: host` (its `values.yaml` default),
/// karmada-apiserver.yaml, karmada-controller-manager.yaml and karmada-scheduler.yaml each make
/// a Deployment `<release>-apiserver` / `-controller-manager` / `-scheduler` in the release
/// namespace (`karmada.name` is `.Release.Name`, `karmada.namespace` `.Release.Namespace`:
/// templates/_helpers.tpl), labelled `app: <that name>`, with `replicas` from
/// `apiServer.replicaCount`, `controllerManager.replicaCount`, `scheduler.replicaCount` (default
/// 1). Other install modes (`agent`, `component`) make none of them.
fn karmada(release: &str, ns: &str, v: &Value) -> Vec<Value> {
    if text(v, &["installMode"], "host") != "host" {
        return Vec::new();
    }
    [("apiserver", "apiServer"), ("controller-manager", "controllerManager"), ("scheduler", "scheduler")]
        .iter()
        .map(|(suffix, key)| {
            let name = format!("{release}-{suffix}");
            deployment(&name, ns, int(v, &[key, "replicaCount"], 1), json!({ "app": name }), &name)
        })
        .collect()
}

/// karmada-io/karmada charts/karmada/templates/pre-install-job.yaml: with `installMode: host` and
/// `certs.mode: auto` (the `values.yaml` defaults), the `<release>-pre-install` Job (a
/// `pre-install` hook only) makes a CA and, with cfssl, a certificate for
/// `tpl (toJson .Values.certs.auto.hosts)` valid for `certs.auto.expiry` (default `43800h`), and
/// `kubectl apply --server-side`s Secret `<release>-cert` with `server-ca.crt`, `server-ca.key`,
/// `karmada.crt`, `karmada.key`, `front-proxy-ca.crt`, `front-proxy-client.crt`,
/// `front-proxy-client.key`, each the base64 of a PEM. cfssl puts a host that parses as an IP
/// address in the IP SANs and any other in the DNS SANs (cloudflare/cfssl `csr/csr.go`,
/// `Generate`). Other values (`certs.mode: custom`: `karmada-cert.yaml` renders the Secret from
/// the values instead) make nothing here. Not simulated: the `<release>-webhook-cert` and
/// `<release>-kubeconfig` Secrets and the ConfigMaps of the same Job; RSA keys (the double's are
/// ECDSA P-256); the front-proxy pair is a copy of the server pair.
fn karmada_pre_install(release: &str, ns: &str, v: &Value) -> Result<Vec<Value>, String> {
    if text(v, &["installMode"], "host") != "host" || text(v, &["certs", "mode"], "auto") != "auto" {
        return Ok(Vec::new());
    }
    let default_hosts = json!([
        "kubernetes.default.svc",
        "*.etcd.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}",
        "*.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}",
        "*.{{ .Release.Namespace }}.svc",
        "localhost",
        "127.0.0.1"
    ]);
    let hosts = at(v, &["certs", "auto", "hosts"]).unwrap_or(&default_hosts);
    let Some(hosts) = hosts.as_array() else { return Err("certs.auto.hosts: not a list".into()) };
    let domain = text(v, &["clusterDomain"], "cluster.local");
    let hosts = hosts
        .iter()
        .map(|h| tpl(h.as_str().unwrap_or_default(), release, ns, domain))
        .collect::<Result<Vec<String>, String>>()?;
    let hours = expiry_hours(text(v, &["certs", "auto", "expiry"], "43800h"))?;
    let (ca_crt, ca_key, crt, key) = karmada_certs(&hosts, hours).map_err(|e| format!("cfssl: {e}"))?;
    let b64 = |s: &str| json!(base64::engine::general_purpose::STANDARD.encode(s));
    Ok(vec![json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": format!("{release}-cert"), "namespace": ns},
        "data": {"server-ca.crt": b64(&ca_crt), "server-ca.key": b64(&ca_key), "karmada.crt": b64(&crt),
            "karmada.key": b64(&key), "front-proxy-ca.crt": b64(&ca_crt), "front-proxy-client.crt": b64(&crt),
            "front-proxy-client.key": b64(&key)}})])
}

/// Helm's `tpl` on one host of `certs.auto.hosts`, for the expressions the chart's defaults use;
/// any other expression fails the install (the double cannot render it).
fn tpl(host: &str, release: &str, ns: &str, domain: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = host;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find("}}") else {
            return Err(format!("certs.auto.hosts: unclosed action in {host:?}"));
        };
        out.push_str(match rest[i + 2..i + j].trim() {
            ".Release.Namespace" => ns,
            ".Release.Name" => release,
            ".Values.clusterDomain" => domain,
            other => return Err(format!("certs.auto.hosts: `{other}` is not simulated")),
        });
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `certs.auto.expiry` as whole hours (cfssl reads it with Go's `time.ParseDuration`; the chart's
/// values use hours).
fn expiry_hours(expiry: &str) -> Result<u64, String> {
    expiry
        .strip_suffix('h')
        .and_then(|h| h.parse().ok())
        .ok_or_else(|| format!("certs.auto.expiry {expiry:?}: not simulated"))
}

/// A CA (`CN=ca`, as the Job's `openssl req -x509`) and a certificate it signs for `hosts`
/// (`CN=system:admin`, `O=system:masters`), valid `hours`: (CA cert, CA key, cert, key), PEM.
fn karmada_certs(hosts: &[String], hours: u64) -> Result<(String, String, String, String), rcgen::Error> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let now = std::time::SystemTime::now();
    let until = now + std::time::Duration::from_secs(hours * 3600);
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(DnType::CommonName, "ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.not_before = now.into();
    ca.not_after = until.into();
    let ca_cert = ca.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(hosts.to_vec())?;
    leaf.distinguished_name.push(DnType::CommonName, "system:admin");
    leaf.distinguished_name.push(DnType::OrganizationName, "system:masters");
    leaf.not_before = now.into();
    leaf.not_after = until.into();
    let cert = leaf.signed_by(&key, &Issuer::from_params(&ca, &ca_key))?;
    Ok((ca_cert.pem(), ca_key.serialize_pem(), cert.pem(), key.serialize_pem()))
}

/// `{{- with .Values.<key> }} <key>: {{ toYaml . }}` for each key: copied into `spec` unless
/// empty (Go templates' `with` skips empty maps, lists, strings and `false`).
pub(crate) fn copy_nonempty(v: &Value, spec: &mut Value, keys: &[&str]) {
    copy_nonempty_from(v, &[], spec, keys);
}

/// [`copy_nonempty`] of the values under `prefix` (`global` for KAI's).
pub(crate) fn copy_nonempty_from(v: &Value, prefix: &[&str], spec: &mut Value, keys: &[&str]) {
    for k in keys {
        let path: Vec<&str> = prefix.iter().chain(std::iter::once(k)).copied().collect();
        let Some(x) = at(v, &path) else { continue };
        let empty = match x {
            Value::Object(m) => m.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::String(s) => s.is_empty(),
            Value::Bool(b) => !b,
            _ => false,
        };
        if !empty {
            spec[*k] = x.clone();
        }
    }
}

/// Cilium's `values.schema.json` (`../shared/specs/helm/cilium/`, the pinned version's).
fn cilium_schema() -> Result<&'static Value, String> {
    static SCHEMA: std::sync::OnceLock<Result<Value, String>> = std::sync::OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let path = crate::repo_root().join("../shared/specs/helm/cilium/values.schema.json");
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Helm validates the coalesced values against the chart's `values.schema.json` before it
/// renders anything (helm/helm pkg/chartutil/jsonschema.go `ValidateAgainstSchema`, message
/// "values don't meet the specifications of the schema(s) in the following chart(s)"). The
/// keywords Cilium's schema uses are checked: `type` (one or a list), `properties`, `items`,
/// `anyOf`, `enum`; others are not.
pub(crate) fn schema_check(chart: &str, schema: &Value, values: &Value) -> Result<(), String> {
    let mut errors = Vec::new();
    schema_errors(schema, values, "", &mut errors);
    if errors.is_empty() {
        return Ok(());
    }
    Err(format!(
        "values don't meet the specifications of the schema(s) in the following chart(s):\n{chart}:\n{}",
        errors.iter().map(|e| format!("- {e}")).collect::<Vec<_>>().join("\n")
    ))
}

fn json_type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn schema_errors(schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    let field = if path.is_empty() { "(root)" } else { path };
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| json_type_matches(t, v)) {
        out.push(format!("{field}: Invalid type. Expected: {}, given: {}", types.join(" or "), json_type_name(v)));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        out.push(format!(
            "{field}: {field} must be one of the following: {}",
            serde_json::to_string(allowed).unwrap_or_default()
        ));
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
        && !any.iter().any(|s| {
            let mut e = Vec::new();
            schema_errors(s, v, path, &mut e);
            e.is_empty()
        })
    {
        out.push(format!("{field}: Must validate at least one schema (anyOf)"));
    }
    if let (Some(props), Some(obj)) = (schema.get("properties").and_then(Value::as_object), v.as_object()) {
        for (k, sub) in props {
            if let Some(x) = obj.get(k) {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                schema_errors(sub, x, &p, out);
            }
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), v.as_array()) {
        for (i, x) in list.iter().enumerate() {
            schema_errors(items, x, &format!("{field}.{i}"), out);
        }
    }
}
