//! Kubernetes' built-in kinds for the API double (`kube_api`): what kube-apiserver does to a
//! built-in object on every write before it stores it, and the list types of their fields. See
//! `kube_api.md`, "Built-in kinds", for each behaviour and the upstream file it follows.
//!
//! * **Quantities** (`k8s.io/apimachinery/pkg/api/resource/quantity.go`: `ParseQuantity`,
//!   `CanonicalizeBytes`): every field whose definition is a `Quantity` in
//!   `shared/specs/kubernetes/v1.33/_definitions.json` is parsed and stored in canonical form
//!   (`1` → `"1"`, `1000m` → `"1"`, `0.5` → `"500m"`, `1024Mi` → `"1Gi"`). Values of a
//!   `ResourceList` are first rounded up to milli precision (`pkg/apis/core/v1/defaults.go`,
//!   `SetDefaults_ResourceList`). Custom resources are not touched: a CRD's fields are stored as
//!   sent (`x-kubernetes-int-or-string` or not).
//! * **Defaults** of the kinds fabric writes (`pkg/apis/{apps,batch,core,rbac}/v1/defaults.go`;
//!   the functions are named beside each rule below).
//! * **List types** (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys` of the definitions):
//!   the double's server-side apply merges `map` lists by their keys and `set` lists by value.
//!
//! This module does not know fabric: the facts come from the upstream definitions file and the
//! upstream defaulting functions, never from fabric's own constants.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The built-in kinds' definitions (OpenAPI, `$defs`), indexed by group/version/kind.
pub struct Builtins {
    defs: Map<String, Value>,
    by_gvk: BTreeMap<(String, String, String), String>,
}

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// How the items of a list are merged and owned (structured-merge-diff's list types).
#[derive(Clone, Debug, PartialEq)]
pub enum ListType {
    /// One value, owned and replaced as a whole (also a list without a declared type).
    Atomic,
    /// Items are unique scalars, each owned on its own (`v:<value>`).
    Set,
    /// Items are objects identified by these keys (`k:{"name":"x"}`).
    Map(Vec<String>),
}

