//! Each validation rule, shown by a topology that breaks it: the code, the message and the exact
//! position (line and column of the offending value) are asserted.

use fabric::topology::problem::{Diag, Severity};
use fabric::topology::{LoadError, Loaded, load_str};

const EXAMPLE: &str = include_str!("../topology.example.yaml");

/// The example without its `k3s_airgap` (for tests that give a bundle of their own).
fn example_without_bundle() -> &'static str {
    &EXAMPLE[..EXAMPLE.find("# K3s from its air-gap bundle").expect("the example has a bundle")]
}

/// A topology with no warning: the example's bundle has its digests recorded.
fn no_warnings(l: &Loaded) {
    assert!(l.warnings.is_empty(), "{:?}", messages(&l.warnings));
}

/// The example with `from` replaced by `to` (the first occurrence after `after`, if given).
fn mutate(after: &str, from: &str, to: &str) -> String {
    let start =
        if after.is_empty() { 0 } else { EXAMPLE.find(after).unwrap_or_else(|| panic!("`{after}` not in example")) };
    let rel = EXAMPLE[start..].find(from).unwrap_or_else(|| panic!("`{from}` not after `{after}`"));
    let at = start + rel;
    format!("{}{}{}", &EXAMPLE[..at], to, &EXAMPLE[at + from.len()..])
}

fn errors(text: &str) -> Vec<Diag> {
    match load_str("t.yaml", text.to_string()) {
        Ok(l) => panic!("expected errors, got a valid topology with warnings {:?}", messages(&l.warnings)),
        Err(LoadError::Invalid { diags, .. }) => diags,
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn valid(text: &str) -> Loaded {
    match load_str("t.yaml", text.to_string()) {
        Ok(l) => l,
        Err(LoadError::Invalid { diags, .. }) => panic!("expected valid, got {:?}", messages(&diags)),
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn messages(d: &[Diag]) -> Vec<String> {
    d.iter().map(|d| format!("{}: {} ({})", d.problem.code, d.problem.message, d.location())).collect()
}

/// 1-based line and column of the `nth` occurrence of `needle` after `after` in `text`.
fn pos(text: &str, after: &str, needle: &str) -> (usize, usize) {
    let start = text.find(after).expect("anchor");
    let at = start + text[start..].find(needle).expect("needle");
    fabric::topology::problem::line_col(text, at)
}

/// Exactly one diagnostic with `code` whose message contains `msg`, at the given position.
fn expect_one(diags: &[Diag], code: &str, msg: &str, at: (usize, usize)) -> Diag {
    let found: Vec<&Diag> =
        diags.iter().filter(|d| d.problem.code == code && d.problem.message.contains(msg)).collect();
    assert_eq!(found.len(), 1, "want one `{code}` containing `{msg}`, got {:#?}", messages(diags));
    let d = found[0];
    assert_eq!((d.line, d.column), at, "position of `{}`", d.problem.message);
    assert_eq!(d.file, "t.yaml");
    assert!(d.problem.help.is_some(), "every diagnostic has a help line: {}", d.problem.message);
    d.clone()
}

#[test]
fn the_example_is_valid_without_warnings() {
    let l = valid(EXAMPLE);
    no_warnings(&l);
    assert_eq!(l.topology.sites.len(), 2);
    // Without its digests: one warning at `digests` (apply refuses to install K3s until then).
    let text = format!("{}\nk3s_airgap:\n  digests: {{}}\n", example_without_bundle());
    let l = valid(&text);
    assert_eq!(messages(&l.warnings).len(), 1, "{:?}", messages(&l.warnings));
    let w = &l.warnings[0];
    assert!(
        w.problem.message.contains("no digests are recorded for K3s v1.33.5+k3s1: `apply` refuses"),
        "{}",
        w.problem.message
    );
    assert_eq!((w.line, w.column), pos(&text, "\nk3s_airgap:", "digests"));
}

#[test]
fn yaml_syntax_error_has_a_position() {
    let text = mutate("  - name: sp\n", "    lan: 192.168.2.0/23", "    lan: [192.168.2.0/23");
    let d = errors(&text);
    assert_eq!(d.len(), 1, "{:?}", messages(&d));
    assert_eq!(d[0].problem.code, "topology::syntax");
    assert!(d[0].problem.message.starts_with("invalid YAML"), "{}", d[0].problem.message);
    let (line, _) = pos(&text, "  - name: sp\n", "lan: [");
    assert!(d[0].line >= line, "syntax error reported at {} (bracket opened on {line})", d[0].location());
}

#[test]
fn empty_file_is_an_error() {
    let d = errors("# nothing\n\n");
    assert_eq!(d[0].problem.code, "topology::syntax");
    assert!(d[0].problem.message.contains("empty"));
}

#[test]
fn type_errors_point_at_the_value() {
    let text = mutate("name: franca\n      id:", "id: 1", "id: one");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::type",
        "sites[0].cluster.id` must be an integer",
        pos(&text, "name: franca\n      id:", "one"),
    );
    // A number where a string is expected gets a hint to quote it.
    let text = mutate("", "k3s: v1.33.5+k3s1", "k3s: 1.33");
    let d = errors(&text);
    let one = expect_one(&d, "topology::type", "versions.k3s", pos(&text, "k3s:", "1.33"));
    assert!(one.problem.help.unwrap().contains("quote"), "help suggests quoting");
}

#[test]
fn unknown_key_suggests_the_right_one() {
    let text = mutate("  - name: sp\n", "    lan:", "    lna:");
    let d = errors(&text);
    assert_eq!(d.len(), 1, "the missing `lan` is not reported twice: {:?}", messages(&d));
    let one = expect_one(&d, "topology::unknown-key", "unknown key `lna` in sites[1]", pos(&text, "- name: sp", "lna"));
    assert!(one.problem.help.unwrap().starts_with("did you mean `lan`?"));
}

#[test]
fn missing_required_key() {
    let text = mutate("", "  karmada_host: host-cluster\n", "");
    let d = errors(&text);
    let one = expect_one(
        &d,
        "topology::missing-key",
        "decisions is missing the required key `karmada_host`",
        pos(&text, "decisions:", "decisions"),
    );
    assert!(one.problem.help.unwrap().contains("Before C.1"), "help carries the field's documentation");
}

#[test]
fn bad_enum_value_suggests() {
    let text = mutate("", "argocd: single", "argocd: singel");
    let d = errors(&text);
    let one = expect_one(&d, "topology::enum", "`singel` is not one of", pos(&text, "  argocd: singel", "singel"));
    assert!(one.problem.help.unwrap().starts_with("did you mean `single`?"));
}

#[test]
fn duplicate_yaml_key() {
    let text =
        mutate("", "  karmada_host: host-cluster\n", "  karmada_host: host-cluster\n  karmada_host: dedicated-vm\n");
    let d = errors(&text);
    let (l, c) = pos(&text, "host-cluster\n", "karmada_host");
    expect_one(&d, "topology::duplicate-key", "key `karmada_host` appears twice", (l, c));
}

#[test]
fn duplicate_names() {
    let text = mutate("  - name: sp\n", "name: sp\n", "name: franca\n");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::duplicate",
        "site `franca` is defined twice",
        pos(&text, "\n  - name: franca\n    lan: 192.168.2", "franca"),
    );
    let text = mutate("", "name: pve-ippri-34", "name: pve-ippri-33");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::duplicate",
        "host name `pve-ippri-33` is defined twice",
        pos(&text, "pve-ippri-33, role: gpu, address: 192.168.2.44", "pve-ippri-33"),
    );
    // A Proxmox host that is a GPU node is listed once: also under external_workloads, it would
    // be joined twice (A.1 and A.4).
    let text = mutate(
        "  - name: sp\n",
        "    queues:",
        "    external_workloads:\n      - { name: pve-ippri-31, kind: bare-metal, address: 192.168.2.41, runs: [proxmox], ssh: { host: 192.168.2.41 } }\n    queues:",
    );
    let d = errors(&text);
    expect_one(
        &d,
        "topology::duplicate",
        "host name `pve-ippri-31` is defined twice",
        pos(&text, "external_workloads:\n      - { name: pve-ippri-31", "pve-ippri-31"),
    );
}

#[test]
fn references_to_unknown_things() {
    let text = mutate("", "class: web-services, port: 7007", "class: web-service, port: 7007");
    let d = errors(&text);
    let one = expect_one(
        &d,
        "topology::reference",
        "no placement class named `web-service`",
        pos(&text, "name: backstage", "web-service"),
    );
    assert!(one.problem.help.unwrap().starts_with("did you mean `web-services`?"));

    let text = mutate("multikueue:", "workers: [sp]", "workers: [sao-paulo]");
    let d = errors(&text);
    expect_one(&d, "topology::reference", "no site named `sao-paulo`", pos(&text, "workers: [", "sao-paulo"));

    let text = mutate("gateway:", "{ site: sp, weight: 20 }", "{ site: rio, weight: 20 }");
    let d = errors(&text);
    expect_one(&d, "topology::reference", "no site named `rio`", pos(&text, "gateway:", "rio"));

    let text = mutate("", "service: vllm", "service: vlm");
    let d = errors(&text);
    expect_one(&d, "topology::reference", "no service named `vlm`", pos(&text, "gateway:", "vlm"));

    let text = mutate("multikueue:", "queue: gpu-batch", "queue: gpu-bulk");
    let d = errors(&text);
    assert!(
        d.iter().any(|d| d.problem.message == "queue `gpu-bulk` does not exist at site `sp`"),
        "{:?}",
        messages(&d)
    );
}

#[test]
fn overlapping_prefixes_across_sites() {
    // LAN against LAN.
    let text = mutate("", "lan: 192.168.2.0/23", "lan: 192.168.0.0/22");
    let d = errors(&text);
    let one = expect_one(
        &d,
        "topology::overlap",
        "LAN of `sp` 192.168.0.0/22 overlaps the LAN of `franca`",
        pos(&text, "name: sp", "192.168.0.0/22"),
    );
    // The other prefix is far above: it is named with its position in the help.
    let line = text.lines().position(|l| l.trim() == "lan: 192.168.0.0/23").unwrap() + 1;
    assert!(
        one.problem.help.unwrap().contains(&format!("LAN of `franca` 192.168.0.0/23: t.yaml:{line}:10")),
        "the other prefix is located"
    );
    // Pod CIDR against the other site's service CIDR.
    let text = mutate("", "pod_cidr: 10.44.0.0/16", "pod_cidr: 10.43.0.0/16");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::overlap",
        "pod CIDR of `sp` 10.43.0.0/16 overlaps the service CIDR of `franca`",
        pos(&text, "name: sp\n      id", "10.43.0.0/16"),
    );
    // The tunnel against a LAN.
    let text = mutate("", "lan: 192.168.2.0/23", "lan: 10.0.0.0/23");
    let d = errors(&text);
    assert!(
        d.iter()
            .any(|d| d.problem.code == "topology::overlap" && d.problem.message.contains("tunnel network 10.0.0.0/30")),
        "{:?}",
        messages(&d)
    );
}

