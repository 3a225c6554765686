//! Secrets fabric makes at apply time: copied from another target's Secret (raw keys, or shaped
//! into a kubeconfig or an ArgoCD cluster secret) or generated (a CA key pair). The desired
//! object only says where the data comes from (annotations); the data itself exists only in
//! memory during apply. Nothing here formats secret material into an error.
//!
//! Everything in this module is pure: the Kubernetes provider fetches the source and applies.

use crate::addr::Target;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

use crate::desired::objects::{CLUSTER_NAME, COPY_AS, COPY_FROM, COPY_KEYS, GENERATE, SERVER};

/// Why a Secret's data cannot be made. Names keys and Secrets, never their content.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SecretError {
    /// The Secret to copy from does not exist (yet).
    #[error("the source Secret {address} does not exist yet")]
    SourceAbsent { address: String },
    /// The source lacks a key, or it is still empty (a token the cluster has not filled yet).
    #[error(
        "the source Secret {address} has no `{key}` yet (is its controller running? a ServiceAccount token is filled by the cluster)"
    )]
    MissingKey { address: String, key: String },
    /// A value of the source is not base64, as a Secret's `data` must be.
    #[error("`{key}` of {address} is not base64")]
    NotBase64 { address: String, key: String },
    /// A value of the source decodes to bytes that are not UTF-8 text.
    #[error("`{key}` of {address} is not text")]
    NotText { address: String, key: String },
    /// A Secret fabric manages without saying where its data comes from.
    #[error("this Secret has no source fabric knows (no copy-from or generate annotation)")]
    NoSource,
    /// A Secret the operator creates (the topology names it; fabric never makes it) is absent.
    #[error(
        "Secret {namespace}/{name} (key `{key}`) does not exist: create it (kubectl -n {namespace} create secret generic {name} --from-literal={key}=...); fabric never creates it"
    )]
    OperatorAbsent { namespace: String, name: String, key: String },
    /// The operator's Secret lacks the key, or it is empty.
    #[error("Secret {namespace}/{name} has no `{key}` (or it is empty): add it; fabric never writes it")]
    OperatorKeyMissing { namespace: String, name: String, key: String },
    /// A key pair could not be generated.
    #[error("cannot generate a CA key: {0}")]
    KeyGeneration(String),
    /// A certificate could not be signed.
    #[error("cannot sign the CA certificate: {0}")]
    Signing(String),
}

/// What a copied Secret is made of.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// The listed keys, as they are: (key in the source, key in the copy).
    Keys(Vec<(String, String)>),
    /// A kubeconfig (key `kubeconfig`) for `server`, from a ServiceAccount token Secret.
    Kubeconfig { server: String },
    /// An ArgoCD cluster secret (`name`, `server`, `config`) from a ServiceAccount token Secret.
    ArgoCdCluster { server: String, name: String },
}

/// Where a Secret's data comes from at apply time (from its annotations).
#[derive(Debug, Clone, PartialEq)]
pub struct CopySource {
    pub target: Target,
    pub namespace: String,
    pub name: String,
    pub shape: Shape,
}

impl CopySource {
    /// `<target>/<namespace>/<name>`, as shown in plans.
    pub fn address(&self) -> String {
        format!("{}/{}/{}", self.target, self.namespace, self.name)
    }
}

/// The copy source of a Secret, if its annotations name one.
pub fn copy_source(obj: &Value) -> Option<CopySource> {
    let a = &obj["metadata"]["annotations"];
    let from = a[COPY_FROM].as_str()?;
    let (target, rest) = from.split_once('/')?;
    let target: Target = target.parse().ok()?;
    let (ns, name) = rest.split_once('/')?;
    let server = a[SERVER].as_str().unwrap_or_default().to_string();
    let shape = match a[COPY_AS].as_str() {
        Some("kubeconfig") => Shape::Kubeconfig { server },
        Some("argocd-cluster") => {
            let name = a[CLUSTER_NAME].as_str().or(obj["metadata"]["name"].as_str()).unwrap_or_default();
            Shape::ArgoCdCluster { server, name: name.to_string() }
        }
        Some(_) => return None,
        None => Shape::Keys(
            a[COPY_KEYS]
                .as_str()?
                .split(',')
                .filter_map(|kv| kv.split_once('=').map(|(a, b)| (a.trim().to_string(), b.trim().to_string())))
                .collect(),
        ),
    };
    Some(CopySource { target, namespace: ns.to_string(), name: name.to_string(), shape })
}