impl Builtins {
    /// Reads a definitions file (`{"$defs": {...}}`, as `shared/specs/kubernetes/v1.33`).
    pub fn load(path: &std::path::Path) -> Result<Builtins, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let defs = v.get("$defs").and_then(Value::as_object).cloned().ok_or(format!("{}: no $defs", path.display()))?;
        let mut by_gvk = BTreeMap::new();
        for (name, d) in &defs {
            for gvk in d.get("x-kubernetes-group-version-kind").and_then(Value::as_array).into_iter().flatten() {
                let s = |k: &str| gvk.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                // The definitions repeat meta types (DeleteOptions, WatchEvent) for every group.
                if name.starts_with("io.k8s.apimachinery") {
                    continue;
                }
                by_gvk.insert((s("group"), s("version"), s("kind")), name.clone());
            }
        }
        Ok(Builtins { defs, by_gvk })
    }

    /// `../shared/specs/kubernetes/v1.33/_definitions.json` relative to the repository root.
    pub fn from_shared() -> Result<Builtins, String> {
        let p = crate::repo_root().join("../shared/specs/kubernetes/v1.33/_definitions.json");
        Builtins::load(&p).map_err(|e| {
            format!("kube_builtin: the Kubernetes v1.33 definitions are needed next to the repository: {e}")
        })
    }

    /// Whether the definitions have this kind.
    pub fn knows(&self, group: &str, version: &str, kind: &str) -> bool {
        self.by_gvk.contains_key(&(group.into(), version.into(), kind.into()))
    }

    fn root(&self, group: &str, version: &str, kind: &str) -> Option<&Value> {
        self.defs.get(self.by_gvk.get(&(group.into(), version.into(), kind.into()))?)
    }

    /// Follows `$ref` (`#/$defs/<name>`); returns the schema and the name it was found under.
    fn resolve<'a>(&'a self, schema: &'a Value) -> (&'a Value, Option<&'a str>) {
        let mut s = schema;
        let mut name = None;
        for _ in 0..8 {
            match s.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
                Some(n) => match self.defs.get_key_value(n) {
                    Some((k, d)) => {
                        name = Some(k.as_str());
                        s = d;
                    }
                    None => break,
                },
                None => break,
            }
        }
        (s, name)
    }

    /// Canonicalizes every quantity of a built-in object in place; the errors are
    /// `(field, message)` as kube-apiserver words a quantity it cannot parse.
    pub fn canonicalize(&self, group: &str, version: &str, kind: &str, obj: &mut Value) -> Vec<(String, String)> {
        let mut errs = Vec::new();
        if let Some(root) = self.root(group, version, kind) {
            self.walk_quantities(root, obj, String::new(), false, &mut errs);
        }
        errs
    }

    fn walk_quantities(
        &self,
        schema: &Value,
        v: &mut Value,
        at: String,
        milli: bool,
        errs: &mut Vec<(String, String)>,
    ) {
        let (s, name) = self.resolve(schema);
        if name == Some(QUANTITY) {
            let text = match v {
                Value::String(t) => t.clone(),
                Value::Number(n) => n.to_string(),
                _ => return,
            };
            match canonical_quantity(&text, milli) {
                Ok(c) => *v = Value::String(c),
                Err(e) => errs.push((at, e)),
            }
            return;
        }
        match v {
            Value::Object(m) => {
                let props = s.get("properties").and_then(Value::as_object);
                let additional = s.get("additionalProperties").filter(|a| a.is_object());
                for (k, c) in m.iter_mut() {
                    let field = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                    if let Some(p) = props.and_then(|p| p.get(k)) {
                        self.walk_quantities(p, c, field, false, errs);
                    } else if let Some(a) = additional {
                        // A map of quantities is a ResourceList: rounded up to milli first.
                        let list = self.resolve(a).1 == Some(QUANTITY);
                        self.walk_quantities(a, c, format!("{at}[{k}]"), list, errs);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = s.get("items") {
                    for (i, c) in items.iter_mut().enumerate() {
                        self.walk_quantities(item, c, format!("{at}[{i}]"), false, errs);
                    }
                }
            }
            _ => {}
        }
    }

    /// The list type of the field at `path` (object keys from the root; list items are walked
    /// through) of a built-in kind; None when the path is no list the definitions know.
    pub fn list_type(&self, group: &str, version: &str, kind: &str, path: &[&str]) -> Option<ListType> {
        let mut s = self.root(group, version, kind)?;
        for seg in path {
            s = self.resolve(s).0;
            // Through list items.
            while let Some(items) = s.get("items") {
                s = self.resolve(items).0;
            }
            s = match s.get("properties").and_then(|p| p.get(*seg)) {
                Some(p) => p,
                None => s.get("additionalProperties").filter(|a| a.is_object())?,
            };
        }
        let (s, _) = self.resolve(s);
        list_type_of(s)
    }
}

/// The list type a schema declares (`x-kubernetes-list-type`, `-map-keys`); None when it is no
/// array. An array without a declared type is atomic (structured-merge-diff's default).
pub fn list_type_of(schema: &Value) -> Option<ListType> {
    let is_array = match schema.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
        _ => schema.get("items").is_some(),
    };
    if !is_array {
        return None;
    }
    Some(match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => ListType::Map(
            schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|ks| ks.iter().filter_map(Value::as_str).map(String::from).collect())
                .unwrap_or_default(),
        ),
        Some("set") => ListType::Set,
        _ => ListType::Atomic,
    })
}

/// The definitions of `shared/specs/kubernetes/v1.33`, loaded once per process.
pub fn shared_builtins() -> Arc<Builtins> {
    static B: OnceLock<Arc<Builtins>> = OnceLock::new();
    B.get_or_init(|| Arc::new(Builtins::from_shared().unwrap_or_else(|e| panic!("{e}")))).clone()
}

