//! fabric as a library: the binary is a thin shell over these modules (see docs/architecture.md).

// Every function fits on a screen or two: clippy.toml sets the limit (100 lines).
#![deny(clippy::too_many_lines)]

/// Serializes a typed string as its text (`Display`) and reads it back through `FromStr`, so a
/// bad value is refused where it is read (a planfile, a journal, a topology).
macro_rules! serde_as_text {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod addr;
pub mod apply;
pub mod catalog;
pub mod command;
pub mod desired;
pub mod live;
pub mod operation;
pub mod plan;
pub mod providers;
pub mod steps;
pub mod style;
pub mod topology;
pub mod transport;
