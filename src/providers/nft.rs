//! Commands for fabric's nftables rules on a Linux router (B.1's underlay; the rules and why they
//! are inserted into the operator's chains are in `desired::nft`). Pure builders, tested as
//! strings here and against a real `nft` in the lab.
//!
//! The chains are found on the router itself (`nft list chains`): every chain of type filter
//! hooked at input or forward, in a table of family `ip` or `inet`. Its table and chain names come
//! from nft and are only handed back to nft on the same host. Without `nft` there is no
//! nftables ruleset to open: the probe passes and apply does nothing.

use crate::desired::nft::{NftRules, TAG_PREFIX};
use crate::sh;
use crate::transport::shell::Sh;

/// Prints `<family> <table> <chain> <hook>` for each chain fabric inserts its rules into.
const CHAINS: &str = "nft list chains | awk '$1 == \"table\" { f = $2; t = $3 } $1 == \"chain\" { c = $2 } \
     $1 == \"type\" && $2 == \"filter\" && $3 == \"hook\" && ($4 == \"input\" || $4 == \"forward\") && \
     (f == \"ip\" || f == \"inet\") { print f, t, c, $4 }'";

/// For the chain `$f $t $c`: a `delete rule` line for each rule fabric inserted earlier.
const DELETES: &str = "nft -a list chain \"$f\" \"$t\" \"$c\" | \
     sed -n 's/.*comment \"fabric-b1 [^\"]*\".* # handle \\([0-9][0-9]*\\)$/\\1/p' | \
     while read -r n; do printf 'delete rule %s %s %s handle %s\\n' \"$f\" \"$t\" \"$c\" \"$n\"; done";

fn lines(rules: &[String]) -> String {
    rules.join("\n")
}

/// Exit 0 when every chain holds exactly these rules of fabric's (by their tag) and no others.
pub fn probe(r: &NftRules) -> Sh {
    debug_assert!(r.tag().starts_with(TAG_PREFIX));
    let tag = format!("comment \"{}\"", r.tag());
    let any = format!("comment \"{TAG_PREFIX}");
    sh!(
        "command -v nft >/dev/null 2>&1 || exit 0; {} | while read -r f t c h; do \
         if [ \"$h\" = input ]; then n={}; else n={}; fi; \
         l=$(nft list chain \"$f\" \"$t\" \"$c\") || exit 1; \
         [ \"$(printf '%s\\n' \"$l\" | grep -cF -- {})\" = \"$n\" ] || exit 1; \
         [ \"$(printf '%s\\n' \"$l\" | grep -cF -- {})\" = \"$n\" ] || exit 1; done",
        Sh::lit(CHAINS),
        r.input.len(),
        r.forward.len(),
        tag,
        any
    )
}

/// Replaces fabric's rules in every chain by these, one nft transaction per chain (the old rules
/// go in the same transaction as the new ones come, so the tunnel is never shut in between).
pub fn apply(r: &NftRules) -> Sh {
    sh!(
        "command -v nft >/dev/null 2>&1 || exit 0; tag={}; rin={}; rfw={}; \
         {} | while read -r f t c h; do \
         if [ \"$h\" = input ]; then r=$rin; else r=$rfw; fi; \
         { {}; printf '%s\\n' \"$r\" | while IFS= read -r x; do \
         printf 'insert rule %s %s %s %s comment \"%s\"\\n' \"$f\" \"$t\" \"$c\" \"$x\" \"$tag\"; done; } | nft -f - || exit 1; done",
        r.tag(),
        lines(&r.input),
        lines(&r.forward),
        Sh::lit(CHAINS),
        Sh::lit(DELETES)
    )
}

/// Removes every rule fabric inserted (B.1's undo); the operator's rules stay as they are.
pub fn remove() -> Sh {
    sh!(
        "command -v nft >/dev/null 2>&1 || exit 0; {} | while read -r f t c h; do {} | nft -f - || exit 1; done",
        Sh::lit(CHAINS),
        Sh::lit(DELETES)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> NftRules {
        NftRules {
            input: vec!["iifname \"wg0\" ip protocol icmp accept".into(), "udp dport 51820 accept".into()],
            forward: vec!["iifname \"wg0\" ip daddr 172.30.1.0/24 accept".into()],
        }
    }

    #[test]
    fn the_tag_follows_the_rules() {
        let a = rules();
        let mut b = rules();
        b.forward.push("oifname \"wg0\" accept".into());
        assert!(a.tag().starts_with("fabric-b1 ") && a.tag().len() == "fabric-b1 ".len() + 8);
        assert_ne!(a.tag(), b.tag());
        assert_eq!(a.tag(), rules().tag());
    }

    #[test]
    fn rules_enter_as_quoted_values() {
        let cmd = apply(&rules());
        assert!(cmd.contains("rin='iifname \"wg0\" ip protocol icmp accept\nudp dport 51820 accept'"), "{cmd}");
        assert!(probe(&rules()).contains("then n=2; else n=1; fi"), "{}", probe(&rules()));
        assert!(remove().contains("nft -a list chain"));
    }

    #[test]
    fn builders_are_valid_shell() {
        for cmd in [probe(&rules()), apply(&rules()), remove()] {
            let o = std::process::Command::new("sh").args(["-n", "-c", &cmd]).output().unwrap();
            assert!(o.status.success(), "{cmd}\n{}", String::from_utf8_lossy(&o.stderr));
        }
    }
}
