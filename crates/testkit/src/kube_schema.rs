//! Test support: validate Kubernetes objects against the upstream schemas in `shared/specs/crds/`
//! with kube-apiserver *strict field validation* semantics.
//!
//! Use it from an integration test with `use fabric_testkit::kube_schema;`. It is self-contained
//! (only `serde_json`, `serde-saphyr` and `regex`).
//!
//! # Sources
//!
//! * Every `apiextensions.k8s.io/v1` `CustomResourceDefinition` found (recursively) in `*.yaml` /
//!   `*.yml` files: `spec.group`, `spec.names.kind`, `spec.scope` and, per `spec.versions[]`,
//!   `name`, `served`, `storage`, `deprecated`, `deprecationWarning` and `schema.openAPIV3Schema`.
//!   A CRD found under a directory named `removed` is still loaded, but every object of that kind
//!   gets a warning (the kind no longer exists upstream).
//! * Every `swagger.json` (Swagger 2.0): each definition carrying `x-kubernetes-group-version-kind`
//!   whose group ends in `karmada.io` (Karmada's aggregated API, e.g. `cluster.karmada.io/v1alpha1
//!   Cluster`, which has no CRD). `$ref: "#/definitions/..."` is resolved. `*List` kinds are
//!   skipped. The scope comes from the `post` paths (`.../namespaces/{namespace}/...` means
//!   namespaced). A CRD for the same (group, kind) takes precedence over the swagger definition.
//!
//! # Semantics implemented (structural schemas, as kube-apiserver applies them)
//!
//! * `apiVersion` and `kind` must be present and known; a version that is not `served` is an error,
//!   a `deprecated` version gives a warning (see [`Schemas::check`]).
//! * `metadata` is checked as ObjectMeta (the CRD schema's `metadata: {type: object}` is replaced
//!   by it, as kube does): every real ObjectMeta field is allowed and type-checked, any other key
//!   (e.g. `lables`) is an unknown field; `name` (or `generateName`) is required and must be a
//!   DNS-1123 subdomain; label keys/values and annotation keys are checked like kube does.
//!   `namespace` is **required** for namespaced kinds and **forbidden** for cluster-scoped kinds.
//!   Both are stricter than the API server, which takes the namespace from the request URL and
//!   silently drops it for cluster-scoped objects: manifests are expected to be self-contained.
//! * `type`, `properties`, `required` (a required property that has a `default` is satisfied by
//!   defaulting), `additionalProperties` (schema or bool), `items`, `enum`, `format` (`int32`,
//!   `int64` ranges, `date-time`, `cidr`; other formats are not checked), `minimum`, `maximum`,
//!   `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength` (in characters), `pattern`
//!   (unanchored match as Go's `regexp.MatchString`, with the `regex` crate, which is RE2-like; a
//!   pattern that does not compile is a loader warning and an error for every value it would
//!   check), `minItems`, `maxItems`, `minProperties`, `maxProperties`, `nullable`,
//!   `x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields`,
//!   `x-kubernetes-embedded-resource` (`apiVersion`/`kind` required, `metadata` as ObjectMeta),
//!   `x-kubernetes-list-type: set|map` (duplicates are errors), and `anyOf`/`oneOf`/`allOf`/`not`
//!   as value validations (no unknown-field checks inside them, as in structural schemas).
//! * Strict field validation: a key not declared in `properties` of an object schema without
//!   `additionalProperties` and without `x-kubernetes-preserve-unknown-fields` is an error
//!   `unknown field "spec.foo"`, with a did-you-mean suggestion when a declared field is close.
//! * `null` for a non-nullable object property is dropped (pruned) by kube-apiserver, so it is not
//!   an error here either, only a warning; it then counts as absent for `required`.
//! * Swagger (Go-typed) schemas: `Quantity` accepts a string matching the quantity grammar or a
//!   number, `type: object` without `properties`/`additionalProperties` (RawExtension, FieldsV1)
//!   and `{}` (JSON) accept anything.
//! * Admission supplements (only in [`Schemas::validate`] / [`Schemas::check`], not in
//!   [`Schemas::validate_schema_only`]): checks the real server makes in Go code rather than in the
//!   schema, each naming its source in the message:
//!   - `cluster.karmada.io` `Cluster` (karmada `pkg/apis/cluster/validation/validation.go`):
//!     name is a DNS-1123 label of at most 48 characters, `spec.syncMode` is required and one of
//!     `Push`, `Pull`, `spec.secretRef`/`spec.impersonatorSecretRef` need `name` and `namespace`,
//!     `spec.apiEndpoint` must be a URL with a host and without user info, query or fragment,
//!     `spec.proxyURL` must use http, https or socks5.
//!   - `kueue.x-k8s.io` `ClusterQueue` (kueue ClusterQueue webhook): `nominalQuota` and
//!     `borrowingLimit` must not be negative (the CRD pattern allows a sign).
//!
//! # Knowingly not implemented
//!
//! * **CEL rules (`x-kubernetes-validations`) are not evaluated.** They are counted
//!   ([`Schemas::cel_rules_skipped`]) and listed ([`Schemas::cel_rules`]) so a caller can see
//!   what is not checked; an object that passes here may still be rejected by a real API server
//!   because of one of them (e.g. Kueue's "flavors must have the same number of resources as the
//!   coveredResources").
//! * Defaulting, status-subresource wiping, immutability and update (ratcheting) rules, other
//!   admission webhooks, and the semantics of `x-kubernetes-list-type: map` merges.
//! * Formats other than those listed above (e.g. `idn-hostname`) are accepted unchecked.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// All known kinds and their schemas.
pub struct Schemas {
    kinds: BTreeMap<(String, String), KindInfo>,
    load_warnings: Vec<String>,
    cel_rules: Vec<String>,
}

/// The serving status of one (group, version, kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionStatus {
    pub served: bool,
    pub storage: bool,
    pub deprecated: bool,
    pub deprecation_warning: Option<String>,
}

/// Outcome of [`Schemas::check`]: errors make the object invalid, warnings do not.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

impl Report {
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

impl Schemas {
    /// Loads every CRD (`*.yaml`, `*.yml`) and every `swagger.json` under `crds_dir`.
    pub fn load(crds_dir: &Path) -> Result<Schemas, String> {
        if !crds_dir.is_dir() {
            return Err(format!("kube_schema: CRD directory {} does not exist", crds_dir.display()));
        }
        let mut files = Vec::new();
        collect_files(crds_dir, &mut files)?;
        files.sort();
        let mut s = Schemas { kinds: BTreeMap::new(), load_warnings: Vec::new(), cel_rules: Vec::new() };
        let mut swaggers = Vec::new();
        for f in &files {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".yaml") || name.ends_with(".yml") {
                s.load_crd_file(f)?;
            } else if name == "swagger.json" {
                swaggers.push(f.clone());
            }
        }
        for f in &swaggers {
            s.load_swagger(f)?;
        }
        if s.kinds.is_empty() {
            return Err(format!("kube_schema: no CustomResourceDefinition found under {}", crds_dir.display()));
        }
        Ok(s)
    }

    /// Loads `../shared/specs/crds` relative to the repository root ([`crate::repo_root`]).
    pub fn from_shared() -> Result<Schemas, String> {
        let dir = crate::repo_root().join("../shared/specs/crds");
        if !dir.is_dir() {
            return Err(format!(
                "kube_schema: upstream schemas not found at {} (expected shared/specs/crds next to the repository)",
                dir.display()
            ));
        }
        Schemas::load(&dir)
    }