#[test]
fn cluster_ids() {
    let text = mutate("name: sp\n      id:", "id: 2", "id: 0");
    expect_one(
        &errors(&text),
        "topology::cluster-id",
        "cluster id 0 is outside 1–255",
        pos(&text, "name: sp\n      id:", "0"),
    );
    let text = mutate("name: sp\n      id:", "id: 2", "id: 256");
    expect_one(
        &errors(&text),
        "topology::cluster-id",
        "cluster id 256 is outside 1–255",
        pos(&text, "name: sp\n      id:", "256"),
    );
    let text = mutate("name: sp\n      id:", "id: 2", "id: 1");
    expect_one(
        &errors(&text),
        "topology::cluster-id",
        "cluster id 1 is used twice",
        pos(&text, "name: sp\n      id:", "1"),
    );
}

#[test]
fn tunnel_ends() {
    let at = |text: &str, v: &str| pos(text, "vyos-sp", v);
    let text = mutate("vyos-sp", "address: 10.0.0.2/30", "address: 10.0.0.6/30");
    expect_one(&errors(&text), "topology::tunnel", "not in the tunnel network 10.0.0.0/30", at(&text, "10.0.0.6/30"));
    let text = mutate("vyos-sp", "address: 10.0.0.2/30", "address: 10.0.0.1/30");
    expect_one(&errors(&text), "topology::tunnel", "10.0.0.1 is used by both", at(&text, "10.0.0.1/30"));
    let text = mutate("vyos-sp", "address: 10.0.0.2/30", "address: 10.0.0.3/30");
    expect_one(&errors(&text), "topology::tunnel", "broadcast address", at(&text, "10.0.0.3/30"));
    let text = mutate("vyos-sp", "address: 10.0.0.2/30", "address: 10.0.0.0/30");
    expect_one(&errors(&text), "topology::tunnel", "network address", at(&text, "10.0.0.0/30"));
}

#[test]
fn names_must_be_dns_labels() {
    let text = mutate("", "name: pve-ippri-34", "name: PVE_ippri-34");
    let d = expect_one(
        &errors(&text),
        "topology::name",
        "node name `PVE_ippri-34` is not a valid DNS label",
        pos(&text, "", "PVE_ippri-34"),
    );
    assert!(d.problem.help.unwrap().contains("`pve-ippri-34`"));
    let text = mutate("", "name: gpu-interactive", "name: gpu.interactive");
    expect_one(&errors(&text), "topology::name", "queue name `gpu.interactive`", pos(&text, "", "gpu.interactive"));
}

#[test]
fn ports_out_of_range() {
    let text = mutate("", "listen_port: 51820", "listen_port: 70000");
    expect_one(&errors(&text), "topology::range", "port 70000 is out of range 1–65535", pos(&text, "", "70000"));
    let text = mutate("", "port: 5432", "port: 0");
    expect_one(
        &errors(&text),
        "topology::range",
        "port 0 is out of range 1–65535",
        pos(&text, "postgresql", "0, workload"),
    );
}

#[test]
fn gpu_quota_larger_than_the_site() {
    let text = mutate("  - name: sp\n", "gpu_quota: 1", "gpu_quota: 4");
    expect_one(
        &errors(&text),
        "topology::quota",
        "quota of 4 GPUs but site `sp` has 3",
        pos(&text, "  - name: sp\n", "4\n"),
    );
    // Each queue fits, together they do not.
    let text = mutate("  - name: sp\n", "gpu_quota: 1", "gpu_quota: 2");
    let sp = text.find("  - name: sp\n").unwrap();
    let batch = sp + text[sp..].find("name: gpu-batch\n        gpu_quota: ").unwrap();
    let at = fabric::topology::problem::line_col(&text, batch + "name: gpu-batch\n        gpu_quota: ".len());
    expect_one(&errors(&text), "topology::quota", "4 GPUs of quota together but the site has 3", at);
}

