//! Self-test of `crates/testkit/src/vyos_spec.rs`: the VyOS interface-definition checker.

use fabric_testkit::vyos_spec;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use vyos_spec::{IMPLEMENTED_VALIDATORS, VyosSpec};

fn spec() -> &'static VyosSpec {
    static SPEC: OnceLock<VyosSpec> = OnceLock::new();
    SPEC.get_or_init(|| VyosSpec::from_shared().unwrap_or_else(|e| panic!("{e}")))
}

#[track_caller]
fn accepts(command: &str) {
    if let Err(e) = spec().check(command) {
        panic!("`{command}` was rejected: {e}");
    }
}

/// Asserts the command is rejected and the message contains every `needle`; returns the message.
#[track_caller]
fn rejects(command: &str, needles: &[&str]) -> String {
    match spec().check(command) {
        Ok(()) => panic!("`{command}` was accepted, expected an error containing {needles:?}"),
        Err(e) => {
            for needle in needles {
                assert!(e.contains(needle), "error for `{command}` lacks {needle:?}:\n{e}");
            }
            e
        }
    }
}

/// The commands fabric emits for one side of a WireGuard site-to-site link (VyOS 1.4+ syntax).
const SITE_TO_SITE: &[&str] = &[
    "set interfaces wireguard wg0 address '10.0.0.1/30'",
    "set interfaces wireguard wg0 description 'fabric: site-to-site'",
    "set interfaces wireguard wg0 port '51820'",
    "set interfaces wireguard wg0 peer sp public-key 'ZmFrZWtleWZha2VrZXlmYWtla2V5ZmFrZWtleTAwMDA='",
    "set interfaces wireguard wg0 peer sp allowed-ips '192.168.2.0/23'",
    "set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.2/32'",
    "set interfaces wireguard wg0 peer sp address '203.0.113.7'",
    "set interfaces wireguard wg0 peer sp port '51820'",
    "set interfaces wireguard wg0 peer sp persistent-keepalive '25'",
    "set protocols static route 192.168.2.0/23 next-hop 10.0.0.2",
    "set protocols static route 192.168.2.0/23 interface wg0",
    "set system config-management commit-confirm action 'reload'",
    "delete interfaces wireguard wg0 peer sp",
];

// ---------------------------------------------------------------------------------------------
// Loading

#[test]
fn loads_every_definition_file_in_the_directory() {
    let spec = spec();
    let on_disk = std::fs::read_dir(VyosSpec::shared_dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".xml.in"))
        .count();
    // shared/specs/SOURCES.md: "123 `*.xml.in` and 573 `include/**/*.xml.i` files".
    assert_eq!(on_disk, 123);
    assert_eq!(spec.files_loaded().len(), on_disk, "skipped: {:?}", spec.warnings());
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    for file in ["interfaces_wireguard.xml.in", "protocols_static.xml.in", "system_config-management.xml.in"] {
        assert!(spec.files_loaded().iter().any(|f| f == file), "{file} not loaded");
    }
    assert!(spec.has_path(&["interfaces", "wireguard", "peer", "public-key"]));
    assert!(spec.has_path(&["protocols", "static", "route", "next-hop"]));
    assert!(spec.has_path(&["protocols", "static", "route", "interface"]));
    assert!(!spec.has_path(&["interfaces", "wireguard", "peer", "pubkey"]));
    let top = spec.top_level();
    for name in ["interfaces", "protocols", "system", "service", "firewall", "vpn", "nat"] {
        assert!(top.contains(&name), "top level lacks {name}: {top:?}");
    }
}