    /// Known (group, version, kind) triples, sorted.
    pub fn kinds(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for ((g, k), info) in &self.kinds {
            for v in info.versions.keys() {
                out.push((g.clone(), v.clone(), k.clone()));
            }
        }
        out.sort();
        out
    }

    /// Whether `apiVersion`/`kind` is known (including versions that are not served).
    pub fn knows(&self, api_version: &str, kind: &str) -> bool {
        self.lookup(api_version, kind).is_some()
    }

    /// Whether a kind is namespaced (`Some(true)`), cluster-scoped (`Some(false)`) or unknown.
    pub fn namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.lookup(api_version, kind).map(|(info, _)| info.namespaced)
    }

    /// Served/storage/deprecated flags of a known version.
    pub fn version_status(&self, api_version: &str, kind: &str) -> Option<VersionStatus> {
        self.lookup(api_version, kind).map(|(_, v)| v.status.clone())
    }

    /// The list type of the field at `path` (object keys from the root, list items walked
    /// through) of a known kind, from its schema's `x-kubernetes-list-type` and
    /// `x-kubernetes-list-map-keys`; None when the path is no list the schema knows. An array
    /// without a declared type is atomic.
    pub fn list_type(&self, api_version: &str, kind: &str, path: &[&str]) -> Option<crate::kube_builtin::ListType> {
        let (_, v) = self.lookup(api_version, kind)?;
        let mut n: &Node = &v.schema;
        for seg in path {
            while let Some(items) = &n.items {
                n = items;
            }
            n = match n.properties.iter().find(|p| p.name == *seg) {
                Some(p) => &p.node,
                None => match &n.additional {
                    Additional::Schema(a) => a,
                    _ => return None,
                },
            };
        }
        if n.ty != Some(Ty::Array) && n.items.is_none() {
            return None;
        }
        Some(match n.list_type.as_deref() {
            Some("map") => crate::kube_builtin::ListType::Map(n.list_map_keys.clone()),
            Some("set") => crate::kube_builtin::ListType::Set,
            _ => crate::kube_builtin::ListType::Atomic,
        })
    }

    /// The file a kind's schema was loaded from.
    pub fn source(&self, api_version: &str, kind: &str) -> Option<&Path> {
        self.lookup(api_version, kind).map(|(info, _)| info.source.as_path())
    }

    /// Problems met while loading (e.g. a `pattern` the regex engine cannot compile).
    pub fn load_warnings(&self) -> &[String] {
        &self.load_warnings
    }

    /// Number of CEL rules (`x-kubernetes-validations`) in the loaded schemas, none evaluated.
    pub fn cel_rules_skipped(&self) -> usize {
        self.cel_rules.len()
    }

    /// The CEL rules that are not evaluated, as `group/version Kind <schema path>: <rule>`.
    pub fn cel_rules(&self) -> &[String] {
        &self.cel_rules
    }

    /// Validates one object: schema plus admission supplements. `Err` lists every problem as
    /// `path: message` (e.g. `.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: ...`).
    pub fn validate(&self, obj: &Value) -> Result<(), Vec<String>> {
        let r = self.check(obj);
        if r.errors.is_empty() { Ok(()) } else { Err(r.errors) }
    }

    /// Like [`Schemas::validate`] but without the admission supplements (schema only).
    pub fn validate_schema_only(&self, obj: &Value) -> Result<(), Vec<String>> {
        let r = self.check_with(obj, false);
        if r.errors.is_empty() { Ok(()) } else { Err(r.errors) }
    }

    /// Validates one object and also returns warnings (deprecated version, removed kind, pruned
    /// nulls).
    pub fn check(&self, obj: &Value) -> Report {
        self.check_with(obj, true)
    }

    /// Parses a (multi-document) YAML text into objects, skipping empty documents.
    pub fn yaml_documents(text: &str) -> Result<Vec<Value>, String> {
        let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(text, yaml_options())
            .map_err(|e| format!("YAML parse error: {e}"))?;
        Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
    }
}

// ---------------------------------------------------------------------------------------------
// Data model
// ---------------------------------------------------------------------------------------------

struct KindInfo {
    group: String,
    kind: String,
    namespaced: bool,
    source: PathBuf,
    removed: bool,
    versions: BTreeMap<String, VersionInfo>,
}

struct VersionInfo {
    status: VersionStatus,
    schema: Arc<Node>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Ty {
    fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "object" => Ty::Object,
            "array" => Ty::Array,
            "string" => Ty::String,
            "integer" => Ty::Integer,
            "number" => Ty::Number,
            "boolean" => Ty::Boolean,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Ty::Object => "object",
            Ty::Array => "array",
            Ty::String => "string",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::Boolean => "boolean",
        }
    }
    fn accepts(self, v: &Value) -> bool {
        match self {
            Ty::Object => v.is_object(),
            Ty::Array => v.is_array(),
            Ty::String => v.is_string(),
            Ty::Integer => is_integer(v),
            Ty::Number => v.is_number(),
            Ty::Boolean => v.is_boolean(),
        }
    }
}

enum Additional {
    Absent,
    Bool(bool),
    Schema(Arc<Node>),
}

struct Prop {
    name: String,
    node: Arc<Node>,
    has_default: bool,
}

#[derive(Clone)]
struct Pattern {
    source: String,
    compiled: Result<regex::Regex, String>,
}

struct Node {
    ty: Option<Ty>,
    properties: Vec<Prop>,
    required: Vec<String>,
    additional: Additional,
    items: Option<Arc<Node>>,
    enum_values: Option<Vec<Value>>,
    format: Option<String>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    pattern: Option<Pattern>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded_resource: bool,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    any_of: Vec<Arc<Node>>,
    one_of: Vec<Arc<Node>>,
    all_of: Vec<Arc<Node>>,
    not: Option<Arc<Node>>,
    /// Swagger `resource.Quantity`: a quantity string or a number.
    quantity: bool,
    /// Swagger `meta.v1.ObjectMeta`: checked by the built-in ObjectMeta rules.
    object_meta: bool,
    /// Swagger `$ref`: validate against the referenced definition instead.
    reference: Option<Arc<Node>>,
}

impl Default for Node {
    fn default() -> Node {
        Node {
            ty: None,
            properties: Vec::new(),
            required: Vec::new(),
            additional: Additional::Absent,
            items: None,
            enum_values: None,
            format: None,
            minimum: None,
            maximum: None,
            exclusive_minimum: false,
            exclusive_maximum: false,
            min_length: None,
            max_length: None,
            min_items: None,
            max_items: None,
            min_properties: None,
            max_properties: None,
            pattern: None,
            nullable: false,
            int_or_string: false,
            preserve_unknown: false,
            embedded_resource: false,
            list_type: None,
            list_map_keys: Vec::new(),
            any_of: Vec::new(),
            one_of: Vec::new(),
            all_of: Vec::new(),
            not: None,
            quantity: false,
            object_meta: false,
            reference: None,
        }
    }
}

impl Node {
    fn prop(&self, name: &str) -> Option<&Prop> {
        self.properties.iter().find(|p| p.name == name)
    }
}

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