#[test]
fn weights_must_be_positive() {
    let text = mutate("gateway:", "weight: 20", "weight: 0");
    expect_one(
        &errors(&text),
        "topology::weight",
        "route weight 0 for `sp` is not positive",
        pos(&text, "site: sp, weight: 0", "0"),
    );
    let text = mutate("", "weights: { franca: 1, sp: 1 }", "weights: { franca: 1, sp: -2 }");
    expect_one(&errors(&text), "topology::weight", "weight -2 for `sp` is not positive", pos(&text, "", "-2"));
}

#[test]
fn unsupported_versions() {
    let text = mutate("", "join: k3s-agent", "join: cilium-external-workloads");
    let d = expect_one(
        &errors(&text),
        "topology::version",
        "Cilium 1.18.4 has no External Workloads",
        pos(&text, "cilium: ", "1.18.4"),
    );
    assert!(d.problem.help.unwrap().contains("1.17"));
    // With Cilium 1.17, external workloads are accepted.
    let text = text.replace("cilium: 1.18.4", "cilium: 1.17.9");
    valid(&text);
    let text = mutate("", "kueue: 0.15.2", "kueue: 0.14.0");
    expect_one(&errors(&text), "topology::version", "does not serve kueue.x-k8s.io/v1beta2", pos(&text, "", "0.14.0"));
    let text = mutate("", "karmada: 1.15.0", "karmada: 1.13.0");
    expect_one(&errors(&text), "topology::version", "ClusterTaintPolicy", pos(&text, "", "1.13.0"));
    let text = mutate("", "karmada: 1.15.0", "karmada: latest");
    expect_one(&errors(&text), "topology::version", "`latest` is not a version", pos(&text, "", "latest"));
}

/// The line of `versions:` (its key, column 1).
fn at_versions(text: &str) -> (usize, usize) {
    (text.lines().position(|l| l == "versions:").expect("a versions: line") + 1, 1)
}

/// Every chart and image fabric writes is pinned (issue 36, item 4): an unset version of a
/// component fabric installs is an error at `versions:`, and none is asked of one it does not.
#[test]
fn an_unpinned_component_is_an_error_at_versions() {
    let text = mutate("", "  argocd: 9.1.0\n", "");
    let d = expect_one(&errors(&text), "topology::version", "`versions.argocd` is not set", at_versions(&text));
    assert!(d.problem.help.unwrap().contains("`argocd: 9.1.0`"));
    // An ArgoCD installed otherwise needs no pin here.
    let installed_otherwise = text.replace("    repo: https://", "    install: false\n    repo: https://");
    assert_ne!(installed_otherwise, text);
    valid(&installed_otherwise);
    let text = mutate("", "  tensorzero: 2026.4.1\n", "");
    expect_one(&errors(&text), "topology::version", "`versions.tensorzero` is not set", at_versions(&text));
}

#[test]
fn addresses_are_checked() {
    let text = mutate("", "lan: 192.168.2.0/23", "lan: 192.168.3.0/23");
    let d = expect_one(&errors(&text), "topology::address", "host bits set", pos(&text, "", "192.168.3.0/23"));
    assert!(d.problem.message.contains("192.168.2.0/23"), "the message gives the right network");
    let text = mutate("", "address: 192.168.2.41", "address: 192.168.9.41");
    expect_one(
        &errors(&text),
        "topology::address",
        "node address 192.168.9.41 is outside the LAN",
        pos(&text, "", "192.168.9.41"),
    );
}

/// A K3s bump (issue 37): the example with `versions.k3s` raised and nothing else is refused at
/// `digests`, naming both releases; with the new release's entry it is valid, the old entry kept
/// for a revert; a URL or path that still names the old release is refused at its line, naming
/// both; the old digests under the new release's key are refused at each digest fabric knows.
#[test]
fn a_k3s_version_and_its_bundle_agree() {
    let bumped = EXAMPLE.replace("  k3s: v1.33.5+k3s1", "  k3s: v1.33.6+k3s1");
    let d = errors(&bumped);
    assert_eq!(d.len(), 1, "{:?}", messages(&d));
    let e = expect_one(
        &d,
        "topology::k3s-airgap",
        "no digests are recorded for K3s v1.33.6+k3s1 (versions.k3s), only for v1.33.5+k3s1",
        pos(&bumped, "\nk3s_airgap:", "digests"),
    );
    assert!(e.problem.help.unwrap().contains("\"v1.33.6+k3s1\": { binary: …, images: …, install_script: … }"));

    let entry = format!(
        "    v1.33.6+k3s1: {{ binary: {}, images: {}, install_script: {} }}\n",
        "d".repeat(64),
        "e".repeat(64),
        "9ca7930c31179d83bc13de20078fd8ad3e1ee00875b31f39a7e524ca4ef7d9de"
    );
    let text = bumped.replace("    # K3s v1.33.5+k3s1, amd64.", &format!("{entry}    # K3s v1.33.5+k3s1, amd64."));
    no_warnings(&valid(&text));

    let old_url = "https://github.com/k3s-io/k3s/releases/download/v1.33.5%2Bk3s1/k3s";
    for (given, shown) in [
        (format!("url: \"{old_url}\""), old_url),
        (
            "url: \"https://mirror.example/k3s/v1.33.5-k3s1/k3s\"".to_string(),
            "https://mirror.example/k3s/v1.33.5-k3s1/k3s",
        ),
        ("path: \"bundle/v1.33.5+k3s1/k3s\"".to_string(), "bundle/v1.33.5+k3s1/k3s"),
    ] {
        let with = text.replace("k3s_airgap:\n", &format!("k3s_airgap:\n  binary: {{ {given} }}\n"));
        let d = errors(&with);
        assert_eq!(d.len(), 1, "{:?}", messages(&d));
        let e = expect_one(
            &d,
            "topology::k3s-airgap",
            &format!("`{shown}` is K3s v1.33.5+k3s1's, but versions.k3s is v1.33.6+k3s1"),
            pos(&with, "\nk3s_airgap:", &format!("\"{shown}")),
        );
        let help = e.problem.help.unwrap();
        if given.starts_with("url") {
            assert!(help.contains("remove `url:` to take v1.33.6+k3s1's own file (https://github.com/k3s-io/k3s/releases/download/v1.33.6%2Bk3s1/k3s)"), "{help}");
        } else {
            assert!(help.contains("point the path at K3s v1.33.6+k3s1's k3s"), "{help}");
        }
    }

    // The old digests under the new release's key (a renamed key): fabric knows whose they are.
    let renamed = bumped.replace("    v1.33.5+k3s1:\n", "    v1.33.6+k3s1:\n");
    let d = errors(&renamed);
    assert_eq!(d.len(), 2, "{:?}", messages(&d));
    for (asset, digest) in [("k3s", "ba2bc689"), ("k3s-airgap-images-amd64.tar.zst", "c1d71ab8")] {
        let e = expect_one(
            &d,
            "topology::k3s-airgap",
            &format!("this is the digest of K3s v1.33.5+k3s1's {asset}, recorded here for v1.33.6+k3s1"),
            pos(&renamed, "\nk3s_airgap:", digest),
        );
        assert!(
            e.problem.help.unwrap().contains(&format!("`{asset}` line of the sha256sum-amd64.txt of K3s v1.33.6+k3s1"))
        );
    }
}

