//! Issue 26, item 3: `fabric rotate credentials` against the API doubles, through the `fabric`
//! binary. Copied Secrets are copied again from their source as it is now; the Cluster Mesh CA
//! is renewed in three runs with an overlap (the new CA beside the old in the trust bundle of
//! the certificates cilium-certgen issued, then signing, then alone); every Secret's old data is
//! kept beside it and `fabric rollback` puts it back. No secret value is ever in the output or
//! the journal. The mesh CA's expiry is warned about in plan and verify under 30 days.
//!
//! No cilium-certgen runs here: the test issues the clustermesh-apiserver certificates from the
//! old CA as certgen does (cilium/cilium `install/kubernetes/cilium/templates/clustermesh-apiserver/tls-cronjob/_job-spec.tpl`:
//! their names, common names and usages; `ca.crt`, `tls.crt`, `tls.key`, type
//! `kubernetes.io/tls`: cilium/certgen `internal/generate/generate.go`, `Cert.StoreAsSecret`).

use base64::Engine as _;
use fabric_testkit::kube_api::{ExampleFabric, TestApiServer};
use fabric_testkit::run;
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decoded(secret: &Value, key: &str) -> String {
    let v = secret["data"][key].as_str().unwrap_or_else(|| panic!("{key} in {}", secret["metadata"]));
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(v).unwrap()).unwrap()
}

fn fabric(f: &ExampleFabric, args: &[&str]) -> (bool, String) {
    let o = run::fabric_in(&f.dir, &f.dir.join("topology.yaml"), &f.dir.join("ssh_config"), args);
    (o.status.success(), run::out(&o))
}

/// Writes `secret` (as read) back, as an operator's `kubectl apply` (or a controller) would.
fn replace(s: &TestApiServer, mut secret: Value, manager: &str) {
    for k in ["resourceVersion", "managedFields", "uid", "creationTimestamp"] {
        secret["metadata"].as_object_mut().unwrap().remove(k);
    }
    s.put_raw_as(secret, manager);
}

fn secret(s: &TestApiServer, ns: &str, name: &str) -> Option<Value> {
    s.object("v1", "Secret", Some(ns), name)
}

/// Every value of `secrets` (base64 as stored, and each line of its decoded text) is absent
/// from `text`.
fn never_shown(text: &str, secrets: &[&Value]) {
    for s in secrets {
        for (key, v) in s["data"].as_object().into_iter().flatten() {
            let b = v.as_str().unwrap();
            assert!(b.len() < 8 || !text.contains(b), "{key} of {} shown (base64)", s["metadata"]["name"]);
            let plain = decoded(s, key);
            for line in plain.lines().filter(|l| l.len() >= 16 && !l.starts_with("-----")) {
                assert!(!text.contains(line), "{key} of {} shown:\n{text}", s["metadata"]["name"]);
            }
        }
    }
    assert!(!text.contains("BEGIN"), "a PEM block shown:\n{text}");
}

/// The text of every journal of the run directory.
fn journals(f: &ExampleFabric) -> String {
    let dir = f.dir.join(".fabric").join("runs");
    std::fs::read_dir(dir).unwrap().flatten().map(|e| std::fs::read_to_string(e.path()).unwrap()).collect()
}

