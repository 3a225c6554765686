//! Typed addresses (terraform's `internal/addrs`): where a resource lives ([`Target`]) and the
//! resource itself ([`Address`]), each with one `Display` and one parser, so no code builds or
//! splits these strings by hand.
//!
//! | target | text | reached over |
//! |---|---|---|
//! | a site's router | `router.<site>` | SSH |
//! | a host (node, VM, bare metal) | `host.<name>` | SSH |
//! | a site's cluster | `cluster.<site>` | the Kubernetes API |
//! | the federation | `karmada` | the Karmada API |
//!
//! An address is `<target>/<path>`, where the path says which provider owns it:
//! `file:<absolute path>`, `wireguard:<interface>`, `vyos:<config subtree>`, `command:<name>`, or a
//! Kubernetes object `[<namespace>/]<Kind>/<name>`.

use std::fmt;
use std::str::FromStr;

/// Where a resource lives. The variants are in the order of their text, so targets sort as
/// their names do.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    Cluster(String),
    Host(String),
    Karmada,
    Router(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    #[error("`{0}` is not a target (router.<site>, host.<name>, cluster.<site> or karmada)")]
    Target(String),
    #[error("`{0}` is not a resource address (<target>/<path>)")]
    Address(String),
}

impl Target {
    pub fn router(site: &str) -> Target {
        Target::Router(site.into())
    }
    pub fn host(name: &str) -> Target {
        Target::Host(name.into())
    }
    pub fn cluster(site: &str) -> Target {
        Target::Cluster(site.into())
    }
    /// The running cluster a new one replaces at `site` (`cluster_migration: new-cluster`): only
    /// the cutover (A.5) writes to it.
    pub fn previous_cluster(site: &str) -> Target {
        Target::Cluster(format!("{site}-previous"))
    }
    /// A site's cluster, or the Karmada API for `None`.
    pub fn api(site: Option<&str>) -> Target {
        site.map_or(Target::Karmada, Target::cluster)
    }

    /// The site of a router or cluster (a host's site is the topology's to say).
    pub fn site(&self) -> Option<&str> {
        match self {
            Target::Router(s) | Target::Cluster(s) => Some(s),
            Target::Host(_) | Target::Karmada => None,
        }
    }

    /// Reached over a Kubernetes API (a cluster or Karmada), not SSH.
    pub fn is_api(&self) -> bool {
        matches!(self, Target::Cluster(_) | Target::Karmada)
    }

    /// The address of `path` on this target.
    pub fn at(&self, path: impl Into<String>) -> Address {
        Address { target: self.clone(), path: path.into() }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Router(s) => write!(f, "router.{s}"),
            Target::Host(h) => write!(f, "host.{h}"),
            Target::Cluster(s) => write!(f, "cluster.{s}"),
            Target::Karmada => f.write_str("karmada"),
        }
    }
}

/// A name of a site or host as it appears in an address: non-empty, without `/`, spaces or
/// control characters (the topology's rules allow less than this).
fn name_ok(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(|c| c == '/' || c.is_whitespace() || c.is_control())
}

impl FromStr for Target {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Target, AddrError> {
        let bad = || AddrError::Target(s.into());
        if s == "karmada" {
            return Ok(Target::Karmada);
        }
        let (kind, name) = s.split_once('.').ok_or_else(bad)?;
        if !name_ok(name) {
            return Err(bad());
        }
        match kind {
            "router" => Ok(Target::Router(name.into())),
            "host" => Ok(Target::Host(name.into())),
            "cluster" => Ok(Target::Cluster(name.into())),
            _ => Err(bad()),
        }
    }
}

/// One resource: its target and its path there. Addresses sort as their text does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    pub target: Target,
    /// `file:/etc/…`, `wireguard:wg0`, `vyos:interfaces wireguard wg0`, `command:k3s-install`, or
    /// `[ns/]Kind/name`.
    pub path: String,
}

impl Address {
    /// The file path of a `file:` address.
    pub fn file(&self) -> Option<&str> {
        self.path.strip_prefix("file:")
    }
    /// The interface of a `wireguard:` address.
    pub fn wireguard(&self) -> Option<&str> {
        self.path.strip_prefix("wireguard:")
    }
    /// The configuration subtree of a `vyos:` address.
    pub fn vyos(&self) -> Option<&str> {
        self.path.strip_prefix("vyos:")
    }
    /// The name of a `command:` address.
    pub fn command(&self) -> Option<&str> {
        self.path.strip_prefix("command:")
    }
}

impl Target {
    /// The text, in pieces (kind prefix, name): `Display` without allocating.
    fn pieces(&self) -> [&str; 2] {
        match self {
            Target::Router(s) => ["router.", s],
            Target::Host(h) => ["host.", h],
            Target::Cluster(s) => ["cluster.", s],
            Target::Karmada => ["karmada", ""],
        }
    }
}