/// Bad digests (issue 37's last paragraph), each refused at its line with what to write instead;
/// so are a digest beside its file (the shape before digests were keyed by release), a key that
/// is no release, and a `versions.k3s` the release files cannot follow.
#[test]
fn a_digest_is_64_lowercase_hex_digits_under_its_release() {
    let k3s = "ba2bc6892347d5ddf7d9a1f50b4d6fe73c6c325eb16894aa95993ac143096725";
    for (bad, says, fix) in [
        (k3s[..63].to_string(), "63 characters, where a SHA-256 has 64 hex digits", "copy the whole digest"),
        (format!("sha256:{k3s}"), "it has a `sha256:` prefix", "write the 64 hex digits alone"),
        (k3s.to_uppercase(), "it has uppercase digits", "write it in lowercase"),
        (format!("{}z", &k3s[..63]), "`z` is no hex digit", "(0-9, a-f)"),
    ] {
        let text = EXAMPLE.replace(&format!("binary: {k3s}"), &format!("binary: \"{bad}\""));
        let d = errors(&text);
        assert_eq!(d.len(), 1, "{:?}", messages(&d));
        let e = expect_one(&d, "topology::k3s-airgap", says, pos(&text, "\nk3s_airgap:", &format!("\"{bad}\"")));
        let help = e.problem.help.unwrap();
        assert!(
            help.contains(fix) && help.contains("the `k3s` line of the sha256sum-amd64.txt of K3s v1.33.5+k3s1"),
            "{help}"
        );
    }

    let text = EXAMPLE.replace("k3s_airgap:\n", &format!("k3s_airgap:\n  binary: {{ sha256: {k3s} }}\n"));
    let e = expect_one(
        &errors(&text),
        "topology::k3s-airgap",
        "`k3s_airgap.binary` takes no `sha256`",
        pos(&text, "  binary: { sha256: ", k3s),
    );
    assert!(e.problem.help.unwrap().contains(&format!("`digests: {{ \"v1.33.5+k3s1\": {{ binary: {k3s}, … }} }}`")));

    let text = EXAMPLE.replace("    v1.33.5+k3s1:\n", "    \"1.33.5\":\n");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::k3s-airgap",
        "`1.33.5` is not a K3s release tag",
        pos(&text, "\nk3s_airgap:", "\"1.33.5\""),
    );
    expect_one(
        &d,
        "topology::k3s-airgap",
        "no digests are recorded for K3s v1.33.5+k3s1",
        pos(&text, "\nk3s_airgap:", "digests"),
    );

    let text =
        EXAMPLE.replace("  k3s: v1.33.5+k3s1", "  k3s: 1.33.5").replace("    v1.33.5+k3s1:\n", "    v1.33.6+k3s1:\n");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::k3s-airgap",
        "`1.33.5` is not a K3s release tag, so the release files k3s_airgap takes by it (binary, images, install_script) have no URL",
        pos(&text, "", "1.33.5\n"),
    );
}

#[test]
fn decisions_are_consistent() {
    let text = mutate("", "sp: dynamic", "sp: fixed");
    expect_one(
        &errors(&text),
        "topology::decision",
        "`sp` has a fixed public address but",
        pos(&text, "  - name: sp\n", "router"),
    );
    let text = mutate("", "franca: fixed", "franca: dynamic");
    expect_one(&errors(&text), "topology::decision", "no site can be dialed", pos(&text, "", "public_address:\n"));
}

/// A `k3s_airgap.digests` entry for `release` with these digests.
fn digests(release: &str, binary: &str, images: &str, script: &str) -> String {
    format!("  digests:\n    \"{release}\": {{ binary: {binary}, images: {images}, install_script: {script} }}\n")
}

/// The air-gap bundle: digests, the images tarball's name, mirror URLs, each at its line.
#[test]
fn the_k3s_bundle_is_checked() {
    let good = "a".repeat(64);
    let bundle = |bin: &str, images: &str, endpoint: &str| {
        format!(
            "{}\nk3s_airgap:\n  binary: {{ path: b/k3s }}\n  images: {{ path: {images} }}\n  \
             install_script: {{ path: b/install.sh }}\n{}  registry_mirrors:\n    - {{ registry: docker.io, endpoints: [\"{endpoint}\"] }}\n",
            example_without_bundle(),
            digests("v1.33.5+k3s1", bin, &"b".repeat(64), &"c".repeat(64)),
        )
    };
    let l = valid(&bundle(&good, "b/k3s-airgap-images-amd64.tar.zst", "https://m.example:5000"));
    assert!(l.warnings.is_empty(), "{:?}", messages(&l.warnings));
    let text = bundle("ABC", "b/images.zip", "ftp://m");
    let d = errors(&text);
    expect_one(&d, "topology::k3s-airgap", "`ABC` is not a SHA-256", pos(&text, "k3s_airgap:", "ABC"));
    expect_one(
        &d,
        "topology::k3s-airgap",
        "K3s does not import `b/images.zip`",
        pos(&text, "k3s_airgap:", "b/images.zip"),
    );
    expect_one(&d, "topology::k3s-airgap", "`ftp://m` is not an http(s) URL", pos(&text, "k3s_airgap:", "\"ftp://m\""));
}

/// A bundle file by URL: at most one of `path` and `url` (neither is the release's own file), an
/// http(s) URL that parses, each problem at its line, and a URL's credentials never in a message.
#[test]
fn a_k3s_bundle_file_has_one_path_or_url() {
    let good = "a".repeat(64);
    let bundle = |binary: &str, images: &str| {
        format!(
            "{}\nk3s_airgap:\n  binary: {{ {binary} }}\n  images: {{ {images} }}\n  \
             install_script: {{ url: \"https://get.k3s.example/install.sh\" }}\n{}",
            example_without_bundle(),
            digests("v1.33.5+k3s1", &good, &"b".repeat(64), &"c".repeat(64)),
        )
    };
    let release = "https://github.com/k3s-io/k3s/releases/download/v1.33.5%2Bk3s1";
    let l = valid(&bundle(
        &format!("url: \"{release}/k3s\""),
        &format!("url: \"https://u:pw@mirror.example/k3s/{}\"", "k3s-airgap-images-amd64.tar.zst"),
    ));
    assert!(l.warnings.is_empty(), "{:?}", messages(&l.warnings));
    // Neither: the release's own file.
    let l = valid(&bundle("", ""));
    assert!(l.warnings.is_empty(), "{:?}", messages(&l.warnings));
    let text = bundle("path: b/k3s, url: \"https://m.example/k3s\"", "");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::k3s-airgap",
        "`k3s_airgap.binary` has both `path` and `url`",
        pos(&text, "", "\"https://m.example/k3s\""),
    );
    assert_eq!(d.len(), 1, "{:?}", messages(&d));
    let text = bundle("url: \"ftp://m.example/k3s\"", "url: \"https://user:s3cret@m example/images.tar\"");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::k3s-airgap",
        "`ftp://m.example/k3s` is not an http:// or https:// URL",
        pos(&text, "", "\"ftp://"),
    );
    let e = expect_one(
        &d,
        "topology::k3s-airgap",
        "`https://m example/images.tar` does not parse as a URL",
        pos(&text, "", "\"https://user"),
    );
    assert!(d.iter().all(|d| !d.problem.message.contains("s3cret")), "{:?}", messages(&d));
    assert!(e.problem.help.as_deref().is_some_and(|h| h.contains("https://")));
    let text = bundle("", "url: \"https://m.example/images.zip?x=1\"");
    expect_one(
        &errors(&text),
        "topology::k3s-airgap",
        "K3s does not import `https://m.example/images.zip?x=1`",
        pos(&text, "", "\"https://m.example/images.zip"),
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = EXAMPLE
        .replace("name: pve-ippri-34", "name: PVE_ippri-34")
        .replace("class: web-services, port: 7007", "class: web-service, port: 7007")
        .replace("pod_cidr: 10.44.0.0/16", "pod_cidr: 10.42.128.0/17")
        .replace("kueue: 0.15.2", "kueue: 0.14.0")
        .replace("weight: 20", "weight: -1");
    let d = errors(&text);
    let codes: Vec<&str> = d.iter().map(|d| d.problem.code).collect();
    for want in ["topology::name", "topology::reference", "topology::overlap", "topology::version", "topology::weight"]
    {
        assert!(codes.contains(&want), "{want} missing from {codes:?}");
    }
    // Structural problems are all reported too.
    let text = EXAMPLE
        .replace("    lan: 192.168.2.0/23", "    lna: 192.168.2.0/23")
        .replace("listen_port: 51820", "listen_port: 99999");
    let d = errors(&text);
    assert_eq!(d.iter().filter(|d| d.problem.code == "topology::range").count(), 2, "{:?}", messages(&d));
    assert_eq!(d.iter().filter(|d| d.problem.code == "topology::unknown-key").count(), 1);
    assert!(d.iter().all(|d| d.problem.severity == Severity::Error));
}