#[test]
fn trees_from_several_files_are_merged() {
    let spec = spec();
    // `protocols static` is defined by four files; each adds its own subtree.
    for child in ["route", "route6", "table", "arp", "multicast", "neighbor-proxy"] {
        assert!(spec.has_path(&["protocols", "static", child]), "protocols static {child} missing");
    }
    let files = &spec.schema_node(&["protocols", "static"]).unwrap().files;
    for file in [
        "protocols_static.xml.in",
        "protocols_static_arp.xml.in",
        "protocols_static_multicast.xml.in",
        "protocols_static_neighbor-proxy.xml.in",
    ] {
        assert!(files.contains(file), "{file} not merged into protocols static: {files:?}");
    }
    // `interfaces` collects every interfaces_*.xml.in.
    let interfaces = spec.schema_node(&["interfaces"]).unwrap();
    assert!(interfaces.children.len() >= 20, "{:?}", interfaces.children.keys());
    // The include files were inlined: port-number.xml.i gives the peer its `port`.
    let port = spec.schema_node(&["interfaces", "wireguard", "peer", "port"]).unwrap();
    assert_eq!(port.properties.constraint_error_message.as_deref(), Some("Port number must be in range 1 to 65535"));
    // A later `<leafNode name="mtu">` that only overrides the default keeps the included constraint.
    let mtu = spec.schema_node(&["interfaces", "wireguard", "mtu"]).unwrap();
    assert_eq!(mtu.properties.constraint_error_message.as_deref(), Some("MTU must be between 68 and 16000"));
}

#[test]
fn system_config_management_is_present_in_the_copied_specs() {
    let dir = VyosSpec::shared_dir();
    assert!(dir.join("system_config-management.xml.in").is_file());
    assert!(spec().has_path(&["system", "config-management", "commit-confirm", "action"]));
    accepts("set system config-management commit-confirm action 'reload'");
    accepts("set system config-management commit-confirm action reboot");
    rejects(
        "set system config-management commit-confirm action 'restart'",
        &["value 'restart'", "regex '(reload|reboot)' does not match"],
    );
}

#[test]
fn only_lookaround_regexes_fail_to_compile_and_none_on_fabric_paths() {
    let failures = VyosSpec::regex_compile_failures(spec());
    assert_eq!(failures.len(), 17, "{failures:#?}");
    assert!(failures.iter().all(|f| f.starts_with("service dns forwarding") && f.contains("look-around")));
}

#[test]
fn load_reports_a_missing_directory() {
    let missing = Path::new("/nonexistent/vyos/interface-definitions");
    let err = VyosSpec::load(missing).unwrap_err();
    assert!(err.contains("/nonexistent/vyos/interface-definitions") && err.contains("does not exist"), "{err}");
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vyos_spec_selftest_{}_{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("include")).unwrap();
    dir
}

const MINI_WG: &str = r#"<?xml version="1.0"?>
<interfaceDefinition>
  <node name="interfaces">
    <children>
      <tagNode name="wireguard">
        <properties>
          <constraint><regex>wg[0-9]+</regex></constraint>
        </properties>
        <children>
          #include <include/port.xml.i>
        </children>
      </tagNode>
    </children>
  </node>
</interfaceDefinition>
"#;

const MINI_PORT: &str = r#"<leafNode name="port">
  <properties>
    <constraint><validator name="numeric" argument="--range 1-65535"/></constraint>
  </properties>
</leafNode>
"#;

const MINI_STATIC: &str = r#"<?xml version="1.0"?>
<interfaceDefinition>
  <node name="protocols">
    <children>
      <node name="static">
        <children>
          <tagNode name="route">
            <properties><constraint><validator name="ipv4-prefix"/></constraint></properties>
          </tagNode>
        </children>
      </node>
    </children>
  </node>
</interfaceDefinition>
"#;

