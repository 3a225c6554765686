//! K3s itself on a host (A.1's servers, A.3/A.4's agents), from the topology's air-gap bundle:
//! the registry mirrors' `registries.yaml`, then the install (`desired::k3s_install`). Nothing
//! without `k3s_airgap`: fabric downloads nothing onto hosts, so K3s must then be there already.

use crate::addr::Target;
use crate::desired::k3s_install::{K3sInstall, Role, Source, registries_yaml};
use crate::desired::{Desired, Out, ProviderKind, Resource, yaml};
use crate::topology::airgap::is_sha256;

/// Where `render` writes out the bundle apply installs (`K3sInstall::bundle`).
pub const BUNDLE: &str = "config/k3s/airgap-bundle.yaml";

/// Where K3s reads its registry mirrors (at start).
pub const REGISTRIES: &str = "/etc/rancher/k3s/registries.yaml";

/// K3s on `host` (of `site`); a server brings up the cluster `brings_up`.
pub(super) fn install(out: &mut Out<'_>, host: &str, site: &str, role: Role, brings_up: Option<Target>) {
    let t = out.t;
    let Some(mut k) = K3sInstall::from_topology(t, role) else { return };
    k.brings_up = brings_up;
    if let Some(r) = registries_yaml(t) {
        let mirrors: Vec<&str> =
            t.k3s_airgap.iter().flat_map(|a| &a.registry_mirrors).map(|m| m.registry.as_str()).collect();
        out.file(
            host,
            site,
            REGISTRIES,
            Desired::File(yaml::to_string(&r)),
            format!("K3s registry mirrors for {} (K3s restarts when it changes)", mirrors.join(", ")),
            Some(format!("config/k3s/{site}/registries.yaml")),
        );
    }
    // `plan` fetches nothing: it only says where apply will fetch from (no credentials).
    let urls: Vec<String> = k
        .uploads()
        .into_iter()
        .filter(|u| matches!(u.from, Source::Url(_)))
        .map(|u| format!("{} from {}", u.name, u.shown()))
        .collect();
    let fetched = if urls.is_empty() { String::new() } else { format!("; fetched here at apply: {}", urls.join(", ")) };
    let pending = k.uploads().into_iter().any(|u| !is_sha256(&u.sha256));
    let digest = if is_sha256(&k.binary.sha256) {
        format!("k3s sha256 {}…", &k.binary.sha256[..12])
    } else {
        "k3s sha256 not recorded".to_string()
    };
    let mut summary = format!(
        "K3s {} {} from the air-gap bundle ({digest}{fetched}), nothing downloaded on the host",
        k.version,
        role.service(),
    );
    // What an upgrade of a running K3s does (`apply::upgrade`): shown before it happens.
    summary.push_str(match role {
        Role::Server => {
            "; over a running K3s: datastore and token backed up first, then cordon, drain, install, Ready, uncordon"
        }
        Role::Agent => "; over a running K3s: cordon, drain, install, Ready, uncordon",
    });
    if pending {
        summary.push_str("; apply refuses it until k3s_airgap's digests are recorded (see validate)");
    }
    out.push(Resource {
        address: Target::host(host).at("command:k3s-install"),
        site: Some(site.into()),
        provider: ProviderKind::Command,
        summary,
        sensitive: false,
        desired: Desired::K3sInstall(Box::new(k)),
        file: Some(BUNDLE.into()),
    });
}