/// What a Secret fabric generates holds, if it is one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Generated {
    /// A self-signed CA: `ca.crt` and `ca.key` (PEM).
    Ca,
}

pub fn generated(obj: &Value) -> Option<Generated> {
    match obj["metadata"]["annotations"][GENERATE].as_str()? {
        "ca" => Some(Generated::Ca),
        _ => None,
    }
}

fn get<'a>(data: &'a Map<String, Value>, key: &str, src: &CopySource) -> Result<&'a str, SecretError> {
    data.get(key)
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| SecretError::MissingKey { address: src.address(), key: key.to_string() })
}

fn decode(v: &str, key: &str, src: &CopySource) -> Result<String, SecretError> {
    let bytes = B64.decode(v).map_err(|_| SecretError::NotBase64 { address: src.address(), key: key.to_string() })?;
    String::from_utf8(bytes).map_err(|_| SecretError::NotText { address: src.address(), key: key.to_string() })
}

/// The `data` of the copy, from the source Secret's `data` (base64 values, as the API returns).
pub fn copied_data(source: &Map<String, Value>, from: &CopySource) -> Result<Map<String, Value>, SecretError> {
    let mut out = Map::new();
    match &from.shape {
        Shape::Keys(keys) => {
            for (k, to) in keys {
                out.insert(to.clone(), Value::from(get(source, k, from)?));
            }
        }
        Shape::Kubeconfig { server } => {
            let token = decode(get(source, "token", from)?, "token", from)?;
            let ca = get(source, "ca.crt", from)?;
            out.insert("kubeconfig".into(), Value::from(B64.encode(kubeconfig(server, ca, &token))));
        }
        Shape::ArgoCdCluster { server, name } => {
            let token = decode(get(source, "token", from)?, "token", from)?;
            let ca = get(source, "ca.crt", from)?;
            let config = json!({ "bearerToken": token, "tlsClientConfig": { "insecure": false, "caData": ca } });
            out.insert("name".into(), Value::from(B64.encode(name)));
            out.insert("server".into(), Value::from(B64.encode(server)));
            out.insert("config".into(), Value::from(B64.encode(config.to_string())));
        }
    }
    Ok(out)
}

/// A kubeconfig with one cluster, user and context, authenticating with a bearer token.
/// `ca` is the base64 PEM as a Secret holds it (kubeconfig's `certificate-authority-data`).
pub fn kubeconfig(server: &str, ca: &str, token: &str) -> String {
    let v = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "worker", "cluster": { "server": server, "certificate-authority-data": ca } }],
        "users": [{ "name": "fabric", "user": { "token": token } }],
        "contexts": [{ "name": "worker", "context": { "cluster": "worker", "user": "fabric" } }],
        "current-context": "worker",
    });
    crate::desired::yaml::to_string(&v)
}

/// Whether `dest` (a live Secret's `data`) already holds what copying from `source` gives.
pub fn copy_matches(dest: &Map<String, Value>, source: &Map<String, Value>, from: &CopySource) -> bool {
    match copied_data(source, from) {
        Ok(want) => want.iter().all(|(k, v)| dest.get(k) == Some(v)),
        Err(_) => false,
    }
}

/// The `data` of a generated Secret.
pub fn generate(what: Generated) -> Result<Map<String, Value>, SecretError> {
    match what {
        Generated::Ca => {
            let (cert, key) = ca("Cilium CA")?;
            let mut m = Map::new();
            m.insert("ca.crt".into(), Value::from(B64.encode(cert)));
            m.insert("ca.key".into(), Value::from(B64.encode(key)));
            Ok(m)
        }
    }
}

