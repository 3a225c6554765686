//! IPv4 addresses and prefixes as the topology writes them.
//!
//! The types parse from strings so that a malformed value is caught by the schema pass (with its
//! position) before serde ever sees it; their `JsonSchema` carries a `format` that the schema pass
//! understands. Only IPv4 is modelled: both sites' LANs, tunnels and pod ranges are IPv4.

use std::borrow::Cow;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// `format` names used in the generated schema; `schema_check` validates them.
pub const FORMAT_CIDR: &str = "ipv4-cidr";
pub const FORMAT_IFACE: &str = "ipv4-interface";
pub const FORMAT_ADDR: &str = "ipv4";

/// A network prefix such as `192.168.0.0/23`: host bits must be zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    pub network: Ipv4Addr,
    pub len: u8,
}

/// An address with its prefix length, as on an interface: `10.0.0.1/30`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IfaceAddr {
    pub addr: Ipv4Addr,
    pub len: u8,
}

fn mask(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) }
}

/// Why a string is not an address or prefix; the text is what the topology's diagnostics say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    #[error("`{0}` has no prefix length (write it as a.b.c.d/len)")]
    NoPrefix(String),
    #[error("`{0}` is not an IPv4 address")]
    NotIpv4(String),
    #[error("`/{0}` is not a prefix length between 0 and 32")]
    BadLength(String),
    #[error("`{text}` has host bits set; the network is {network}/{len}")]
    HostBits { text: String, network: Ipv4Addr, len: u8 },
}

fn split_prefix(s: &str) -> Result<(Ipv4Addr, u8), AddrError> {
    let (a, l) = s.split_once('/').ok_or_else(|| AddrError::NoPrefix(s.into()))?;
    let addr = Ipv4Addr::from_str(a).map_err(|_| AddrError::NotIpv4(a.into()))?;
    let len: u8 = l.parse().ok().filter(|n| *n <= 32).ok_or_else(|| AddrError::BadLength(l.into()))?;
    Ok((addr, len))
}

impl Cidr {
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.len) == u32::from(self.network)
    }
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.network) || other.contains(self.network)
    }
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) | !mask(self.len))
    }
}

impl IfaceAddr {
    /// The network this address sits in.
    pub fn network(&self) -> Cidr {
        Cidr { network: Ipv4Addr::from(u32::from(self.addr) & mask(self.len)), len: self.len }
    }
    /// True when the address is the network or broadcast address of a prefix that has both
    /// (/31 and /32 have neither, RFC 3021).
    pub fn is_network_or_broadcast(&self) -> bool {
        let net = self.network();
        self.len < 31 && (self.addr == net.network || self.addr == net.broadcast())
    }
}

impl FromStr for Cidr {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        let (addr, len) = split_prefix(s)?;
        let network = Ipv4Addr::from(u32::from(addr) & mask(len));
        if network != addr {
            return Err(AddrError::HostBits { text: s.into(), network, len });
        }
        Ok(Cidr { network, len })
    }
}

impl FromStr for IfaceAddr {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        let (addr, len) = split_prefix(s)?;
        Ok(IfaceAddr { addr, len })
    }
}

/// Checks a string against one of the formats above; used by the schema pass.
pub fn check_format(format: &str, s: &str) -> Option<Result<(), AddrError>> {
    match format {
        FORMAT_CIDR => Some(Cidr::from_str(s).map(|_| ())),
        FORMAT_IFACE => Some(IfaceAddr::from_str(s).map(|_| ())),
        FORMAT_ADDR => Some(Ipv4Addr::from_str(s).map(|_| ()).map_err(|_| AddrError::NotIpv4(s.into()))),
        _ => None,
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.len)
    }
}
impl fmt::Display for IfaceAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

macro_rules! string_typed {
    ($t:ty, $format:expr, $desc:expr) => {
        serde_as_text!($t);
        impl JsonSchema for $t {
            fn schema_name() -> Cow<'static, str> {
                stringify!($t).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({ "type": "string", "format": $format, "description": $desc })
            }
        }
    };
}

string_typed!(Cidr, FORMAT_CIDR, "An IPv4 prefix, e.g. 192.168.0.0/23 (host bits zero).");
string_typed!(IfaceAddr, FORMAT_IFACE, "An IPv4 interface address with prefix, e.g. 10.0.0.1/30.");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parses_and_rejects_host_bits() {
        let c: Cidr = "192.168.0.0/23".parse().unwrap();
        assert!(c.contains("192.168.1.255".parse().unwrap()));
        assert!(!c.contains("192.168.2.0".parse().unwrap()));
        let err = "192.168.1.0/23".parse::<Cidr>().unwrap_err();
        assert!(err.to_string().contains("192.168.0.0/23"), "{err}");
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("10.0.0.0".parse::<Cidr>().is_err());
    }

    #[test]
    fn overlap_is_symmetric() {
        let a: Cidr = "10.0.0.0/8".parse().unwrap();
        let b: Cidr = "10.42.0.0/16".parse().unwrap();
        let c: Cidr = "192.168.0.0/23".parse().unwrap();
        assert!(a.overlaps(&b) && b.overlaps(&a));
        assert!(!a.overlaps(&c));
    }

    #[test]
    fn iface_network_and_edges() {
        let a: IfaceAddr = "10.0.0.1/30".parse().unwrap();
        assert_eq!(a.network().to_string(), "10.0.0.0/30");
        assert!(!a.is_network_or_broadcast());
        assert!("10.0.0.3/30".parse::<IfaceAddr>().unwrap().is_network_or_broadcast());
        assert!("10.0.0.0/30".parse::<IfaceAddr>().unwrap().is_network_or_broadcast());
        assert!(!"10.0.0.0/31".parse::<IfaceAddr>().unwrap().is_network_or_broadcast());
    }
}