#[test]
fn load_skips_broken_files_with_a_warning_and_reports_missing_definitions() {
    let dir = scratch_dir("broken");
    std::fs::write(dir.join("include/port.xml.i"), MINI_PORT).unwrap();
    std::fs::write(dir.join("interfaces_wireguard.xml.in"), MINI_WG).unwrap();
    std::fs::write(dir.join("protocols_static.xml.in"), MINI_STATIC).unwrap();
    std::fs::write(
        dir.join("bad_include.xml.in"),
        "<interfaceDefinition>\n#include <include/nope.xml.i>\n</interfaceDefinition>\n",
    )
    .unwrap();
    std::fs::write(dir.join("bad_xml.xml.in"), "<interfaceDefinition><node name=\"x\">\n").unwrap();
    std::fs::write(dir.join("ignored.txt"), "not a definition").unwrap();

    let spec = VyosSpec::load(&dir).unwrap();
    assert_eq!(spec.files_loaded(), ["interfaces_wireguard.xml.in", "protocols_static.xml.in"]);
    assert_eq!(spec.warnings().len(), 2, "{:?}", spec.warnings());
    assert!(spec.warnings()[0].starts_with("bad_include.xml.in: skipped") && spec.warnings()[0].contains("nope.xml.i"));
    assert!(spec.warnings()[1].starts_with("bad_xml.xml.in: skipped: XML parse error"), "{:?}", spec.warnings());
    assert!(spec.check("set interfaces wireguard wg1 port 1").is_ok());
    assert!(
        spec.check("set interfaces wireguard wg1 port 0")
            .unwrap_err()
            .contains("Number is not in any of allowed ranges")
    );

    // Without the static-route definitions, load says what is missing.
    std::fs::remove_file(dir.join("protocols_static.xml.in")).unwrap();
    let err = VyosSpec::load(&dir).unwrap_err();
    assert!(err.contains("lack `protocols static route` (from protocols_static.xml.in)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// What fabric emits

#[test]
fn accepts_the_wireguard_site_to_site_commands() {
    for command in SITE_TO_SITE {
        accepts(command);
    }
    assert!(spec().check_lines(&SITE_TO_SITE.join("\n")).is_ok());
}

#[test]
fn accepts_ipv6_and_other_valid_variants() {
    accepts("set interfaces wireguard wg10 address 'fd00:10::1/64'");
    accepts("set interfaces wireguard wg0 address '10.0.0.1/32'");
    accepts("set interfaces wireguard wg0 peer sp allowed-ips 'fd00:2::/48'");
    accepts("set interfaces wireguard wg0 peer sp allowed-ips '0.0.0.0/0'");
    accepts("set interfaces wireguard wg0 peer sp address '2001:db8::7'");
    accepts("set interfaces wireguard wg0 peer 'site-b' description 'x'");
    accepts("set interfaces wireguard wg0 private-key 'ZmFrZWtleWZha2VrZXlmYWtla2V5ZmFrZWtleTAwMDA='");
    accepts("set interfaces wireguard wg0 mtu 1420");
    accepts("set interfaces wireguard wg0 fwmark 4294967295");
    accepts("set interfaces wireguard wg0 peer sp disable");
    accepts("set protocols static route 10.0.0.2/32 next-hop 10.0.0.1 distance 10");
    accepts("set protocols static route 0.0.0.0/0 interface wg0.5");
    accepts("set protocols static route 10.0.0.0/8 blackhole");
    accepts("set protocols static route6 fd00:2::/48 next-hop fd00:10::2");
    // Stopping after a plain node or a tag value creates the node.
    accepts("set interfaces wireguard wg0");
    accepts("set protocols static route 192.168.2.0/23");
}

#[test]
fn delete_may_stop_at_any_node() {
    accepts("delete interfaces wireguard wg0 peer sp");
    accepts("delete interfaces wireguard");
    accepts("delete interfaces wireguard wg0 peer");
    accepts("delete interfaces wireguard wg0 peer sp allowed-ips");
    accepts("delete interfaces wireguard wg0 peer sp allowed-ips '10.0.0.2/32'");
    accepts("delete protocols static route 192.168.2.0/23");
    rejects("delete interfaces wirguard wg0", &["unknown path component 'wirguard'"]);
    rejects("delete interfaces wireguard eth0", &["WireGuard interface must be named wgN"]);
}

// ---------------------------------------------------------------------------------------------
// Rejections

#[test]
fn rejects_old_pubkey_syntax_and_suggests_public_key() {
    let e = rejects(
        "set interfaces wireguard wg0 peer sp pubkey 'ZmFrZWtleWZha2VrZXlmYWtla2V5ZmFrZWtleTAwMDA='",
        &[
            "unknown path component 'pubkey' (word 7) under 'interfaces wireguard wg0 peer sp'",
            "did you mean 'public-key'?",
        ],
    );
    assert!(e.contains("valid here: address, allowed-ips, description, disable,"), "{e}");
}

#[test]
fn rejects_old_endpoint_syntax_and_suggests_address() {
    rejects(
        "set interfaces wireguard wg0 peer sp endpoint '203.0.113.7:51820'",
        &["unknown path component 'endpoint'", "did you mean 'address' and 'port'?", "VyOS 1.4+"],
    );
}

#[test]
fn rejects_a_typo_in_a_path_component() {
    rejects(
        "set interfaces wirguard wg0 address '10.0.0.1/30'",
        &["unknown path component 'wirguard' (word 3) under 'interfaces'", "did you mean 'wireguard'?", "valid here: "],
    );
    rejects("set protocol static route 10.0.0.0/8 blackhole", &["'protocol' (word 2) at the top level", "'protocols'"]);
    rejects("set interfaces wireguard wg0 peer sp public_key x", &["did you mean 'public-key'?"]);
}

#[test]
fn rejects_a_wireguard_interface_not_named_wgn() {
    rejects(
        "set interfaces wireguard eth0 address '10.0.0.1/30'",
        &["tag value 'eth0' (word 4) for 'interfaces wireguard'", "WireGuard interface must be named wgN"],
    );
    rejects("set interfaces wireguard wg address '10.0.0.1/30'", &["WireGuard interface must be named wgN"]);
    // Upstream quirk: the peer alias regex `[^ ]{1,100}` also forbids spaces, under a "too long" message.
    rejects(
        "set interfaces wireguard wg0 peer 'site b' description 'x'",
        &["tag value 'site b' (word 6)", "peer alias too long (limit 100 characters)", "regex '[^ ]{1,100}'"],
    );
}

#[test]
fn rejects_an_out_of_range_port() {
    for command in ["set interfaces wireguard wg0 port '70000'", "set interfaces wireguard wg0 peer sp port 70000"] {
        rejects(
            command,
            &["value '70000'", "Port number must be in range 1 to 65535", "Number is not in any of allowed ranges"],
        );
    }
    rejects("set interfaces wireguard wg0 port 0", &["Port number must be in range 1 to 65535"]);
    rejects("set interfaces wireguard wg0 port 'http'", &["'http' is not a valid number"]);
    rejects("set interfaces wireguard wg0 peer sp persistent-keepalive 2.5", &["'2.5' is not a valid integer number"]);
}

#[test]
fn rejects_an_interface_address_without_prefix_length() {
    // address-ipv4-ipv6.xml.i: only `ip-host` (no `dhcp` alternative for WireGuard).
    rejects(
        "set interfaces wireguard wg0 address '10.0.0.1'",
        &["value '10.0.0.1' (word 6) for 'interfaces wireguard wg0 address'", "missing prefix length"],
    );
    rejects("set interfaces wireguard wg0 address 'dhcp'", &["validator ip-host"]);
    // ip-host: the network address itself is not a host address.
    rejects("set interfaces wireguard wg0 address '10.0.0.0/30'", &["network address, not a host address"]);
    rejects("set interfaces wireguard wg0 address '10.0.0.256/30'", &["'10.0.0.256/30' is not a valid IP host"]);
}

#[test]
fn rejects_a_public_key_that_is_not_base64() {
    rejects(
        "set interfaces wireguard wg0 peer sp public-key 'not base64!'",
        &["Key is not base64-encoded", "cannot be 1 more than a multiple of 4"],
    );
    rejects(
        "set interfaces wireguard wg0 peer sp public-key 'abc'",
        &["Key is not base64-encoded", "Incorrect padding"],
    );
}

#[test]
fn rejects_a_static_route_with_host_bits_set() {
    rejects(
        "set protocols static route 192.168.3.0/23 next-hop 10.0.0.2",
        &["tag value '192.168.3.0/23' (word 5) for 'protocols static route'", "host bits are set"],
    );
    rejects("set protocols static route 192.168.2.1 next-hop 10.0.0.2", &["missing prefix length"]);
    rejects("set protocols static route 192.168.2.0/23 next-hop 10.0.0.2/32", &["is not a valid IPv4 address"]);
    rejects("set protocols static route fd00::/48 next-hop fd00::1", &["is not a valid IPv4 prefix"]);
    rejects("set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.1/30'", &["host bits are set"]);
}

#[test]
fn rejects_a_tag_node_without_its_tag() {
    rejects(
        "set interfaces wireguard wg0 peer",
        &["missing tag value after 'interfaces wireguard wg0 peer'", "`interfaces wireguard wg0 peer <peer>`"],
    );
    rejects("set interfaces wireguard", &["missing tag value after 'interfaces wireguard'"]);
}

#[test]
fn rejects_missing_and_extra_values() {
    rejects(
        "set interfaces wireguard wg0 port",
        &["missing value for leaf 'interfaces wireguard wg0 port': write `set interfaces wireguard wg0 port <value>`"],
    );
    rejects(
        "set interfaces wireguard wg0 peer sp disable 'yes'",
        &["'interfaces wireguard wg0 peer sp disable' is a valueless leaf and takes no value, but got 'yes' (word 8)"],
    );
    rejects(
        "set interfaces wireguard wg0 description fabric: site-to-site",
        &["takes exactly one value, got 'fabric:' followed by unexpected 'site-to-site'"],
    );
    rejects("set interfaces wireguard wg0 address '10.0.0.1/30", &["unterminated single quote"]);
    rejects("set", &["missing path after 'set'"]);
}

#[test]
fn only_set_and_delete_are_configuration_commands() {
    for command in ["show interfaces wireguard", "commit", "save", "run show version", "configure", ""] {
        rejects(command, &["not a configuration command"]);
    }
}

// ---------------------------------------------------------------------------------------------
// Constraint semantics

#[test]
fn any_constraint_entry_may_accept_the_value() {
    // peer address: ip-address OR ipv6-link-local (the latter accepts a %zone).
    accepts("set interfaces wireguard wg0 peer sp address 'fe80::1%eth0'");
    rejects(
        "set interfaces wireguard wg0 peer sp address 'vpn.example.net'",
        &["validator ip-address: 'vpn.example.net' is not a valid IP address", "validator ipv6-link-local"],
    );
    // static route vrf: regex (default) OR validator vrf-name: the regex decides without vrf-name.
    accepts("set protocols static route 10.0.0.0/8 next-hop 10.0.0.1 vrf default");
}

#[test]
fn unimplemented_validators_are_errors_not_silent_passes() {
    // interface-name.xml.i: a regex OR `file-path --lookup-path /sys/class/net --directory`,
    // which depends on the router's interfaces.
    rejects(
        "set protocols static route 10.0.0.0/8 interface 'my-uplink'",
        &[
            "cannot be decided",
            "validator file-path not implemented (argument '--lookup-path /sys/class/net --directory')",
        ],
    );
    rejects("set interfaces wireguard wg0 vrf 'red'", &["validator vrf-name not implemented"]);
    rejects(
        "set system config-management commit-archive location 'https://example.net/archive'",
        &["validator url not implemented", "regex '(ssh|git|git\\+(\\w+)):\\/\\/.*' does not match"],
    );
    // ... unless another entry accepts the value.
    accepts("set system config-management commit-archive location 'git+https://example.net/archive'");
}

#[test]
fn validators_on_fabric_paths_are_implemented_except_known_ones() {
    let spec = spec();
    let mut unimplemented = std::collections::BTreeSet::new();
    for path in [&["interfaces", "wireguard"][..], &["protocols", "static"], &["system", "config-management"]] {
        for name in spec.validator_names_under(path) {
            if !IMPLEMENTED_VALIDATORS.contains(&name.as_str()) {
                unimplemented.insert(name);
            }
        }
    }
    let expected = ["file-path", "ipv6-srv6-segments", "url", "vrf-name"];
    assert_eq!(unimplemented.iter().map(String::as_str).collect::<Vec<_>>(), expected);
    // Every implemented name is really used somewhere in the definitions.
    let all = spec.validator_names_under(&[]);
    for name in IMPLEMENTED_VALIDATORS {
        assert!(all.contains(*name), "{name} is not used by any definition");
    }
}

#[test]
fn numeric_validator_follows_vyos_utils() {
    let spec = spec();
    // --range 0-4294967295 (fwmark)
    assert!(spec.check("set interfaces wireguard wg0 fwmark 0").is_ok());
    let e = spec.check("set interfaces wireguard wg0 fwmark 4294967296").unwrap_err();
    assert!(e.contains("Number is not in any of allowed ranges (0-4294967295)"), "{e}");
    assert!(spec.check("set interfaces wireguard wg0 fwmark -1").unwrap_err().contains("Number is not in any"));
    assert!(spec.check("set interfaces wireguard wg0 fwmark 0x10").unwrap_err().contains("is not a valid number"));
    // A range value is only allowed with --allow-range.
    let e = spec.check("set interfaces wireguard wg0 port 1000-2000").unwrap_err();
    assert!(e.contains("Value must be a number, not a range"), "{e}");
}

/// The firewall and NAT rules B.1 renders (VyOS 1.4+ syntax), and the mistakes the checker must
/// refuse: 1.3's `firewall name … rule` on a base chain, a port outside 1–65535, a protocol name
/// that does not exist, `inbound-interface` without `name`, a NAT rule's misspelled `exclude`.
#[test]
fn firewall_and_nat_rules_of_the_underlay() {
    for ok in [
        "set firewall ipv4 input filter rule 50 action 'accept'",
        "set firewall ipv4 input filter rule 50 inbound-interface name 'wg0'",
        "set firewall ipv4 input filter rule 50 protocol 'icmp'",
        "set firewall ipv4 input filter rule 51 destination port '51820'",
        "set firewall ipv4 input filter rule 51 protocol 'udp'",
        "set firewall ipv4 input filter rule 51 source address '198.51.100.7'",
        "set firewall ipv4 input filter rule 51 description 'fabric lab: WireGuard'",
        "set firewall ipv4 forward filter rule 50 destination address '172.30.1.0/24'",
        "set firewall ipv4 forward filter rule 51 outbound-interface name 'wg0'",
        "set firewall ipv4 forward filter default-action 'drop'",
        "set nat source rule 50 exclude",
        "set nat source rule 50 outbound-interface name 'wg0'",
        "set firewall ipv4 input filter rule 52 destination port '1000-2000,!22'",
    ] {
        accepts(ok);
    }
    rejects("set firewall ipv4 input filter rule 51 destination port '70000'", &["not a valid port"]);
    rejects("set firewall ipv4 input filter rule 51 destination port '2000-1000'", &["not a valid port"]);
    rejects("set firewall ipv4 input filter rule 51 destination port 'wireguard'", &["named services"]);
    rejects("set firewall ipv4 input filter rule 51 protocol 'udpp'", &["not a valid IP protocol"]);
    rejects("set firewall ipv4 input filter rule 50 inbound-interface 'wg0'", &[]);
    rejects("set firewall ipv4 input filter rule 0 action 'accept'", &[]);
    rejects("set firewall ipv4 input filter rule 50 action 'allow'", &[]);
    rejects("set nat source rule 50 exclude-it", &[]);
    rejects("set firewall name WAN_LOCAL rule 50 action 'accept'", &[]);
}