impl Ord for Address {
    /// As the texts compare, without building them (maps of addresses compare often).
    fn cmp(&self, other: &Address) -> std::cmp::Ordering {
        let [k1, n1] = self.target.pieces();
        let [k2, n2] = other.target.pieces();
        let a = k1.bytes().chain(n1.bytes()).chain(std::iter::once(b'/')).chain(self.path.bytes());
        let b = k2.bytes().chain(n2.bytes()).chain(std::iter::once(b'/')).chain(other.path.bytes());
        a.cmp(b)
    }
}

impl PartialOrd for Address {
    fn partial_cmp(&self, other: &Address) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq<&str> for Address {
    fn eq(&self, other: &&str) -> bool {
        other.parse::<Address>().is_ok_and(|a| a == *self)
    }
}

impl PartialEq<&str> for Target {
    fn eq(&self, other: &&str) -> bool {
        other.parse::<Target>().is_ok_and(|t| t == *self)
    }
}

/// Unit tests write addresses as text; only they may (a bad one is a bug in the test).
#[cfg(test)]
impl From<&str> for Address {
    fn from(s: &str) -> Address {
        s.parse().expect("a valid address in a test")
    }
}

#[cfg(test)]
impl From<&str> for Target {
    fn from(s: &str) -> Target {
        s.parse().expect("a valid target in a test")
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.target, self.path)
    }
}

impl FromStr for Address {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Address, AddrError> {
        let (target, path) = s.split_once('/').ok_or_else(|| AddrError::Address(s.into()))?;
        if path.is_empty() {
            return Err(AddrError::Address(s.into()));
        }
        Ok(Address { target: target.parse()?, path: path.into() })
    }
}

serde_as_text!(Target);
serde_as_text!(Address);

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn targets_and_addresses_read_back_as_written() {
        for t in ["router.sp", "host.franca-cp1", "cluster.franca", "karmada"] {
            assert_eq!(t.parse::<Target>().unwrap().to_string(), t);
        }
        let a: Address = "cluster.sp/kube-system/HelmChart/cilium".parse().unwrap();
        assert_eq!(a.target, Target::cluster("sp"));
        assert_eq!(a.path, "kube-system/HelmChart/cilium");
        let f: Address = "host.sp-cp1/file:/etc/rancher/k3s/config.yaml".parse().unwrap();
        assert_eq!(f.file(), Some("/etc/rancher/k3s/config.yaml"));
        let v: Address = "router.franca/vyos:interfaces wireguard wg0".parse().unwrap();
        assert_eq!(v.vyos(), Some("interfaces wireguard wg0"));
        assert_eq!(Target::router("sp").at("wireguard:wg0").wireguard(), Some("wg0"));
        assert_eq!(Target::api(None), Target::Karmada);
    }

    #[test]
    fn what_is_not_an_address_is_refused() {
        for bad in ["", "router", "router.", "switch.sp", "host.a b", "host.a\nb", "cluster.a/b", "karmada2"] {
            assert!(bad.parse::<Target>().is_err(), "{bad:?}");
        }
        for bad in ["cluster.sp", "cluster.sp/", "nowhere/x"] {
            assert!(bad.parse::<Address>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn serde_uses_the_text() {
        let a: Address = "karmada/kube-system/Secret/x".parse().unwrap();
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, "\"karmada/kube-system/Secret/x\"");
        assert_eq!(serde_json::from_str::<Address>(&json).unwrap(), a);
        let map: std::collections::BTreeMap<Target, u8> = [(Target::router("sp"), 1)].into();
        assert_eq!(serde_json::to_string(&map).unwrap(), "{\"router.sp\":1}");
    }

    #[test]
    fn addresses_sort_as_their_texts() {
        let mut a: Vec<Address> =
            ["host.a-b/file:/x", "host.a/file:/x", "cluster.sp/x", "karmada/y", "router.sp/vyos:z"]
                .iter()
                .map(|t| t.parse().unwrap())
                .collect();
        a.sort();
        let text: Vec<String> = a.iter().map(Address::to_string).collect();
        let mut sorted = text.clone();
        sorted.sort();
        assert_eq!(text, sorted);
    }

    #[test]
    fn order_is_the_texts() {
        let mut ts: Vec<Target> = ["router.sp", "karmada", "host.sp-cp1", "host.sp", "cluster.sp"]
            .iter()
            .map(|t| t.parse().unwrap())
            .collect();
        ts.sort();
        let text: Vec<String> = ts.iter().map(Target::to_string).collect();
        let mut sorted = text.clone();
        sorted.sort();
        assert_eq!(text, sorted);
    }

    proptest! {
        #[test]
        fn any_address_round_trips(kind in 0..4u8, name in "[a-z0-9][a-z0-9-]{0,20}", path in "[ -~]{1,40}") {
            let target = match kind {
                0 => Target::router(&name),
                1 => Target::host(&name),
                2 => Target::cluster(&name),
                _ => Target::Karmada,
            };
            let a = target.at(path);
            prop_assert_eq!(a.to_string().parse::<Address>().unwrap(), a);
        }
    }
}