// ---------------------------------------------------------------------------------------------
// Quantities (k8s.io/apimachinery/pkg/api/resource/quantity.go)
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Format {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

/// kube-apiserver's message for a quantity it cannot parse (`ErrFormatWrong`).
pub const QUANTITY_FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// The canonical form of a quantity, as the API server stores and returns it
/// (`ParseQuantity`, then `CanonicalizeBytes`). `milli`: round up to milli precision first, as
/// `SetDefaults_ResourceList` does for resource lists; otherwise `ParseQuantity` rounds up to
/// nano precision.
pub fn canonical_quantity(text: &str, milli: bool) -> Result<String, String> {
    let s = text.trim();
    let wrong = || QUANTITY_FORMAT_WRONG.to_string();
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let num_len = body.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
    let (num, suffix) = body.split_at(num_len);
    if num.is_empty() || num.matches('.').count() > 1 || !num.bytes().any(|b| b.is_ascii_digit()) {
        return Err(wrong());
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    // value = mantissa × 10^exp10 × 1024^exp1024
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err("the quantity is too large for the test double".into());
    }
    let mut mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| wrong())? };
    let mut exp10: i32 = -(frac_part.len() as i32);
    let (format, exp1024) = match suffix {
        "" => (Format::DecimalSI, 0),
        "n" => {
            exp10 -= 9;
            (Format::DecimalSI, 0)
        }
        "u" => {
            exp10 -= 6;
            (Format::DecimalSI, 0)
        }
        "m" => {
            exp10 -= 3;
            (Format::DecimalSI, 0)
        }
        "k" | "M" | "G" | "T" | "P" | "E" => {
            exp10 += 3 * (1 + "kMGTPE".find(suffix).expect("decimal suffix") as i32);
            (Format::DecimalSI, 0)
        }
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => (
            Format::BinarySI,
            1 + ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].iter().position(|x| *x == suffix).unwrap() as u32,
        ),
        e if e.starts_with(['e', 'E']) => {
            let n: i32 = e[1..].parse().map_err(|_| wrong())?;
            exp10 += n;
            (Format::DecimalExponent, 0)
        }
        _ => return Err(wrong()),
    };
    for _ in 0..exp1024 {
        mantissa = mantissa.checked_mul(1024).ok_or_else(wrong)?;
    }
    // Precision: nano (ParseQuantity) or milli (ResourceList), rounded up (away from zero).
    let floor = if milli { -3 } else { -9 };
    while exp10 < floor {
        let rest = mantissa % 10;
        mantissa /= 10;
        if rest != 0 {
            mantissa += 1;
        }
        exp10 += 1;
    }
    if mantissa == 0 {
        return Ok("0".into());
    }
    let sign = if neg { "-" } else { "" };
    let mut format = format;
    if format == Format::BinarySI {
        // CanonicalizeBytes: between -1024 and 1024, or not an integer: shown as DecimalSI.
        let integer = if exp10 >= 0 {
            Some(mantissa * 10i128.pow(exp10 as u32))
        } else {
            let d = 10i128.pow((-exp10) as u32);
            (mantissa % d == 0).then(|| mantissa / d)
        };
        match integer {
            Some(n) if n >= 1024 => {
                let (mut n, mut k) = (n, 0usize);
                while n % 1024 == 0 && k < 6 {
                    n /= 1024;
                    k += 1;
                }
                return Ok(format!("{sign}{n}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][k]));
            }
            _ => format = Format::DecimalSI,
        }
    }
    // AsCanonicalBytes: trailing zeros out, then the exponent down to a multiple of 3.
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exp10 += 1;
    }
    let extra = exp10.rem_euclid(3);
    for _ in 0..extra {
        mantissa *= 10;
    }
    exp10 -= extra;
    let suffix = match (format, exp10) {
        (_, 0) => String::new(),
        (Format::DecimalSI, -9) => "n".into(),
        (Format::DecimalSI, -6) => "u".into(),
        (Format::DecimalSI, -3) => "m".into(),
        (Format::DecimalSI, e @ 3..=18) => "kMGTPE"[(e / 3 - 1) as usize..(e / 3) as usize].to_string(),
        (_, e) => format!("e{e}"),
    };
    Ok(format!("{sign}{mantissa}{suffix}"))
}

// ---------------------------------------------------------------------------------------------
// Defaults (pkg/apis/{apps,batch,core,rbac}/v1/defaults.go)
// ---------------------------------------------------------------------------------------------

fn set_if_absent(m: &mut Map<String, Value>, k: &str, v: Value) {
    if m.get(k).is_none_or(|x| x.is_null() || x == "") {
        m.insert(k.into(), v);
    }
}

fn obj_at<'a>(v: &'a mut Value, k: &str) -> &'a mut Map<String, Value> {
    if !v.get(k).is_some_and(Value::is_object) {
        v[k] = json!({});
    }
    v[k].as_object_mut().expect("object")
}