#[test]
fn placement_rules() {
    let text = mutate("", "    prefer: franca\n", "");
    expect_one(
        &errors(&text),
        "topology::placement",
        "has affinity but no preferred site",
        pos(&text, "data-services", "affinity"),
    );
    let text = mutate("", "    failover: true", "    failover: false");
    let d = errors(&text);
    assert_eq!(
        d.iter().filter(|d| d.problem.message.contains("Karmada failover is off")).count(),
        2,
        "{:?}",
        messages(&d)
    );
    let text = mutate("", "    sites: [franca, sp]\n    weights", "    sites: [franca]\n    weights");
    let d = errors(&text);
    assert!(
        d.iter().any(|d| d.problem.message == "service `vllm` does not run at `sp` (class `gpu-services`)"),
        "{:?}",
        messages(&d)
    );
}

#[test]
fn undecided_decisions_are_warnings_at_load() {
    let text = mutate("", "argocd: single", "argocd: undecided");
    let l = valid(&text);
    // The loader itself accepts open decisions; validate and plan name them.
    no_warnings(&l);
}

#[test]
fn hostile_values_never_reach_a_shell() {
    // Everything that reaches a remote command is validated first: names are DNS labels,
    // interfaces are interface names, addresses are parsed; whatever else reaches a command
    // (paths, holders) is quoted by `transport::shell` (tested there against a real sh).
    for (from, to, code) in [
        ("interface: wg0", "interface: \"wg0; reboot\"", "topology::name"),
        ("name: vyos-sp", "name: \"sp$(reboot)\"", "topology::name"),
        ("name: debian-proxy", "name: \"proxy`id`\"", "topology::name"),
        ("lan: 192.168.2.0/23", "lan: \"192.168.2.0/23; rm -rf /\"", "topology::address"),
        (
            "name: gpu-batch\n        gpu_quota: 2",
            "name: \"gpu-batch && halt\"\n        gpu_quota: 2",
            "topology::name",
        ),
    ] {
        let text = if from == "interface: wg0" { EXAMPLE.replacen(from, to, 1) } else { mutate("", from, to) };
        assert_ne!(text, EXAMPLE, "{from}");
        let d = errors(&text);
        assert!(d.iter().any(|d| d.problem.code == code), "{to}: {:?}", messages(&d));
    }
    // VyOS interface names are wgN.
    let text = EXAMPLE.replacen("interface: wg0", "interface: tun0", 1);
    let d = errors(&text);
    assert!(d.iter().any(|d| d.problem.message == "`tun0` is not a valid interface name"), "{:?}", messages(&d));
}

/// A router's recorded WireGuard key must be a key (its value is not repeated in the message);
/// the tunnel MTU stays in 1280–9000.
#[test]
fn wireguard_public_key_and_mtu() {
    const KEY: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
    let good = mutate(
        "",
        "address: 10.0.0.1/30",
        &format!("address: 10.0.0.1/30\n        public_key: {KEY}\n        mtu: 1412"),
    );
    let l = valid(&good);
    assert_eq!(l.topology.sites[0].router.wireguard.public_key.as_ref().unwrap().to_string(), KEY);
    assert_eq!(l.topology.sites[0].router.wireguard.tunnel_mtu(), 1412);
    assert_eq!(l.topology.sites[1].router.wireguard.tunnel_mtu(), 1420);

    let bad = mutate("", "address: 10.0.0.1/30", "address: 10.0.0.1/30\n        public_key: not-a-key-at-all");
    let d = errors(&bad);
    let one = expect_one(
        &d,
        "topology::wireguard-key",
        "is not a WireGuard public key",
        pos(&bad, "public_key:", "not-a-key"),
    );
    assert!(!one.problem.message.contains("not-a-key-at-all"), "{}", one.problem.message);
    // 43 characters, or 44 that are not canonical base64: not a key either.
    for k in [&KEY[..43], "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dh="] {
        let bad = mutate("", "address: 10.0.0.1/30", &format!("address: 10.0.0.1/30\n        public_key: {k}"));
        expect_one(&errors(&bad), "topology::wireguard-key", "public_key", pos(&bad, "public_key:", k));
    }

    let bad = mutate("", "address: 10.0.0.1/30", "address: 10.0.0.1/30\n        mtu: 1500000");
    assert!(errors(&bad).iter().any(|d| d.problem.code == "topology::range"), "{:?}", messages(&errors(&bad)));
    let bad = mutate("", "address: 10.0.0.1/30", "address: 10.0.0.1/30\n        mtu: 576");
    assert!(errors(&bad).iter().any(|d| d.problem.code == "topology::range"), "{:?}", messages(&errors(&bad)));
}

/// The example's vLLM line with `fields` instead of its sharing form.
fn vllm_with(fields: &str) -> String {
    mutate("services:\n", "gpu_fraction: 0.5, queue: gpu-interactive", fields)
}