/// The run id a rotation printed.
fn run_id(text: &str) -> String {
    let at = text.find("Run ").unwrap_or_else(|| panic!("no run id:\n{text}")) + 4;
    text[at..].split(';').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copied_secrets_are_copied_again_from_their_source_never_shown_and_rolled_back() {
    let f = ExampleFabric::start("rotcred-copy");
    f.karmada.simulate_controllers(std::time::Duration::from_millis(50));
    let t = fabric::topology::load_str("t.yaml", f.text.clone()).unwrap().topology;
    // C.2: Karmada's credentials for each member, copied from the member's token (filled by the
    // double's token controller).
    apply_step::apply_step(&t, &f.dir, "C.2", "20261202T090000Z-1").await.unwrap();
    let creds = || secret(&f.karmada, "karmada-cluster", "sp").expect("Karmada's credentials for sp");
    let source = || secret(&f.sp, "karmada-cluster", "karmada-member-token").expect("sp's token");
    let before = creds();
    assert_eq!(before["data"]["token"], source()["data"]["token"]);

    // Nothing renewed while the copies match their sources.
    let (ok, text) = fabric(&f, &["rotate", "credentials", "--auto-approve"]);
    assert!(ok, "{text}");
    assert!(text.contains("= karmada/karmada-cluster/Secret/sp (C.2), from cluster.sp/karmada-cluster/karmada-member-token: holds what its source gives now"), "{text}");
    assert!(text.contains("Nothing to renew."), "{text}");

    // sp's token is renewed (by its operator, or a token controller): the rotation copies it.
    let mut renewed = source();
    renewed["data"]["token"] = json!(b64(b"sp-token-renewed-0123456789"));
    replace(&f.sp, renewed, "kube-controller-manager");
    // At a terminal: shown, then asked; answered `no`.
    let o = run::fabric_at_terminal(
        &f.dir,
        &f.dir.join("topology.yaml"),
        &f.dir.join("ssh_config"),
        &["rotate", "credentials", "--site", "sp"],
        "no",
    );
    let plan = run::out(&o);
    assert_eq!(o.status.code(), Some(1), "approval is asked and refused:\n{plan}");
    assert!(plan.contains("Do you want to perform these actions?") && plan.contains("Apply cancelled."), "{plan}");
    assert!(plan.contains("~ karmada/karmada-cluster/Secret/sp (C.2), from cluster.sp/karmada-cluster/karmada-member-token: copied again: it differs from its source now"), "{plan}");
    assert!(plan.contains("the Cluster Mesh CA (B.2): refused: it is shared by every site"), "{plan}");
    assert!(plan.contains("= the K3s join token of `sp` (A.1): not renewed without --k3s-token"), "{plan}");
    assert!(!plan.contains("Secret/franca (C.2)"), "--site sp leaves franca's copies out:\n{plan}");
    assert_eq!(creds()["data"], before["data"], "nothing changed before approval");

    let (ok, text) = fabric(&f, &["rotate", "credentials", "--site", "sp", "--auto-approve"]);
    assert!(ok, "{text}");
    let run = run_id(&text);
    let after = creds();
    assert_eq!(after["data"]["token"], source()["data"]["token"], "copied from the source as it is now");
    assert_ne!(after["data"]["token"], before["data"]["token"]);
    assert_eq!(after["metadata"]["labels"], before["metadata"]["labels"], "fabric's labels stay");
    // The old data is kept beside it, for rollback, with no label prune would select.
    let kept_name = format!("sp.prior-{}", run.to_ascii_lowercase());
    let kept = secret(&f.karmada, "karmada-cluster", &kept_name).expect("the old data kept");
    assert_eq!(kept["data"], before["data"]);
    assert!(kept["metadata"].get("labels").is_none());
    assert!(
        text.contains(&format!(
            "karmada/karmada-cluster/Secret/sp: renewed; the old data kept in Secret karmada-cluster/{kept_name}"
        )),
        "{text}"
    );
    let journal = journals(&f);
    for shown in [&text, &plan, &journal] {
        never_shown(shown, &[&before, &after, &source(), &kept]);
    }
    assert!(journal.contains("\"step\":\"C.2\"") && journal.contains("(sensitive)"), "{journal}");

    // Rollback puts the old data back and drops what was kept.
    let (ok, text) = fabric(&f, &["rollback", &run]);
    assert!(ok, "{text}");
    assert_eq!(creds()["data"], before["data"], "{text}");
    assert_eq!(creds()["metadata"]["labels"], before["metadata"]["labels"]);
    assert!(secret(&f.karmada, "karmada-cluster", &kept_name).is_none());
    never_shown(&text, &[&before, &after]);
}

/// A CA as fabric and cilium-certgen make it (`Cilium CA`), valid until `days` from now.
fn ca(days: u64) -> (rcgen::Issuer<'static, rcgen::KeyPair>, String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name.push(rcgen::DnType::CommonName, "Cilium CA");
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let now = std::time::SystemTime::now();
    p.not_before = (now - std::time::Duration::from_secs(3 * 365 * 86_400)).into();
    p.not_after = (now + std::time::Duration::from_secs(days * 86_400 + 3600)).into();
    let pem = p.self_signed(&key).unwrap().pem();
    let key_pem = key.serialize_pem();
    (rcgen::Issuer::new(p, key), pem, key_pem)
}

/// A certificate certgen issues: `name` in kube-system, signed by `issuer`, `ca.crt` the CA.
fn issued(issuer: &rcgen::Issuer<'static, rcgen::KeyPair>, ca_pem: &str, name: &str, server: bool) -> Value {
    let key = rcgen::KeyPair::generate().unwrap();
    let sans = if server { vec!["clustermesh-apiserver.cilium.io".to_string(), "127.0.0.1".into()] } else { vec![] };
    let mut p = rcgen::CertificateParams::new(sans).unwrap();
    let cn = if server { "clustermesh-apiserver.cilium.io" } else { "remote" };
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.use_authority_key_identifier_extension = true;
    let eku =
        if server { rcgen::ExtendedKeyUsagePurpose::ServerAuth } else { rcgen::ExtendedKeyUsagePurpose::ClientAuth };
    p.extended_key_usages = vec![eku];
    let cert = p.signed_by(&key, issuer).unwrap().pem();
    json!({ "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": { "name": name, "namespace": "kube-system" },
        "data": { "ca.crt": b64(ca_pem.as_bytes()), "tls.crt": b64(cert.as_bytes()), "tls.key": b64(key.serialize_pem().as_bytes()) } })
}

/// `openssl verify` of `cert` against the trust file `cas` (both PEM).
fn openssl_verifies(dir: &std::path::Path, cas: &str, cert: &str) -> bool {
    std::fs::write(dir.join("cas.pem"), cas).unwrap();
    std::fs::write(dir.join("cert.pem"), cert).unwrap();
    std::process::Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(dir.join("cas.pem"))
        .arg(dir.join("cert.pem"))
        .output()
        .expect("openssl runs")
        .status
        .success()
}

const ISSUED: [(&str, bool); 2] =
    [("clustermesh-apiserver-server-cert", true), ("clustermesh-apiserver-remote-cert", false)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mesh_ca_is_warned_about_and_renewed_in_three_runs_with_an_overlap() {
    let f = ExampleFabric::start("rotcred-mesh");
    // The mesh CA fabric generated in Franca (copied to SP), 10 days from its end, and the
    // certificates certgen issued from it in both clusters.
    let (old_issuer, old_crt, old_key) = ca(10);
    let ca_secret = |crt: &str, key: &str| {
        json!({ "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": { "name": "cilium-ca", "namespace": "kube-system",
                "labels": { "app.kubernetes.io/managed-by": "fabric" } },
            "data": { "ca.crt": b64(crt.as_bytes()), "ca.key": b64(key.as_bytes()) } })
    };
    for s in [&f.franca, &f.sp] {
        s.put_raw_as(ca_secret(&old_crt, &old_key), "fabric");
        for (name, server) in ISSUED {
            s.put_raw_as(issued(&old_issuer, &old_crt, name, server), "cilium-certgen");
        }
    }
    let old_issued: Vec<Value> = [&f.franca, &f.sp]
        .iter()
        .flat_map(|s| ISSUED.iter().map(|(n, _)| secret(s, "kube-system", n).unwrap()))
        .collect();

    // Plan and verify warn; the metrics hold its expiry.
    let metrics = f.dir.join("fabric.prom");
    let (_, plan) = fabric(&f, &["plan", "--step", "B.2", "--with-deps", "--metrics", metrics.to_str().unwrap()]);
    assert!(
        plan.contains("B.2: the Cluster Mesh CA (Secret kube-system/cilium-ca, key ca.crt) expires in 10 day(s)"),
        "{plan}"
    );
    assert!(plan.contains("fabric rotate credentials"), "{plan}");
    let prom = std::fs::read_to_string(&metrics).unwrap();
    let line = prom
        .lines()
        .find(|l| l.starts_with("fabric_certificate_expiry_seconds{certificate=\"kube-system/cilium-ca\"}"))
        .unwrap_or_else(|| panic!("{prom}"));
    let secs: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((10.0 * 86_400.0..11.0 * 86_400.0).contains(&secs), "{line}");
    let (_, verify) = fabric(&f, &["verify", "--step", "B.2"]);
    let check = verify.lines().find(|l| l.contains("the mesh CA's expiry")).unwrap_or_else(|| panic!("{verify}"));
    assert!(check.contains("WARN") && check.contains("expires in 10 day(s)"), "{check}");

    let cas_in = |s: &TestApiServer, name: &str| decoded(&secret(s, "kube-system", name).unwrap(), "ca.crt");
    let tls = |s: &TestApiServer, name: &str| decoded(&secret(s, "kube-system", name).unwrap(), "tls.crt");
    let count = |pem: &str| pem.matches("BEGIN CERTIFICATE").count();
    let mut outputs = vec![plan, verify];

    // Run 1: a new CA beside the old in every trust bundle; nothing is signed by it yet.
    let (ok, text) = fabric(&f, &["rotate", "credentials", "--auto-approve"]);
    assert!(ok, "{text}");
    assert!(text.contains("stage 1 of 3: a new CA is generated (kube-system/cilium-ca-next) and added beside the old in the trust bundle (ca.crt) of 4 certificate Secret(s)"), "{text}");
    let run1 = run_id(&text);
    outputs.push(text);
    let next = secret(&f.franca, "kube-system", "cilium-ca-next").expect("the new CA");
    let new_crt = decoded(&next, "ca.crt");
    assert_ne!(new_crt, old_crt);
    for s in [&f.franca, &f.sp] {
        assert_eq!(
            decoded(&secret(s, "kube-system", "cilium-ca").unwrap(), "ca.crt"),
            old_crt,
            "certgen still signs with the old"
        );
        for (name, _) in ISSUED {
            let bundle = cas_in(s, name);
            assert_eq!(count(&bundle), 2, "{name}");
            assert!(bundle.starts_with(&old_crt) && bundle.contains(&new_crt), "{name}");
            assert!(openssl_verifies(&f.dir, &bundle, &tls(s, name)), "{name}: its certificate is still trusted");
        }
    }

    // Run 2: the new CA signs; every certificate is issued again by it, trusted by both bundles.
    let (ok, text) = fabric(&f, &["rotate", "credentials", "--auto-approve"]);
    assert!(ok, "{text}");
    assert!(text.contains("stage 2 of 3"), "{text}");
    outputs.push(text);
    for s in [&f.franca, &f.sp] {
        let ca_now = secret(s, "kube-system", "cilium-ca").unwrap();
        assert_eq!(
            decoded(&ca_now, "ca.crt"),
            new_crt,
            "cilium-ca holds the new CA alone (certgen reads a chain there)"
        );
        assert_eq!(ca_now["data"]["ca.key"], next["data"]["ca.key"]);
        assert_eq!(ca_now["metadata"]["labels"]["app.kubernetes.io/managed-by"], "fabric");
        for (name, server) in ISSUED {
            let (bundle, cert) = (cas_in(s, name), tls(s, name));
            assert_eq!(count(&bundle), 2, "{name}");
            assert!(openssl_verifies(&f.dir, &new_crt, &cert), "{name}: issued by the new CA");
            assert!(!openssl_verifies(&f.dir, &old_crt, &cert), "{name}: not by the old");
            assert!(openssl_verifies(&f.dir, &bundle, &cert), "{name}: trusted by the bundle");
            let names = fabric::providers::cert::parse(cert.as_bytes()).unwrap();
            assert_eq!(!names.dns.is_empty(), server, "{name}: the same names as certgen gave it: {names:?}");
        }
    }
    // A peer that still trusts only the old bundle's CAs trusts the new certificates too
    // (run 1 gave every bundle both).

    // Run 3: the old CA leaves the bundles; the new CA's staging Secret goes.
    let (ok, text) = fabric(&f, &["rotate", "credentials", "--auto-approve"]);
    assert!(ok, "{text}");
    assert!(text.contains("stage 3 of 3"), "{text}");
    let run3 = run_id(&text);
    outputs.push(text);
    for s in [&f.franca, &f.sp] {
        for (name, _) in ISSUED {
            assert_eq!(cas_in(s, name), new_crt, "{name}: the new CA alone");
        }
    }
    assert!(secret(&f.franca, "kube-system", "cilium-ca-next").is_none());
    let (_, plan) = fabric(&f, &["plan", "--step", "B.2", "--with-deps"]);
    assert!(!plan.contains("B.2: the Cluster Mesh CA"), "a 3-year CA is not warned about:\n{plan}");
    outputs.push(plan);

    // Rolling back run 3 puts the old CA back into the bundles and the staging Secret back.
    let (ok, text) = fabric(&f, &["rollback", &run3]);
    assert!(ok, "{text}");
    outputs.push(text);
    assert_eq!(count(&cas_in(&f.sp, "clustermesh-apiserver-remote-cert")), 2);
    assert_eq!(secret(&f.franca, "kube-system", "cilium-ca-next").unwrap()["data"], next["data"]);
    assert!(!run1.is_empty());

    // No key, certificate or bundle was ever printed or journaled.
    outputs.push(journals(&f));
    let mut all: Vec<Value> = old_issued;
    all.push(next);
    for s in [&f.franca, &f.sp] {
        all.extend(ISSUED.iter().map(|(n, _)| secret(s, "kube-system", n).unwrap()));
    }
    all.push(ca_secret(&old_crt, &old_key));
    let refs: Vec<&Value> = all.iter().collect();
    for text in &outputs {
        never_shown(text, &refs);
    }
}

/// A stage that fails part-way is put back whole: the CA, its copies and every certificate
/// written before the failure get their old data back, and nothing the run kept is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_that_fails_part_way_is_put_back_whole() {
    let f = ExampleFabric::start("rotcred-fail");
    let (old_issuer, old_crt, old_key) = ca(400);
    for s in [&f.franca, &f.sp] {
        s.put_raw_as(
            json!({ "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": { "name": "cilium-ca", "namespace": "kube-system" },
                "data": { "ca.crt": b64(old_crt.as_bytes()), "ca.key": b64(old_key.as_bytes()) } }),
            "fabric",
        );
        for (name, server) in ISSUED {
            s.put_raw_as(issued(&old_issuer, &old_crt, name, server), "cilium-certgen");
        }
    }
    let (ok, text) = fabric(&f, &["rotate", "credentials", "--auto-approve"]);
    assert!(ok && text.contains("stage 1 of 3"), "{text}");
    let run1 = run_id(&text);
    // SP's remote certificate is no certificate any more: it cannot be issued again.
    let mut broken = secret(&f.sp, "kube-system", "clustermesh-apiserver-remote-cert").unwrap();
    broken["data"]["tls.crt"] = json!(b64(b"not a certificate"));
    replace(&f.sp, broken, "cilium-certgen");
    let snapshot = |s: &TestApiServer| -> Vec<Value> {
        ["cilium-ca", ISSUED[0].0, ISSUED[1].0]
            .iter()
            .map(|n| secret(s, "kube-system", n).unwrap()["data"].clone())
            .collect()
    };
    let before = (snapshot(&f.franca), snapshot(&f.sp));

    let (ok, text) = fabric(&f, &["rotate", "credentials", "--auto-approve"]);
    assert!(!ok, "{text}");
    assert!(text.contains("stage 2 of 3"), "{text}");
    assert!(text.contains("rotate::failed") && text.contains("B.2 was reverted"), "{text}");
    assert!(text.contains("cluster.sp/kube-system/Secret/clustermesh-apiserver-remote-cert"), "{text}");
    assert_eq!((snapshot(&f.franca), snapshot(&f.sp)), before, "nothing half-applied");
    // Nothing the failed run kept is left; what the first run kept stays, for its rollback.
    let failed = kept_suffix(&text);
    let kept_by = |s: &TestApiServer, suffix: &str| -> Vec<String> {
        s.objects()
            .iter()
            .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
            .filter(|n| n.ends_with(suffix))
            .collect()
    };
    let first = format!(".prior-{}", run1.to_ascii_lowercase());
    for s in [&f.franca, &f.sp] {
        assert!(kept_by(s, &failed).is_empty(), "{:?}\n{text}", kept_by(s, &failed));
        assert_eq!(kept_by(s, &first).len(), 2, "the first run's kept certificates: {:?}", kept_by(s, &first));
    }
    let journal = journals(&f);
    assert!(journal.contains("\"event\":\"reverted\"") && journal.contains("\"step\":\"B.2\""), "{journal}");
}

/// The name suffix of what a run kept (`.prior-<run id, lowercased>`), from its first
/// "kept in Secret" line.
fn kept_suffix(text: &str) -> String {
    let at = text.find(".prior-").unwrap_or_else(|| panic!("nothing kept:\n{text}"));
    text[at..].split(' ').next().unwrap().to_string()
}

#[test]
fn its_help_explains_with_examples() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fabric"))
        .args(["rotate", "credentials", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    for part in
        ["Examples:", "--site", "--auto-approve", "fabric rollback", "--k3s-token", "the old token kept on each host"]
    {
        assert!(text.contains(part), "{part}:\n{text}");
    }
}