/// The defaults kube-apiserver sets on a built-in object of these kinds (the kinds fabric
/// writes and the workloads around them). Each rule names its upstream function.
pub fn apply_defaults(group: &str, kind: &str, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    match (group, kind) {
        ("apps", "Deployment") => {
            let spec = obj_at(obj, "spec");
            // apps/v1 SetDefaults_Deployment.
            set_if_absent(spec, "replicas", json!(1));
            let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
            if let Some(st) = strategy.as_object_mut() {
                set_if_absent(st, "type", json!("RollingUpdate"));
                if st["type"] == "RollingUpdate" {
                    let ru = st.entry("rollingUpdate").or_insert_with(|| json!({}));
                    if let Some(ru) = ru.as_object_mut() {
                        set_if_absent(ru, "maxUnavailable", json!("25%"));
                        set_if_absent(ru, "maxSurge", json!("25%"));
                    }
                }
            }
            set_if_absent(spec, "revisionHistoryLimit", json!(10));
            set_if_absent(spec, "progressDeadlineSeconds", json!(600));
            template_defaults(obj);
        }
        ("apps", "DaemonSet") => {
            let spec = obj_at(obj, "spec");
            // apps/v1 SetDefaults_DaemonSet.
            let us = spec.entry("updateStrategy").or_insert_with(|| json!({}));
            if let Some(us) = us.as_object_mut() {
                set_if_absent(us, "type", json!("RollingUpdate"));
                if us["type"] == "RollingUpdate" {
                    let ru = us.entry("rollingUpdate").or_insert_with(|| json!({}));
                    if let Some(ru) = ru.as_object_mut() {
                        set_if_absent(ru, "maxUnavailable", json!(1));
                        set_if_absent(ru, "maxSurge", json!(0));
                    }
                }
            }
            set_if_absent(spec, "revisionHistoryLimit", json!(10));
            template_defaults(obj);
        }
        ("apps", "StatefulSet") => {
            let spec = obj_at(obj, "spec");
            // apps/v1 SetDefaults_StatefulSet (StatefulSetAutoDeletePVC is on in v1.33).
            set_if_absent(spec, "podManagementPolicy", json!("OrderedReady"));
            let us = spec.entry("updateStrategy").or_insert_with(|| json!({}));
            if let Some(us) = us.as_object_mut() {
                if us.get("type").is_none_or(|t| t == "") {
                    us.insert("type".into(), json!("RollingUpdate"));
                    us.entry("rollingUpdate").or_insert_with(|| json!({}));
                }
                if us["type"] == "RollingUpdate"
                    && let Some(ru) = us.get_mut("rollingUpdate").and_then(Value::as_object_mut)
                {
                    set_if_absent(ru, "partition", json!(0));
                }
            }
            let p = spec.entry("persistentVolumeClaimRetentionPolicy").or_insert_with(|| json!({}));
            if let Some(p) = p.as_object_mut() {
                set_if_absent(p, "whenDeleted", json!("Retain"));
                set_if_absent(p, "whenScaled", json!("Retain"));
            }
            set_if_absent(spec, "replicas", json!(1));
            set_if_absent(spec, "revisionHistoryLimit", json!(10));
            template_defaults(obj);
        }
        ("batch", "Job") => {
            // batch/v1 SetDefaults_Job (JobPodReplacementPolicy is on in v1.33).
            let template_labels = obj.pointer("/spec/template/metadata/labels").cloned();
            let spec = obj_at(obj, "spec");
            if spec.get("completions").is_none_or(Value::is_null) && spec.get("parallelism").is_none_or(Value::is_null)
            {
                spec.insert("completions".into(), json!(1));
                spec.insert("parallelism".into(), json!(1));
            }
            set_if_absent(spec, "parallelism", json!(1));
            let per_index = spec.get("backoffLimitPerIndex").is_some_and(|v| !v.is_null());
            set_if_absent(spec, "backoffLimit", json!(if per_index { i32::MAX } else { 6 }));
            set_if_absent(spec, "completionMode", json!("NonIndexed"));
            set_if_absent(spec, "suspend", json!(false));
            let pfp = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
            set_if_absent(spec, "podReplacementPolicy", json!(if pfp { "Failed" } else { "TerminatingOrFailed" }));
            set_if_absent(spec, "manualSelector", json!(false));
            if let Some(l) = template_labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
                let meta = obj_at(obj, "metadata");
                if meta.get("labels").and_then(Value::as_object).is_none_or(Map::is_empty) {
                    meta.insert("labels".into(), l);
                }
            }
            template_defaults(obj);
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding" | "RoleBinding") => {
            // rbac/v1 SetDefaults_ClusterRoleBinding, SetDefaults_RoleBinding, SetDefaults_Subject
            // (a ServiceAccount's apiGroup stays "", which the API does not print).
            if let Some(r) = obj.get_mut("roleRef").and_then(Value::as_object_mut) {
                set_if_absent(r, "apiGroup", json!("rbac.authorization.k8s.io"));
            }
            for sub in obj.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
                let kind = sub["kind"].as_str().unwrap_or_default().to_string();
                if let Some(m) = sub.as_object_mut()
                    && (kind == "User" || kind == "Group")
                {
                    set_if_absent(m, "apiGroup", json!("rbac.authorization.k8s.io"));
                }
            }
        }
        ("", "Service") => service_defaults(obj),
        ("", "Pod") => {
            // core/v1 SetDefaults_Pod: requests default to limits; enableServiceLinks.
            if let Some(spec) = obj.get_mut("spec") {
                for list in ["containers", "initContainers"] {
                    for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                        let Some(limits) = c.pointer("/resources/limits").and_then(Value::as_object).cloned() else {
                            continue;
                        };
                        let req = obj_at(c.get_mut("resources").expect("resources"), "requests");
                        for (k, v) in limits {
                            req.entry(k).or_insert(v);
                        }
                    }
                }
                if let Some(s) = spec.as_object_mut() {
                    set_if_absent(s, "enableServiceLinks", json!(true));
                }
                pod_spec_defaults(spec);
            }
        }
        ("", "Secret") => {
            // core/v1 SetDefaults_Secret.
            if let Some(m) = obj.as_object_mut() {
                set_if_absent(m, "type", json!("Opaque"));
            }
        }
        ("", "Namespace") => {
            // core/v1 SetDefaults_Namespace: the label kubernetes.io/metadata.name.
            if let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str).map(String::from)
                && !name.is_empty()
            {
                let meta = obj_at(obj, "metadata");
                if !meta.get("labels").is_some_and(Value::is_object) {
                    meta.insert("labels".into(), json!({}));
                }
                meta["labels"]["kubernetes.io/metadata.name"] = json!(name);
            }
        }
        _ => {}
    }
}