fn yaml_options() -> serde_saphyr::Options {
    let mut o = serde_saphyr::Options::default();
    // The Cilium CRDs are large and deep; the defaults are tuned for configuration files.
    let mut b = o.budget.clone().unwrap_or_default();
    b.max_depth = b.max_depth.max(1024);
    b.max_nodes = b.max_nodes.max(10_000_000);
    b.max_events = b.max_events.max(50_000_000);
    o.budget = Some(b);
    o
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("kube_schema: cannot read {}: {e}", dir.display()))?;
    for entry in rd {
        let entry = entry.map_err(|e| format!("kube_schema: cannot read {}: {e}", dir.display()))?;
        let p = entry.path();
        if p.is_dir() {
            collect_files(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for k in path {
        cur = cur.get(*k)?;
    }
    cur.as_str()
}

impl Schemas {
    fn lookup(&self, api_version: &str, kind: &str) -> Option<(&KindInfo, &VersionInfo)> {
        let (group, version) = split_api_version(api_version);
        let info = self.kinds.get(&(group.to_string(), kind.to_string()))?;
        let v = info.versions.get(version)?;
        Some((info, v))
    }

    fn load_crd_file(&mut self, file: &Path) -> Result<(), String> {
        let text =
            std::fs::read_to_string(file).map_err(|e| format!("kube_schema: cannot read {}: {e}", file.display()))?;
        let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(&text, yaml_options())
            .map_err(|e| format!("kube_schema: cannot parse {}: {e}", file.display()))?;
        let removed = file.components().any(|c| c.as_os_str() == "removed");
        for doc in docs {
            if str_at(&doc, &["kind"]) != Some("CustomResourceDefinition") {
                continue;
            }
            let bad = |what: &str| format!("kube_schema: {}: CRD without {what}", file.display());
            let group = str_at(&doc, &["spec", "group"]).ok_or_else(|| bad("spec.group"))?.to_string();
            let kind = str_at(&doc, &["spec", "names", "kind"]).ok_or_else(|| bad("spec.names.kind"))?.to_string();
            let scope = str_at(&doc, &["spec", "scope"]).ok_or_else(|| bad("spec.scope"))?;
            let namespaced = match scope {
                "Namespaced" => true,
                "Cluster" => false,
                other => return Err(format!("kube_schema: {}: unknown scope {other:?}", file.display())),
            };
            let versions =
                doc.pointer("/spec/versions").and_then(Value::as_array).ok_or_else(|| bad("spec.versions"))?;
            let mut vmap = BTreeMap::new();
            for v in versions {
                let name = str_at(v, &["name"]).ok_or_else(|| bad("spec.versions[].name"))?.to_string();
                let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
                let status = VersionStatus {
                    served: flag("served"),
                    storage: flag("storage"),
                    deprecated: flag("deprecated"),
                    deprecation_warning: str_at(v, &["deprecationWarning"]).map(str::to_string),
                };
                let raw = v
                    .pointer("/schema/openAPIV3Schema")
                    .ok_or_else(|| bad(&format!("spec.versions[{name}].schema.openAPIV3Schema")))?;
                let ctx = format!("{group}/{name} {kind}");
                let schema = Arc::new(self.compile_crd(raw, &ctx, &mut String::new()));
                vmap.insert(name, VersionInfo { status, schema });
            }
            let key = (group.clone(), kind.clone());
            if self.kinds.contains_key(&key) {
                self.load_warnings.push(format!("{}: {group} {kind} defined twice; keeping the first", file.display()));
                continue;
            }
            self.kinds.insert(key, KindInfo { group, kind, namespaced, source: file.into(), removed, versions: vmap });
        }
        Ok(())
    }

    fn compile_pattern(&mut self, src: &str, ctx: &str, path: &str) -> Pattern {
        let compiled = regex::Regex::new(src).map_err(|e| {
            let msg = format!("{ctx} {path}: pattern {src:?} does not compile: {e}");
            self.load_warnings.push(msg.clone());
            msg
        });
        Pattern { source: src.to_string(), compiled }
    }

    /// Compiles an OpenAPI v3 (CRD) schema. `path` is the schema path, for messages.
    fn compile_crd(&mut self, s: &Value, ctx: &str, path: &mut String) -> Node {
        let Some(o) = s.as_object() else { return Node::default() };
        let mut n = Node { ty: o.get("type").and_then(Value::as_str).and_then(Ty::parse), ..Node::default() };
        n.format = o.get("format").and_then(Value::as_str).map(str::to_string);
        n.nullable = o.get("nullable").and_then(Value::as_bool).unwrap_or(false);
        n.int_or_string = o.get("x-kubernetes-int-or-string").and_then(Value::as_bool).unwrap_or(false);
        n.preserve_unknown = o.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool).unwrap_or(false);
        n.embedded_resource = o.get("x-kubernetes-embedded-resource").and_then(Value::as_bool).unwrap_or(false);
        n.list_type = o.get("x-kubernetes-list-type").and_then(Value::as_str).map(str::to_string);
        n.list_map_keys = string_list(o.get("x-kubernetes-list-map-keys"));
        n.required = string_list(o.get("required"));
        n.enum_values = o.get("enum").and_then(Value::as_array).cloned();
        n.minimum = o.get("minimum").and_then(Value::as_f64);
        n.maximum = o.get("maximum").and_then(Value::as_f64);
        n.exclusive_minimum = o.get("exclusiveMinimum").and_then(Value::as_bool).unwrap_or(false);
        n.exclusive_maximum = o.get("exclusiveMaximum").and_then(Value::as_bool).unwrap_or(false);
        n.min_length = o.get("minLength").and_then(Value::as_u64);
        n.max_length = o.get("maxLength").and_then(Value::as_u64);
        n.min_items = o.get("minItems").and_then(Value::as_u64);
        n.max_items = o.get("maxItems").and_then(Value::as_u64);
        n.min_properties = o.get("minProperties").and_then(Value::as_u64);
        n.max_properties = o.get("maxProperties").and_then(Value::as_u64);
        if let Some(p) = o.get("pattern").and_then(Value::as_str) {
            n.pattern = Some(self.compile_pattern(p, ctx, path));
        }
        if let Some(rules) = o.get("x-kubernetes-validations").and_then(Value::as_array) {
            for r in rules {
                let rule = r.get("rule").and_then(Value::as_str).unwrap_or("?");
                let at = if path.is_empty() { "." } else { path.as_str() };
                self.cel_rules.push(format!("{ctx} {at}: {rule}"));
            }
        }
        if let Some(props) = o.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                let len = path.len();
                let _ = write!(path, ".{k}");
                let node = Arc::new(self.compile_crd(v, ctx, path));
                path.truncate(len);
                n.properties.push(Prop { name: k.clone(), node, has_default: v.get("default").is_some() });
            }
        }
        match o.get("additionalProperties") {
            Some(Value::Bool(b)) => n.additional = Additional::Bool(*b),
            Some(v @ Value::Object(_)) => {
                let len = path.len();
                path.push_str("[*]");
                n.additional = Additional::Schema(Arc::new(self.compile_crd(v, ctx, path)));
                path.truncate(len);
            }
            _ => {}
        }
        if let Some(items) = o.get("items") {
            let len = path.len();
            path.push_str("[*]");
            n.items = Some(Arc::new(self.compile_crd(items, ctx, path)));
            path.truncate(len);
        }
        for (key, slot) in [("anyOf", 0), ("oneOf", 1), ("allOf", 2)] {
            if let Some(list) = o.get(key).and_then(Value::as_array) {
                let nodes: Vec<Arc<Node>> = list.iter().map(|b| Arc::new(self.compile_crd(b, ctx, path))).collect();
                match slot {
                    0 => n.any_of = nodes,
                    1 => n.one_of = nodes,
                    _ => n.all_of = nodes,
                }
            }
        }
        if let Some(not) = o.get("not") {
            n.not = Some(Arc::new(self.compile_crd(not, ctx, path)));
        }
        n
    }

    fn load_swagger(&mut self, file: &Path) -> Result<(), String> {
        let text =
            std::fs::read_to_string(file).map_err(|e| format!("kube_schema: cannot read {}: {e}", file.display()))?;
        let doc: Value =
            serde_json::from_str(&text).map_err(|e| format!("kube_schema: cannot parse {}: {e}", file.display()))?;
        let defs = doc.get("definitions").and_then(Value::as_object).cloned().unwrap_or_default();
        // Scope of each kind from its `post` operation path.
        let mut scope: HashMap<(String, String, String), bool> = HashMap::new();
        if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
            for (p, ops) in paths {
                let Some(post) = ops.get("post") else { continue };
                if post.get("x-kubernetes-action").and_then(Value::as_str) != Some("post") {
                    continue;
                }
                let Some(gvk) = post.get("x-kubernetes-group-version-kind") else { continue };
                let (Some(g), Some(v), Some(k)) =
                    (str_at(gvk, &["group"]), str_at(gvk, &["version"]), str_at(gvk, &["kind"]))
                else {
                    continue;
                };
                scope.insert((g.into(), v.into(), k.into()), p.contains("/namespaces/{namespace}/"));
            }
        }
        let mut compiler = SwaggerCompiler { defs: &defs, cache: HashMap::new(), in_progress: BTreeSet::new() };
        let mut added: BTreeMap<(String, String), KindInfo> = BTreeMap::new();
        for (name, def) in &defs {
            if name.starts_with("io.k8s.") {
                continue; // shared apimachinery types listed under every group (DeleteOptions, ...)
            }
            let Some(gvks) = def.get("x-kubernetes-group-version-kind").and_then(Value::as_array) else { continue };
            for gvk in gvks {
                let (Some(g), Some(v), Some(k)) =
                    (str_at(gvk, &["group"]), str_at(gvk, &["version"]), str_at(gvk, &["kind"]))
                else {
                    continue;
                };
                if !g.ends_with("karmada.io") || (k.ends_with("List") && def.pointer("/properties/items").is_some()) {
                    continue;
                }
                if self.kinds.contains_key(&(g.to_string(), k.to_string())) {
                    continue; // the CRD takes precedence
                }
                let Some(&namespaced) = scope.get(&(g.to_string(), v.to_string(), k.to_string())) else {
                    self.load_warnings.push(format!("{}: {g}/{v} {k} has no create path; skipped", file.display()));
                    continue;
                };
                let schema = compiler.compile_def(name, self);
                let entry = added.entry((g.to_string(), k.to_string())).or_insert_with(|| KindInfo {
                    group: g.to_string(),
                    kind: k.to_string(),
                    namespaced,
                    source: file.into(),
                    removed: false,
                    versions: BTreeMap::new(),
                });
                let status =
                    VersionStatus { served: true, storage: false, deprecated: false, deprecation_warning: None };
                entry.versions.insert(v.to_string(), VersionInfo { status, schema });
            }
        }
        for (k, v) in added {
            self.kinds.entry(k).or_insert(v);
        }
        Ok(())
    }
}