#[test]
fn gpu_sharing_rules_point_at_the_field() {
    for bad in ["gpu_fraction: 0", "gpu_fraction: 1.5", "gpu_fraction: -0.5"] {
        let text = vllm_with(&format!("{bad}, queue: gpu-interactive"));
        let at = pos(&text, "name: vllm", "gpu_fraction: ");
        expect_one(&errors(&text), "topology::gpu-sharing", "is outside (0, 1]", (at.0, at.1 + "gpu_fraction: ".len()));
    }
    // Both forms at once.
    let text = vllm_with("gpu_fraction: 0.5, gpu_memory_mib: 1024, queue: gpu-interactive");
    let at = pos(&text, "name: vllm", "gpu_memory_mib: ");
    expect_one(&errors(&text), "topology::gpu-sharing", "a GPU fraction and an amount", (at.0, at.1 + 16));
    // Whole GPUs and a share.
    let text = vllm_with("gpus: 1, gpu_fraction: 0.5, queue: gpu-interactive");
    let at = pos(&text, "name: vllm", "gpus: ");
    expect_one(&errors(&text), "topology::gpu-sharing", "whole GPUs and a shared one", (at.0, at.1 + 6));
    // Sharing needs a queue.
    let text = vllm_with("gpu_fraction: 0.5");
    let at = pos(&text, "name: vllm", "gpu_fraction: ");
    expect_one(&errors(&text), "topology::gpu-sharing", "names no `queue`", (at.0, at.1 + 14));
    // More memory than one of the site's GPUs (24 GiB = 24576 MiB).
    let text = vllm_with("gpu_memory_mib: 24577, queue: gpu-interactive");
    let at = pos(&text, "name: vllm", "gpu_memory_mib: ");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::gpu-sharing",
        "24577 MiB of one GPU, but a a5500 at site `franca` has 24576",
        (at.0, at.1 + 16),
    );
    expect_one(&d, "topology::gpu-sharing", "a a5000 at site `sp` has 24576", (at.0, at.1 + 16));
    let text = vllm_with("gpu_memory_mib: 24576, queue: gpu-interactive");
    assert!(
        !errors(&text).iter().any(|d| d.problem.code == "topology::gpu-sharing"),
        "a whole GPU's memory is allowed"
    );
    // A queue the site does not have, and the MultiKueue queue (no GPUs at the manager).
    let text = vllm_with("gpu_fraction: 0.5, queue: gpu-nope");
    let at = pos(&text, "name: vllm", "gpu-nope");
    let d = errors(&text);
    expect_one(&d, "topology::reference", "queue `gpu-nope` does not exist at site `franca`", at);
    expect_one(&d, "topology::reference", "queue `gpu-nope` does not exist at site `sp`", at);
    let text = vllm_with("queue: gpu-interactive");
    expect_one(
        &errors(&text),
        "topology::gpu-sharing",
        "names a queue but asks for no GPU",
        pos(&text, "name: vllm", "gpu-interactive"),
    );
    let text = vllm_with("gpu_fraction: 0.5, queue: gpu-batch");
    expect_one(&errors(&text), "topology::gpu-sharing", "dispatches batch Jobs", pos(&text, "name: vllm", "gpu-batch"));
}

#[test]
fn sharing_where_kai_is_not_installed() {
    let text = mutate("", "  kai_scheduler: v0.10.2          # GPU sharing inside a node (D.5)\n", "");
    let at = pos(&text, "name: vllm", "gpu_fraction: ");
    let d = errors(&text);
    expect_one(&d, "topology::gpu-sharing", "`vllm` needs KAI Scheduler at site `franca`", (at.0, at.1 + 14));
    let whisper = pos(&text, "name: whisper", "gpu_memory_mib: ");
    expect_one(&d, "topology::gpu-sharing", "`whisper` needs KAI Scheduler at site `sp`", (whisper.0, whisper.1 + 16));
}

#[test]
fn gpu_services_that_do_not_fit_their_sites() {
    // The example as it was: four services with one whole GPU per replica, one replica per site,
    // on the GPUs no queue holds: at sp 3 GPUs less 3 of quota, none fits; at franca neither (its
    // gpu-batch queue dispatches to sp and holds none of its GPUs, but gpu-batch-local, its own
    // batch queue, holds 2).
    let mut text = EXAMPLE.to_string();
    for form in ["gpu_fraction: 0.5", "gpu_memory_mib: 4096", "gpu_memory_mib: 4096", "gpu_memory_mib: 2048"] {
        text = text.replacen(&format!("{form}, queue: gpu-interactive"), "gpus: 1", 1);
    }
    let d = errors(&text);
    let at = pos(&text, "name: vllm", "gpus: ");
    let e = expect_one(&d, "topology::gpu-capacity", "`vllm` does not fit at site `sp`", (at.0, at.1 + 6));
    assert!(
        e.problem.message.contains("the 0 GPU(s) of site `sp` that no queue's quota holds"),
        "{}",
        e.problem.message
    );
    let at = pos(&text, "name: docling", "gpus: ");
    expect_one(&d, "topology::gpu-capacity", "`docling` does not fit at site `franca`", (at.0, at.1 + 6));
    assert_eq!(d.iter().filter(|d| d.problem.code == "topology::gpu-capacity").count(), 8, "{:?}", messages(&d));
    // In the interactive queue (1 GPU per site): one whole-GPU service fits, the next does not.
    let text = vllm_with("gpus: 1, queue: gpu-interactive");
    let d = errors(&text);
    let at = pos(&text, "name: whisper", "gpu_memory_mib: ");
    let d1 = expect_one(&d, "topology::gpu-capacity", "`whisper` does not fit at site `franca`", (at.0, at.1 + 16));
    assert!(d1.problem.message.contains("queue `gpu-interactive`'s quota of 1 GPU(s)"), "{}", d1.problem.message);
    assert!(!d.iter().any(|x| x.problem.message.contains("`vllm` does not fit")), "{:?}", messages(&d));
    // Shares add up on a device: 0.5 + 3 × 0.25 is more than one GPU.
    let text = EXAMPLE
        .replace("gpu_memory_mib: 4096", "gpu_fraction: 0.25")
        .replace("gpu_memory_mib: 2048", "gpu_fraction: 0.25");
    let at = pos(&text, "name: bge-m3", "gpu_fraction: ");
    expect_one(&errors(&text), "topology::gpu-capacity", "`bge-m3` does not fit at site `sp`", (at.0, at.1 + 14));
    // Raising the queue's quota (and lowering the batch queues', within the site's 3 GPUs) makes
    // it fit.
    let text = text.replace("gpu_quota: 1\n", "gpu_quota: 2\n").replacen(
        "gpu_quota: 2\n        local_queues: [{ name: batch",
        "gpu_quota: 1\n        local_queues: [{ name: batch",
        3,
    );
    let dispatching = "# the MultiKueue dispatching queue: Jobs in batch/batch run in SP (see multikueue below)\n        gpu_quota: 1";
    assert!(text.contains(dispatching));
    let l = valid(&text.replace(dispatching, "# x\n        gpu_quota: 1"));
    assert_eq!(l.topology.sites[0].queues[0].gpu_quota, 2);
}

#[test]
fn external_gpu_hosts_count_only_for_services_that_tolerate_their_taint() {
    // Whisper takes half a GPU: with vLLM's half, the interactive queue's one GPU is full, and
    // docling and bge-m3 do not fit. An a5500 on one of franca's external hosts is counted for
    // them only once they tolerate the hosts' taint.
    let host = "runs: [proxmox, linstor-satellite], ssh: { host: 192.168.0.41 } }";
    assert!(EXAMPLE.contains(host));
    let text = EXAMPLE
        .replace(
            host,
            "runs: [proxmox, linstor-satellite], gpu: { model: a5500, count: 1, memory_gib: 24 }, ssh: { host: 192.168.0.41 } }",
        )
        .replacen("gpu_memory_mib: 4096, queue: gpu-interactive", "gpu_fraction: 0.5, queue: gpu-interactive", 1);
    let d = errors(&text);
    let at = pos(&text, "name: docling", "gpu_memory_mib: ");
    let e = expect_one(&d, "topology::gpu-capacity", "`docling` does not fit at site `franca`", (at.0, at.1 + 16));
    assert!(e.problem.message.contains("1 GPU(s) of external hosts not counted"), "{}", e.problem.message);
    let tolerant = text
        .replace(
            "gpu_memory_mib: 4096, queue: gpu-interactive",
            "gpu_memory_mib: 4096, queue: gpu-interactive, tolerate_external: true",
        )
        .replace(
            "gpu_memory_mib: 2048, queue: gpu-interactive",
            "gpu_memory_mib: 2048, queue: gpu-interactive, tolerate_external: true",
        );
    let d = errors(&tolerant);
    let franca: Vec<String> = messages(&d).into_iter().filter(|m| m.contains("at site `franca`")).collect();
    assert!(franca.is_empty(), "{franca:?}");
    // SP has no external GPU host: there they still do not fit.
    let at = pos(&tolerant, "name: docling", "gpu_memory_mib: ");
    expect_one(&d, "topology::gpu-capacity", "`docling` does not fit at site `sp`", (at.0, at.1 + 16));
}