fn template_defaults(obj: &mut Value) {
    if let Some(spec) = obj.pointer_mut("/spec/template/spec") {
        pod_spec_defaults(spec);
    }
}

/// core/v1 SetDefaults_PodSpec and what it holds: SetDefaults_Container, SetDefaults_Probe,
/// SetDefaults_HTTPGetAction, the volume sources' `defaultMode`, SetDefaults_ObjectFieldSelector,
/// SetDefaults_HostPathVolumeSource; ContainerPort's protocol (`Defaults to "TCP"`).
fn pod_spec_defaults(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else { return };
    set_if_absent(s, "dnsPolicy", json!("ClusterFirst"));
    set_if_absent(s, "restartPolicy", json!("Always"));
    if s.get("securityContext").is_none_or(Value::is_null) {
        s.insert("securityContext".into(), json!({}));
    }
    set_if_absent(s, "terminationGracePeriodSeconds", json!(30));
    set_if_absent(s, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        for c in s.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            container_defaults(c);
        }
    }
    for v in s.get_mut("volumes").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(v) = v.as_object_mut() else { continue };
        for (src, mode) in [("secret", 420), ("configMap", 420), ("downwardAPI", 420), ("projected", 420)] {
            if let Some(m) = v.get_mut(src).and_then(Value::as_object_mut) {
                set_if_absent(m, "defaultMode", json!(mode));
            }
        }
        if let Some(h) = v.get_mut("hostPath").and_then(Value::as_object_mut)
            && h.get("type").is_none_or(Value::is_null)
        {
            h.insert("type".into(), json!(""));
        }
    }
}