struct SwaggerCompiler<'a> {
    defs: &'a Map<String, Value>,
    cache: HashMap<String, Arc<Node>>,
    in_progress: BTreeSet<String>,
}

impl SwaggerCompiler<'_> {
    fn compile_def(&mut self, name: &str, s: &mut Schemas) -> Arc<Node> {
        if let Some(n) = self.cache.get(name) {
            return n.clone();
        }
        if name == "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
            let n = Arc::new(Node { ty: Some(Ty::Object), object_meta: true, ..Node::default() });
            self.cache.insert(name.into(), n.clone());
            return n;
        }
        if name == "io.k8s.apimachinery.pkg.api.resource.Quantity" {
            let n = Arc::new(Node { quantity: true, ..Node::default() });
            self.cache.insert(name.into(), n.clone());
            return n;
        }
        let Some(def) = self.defs.get(name) else {
            s.load_warnings.push(format!("swagger: unresolved $ref {name}; accepting anything there"));
            return Arc::new(Node { preserve_unknown: true, ..Node::default() });
        };
        if !self.in_progress.insert(name.to_string()) {
            s.load_warnings.push(format!("swagger: recursive $ref {name}; accepting anything below it"));
            return Arc::new(Node { preserve_unknown: true, ..Node::default() });
        }
        let n = Arc::new(self.compile(def, name, s));
        self.in_progress.remove(name);
        self.cache.insert(name.into(), n.clone());
        n
    }

    fn compile(&mut self, v: &Value, ctx: &str, s: &mut Schemas) -> Node {
        let Some(o) = v.as_object() else { return Node::default() };
        if let Some(r) = o.get("$ref").and_then(Value::as_str) {
            let name = r.trim_start_matches("#/definitions/");
            let target = self.compile_def(name, s);
            // A `$ref` with siblings: the siblings (description, default) carry no validation.
            return Node { reference: Some(target), ..Node::default() };
        }
        let mut n = Node { ty: o.get("type").and_then(Value::as_str).and_then(Ty::parse), ..Node::default() };
        n.format = o.get("format").and_then(Value::as_str).map(str::to_string);
        if n.format.as_deref() == Some("int-or-string") {
            n.ty = None;
            n.int_or_string = true;
        }
        n.required = string_list(o.get("required"));
        n.enum_values = o.get("enum").and_then(Value::as_array).cloned();
        n.list_type = o.get("x-kubernetes-list-type").and_then(Value::as_str).map(str::to_string);
        n.list_map_keys = string_list(o.get("x-kubernetes-list-map-keys"));
        if let Some(p) = o.get("pattern").and_then(Value::as_str) {
            n.pattern = Some(s.compile_pattern(p, ctx, ""));
        }
        if let Some(props) = o.get("properties").and_then(Value::as_object) {
            for (k, pv) in props {
                let node = Arc::new(self.compile(pv, ctx, s));
                n.properties.push(Prop { name: k.clone(), node, has_default: pv.get("default").is_some() });
            }
        }
        match o.get("additionalProperties") {
            Some(Value::Bool(b)) => n.additional = Additional::Bool(*b),
            Some(ap @ Value::Object(_)) => n.additional = Additional::Schema(Arc::new(self.compile(ap, ctx, s))),
            _ => {}
        }
        if let Some(items) = o.get("items") {
            n.items = Some(Arc::new(self.compile(items, ctx, s)));
        }
        // Go types that decode arbitrary JSON (RawExtension, FieldsV1, apiextensions JSON).
        if (n.ty == Some(Ty::Object) || n.ty.is_none())
            && n.properties.is_empty()
            && matches!(n.additional, Additional::Absent)
            && !n.int_or_string
        {
            n.preserve_unknown = true;
        }
        n
    }
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

// ---------------------------------------------------------------------------------------------
// Paths and messages
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
enum Seg {
    Field(String),
    Index(usize),
    Key(String),
}

/// `.spec.a[0].b` (for the `path:` prefix).
fn show_path(p: &[Seg]) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let mut s = String::new();
    for seg in p {
        match seg {
            Seg::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            Seg::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
            Seg::Key(k) => {
                let _ = write!(s, "[{k}]");
            }
        }
    }
    s
}