#[test]
fn an_in_place_migration_needs_ssh_on_every_node_of_the_cluster() {
    // Each node's migration runs on the node (its K3s, Flannel's interfaces and rules).
    let text = mutate("name: franca-gpu2", " ssh: { host: 192.168.0.22 },", "");
    let d = errors(&text);
    let one = expect_one(
        &d,
        "topology::decision",
        "node `franca-gpu2` has no `ssh`, but an in-place migration moves every node",
        pos(&text, "name: franca-gpu1", "{ name: franca-gpu2"),
    );
    assert!(one.problem.help.as_deref().unwrap_or_default().contains("ssh:"));
    // A new cluster needs it too (its server is installed, every other node moves at the cutover).
    let text = mutate("", "franca: in-place", "franca: new-cluster");
    let text = text.replacen(" ssh: { host: 192.168.0.22 },", "", 1);
    let d = errors(&text);
    expect_one(
        &d,
        "topology::decision",
        "node `franca-gpu2` has no `ssh`, but a new cluster is built on its server hosts",
        pos(&text, "name: franca-gpu1", "{ name: franca-gpu2"),
    );
    // The site's cluster on its own (not existing): no migration, so no such error; but A.1
    // installs every node of a new cluster, so the node without SSH can never join: that error.
    let text = mutate("", "      existing: true", "      existing: false");
    let text = text
        .replacen(" ssh: { host: 192.168.0.22 },", "", 1)
        .replace("  cluster_migration:\n    franca: in-place\n", "");
    let d = errors(&text);
    assert!(!d.iter().any(|d| d.problem.code == "topology::decision"), "{:?}", messages(&d));
    expect_one(
        &d,
        "topology::node",
        "node `franca-gpu2` of the new cluster `franca` has no `ssh`",
        pos(&text, "name: franca-gpu1", "{ name: franca-gpu2"),
    );
}

const MK_VM: &str = include_str!("data/multikueue-vm.yaml");

/// MultiKueue's manager may be Karmada's dedicated VM (tests/data/multikueue-vm.yaml), only
/// while Karmada runs there; any other name is an unknown reference, which lists the VM.
#[test]
fn the_multikueue_manager_is_a_site_or_karmadas_dedicated_vm() {
    let l = valid(MK_VM);
    no_warnings(&l);
    assert_eq!(l.topology.multikueue_vm().map(|vm| vm.name.as_str()), Some("karmada-vm"));
    // Franca's gpu-batch is then a queue of Franca's GPUs, counted against them as any other.
    let text = MK_VM.replacen("gpu_quota: 2\n", "gpu_quota: 3\n", 1);
    let d = errors(&text);
    assert!(
        d.iter().any(|d| d.problem.code == "topology::quota"
            && d.problem.message.contains("queues of site `franca` have 4 GPUs")),
        "{:?}",
        messages(&d)
    );

    let text = MK_VM.replace("karmada_host: dedicated-vm", "karmada_host: host-cluster");
    let d = errors(&text);
    let at = pos(&text, "multikueue:", "karmada-vm");
    let e = expect_one(&d, "topology::multikueue", "Karmada's VM `karmada-vm`, but Karmada does not run on it", at);
    assert!(e.problem.help.unwrap().contains("karmada_host: dedicated-vm"));

    let text = MK_VM.replace("manager: karmada-vm", "manager: karmada-box");
    let d = errors(&text);
    let e = expect_one(
        &d,
        "topology::reference",
        "no site or Karmada VM named `karmada-box`",
        pos(&text, "multikueue:", "karmada-box"),
    );
    assert!(e.problem.help.unwrap().contains("did you mean `karmada-vm`?"));
    // Without a VM, the VM's name is no manager either.
    let text = mutate("multikueue:", "manager: franca", "manager: karmada-vm");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::reference",
        "no site or Karmada VM named `karmada-vm`",
        pos(&text, "multikueue:", "karmada-vm"),
    );
    // The queue must exist at every worker; the VM's is made from theirs.
    let text = MK_VM.replacen("name: gpu-batch ", "name: gpu-bulk ", 1);
    let d = errors(&text);
    assert!(
        d.iter().any(|d| d.problem.message == "queue `gpu-batch` does not exist at site `franca`"),
        "{:?}",
        messages(&d)
    );
}

/// Issue #22 item 6: a node of a new cluster that fabric can never join is an error at the
/// node's line, saying why and what to add (one without `ssh`, when fabric installs the cluster
/// from `k3s_airgap`); without a bundle fabric installs no K3s at all, and each node is a warning
/// at its line (it joins only if K3s is put there by other means).
#[test]
fn a_node_of_a_new_cluster_fabric_cannot_join_is_an_error_at_its_line() {
    let text = mutate("name: pve-ippri-33", " ssh: { host: 192.168.2.43 },", "");
    let d = errors(&text);
    let e = expect_one(
        &d,
        "topology::node",
        "node `pve-ippri-33` of the new cluster `sp` has no `ssh`: fabric can never install K3s there and join it, so its 1 GPU(s) count in the site's capacity but never appear",
        pos(&text, "name: pve-ippri-31", "{ name: pve-ippri-33"),
    );
    assert!(e.problem.help.unwrap().contains("add `ssh: { host: … }`"));
    assert_eq!(d.iter().filter(|d| d.problem.severity == Severity::Error).count(), 1, "{:?}", messages(&d));
    // No bundle: fabric installs no node of the new cluster; each is a warning at its line.
    let text = example_without_bundle();
    let l = valid(text);
    for n in ["sp-cp1", "pve-ippri-31", "pve-ippri-33", "pve-ippri-34"] {
        let e = expect_one(
            &l.warnings,
            "topology::node",
            &format!("node `{n}` of the new cluster `sp` is never installed by fabric: there is no `k3s_airgap`"),
            pos(text, "  - name: sp\n", &format!("{{ name: {n},")),
        );
        assert!(e.problem.help.unwrap().contains("add `k3s_airgap:`"));
    }
    assert_eq!(l.warnings.len(), 4, "Franca's cluster exists: its nodes need no bundle: {:?}", messages(&l.warnings));
}

/// Issue #22 item 7: a StatefulSet keeps its data where it runs (Karmada does not propagate the
/// PVCs of `volumeClaimTemplates`), so a `statefulset` placed at two sites is an error at its
/// `workload`; what a service lists it is made of are object names, each checked at its line.
#[test]
fn a_statefulset_runs_at_one_site_and_its_parts_are_object_names() {
    let text =
        mutate("", "class: web-services, port: 7007 }", "class: web-services, port: 7007, workload: statefulset }");
    let e = expect_one(
        &errors(&text),
        "topology::placement",
        "StatefulSet `backstage` would run at franca and sp (web-services): each member makes its own empty volumes",
        pos(&text, "name: backstage", "statefulset"),
    );
    assert!(e.problem.help.unwrap().contains("strategy: affinity"));
    // The example's data services: affinity to Franca, one site.
    assert!(!messages(&valid(EXAMPLE).warnings).iter().any(|m| m.contains("StatefulSet")));
    let text = mutate(
        "",
        "port: 5432, workload: statefulset }",
        "port: 5432, workload: statefulset, configmaps: [pg-conf], secrets: [Bad_Secret] }",
    );
    expect_one(
        &errors(&text),
        "topology::name",
        "`Bad_Secret` is not a Kubernetes object name",
        pos(&text, "name: postgresql", "Bad_Secret"),
    );
    let text = mutate("", "port: 5432, workload: statefulset }", "port: 5432, workload: replicaset }");
    let d = errors(&text);
    assert!(d.iter().any(|d| d.problem.message.contains("replicaset")), "{:?}", messages(&d));
}