/// A self-signed CA certificate and its private key (ECDSA P-256, PEM), valid for 3 years, as
/// Cilium's certgen makes its `cilium-ca`.
pub fn ca(common_name: &str) -> Result<(String, String), SecretError> {
    use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate().map_err(|e| SecretError::KeyGeneration(e.to_string()))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let now = std::time::SystemTime::now();
    params.not_before = now.into();
    params.not_after = (now + std::time::Duration::from_secs(3 * 365 * 24 * 3600)).into();
    let cert = params.self_signed(&key).map_err(|e| SecretError::Signing(e.to_string()))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The Secret keys a workload's pods read from Secrets (`env[].valueFrom.secretKeyRef` of its
/// containers and init containers, unless `optional: true`): (namespace, Secret, key).
pub fn secret_key_refs(obj: &Value) -> Vec<(String, String, String)> {
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
    let spec = &obj["spec"]["template"]["spec"];
    let containers = ["containers", "initContainers"].into_iter().filter_map(|k| spec[k].as_array()).flatten();
    let mut out = Vec::new();
    for e in containers.filter_map(|c| c["env"].as_array()).flatten() {
        let r = &e["valueFrom"]["secretKeyRef"];
        if let (Some(name), Some(key), false) = (r["name"].as_str(), r["key"].as_str(), r["optional"] == true) {
            let item = (ns.to_string(), name.to_string(), key.to_string());
            if !out.contains(&item) {
                out.push(item);
            }
        }
    }
    out
}

/// Why the Secret `namespace/name` (its `data`, None when absent) cannot give `key`: absent, or
/// the key missing or empty. Reads only whether the key holds something, never its value.
pub fn key_problem(data: Option<&Map<String, Value>>, namespace: &str, name: &str, key: &str) -> Option<SecretError> {
    let (namespace, name, key) = (namespace.to_string(), name.to_string(), key.to_string());
    match data {
        None => Some(SecretError::OperatorAbsent { namespace, name, key }),
        Some(d) if d.get(&key).and_then(Value::as_str).is_none_or(str::is_empty) => {
            Some(SecretError::OperatorKeyMissing { namespace, name, key })
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workloads_secret_keys_are_read_from_its_containers_env_but_optional_ones() {
        let d = json!({ "kind": "Deployment", "metadata": { "namespace": "tensorzero" }, "spec": { "template": { "spec": {
            "initContainers": [{ "env": [{ "name": "U", "valueFrom": { "secretKeyRef": { "name": "pg", "key": "url" } } }] }],
            "containers": [{ "env": [
                { "name": "U", "valueFrom": { "secretKeyRef": { "name": "pg", "key": "url" } } },
                { "name": "K", "valueFrom": { "secretKeyRef": { "name": "cloud", "key": "api_key" } } },
                { "name": "O", "valueFrom": { "secretKeyRef": { "name": "opt", "key": "k", "optional": true } } },
                { "name": "P", "value": "plain" },
            ] }],
        } } } });
        let refs = secret_key_refs(&d);
        let t = |n: &str, k: &str| ("tensorzero".to_string(), n.to_string(), k.to_string());
        assert_eq!(refs, vec![t("pg", "url"), t("cloud", "api_key")]);
    }

    #[test]
    fn an_operator_secret_needs_its_key_filled_and_errors_never_show_values() {
        let mut data = Map::new();
        assert!(matches!(key_problem(None, "ns", "s", "k"), Some(SecretError::OperatorAbsent { .. })));
        assert!(matches!(key_problem(Some(&data), "ns", "s", "k"), Some(SecretError::OperatorKeyMissing { .. })));
        data.insert("k".into(), json!(""));
        assert!(matches!(key_problem(Some(&data), "ns", "s", "k"), Some(SecretError::OperatorKeyMissing { .. })));
        data.insert("k".into(), json!("c2VjcmV0LXZhbHVl"));
        assert_eq!(key_problem(Some(&data), "ns", "s", "k"), None);
        let e = key_problem(None, "ns", "s", "k").unwrap().to_string();
        assert!(e.contains("ns/s") && e.contains("`k`") && e.contains("kubectl -n ns create secret generic s"), "{e}");
    }

    fn src(shape: Shape) -> CopySource {
        CopySource { target: "cluster.sp".into(), namespace: "ns".into(), name: "tok".into(), shape }
    }

    fn token_secret() -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("token".into(), Value::from(B64.encode("abc.def")));
        m.insert("ca.crt".into(), Value::from(B64.encode("-----BEGIN CERTIFICATE-----\nx\n")));
        m
    }

    #[test]
    fn annotations_name_the_source_and_shape() {
        let obj = json!({"metadata": {"name": "karmada-api", "annotations": {
            COPY_FROM: "karmada/kube-system/argocd-manager-token", COPY_AS: "argocd-cluster", SERVER: "https://10.0.0.1:32443", CLUSTER_NAME: "karmada"}}});
        let c = copy_source(&obj).unwrap();
        assert_eq!(c.address(), "karmada/kube-system/argocd-manager-token");
        assert_eq!(c.shape, Shape::ArgoCdCluster { server: "https://10.0.0.1:32443".into(), name: "karmada".into() });
        let obj = json!({"metadata": {"name": "x", "annotations": {COPY_FROM: "cluster.a/ns/n", COPY_KEYS: "token=token, ca.crt=caBundle"}}});
        assert_eq!(
            copy_source(&obj).unwrap().shape,
            Shape::Keys(vec![("token".into(), "token".into()), ("ca.crt".into(), "caBundle".into())])
        );
        let obj = json!({"metadata": {"name": "x", "annotations": {COPY_FROM: "cluster.a/ns/n", COPY_AS: "nonsense"}}});
        assert_eq!(copy_source(&obj), None);
        assert_eq!(generated(&json!({"metadata": {"annotations": {GENERATE: "ca"}}})), Some(Generated::Ca));
    }

    #[test]
    fn kubeconfig_shape_is_a_kubeconfig_with_the_token() {
        let from = src(Shape::Kubeconfig { server: "https://172.30.2.10:6443".into() });
        let data = copied_data(&token_secret(), &from).unwrap();
        let text = String::from_utf8(B64.decode(data["kubeconfig"].as_str().unwrap()).unwrap()).unwrap();
        let kc: kube::config::Kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some("https://172.30.2.10:6443"));
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(format!("{:?}", user.token).contains("abc.def") || user.token.is_some());
        assert_eq!(kc.current_context.as_deref(), Some("worker"));
        assert!(copy_matches(&data, &token_secret(), &from));
        let mut other = token_secret();
        other.insert("token".into(), Value::from(B64.encode("rotated")));
        assert!(!copy_matches(&data, &other, &from), "a rotated token is a difference");
    }

    #[test]
    fn argocd_shape_has_config_json() {
        let from = src(Shape::ArgoCdCluster { server: "https://10.0.0.1:32443".into(), name: "karmada".into() });
        let data = copied_data(&token_secret(), &from).unwrap();
        let dec = |k: &str| String::from_utf8(B64.decode(data[k].as_str().unwrap()).unwrap()).unwrap();
        assert_eq!(dec("name"), "karmada");
        assert_eq!(dec("server"), "https://10.0.0.1:32443");
        let config: Value = serde_json::from_str(&dec("config")).unwrap();
        assert_eq!(config["bearerToken"], "abc.def");
        assert_eq!(config["tlsClientConfig"]["caData"], token_secret()["ca.crt"]);
    }

    #[test]
    fn missing_keys_are_named_without_content() {
        let from = src(Shape::Keys(vec![("token".into(), "token".into())]));
        let e = copied_data(&Map::new(), &from).unwrap_err();
        assert_eq!(e, SecretError::MissingKey { address: "cluster.sp/ns/tok".into(), key: "token".into() });
        assert_eq!(
            e.to_string(),
            "the source Secret cluster.sp/ns/tok has no `token` yet (is its controller running? a ServiceAccount token is filled by the cluster)"
        );
    }

    #[test]
    fn undecodable_values_are_named_without_content() {
        let from = src(Shape::Kubeconfig { server: "https://172.30.2.10:6443".into() });
        let mut data = token_secret();
        data.insert("token".into(), Value::from("s3cret!!"));
        let e = copied_data(&data, &from).unwrap_err();
        assert_eq!(e.to_string(), "`token` of cluster.sp/ns/tok is not base64");
        data.insert("token".into(), Value::from(B64.encode([0xff, 0xfe])));
        let e = copied_data(&data, &from).unwrap_err();
        assert_eq!(e.to_string(), "`token` of cluster.sp/ns/tok is not text");
        assert!(!format!("{e:?}").contains("//4="), "{e:?}");
        assert_eq!(
            SecretError::SourceAbsent { address: "karmada/kube-system/t".into() }.to_string(),
            "the source Secret karmada/kube-system/t does not exist yet"
        );
    }

    #[test]
    fn generated_ca_is_a_pem_ca_pair() {
        let data = generate(Generated::Ca).unwrap();
        let cert = String::from_utf8(B64.decode(data["ca.crt"].as_str().unwrap()).unwrap()).unwrap();
        let key = String::from_utf8(B64.decode(data["ca.key"].as_str().unwrap()).unwrap()).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        // Two runs make two different keys: nothing is fixed or reused.
        assert_ne!(generate(Generated::Ca).unwrap()["ca.key"], data["ca.key"]);
    }
}