/// `spec.a[0].b` (kube-apiserver's own field path form, used inside messages).
fn kube_path(p: &[Seg]) -> String {
    let s = show_path(p);
    s.strip_prefix('.').map(str::to_string).unwrap_or(s)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(v) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(v: &Value) -> bool {
    v.is_i64() || v.is_u64()
}

/// A short rendering of a value for messages.
fn short(v: &Value) -> String {
    let s = match v {
        Value::Object(_) | Value::Array(_) => format!("<{}>", type_name(v)),
        other => other.to_string(),
    };
    if s.chars().count() > 80 { format!("{}...", s.chars().take(77).collect::<String>()) } else { s }
}

struct Out {
    errors: Vec<String>,
    warnings: Vec<String>,
}

impl Out {
    fn new() -> Out {
        Out { errors: Vec::new(), warnings: Vec::new() }
    }
    fn err(&mut self, p: &[Seg], msg: impl AsRef<str>) {
        self.errors.push(format!("{}: {}", show_path(p), msg.as_ref()));
    }
    fn warn(&mut self, p: &[Seg], msg: impl AsRef<str>) {
        self.warnings.push(format!("{}: {}", show_path(p), msg.as_ref()));
    }
    fn unknown_field<'a>(&mut self, p: &[Seg], candidates: impl Iterator<Item = &'a str>) {
        let name = match p.last() {
            Some(Seg::Field(f)) => f.clone(),
            _ => String::new(),
        };
        let mut msg = format!("unknown field \"{}\"", kube_path(p));
        if let Some(s) = suggest(&name, candidates) {
            let _ = write!(msg, "; did you mean \"{s}\"?");
        }
        self.err(p, msg);
    }
}

/// The closest candidate, if close enough to be a plausible misspelling or rename.
fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let lname = name.to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let lc = c.to_lowercase();
        let d = osa_distance(&lname, &lc);
        let limit = (name.chars().count() / 3).clamp(1, 3);
        let contained = lname.len() >= 4 && lc.len() >= 4 && (lc.starts_with(&lname) || lname.starts_with(&lc));
        let score = if d <= limit {
            d
        } else if contained {
            limit + 1
        } else {
            continue;
        };
        if best.is_none_or(|(b, _)| score < b) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c.to_string())
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
fn osa_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

impl Schemas {
    fn check_with(&self, obj: &Value, supplements: bool) -> Report {
        let mut out = Out::new();
        let mut path = Vec::new();
        let Some(map) = obj.as_object() else {
            out.err(&path, format!("Invalid value: \"{}\": object must be of type object", type_name(obj)));
            return Report { errors: out.errors, warnings: out.warnings };
        };
        let api_version = map.get("apiVersion").and_then(Value::as_str);
        let kind = map.get("kind").and_then(Value::as_str);
        if api_version.is_none() {
            out.err(&[Seg::Field("apiVersion".into())], "Required value: apiVersion must be a non-empty string");
        }
        if kind.is_none() {
            out.err(&[Seg::Field("kind".into())], "Required value: kind must be a non-empty string");
        }
        let (Some(api_version), Some(kind)) = (api_version, kind) else {
            return Report { errors: out.errors, warnings: out.warnings };
        };
        let Some((info, version)) = self.resolve_kind(api_version, kind, &mut out) else {
            return Report { errors: out.errors, warnings: out.warnings };
        };
        if !version.status.served {
            out.err(&[Seg::Field("apiVersion".into())], format!("{api_version} {kind} is not served"));
        }
        if version.status.deprecated {
            let text = version
                .status
                .deprecation_warning
                .clone()
                .unwrap_or_else(|| format!("{api_version} {kind} is deprecated"));
            out.warn(&[Seg::Field("apiVersion".into())], format!("{api_version} {kind} is deprecated: {text}"));
        }
        if info.removed {
            out.warn(
                &[Seg::Field("kind".into())],
                format!("{} {kind} was removed upstream (schema from {})", info.group, info.source.display()),
            );
        }
        let schema = &version.schema;
        let ctx = Ctx { namespaced: info.namespaced, kind };
        if map.get("metadata").is_none_or(Value::is_null) {
            // Still report the missing name (and namespace, for namespaced kinds).
            path.push(Seg::Field("metadata".into()));
            check_object_meta(&Map::new(), &mut path, MetaMode::Root(&ctx), &mut out);
            path.pop();
        }
        self.check_object(schema, map, &mut path, true, true, Some(&ctx), &mut out);
        if supplements {
            supplement(&info.group, kind, obj, &mut out);
        }
        Report { errors: out.errors, warnings: out.warnings }
    }

    fn resolve_kind(&self, api_version: &str, kind: &str, out: &mut Out) -> Option<(&KindInfo, &VersionInfo)> {
        let (group, version) = split_api_version(api_version);
        if let Some(info) = self.kinds.get(&(group.to_string(), kind.to_string())) {
            if let Some(v) = info.versions.get(version) {
                return Some((info, v));
            }
            let known: Vec<&str> = info.versions.keys().map(String::as_str).collect();
            out.err(
                &[Seg::Field("apiVersion".into())],
                format!("no version {version:?} of {group} {kind} (known versions: {})", known.join(", ")),
            );
            return None;
        }
        let same_group: Vec<&str> = self.kinds.values().filter(|i| i.group == group).map(|i| i.kind.as_str()).collect();
        let mut msg = format!("unknown kind {kind:?} in {api_version}");
        if same_group.is_empty() {
            let other: Vec<String> = self.kinds.values().filter(|i| i.kind == kind).map(|i| i.group.clone()).collect();
            let _ = write!(msg, " (no schema for group {group:?}");
            if !other.is_empty() {
                let _ = write!(msg, "; {kind} is known in: {}", other.join(", "));
            }
            msg.push(')');
        } else {
            let _ = write!(msg, " (known kinds of {group}: {})", same_group.join(", "));
            if let Some(s) = suggest(kind, same_group.iter().copied()) {
                let _ = write!(msg, "; did you mean {s:?}?");
            }
        }
        out.err(&[Seg::Field("kind".into())], msg);
        None
    }

    /// Checks `v` against `n`. `strict` is false inside anyOf/oneOf/allOf/not branches.
    fn check_value(&self, n: &Node, v: &Value, p: &mut Vec<Seg>, strict: bool, out: &mut Out) {
        if let Some(target) = &n.reference {
            return self.check_value(target, v, p, strict, out);
        }
        if v.is_null() {
            if n.nullable || (n.ty.is_none() && !n.int_or_string && !n.quantity) {
                return;
            }
            let want = if n.int_or_string { "integer or string" } else { n.ty.map_or("a value", Ty::name) };
            type_error(p, v, want, out);
            return;
        }
        if let Some(t) = n.ty
            && !t.accepts(v)
        {
            type_error(p, v, t.name(), out);
            return;
        }
        if n.int_or_string && !(is_integer(v) || v.is_string()) {
            type_error(p, v, "integer or string", out);
            return;
        }
        if n.quantity {
            match v {
                Value::Number(_) => {}
                Value::String(s) if is_quantity(s) => {}
                Value::String(s) => {
                    out.err(
                        p,
                        format!("Invalid value: {s:?}: quantities must match the regular expression '{QUANTITY_RE}'"),
                    );
                }
                _ => type_error(p, v, "quantity (string or number)", out),
            }
            return;
        }
        if n.object_meta {
            if let Value::Object(m) = v {
                check_object_meta(m, p, MetaMode::Embedded, out);
            } else {
                type_error(p, v, "object", out);
            }
            return;
        }
        if let Some(values) = &n.enum_values
            && !values.contains(v)
        {
            let list: Vec<String> = values.iter().map(|x| x.to_string()).collect();
            out.err(p, format!("Unsupported value: {}: supported values: {}", short(v), list.join(", ")));
        }
        match v {
            Value::String(s) => self.check_string(n, s, p, out),
            Value::Number(_) => check_number(n, v, p, out),
            Value::Array(a) => self.check_array(n, a, p, strict, out),
            Value::Object(m) => self.check_object(n, m, p, strict, false, None, out),
            _ => {}
        }
        self.check_combinators(n, v, p, out);
    }