/// TensorZero refuses a variant that is both a candidate and a fallback
/// (tensorzero-core/src/experimentation/mod.rs `check_duplicates_across`): a route listed under
/// `fallback:` is refused at its line.
#[test]
fn a_gateway_route_listed_as_a_fallback_is_an_error_at_the_fallback() {
    let anchor = "        api_key: { secret: tensorzero-cloud, key: api_key }\n";
    let text = mutate("", anchor, &format!("{anchor}      fallback: [sp]\n"));
    let d = errors(&text);
    expect_one(
        &d,
        "topology::gateway",
        "`sp` is a route of `llama-3.1-70b` and a fallback too",
        pos(&text, "fallback: [", "sp"),
    );
}

/// A cloud model's `api_base` (an OpenAI-compatible endpoint): a URL TensorZero parses
/// (`parse_optional_url` in tensorzero-core/src/model.rs), without the path it appends
/// (`get_chat_url` in providers/openai/mod.rs), and without credentials, which would be written
/// into the gateway's ConfigMap; refused at its line, the credentials never repeated.
#[test]
fn a_cloud_api_base_is_checked_at_its_line() {
    let anchor = "        api_key: { secret: tensorzero-cloud, key: api_key }\n";
    let with = |base: &str| mutate("", anchor, &format!("{anchor}        api_base: \"{base}\"\n"));
    let ok = valid(&with("https://llm.example/v1"));
    let cloud = ok.topology.gateway.as_ref().unwrap().models[0].cloud.as_ref().unwrap();
    assert_eq!(cloud.api_base.as_deref(), Some("https://llm.example/v1"));
    for (base, msg) in [
        ("llm.example/v1", "is not an http:// or https:// URL"),
        ("https://llm.example/v1/chat/completions", "already ends with `/chat/completions`"),
        ("https://user:s3cret@llm.example/v1", "carries credentials"),
    ] {
        let text = with(base);
        let d = errors(&text);
        let e = expect_one(&d, "topology::gateway", msg, pos(&text, "api_base:", "\""));
        assert!(!e.problem.message.contains("s3cret"), "{}", e.problem.message);
    }
}

/// Rate limits: only `<model_inferences|tokens>_per_<second…month>` (TensorZero's
/// `parse_resource` and `RateLimitInterval`), positive; a token limit needs `max_tokens`.
#[test]
fn gateway_rate_limits_are_checked_at_their_lines() {
    let text = mutate("rate_limit:", "model_inferences_per_minute: 30", "requests_per_minute: 30");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::gateway",
        "`requests_per_minute` is no TensorZero rate limit",
        pos(&text, "requests_per_minute", "30"),
    );
    let text = mutate("rate_limit:", "model_inferences_per_minute: 30", "model_inferences_per_minute: 0");
    let d = errors(&text);
    expect_one(&d, "topology::gateway", "refuses every request", pos(&text, "model_inferences_per_minute: 0", "0"));
    let text = mutate("rate_limit:", "    max_tokens: 2048", "    # no max_tokens");
    let d = errors(&text);
    expect_one(
        &d,
        "topology::gateway",
        "`tokens_per_hour` without `max_tokens`",
        pos(&text, "tokens_per_hour", "200000"),
    );
    let text = mutate("rate_limit:", "secret: tensorzero-postgres", "secret: Tensorzero_Postgres");
    let d = errors(&text);
    expect_one(&d, "topology::gateway", "is no Secret name", pos(&text, "rate_limit:", "Tensorzero_Postgres"));
}

/// Issue 22, item 3: Kueue admits a Job only when its queue covers every resource it asks, so
/// each queue covers cpu and memory, derived from the GPU nodes' `allocatable` unless the queue
/// sets them: a GPU node that does not say is an error at its name, with the queue as the
/// related place.
#[test]
fn a_queue_needs_cpu_and_memory_from_its_nodes_or_its_own() {
    let text = mutate("  - name: sp\n", ", allocatable: { cpus: 16, memory_gib: 62 }", "");
    let d = errors(&text);
    let at = pos(&text, "- { name: pve-ippri-31", "pve-ippri-31");
    let e = expect_one(&d, "topology::queue-resources", "GPU node `pve-ippri-31` does not say its allocatable", at);
    assert!(e.problem.message.contains("queue `gpu-interactive`'s quotas"), "{}", e.problem.message);
    assert!(e.problem.help.as_deref().unwrap_or_default().contains("allocatable: { cpus: N, memory_gib: M }"));
    // The queues' own quotas instead: valid.
    let own = text.replace(
        "      - name: gpu-batch\n        gpu_quota: 2\n        local_queues: [{ name: batch, namespace: batch }]\n\nmesh",
        "      - name: gpu-batch\n        gpu_quota: 2\n        cpu_quota: 24\n        memory_gib_quota: 96\n        local_queues: [{ name: batch, namespace: batch }]\n\nmesh",
    );
    let own = own.replacen(
        "        gpu_quota: 1\n        local_queues: [{ name: interactive, namespace: ai }]\n      - name: gpu-batch\n        gpu_quota: 2\n        cpu",
        "        gpu_quota: 1\n        cpu_quota: 8\n        memory_gib_quota: 32\n        local_queues: [{ name: interactive, namespace: ai }]\n      - name: gpu-batch\n        gpu_quota: 2\n        cpu",
        1,
    );
    assert_ne!(own, text);
    valid(&own);
}

/// The site's queues may not guarantee more cpu or memory than its GPU nodes offer (3 × 16
/// cores at SP): reported once, at the `cpu_quota` that goes over.
#[test]
fn queue_cpu_beyond_the_nodes() {
    let text = mutate(
        "  - name: sp\n",
        "      - name: gpu-batch\n        gpu_quota: 2\n",
        "      - name: gpu-batch\n        gpu_quota: 2\n        cpu_quota: 40\n",
    );
    let d = errors(&text);
    let at = pos(&text, "cpu_quota: 40", "40");
    let e = expect_one(&d, "topology::queue-resources", "queues of site `sp` guarantee 56 cores of cpu", at);
    assert!(e.problem.message.contains("its GPU nodes offer 48 cores"), "{}", e.problem.message);
}

/// Issue 22, item 8: a GPU site as MultiKueue's manager whose dispatching queue's namespace has
/// no local queue there sends every batch Job away: a warning at `multikueue.manager`.
#[test]
fn a_gpu_manager_without_a_local_batch_queue_is_warned() {
    let text = mutate(
        "",
        "      - name: gpu-batch-local   # Franca's own batch GPUs: Jobs in LocalQueue batch/batch-local run here\n        gpu_quota: 2\n        local_queues: [{ name: batch-local, namespace: batch }]\n",
        "",
    );
    let l = valid(&text);
    let w: Vec<_> = l.warnings.iter().filter(|d| d.problem.code == "topology::multikueue-local").collect();
    assert_eq!(w.len(), 1, "{:?}", messages(&l.warnings));
    assert!(w[0].problem.message.contains("every Job of namespace `batch` at `franca` goes to the workers (sp)"));
    assert_eq!((w[0].line, w[0].column), pos(&text, "multikueue:\n  manager: ", "franca"));
    assert!(w[0].problem.help.as_deref().unwrap_or_default().contains("`batch-local`"));
}