fn container_defaults(c: &mut Value) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default().to_string();
    let Some(m) = c.as_object_mut() else { return };
    // SetDefaults_Container: Always for the tag `latest` (or none), else IfNotPresent.
    let policy = if image_tag(&image) == "latest" { "Always" } else { "IfNotPresent" };
    set_if_absent(m, "imagePullPolicy", json!(policy));
    set_if_absent(m, "terminationMessagePath", json!("/dev/termination-log"));
    set_if_absent(m, "terminationMessagePolicy", json!("File"));
    for p in m.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(p) = p.as_object_mut() {
            set_if_absent(p, "protocol", json!("TCP"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(p) = m.get_mut(probe).and_then(Value::as_object_mut) else { continue };
        for (k, d) in [("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)] {
            if p.get(k).is_none_or(|v| v.is_null() || v == 0) {
                p.insert(k.into(), json!(d));
            }
        }
        if let Some(h) = p.get_mut("httpGet").and_then(Value::as_object_mut) {
            set_if_absent(h, "path", json!("/"));
            set_if_absent(h, "scheme", json!("HTTP"));
        }
    }
    for e in m.get_mut("env").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(f) = e.pointer_mut("/valueFrom/fieldRef").and_then(Value::as_object_mut) {
            set_if_absent(f, "apiVersion", json!("v1"));
        }
    }
}

/// The tag of an image reference as `pkg/util/parsers.ParseImageName` gives it: `latest` when
/// there is neither tag nor digest.
fn image_tag(image: &str) -> String {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => tag.to_string(),
        None if digest.is_some() => String::new(),
        None => "latest".into(),
    }
}

/// core/v1 SetDefaults_Service.
fn service_defaults(obj: &mut Value) {
    let spec = obj_at(obj, "spec");
    set_if_absent(spec, "sessionAffinity", json!("None"));
    if spec["sessionAffinity"] == "None" {
        spec.remove("sessionAffinityConfig");
    } else if spec["sessionAffinity"] == "ClientIP"
        && spec
            .get("sessionAffinityConfig")
            .and_then(|c| c.pointer("/clientIP/timeoutSeconds"))
            .is_none_or(Value::is_null)
    {
        spec.insert("sessionAffinityConfig".into(), json!({"clientIP": {"timeoutSeconds": 10800}}));
    }
    set_if_absent(spec, "type", json!("ClusterIP"));
    for p in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(p) = p.as_object_mut() else { continue };
        set_if_absent(p, "protocol", json!("TCP"));
        if p.get("targetPort").is_none_or(|t| t.is_null() || t == 0 || t == "")
            && let Some(port) = p.get("port").cloned()
        {
            p.insert("targetPort".into(), port);
        }
    }
    let ty = spec["type"].as_str().unwrap_or_default().to_string();
    // pkg/api/v1/service ExternallyAccessible: LoadBalancer, NodePort, or ClusterIP with externalIPs.
    let external = ty == "LoadBalancer"
        || ty == "NodePort"
        || (ty == "ClusterIP" && spec.get("externalIPs").and_then(Value::as_array).is_some_and(|a| !a.is_empty()));
    if external {
        set_if_absent(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        set_if_absent(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set_if_absent(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_canonical_as_upstream_prints_them() {
        for (given, milli, want) in [
            ("1", false, "1"),
            ("1000m", false, "1"),
            ("0.5", false, "500m"),
            ("1Gi", false, "1Gi"),
            ("1024Mi", false, "1Gi"),
            ("1536Mi", false, "1536Mi"),
            ("0.5Gi", false, "512Mi"),
            ("100Mi", false, "100Mi"),
            ("1500", false, "1500"),
            ("2000", false, "2k"),
            ("1.5", false, "1500m"),
            ("0", false, "0"),
            ("0Gi", false, "0"),
            ("1e3", false, "1e3"),
            ("100m", false, "100m"),
            ("512", false, "512"),
            ("0.0001", true, "1m"),
            ("0.0001", false, "100u"),
            ("-1", false, "-1"),
        ] {
            assert_eq!(canonical_quantity(given, milli).as_deref(), Ok(want), "{given}");
        }
        // apimachinery's own table (`pkg/api/resource/quantity_test.go`, `TestQuantityParseEmit`),
        // and its negated forms.
        for (given, want) in [
            ("1Ki", "1Ki"),
            ("1Mi", "1Mi"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1000M", "1G"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            (".000000000001Ki", "2n"),
        ] {
            assert_eq!(canonical_quantity(given, false).as_deref(), Ok(want), "{given}");
            assert_eq!(canonical_quantity(&format!("-{given}"), false), Ok(format!("-{want}")), "-{given}");
        }
        for bad in ["", "abc", "1..2", "1x", "Gi", "1 Gi"] {
            assert!(canonical_quantity(bad, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn image_tags() {
        assert_eq!(image_tag("nginx"), "latest");
        assert_eq!(image_tag("registry:5000/a/nginx"), "latest");
        assert_eq!(image_tag("registry:5000/a/nginx:1.2"), "1.2");
        assert_eq!(image_tag("nginx@sha256:abc"), "");
    }
}