    fn check_combinators(&self, n: &Node, v: &Value, p: &mut Vec<Seg>, out: &mut Out) {
        let run = |b: &Node, p: &mut Vec<Seg>| {
            let mut o = Out::new();
            self.check_value(b, v, p, false, &mut o);
            o.errors
        };
        if !n.any_of.is_empty() {
            let results: Vec<Vec<String>> = n.any_of.iter().map(|b| run(b, p)).collect();
            if results.iter().all(|r| !r.is_empty()) {
                let detail: Vec<String> = results.into_iter().flatten().collect();
                out.err(
                    p,
                    format!(
                        "Invalid value: {}: must validate at least one schema (anyOf): {}",
                        short(v),
                        detail.join("; ")
                    ),
                );
            }
        }
        if !n.one_of.is_empty() {
            let results: Vec<Vec<String>> = n.one_of.iter().map(|b| run(b, p)).collect();
            let ok = results.iter().filter(|r| r.is_empty()).count();
            if ok != 1 {
                let why = if ok == 0 {
                    let detail: Vec<String> = results.into_iter().flatten().collect();
                    format!("must validate one and only one schema (oneOf), found none: {}", detail.join("; "))
                } else {
                    format!("must validate one and only one schema (oneOf), found {ok}")
                };
                out.err(p, format!("Invalid value: {}: {why}", short(v)));
            }
        }
        for b in &n.all_of {
            // allOf branches report their own errors in place.
            out.errors.extend(run(b, p));
        }
        if let Some(not) = &n.not
            && run(not, p).is_empty()
        {
            out.err(p, format!("Invalid value: {}: must not validate the schema (not)", short(v)));
        }
    }

    fn check_string(&self, n: &Node, s: &str, p: &[Seg], out: &mut Out) {
        let chars = s.chars().count() as u64;
        if let Some(min) = n.min_length
            && chars < min
        {
            out.err(p, format!("Invalid value: {s:?}: {} in body should be at least {min} chars long", kube_path(p)));
        }
        if let Some(max) = n.max_length
            && chars > max
        {
            out.err(
                p,
                format!("Too long: may not be more than {max} characters ({} in body has {chars})", kube_path(p)),
            );
        }
        if let Some(pat) = &n.pattern {
            match &pat.compiled {
                Ok(re) if re.is_match(s) => {}
                Ok(_) => {
                    out.err(p, format!("Invalid value: {s:?}: {} in body should match '{}'", kube_path(p), pat.source))
                }
                Err(e) => out.err(p, format!("cannot check pattern: {e}")),
            }
        }
        match n.format.as_deref() {
            Some("date-time") if !is_rfc3339(s) => {
                out.err(p, format!("Invalid value: {s:?}: {} in body must be of type date-time", kube_path(p)));
            }
            Some("cidr") if !is_cidr(s) => {
                out.err(p, format!("Invalid value: {s:?}: {} in body must be of type cidr", kube_path(p)));
            }
            _ => {}
        }
    }

    fn check_array(&self, n: &Node, a: &[Value], p: &mut Vec<Seg>, strict: bool, out: &mut Out) {
        let len = a.len() as u64;
        if let Some(min) = n.min_items
            && len < min
        {
            out.err(p, format!("Invalid value: {len}: {} in body should have at least {min} items", kube_path(p)));
        }
        if let Some(max) = n.max_items
            && len > max
        {
            out.err(p, format!("Too many: {len}: must have at most {max} items"));
        }
        if let Some(items) = &n.items {
            for (i, item) in a.iter().enumerate() {
                p.push(Seg::Index(i));
                self.check_value(items, item, p, strict, out);
                p.pop();
            }
        }
        match n.list_type.as_deref() {
            Some("set") => {
                for (i, item) in a.iter().enumerate() {
                    if a[..i].contains(item) {
                        p.push(Seg::Index(i));
                        out.err(p, format!("Duplicate value: {}", short(item)));
                        p.pop();
                    }
                }
            }
            Some("map") if !n.list_map_keys.is_empty() => {
                let key_of = |v: &Value| -> Vec<Value> {
                    n.list_map_keys.iter().map(|k| v.get(k).cloned().unwrap_or(Value::Null)).collect()
                };
                for (i, item) in a.iter().enumerate() {
                    let k = key_of(item);
                    if a[..i].iter().any(|x| key_of(x) == k) {
                        p.push(Seg::Index(i));
                        let shown: Vec<String> =
                            n.list_map_keys.iter().zip(&k).map(|(name, v)| format!("{name}={v}")).collect();
                        out.err(p, format!("Duplicate value: map key {{{}}}", shown.join(", ")));
                        p.pop();
                    }
                }
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_object(
        &self,
        n: &Node,
        m: &Map<String, Value>,
        p: &mut Vec<Seg>,
        strict: bool,
        root: bool,
        root_ctx: Option<&Ctx>,
        out: &mut Out,
    ) {
        let count = m.len() as u64;
        if let Some(min) = n.min_properties
            && count < min
        {
            out.err(
                p,
                format!("Invalid value: {count}: {} in body should have at least {min} properties", kube_path(p)),
            );
        }
        if let Some(max) = n.max_properties
            && count > max
        {
            out.err(p, format!("Too many: {count}: must have at most {max} properties"));
        }
        for r in &n.required {
            if root && (r == "apiVersion" || r == "kind" || r == "metadata") {
                continue;
            }
            let prop = n.prop(r);
            let present = match m.get(r) {
                None => false,
                Some(Value::Null) => prop.is_some_and(|pr| pr.node.nullable),
                Some(_) => true,
            };
            if !present && !prop.is_some_and(|pr| pr.has_default) {
                p.push(Seg::Field(r.clone()));
                out.err(p, "Required value");
                p.pop();
            }
        }
        let embedded = n.embedded_resource;
        if embedded {
            for k in ["apiVersion", "kind"] {
                if m.get(k).and_then(Value::as_str).is_none_or(|s| s.is_empty()) {
                    p.push(Seg::Field(k.into()));
                    out.err(p, "Required value: must not be empty for an embedded resource");
                    p.pop();
                }
            }
        }
        for (k, val) in m {
            p.push(Seg::Field(k.clone()));
            if (root || embedded) && k == "metadata" {
                match val {
                    Value::Object(meta) => {
                        let mode = match root_ctx {
                            Some(ctx) if root => MetaMode::Root(ctx),
                            _ => MetaMode::Embedded,
                        };
                        check_object_meta(meta, p, mode, out);
                    }
                    Value::Null if !root => {}
                    _ => type_error(p, val, "object", out),
                }
                p.pop();
                continue;
            }
            if (root || embedded) && (k == "apiVersion" || k == "kind") {
                if !val.is_string() {
                    type_error(p, val, "string", out);
                }
                p.pop();
                continue;
            }
            if let Some(prop) = n.prop(k) {
                if val.is_null() && !prop.node.nullable {
                    if strict {
                        out.warn(p, "null value of a non-nullable field is dropped by the API server");
                    }
                } else {
                    self.check_value(&prop.node, val, p, strict, out);
                }
            } else if let Additional::Schema(ap) = &n.additional {
                p.pop();
                p.push(Seg::Key(k.clone()));
                if !val.is_null() || ap.nullable {
                    self.check_value(ap, val, p, strict, out);
                }
            } else if matches!(n.additional, Additional::Bool(true)) || n.preserve_unknown {
                // allowed as is
            } else if strict {
                out.unknown_field(p, n.properties.iter().map(|pr| pr.name.as_str()));
            }
            p.pop();
        }
    }
}

struct Ctx<'a> {
    namespaced: bool,
    kind: &'a str,
}

fn type_error(p: &[Seg], v: &Value, want: &str, out: &mut Out) {
    let found = type_name(v);
    let at = if p.is_empty() { "body".to_string() } else { format!("{} in body", kube_path(p)) };
    out.err(p, format!("Invalid value: \"{found}\": {at} must be of type {want}: \"{found}\""));
}

fn check_number(n: &Node, v: &Value, p: &[Seg], out: &mut Out) {
    let Some(x) = v.as_f64() else { return };
    if let Some(min) = n.minimum {
        let bad = if n.exclusive_minimum { x <= min } else { x < min };
        if bad {
            let rel = if n.exclusive_minimum { "greater than" } else { "greater than or equal to" };
            out.err(p, format!("Invalid value: {v}: {} in body should be {rel} {min}", kube_path(p)));
        }
    }
    if let Some(max) = n.maximum {
        let bad = if n.exclusive_maximum { x >= max } else { x > max };
        if bad {
            let rel = if n.exclusive_maximum { "less than" } else { "less than or equal to" };
            out.err(p, format!("Invalid value: {v}: {} in body should be {rel} {max}", kube_path(p)));
        }
    }
    let range = match n.format.as_deref() {
        Some("int32") => Some((i32::MIN as i128, i32::MAX as i128)),
        Some("int64") => Some((i64::MIN as i128, i64::MAX as i128)),
        _ => None,
    };
    if let Some((lo, hi)) = range {
        let val: Option<i128> = v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from));
        if let Some(val) = val
            && (val < lo || val > hi)
        {
            out.err(
                p,
                format!(
                    "Invalid value: {v}: {} in body must be of type {}",
                    kube_path(p),
                    n.format.as_deref().unwrap_or("")
                ),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ObjectMeta
// ---------------------------------------------------------------------------------------------

enum MetaMode<'a> {
    Root(&'a Ctx<'a>),
    Embedded,
}

const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

const OWNER_REFERENCE_FIELDS: &[&str] = &["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"];

fn check_object_meta(m: &Map<String, Value>, p: &mut Vec<Seg>, mode: MetaMode, out: &mut Out) {
    for (k, v) in m {
        p.push(Seg::Field(k.clone()));
        if v.is_null() {
            p.pop();
            continue;
        }
        match k.as_str() {
            "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => {
                if !v.is_string() {
                    type_error(p, v, "string", out);
                }
            }
            "generation" | "deletionGracePeriodSeconds" => {
                if !is_integer(v) {
                    type_error(p, v, "integer", out);
                }
            }
            "creationTimestamp" | "deletionTimestamp" => match v.as_str() {
                Some(s) if is_rfc3339(s) => {}
                Some(s) => out.err(p, format!("Invalid value: {s:?}: must be an RFC 3339 date-time")),
                None => type_error(p, v, "string", out),
            },
            "labels" => check_string_map(v, p, true, out),
            "annotations" => check_string_map(v, p, false, out),
            "finalizers" => match v.as_array() {
                Some(a) => {
                    for (i, f) in a.iter().enumerate() {
                        p.push(Seg::Index(i));
                        match f.as_str() {
                            Some(s) if is_qualified_name(s) => {}
                            Some(s) => {
                                out.err(p, format!("Invalid value: {s:?}: a finalizer must be a qualified name"))
                            }
                            None => type_error(p, f, "string", out),
                        }
                        p.pop();
                    }
                }
                None => type_error(p, v, "array", out),
            },
            "ownerReferences" => match v.as_array() {
                Some(a) => {
                    for (i, r) in a.iter().enumerate() {
                        p.push(Seg::Index(i));
                        check_owner_reference(r, p, out);
                        p.pop();
                    }
                }
                None => type_error(p, v, "array", out),
            },
            "managedFields" => {
                if !v.is_array() {
                    type_error(p, v, "array", out);
                }
            }
            _ => out.unknown_field(p, OBJECT_META_FIELDS.iter().copied()),
        }
        p.pop();
    }
    let name = m.get("name").and_then(Value::as_str);
    let generate_name = m.get("generateName").and_then(Value::as_str);
    if let MetaMode::Root(ctx) = mode {
        match (name, generate_name) {
            (Some(n), _) if !n.is_empty() => {
                if let Err(why) = dns1123_subdomain(n) {
                    p.push(Seg::Field("name".into()));
                    out.err(p, format!("Invalid value: {n:?}: {why}"));
                    p.pop();
                }
            }
            (_, Some(g)) if !g.is_empty() => {}
            _ => {
                p.push(Seg::Field("name".into()));
                out.err(p, "Required value: name or generateName is required");
                p.pop();
            }
        }
        let ns = m.get("namespace").and_then(Value::as_str).filter(|s| !s.is_empty());
        p.push(Seg::Field("namespace".into()));
        match (ctx.namespaced, ns) {
            (true, None) => {
                out.err(p, format!("Required value: {} is namespaced; metadata.namespace must be set", ctx.kind))
            }
            (true, Some(ns)) => {
                if let Err(why) = dns1123_label(ns) {
                    out.err(p, format!("Invalid value: {ns:?}: {why}"));
                }
            }
            (false, Some(ns)) => out.err(
                p,
                format!("Forbidden: {} is cluster-scoped; metadata.namespace must not be set (got {ns:?})", ctx.kind),
            ),
            (false, None) => {}
        }
        p.pop();
    }
}

fn check_owner_reference(r: &Value, p: &mut Vec<Seg>, out: &mut Out) {
    let Some(m) = r.as_object() else {
        type_error(p, r, "object", out);
        return;
    };
    for k in ["apiVersion", "kind", "name", "uid"] {
        if !m.get(k).is_some_and(Value::is_string) {
            p.push(Seg::Field(k.into()));
            out.err(p, "Required value");
            p.pop();
        }
    }
    for (k, v) in m {
        p.push(Seg::Field(k.clone()));
        match k.as_str() {
            "controller" | "blockOwnerDeletion" => {
                if !v.is_boolean() && !v.is_null() {
                    type_error(p, v, "boolean", out);
                }
            }
            "apiVersion" | "kind" | "name" | "uid" => {
                if !v.is_string() {
                    type_error(p, v, "string", out);
                }
            }
            _ => out.unknown_field(p, OWNER_REFERENCE_FIELDS.iter().copied()),
        }
        p.pop();
    }
}

fn check_string_map(v: &Value, p: &mut Vec<Seg>, labels: bool, out: &mut Out) {
    let Some(m) = v.as_object() else {
        type_error(p, v, "object", out);
        return;
    };
    let mut total = 0usize;
    for (k, val) in m {
        p.push(Seg::Key(k.clone()));
        if !is_qualified_name(k) {
            out.err(
                p,
                format!("Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/'"),
            );
        }
        match val.as_str() {
            Some(s) => {
                total += k.len() + s.len();
                if labels && !is_label_value(s) {
                    out.err(p, format!("Invalid value: {s:?}: a label value must be 63 characters or less, empty or consist of alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character"));
                }
            }
            None => type_error(p, val, "string", out),
        }
        p.pop();
    }
    if !labels && total > 256 * 1024 {
        out.err(p, format!("Too long: must have at most 262144 bytes (annotations have {total})"));
    }
}

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn dns1123_label(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.starts_with(is_alnum_lower)
        && s.ends_with(is_alnum_lower);
    if ok {
        Ok(())
    } else {
        Err("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', start and end with an alphanumeric character, and be at most 63 characters".into())
    }
}

fn dns1123_subdomain(s: &str) -> Result<(), String> {
    if !s.is_empty() && s.len() <= 253 && s.split('.').all(|l| dns1123_label(l).is_ok()) {
        Ok(())
    } else {
        Err("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character, at most 253 characters".into())
    }
}

fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((pre, n)) => (Some(pre), n),
        None => (None, s),
    };
    if let Some(pre) = prefix
        && dns1123_subdomain(pre).is_err()
    {
        return false;
    }
    !name.is_empty() && is_label_value(name)
}

fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r.clone()).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || !matches!(b[10], b'T' | b't' | b' ')
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    rest == "Z"
        || rest == "z"
        || (rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':'
            && rest[1..3].bytes().all(|c| c.is_ascii_digit())
            && rest[4..6].bytes().all(|c| c.is_ascii_digit()))
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else { return false };
    let Ok(bits) = bits.parse::<u8>() else { return false };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

const QUANTITY_RE: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The `resource.Quantity` grammar (as in the Kueue CRD pattern).
fn is_quantity(s: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(QUANTITY_RE).expect("quantity regex")).is_match(s)
}

// ---------------------------------------------------------------------------------------------
// Admission supplements (server-side Go validation that is not in the published schema)
// ---------------------------------------------------------------------------------------------

fn supplement(group: &str, kind: &str, obj: &Value, out: &mut Out) {
    match (group, kind) {
        ("cluster.karmada.io", "Cluster") => karmada_cluster(obj, out),
        ("kueue.x-k8s.io", "ClusterQueue") => kueue_cluster_queue(obj, out),
        _ => {}
    }
}

fn seg_path(parts: &[&str]) -> Vec<Seg> {
    parts.iter().map(|s| Seg::Field(s.to_string())).collect()
}

/// karmada `pkg/apis/cluster/validation/validation.go` (`ValidateCluster`).
fn karmada_cluster(obj: &Value, out: &mut Out) {
    const SRC: &str = "karmada-aggregated-apiserver validation";
    if let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) {
        let p = seg_path(&["metadata", "name"]);
        if name.len() > 48 {
            out.err(&p, format!("Invalid value: {name:?}: must be no more than 48 characters ({SRC})"));
        } else if let Err(why) = dns1123_label(name) {
            out.err(&p, format!("Invalid value: {name:?}: {why} ({SRC})"));
        }
    }
    let spec = obj.get("spec");
    let sync_mode = spec.and_then(|s| s.get("syncMode")).and_then(Value::as_str).unwrap_or("");
    let p = seg_path(&["spec", "syncMode"]);
    if sync_mode.is_empty() {
        out.err(&p, format!("Required value ({SRC})"));
    } else if sync_mode != "Push" && sync_mode != "Pull" {
        out.err(&p, format!("Unsupported value: {sync_mode:?}: supported values: \"Pull\", \"Push\" ({SRC})"));
    }
    let Some(spec) = spec else { return };
    for r in ["secretRef", "impersonatorSecretRef"] {
        if let Some(sr) = spec.get(r).filter(|v| v.is_object()) {
            for f in ["namespace", "name"] {
                if sr.get(f).is_none_or(|v| v.is_null() || v.as_str() == Some("")) {
                    out.err(&seg_path(&["spec", r, f]), format!("Required value ({SRC})"));
                }
            }
        }
    }
    if let Some(ep) = spec.get("apiEndpoint").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        let p = seg_path(&["spec", "apiEndpoint"]);
        match ep.split_once("://") {
            Some((_, rest)) => {
                let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
                if authority.contains('@') {
                    out.err(&p, format!("Invalid value: {ep:?}: user information is not permitted in the URL ({SRC})"));
                }
                if authority.is_empty() {
                    out.err(&p, format!("Invalid value: {ep:?}: host must be provided ({SRC})"));
                }
                if rest.contains('#') {
                    out.err(&p, format!("Invalid value: {ep:?}: fragments are not permitted in the URL ({SRC})"));
                }
                if rest.contains('?') {
                    out.err(
                        &p,
                        format!("Invalid value: {ep:?}: query parameters are not permitted in the URL ({SRC})"),
                    );
                }
            }
            None => out.err(
                &p,
                format!("Invalid value: {ep:?}: host must be provided: use a URL such as https://host:6443 ({SRC})"),
            ),
        }
    }
    if let Some(proxy) = spec.get("proxyURL").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        let scheme = proxy.split_once("://").map_or("", |(s, _)| s);
        if !matches!(scheme, "http" | "https" | "socks5") {
            out.err(
                &seg_path(&["spec", "proxyURL"]),
                format!(
                    "Invalid value: {proxy:?}: unsupported scheme {scheme:?}, must be http, https, or socks5 ({SRC})"
                ),
            );
        }
    }
}

/// kueue ClusterQueue webhook (`validateResourceQuantity`): quotas must not be negative.
fn kueue_cluster_queue(obj: &Value, out: &mut Out) {
    let Some(groups) = obj.pointer("/spec/resourceGroups").and_then(Value::as_array) else { return };
    for (gi, g) in groups.iter().enumerate() {
        let Some(flavors) = g.get("flavors").and_then(Value::as_array) else { continue };
        for (fi, f) in flavors.iter().enumerate() {
            let Some(resources) = f.get("resources").and_then(Value::as_array) else { continue };
            for (ri, r) in resources.iter().enumerate() {
                for field in ["nominalQuota", "borrowingLimit"] {
                    let negative = match r.get(field) {
                        Some(Value::String(s)) => {
                            s.trim_start().starts_with('-') && s.bytes().any(|c| matches!(c, b'1'..=b'9'))
                        }
                        Some(v @ Value::Number(_)) => v.as_f64().is_some_and(|x| x < 0.0),
                        _ => false,
                    };
                    if negative {
                        let p = vec![
                            Seg::Field("spec".into()),
                            Seg::Field("resourceGroups".into()),
                            Seg::Index(gi),
                            Seg::Field("flavors".into()),
                            Seg::Index(fi),
                            Seg::Field("resources".into()),
                            Seg::Index(ri),
                            Seg::Field(field.into()),
                        ];
                        out.err(
                            &p,
                            format!(
                                "Invalid value: {}: must be greater than or equal to 0 (kueue ClusterQueue webhook)",
                                short(&r[field])
                            ),
                        );
                    }
                }
            }
        }
    }
}
