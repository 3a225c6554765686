//! Pure builders of `fabric rotate wireguard` (the run is `apply::rotate`): what each router is
//! sent to make its next key, to prepare the switch, and to switch when triggered; and what
//! their answers mean. A private key is made on its router and stays there: only public keys are
//! read back, and any answer line that names a private key is dropped before it can reach a
//! message ([`scrub`]).
//!
//! Linux: the next key and the next wg-quick file wait in a 0700 directory beside the live ones;
//! the staged script prints [`STAGED`] and waits on stdin; on `go` it saves the live key and
//! file, arms the self-revert (the timer of `apply::confirm`, which also puts the old key back),
//! moves the next ones in and switches the running interface with `wg set` (its key) and `wg
//! syncconf` (its peers; wireguard-tools wg(8): syncconf changes only what differs, so nothing
//! else of the interface is disturbed). Ending stdin without `go` changes nothing.
//!
//! VyOS: one `vbash -s` session per router, fed in three parts: the key is generated into the
//! session's candidate (`run generate pki wireguard key-pair install interface wgN`: vyos-1x
//! `op-mode-definitions/pki.xml.in` → `src/op_mode/pki.py` `generate_wireguard_key` →
//! `install_wireguard_key` → `python/vyos/utils/misc.py` `install_into_config`), then the peers'
//! new public keys are set, then `commit-confirm` is the trigger. The candidate lives only as
//! long as the session, so the session stays open from the key to the commit.

use std::net::Ipv4Addr;

use crate::providers::{ConfirmForm, WgKey, commit_confirm_line, wg_conf_path, wg_restart, wgkey};
use crate::sh;
use crate::transport::shell::{self, Sh};

/// The line a staged router prints once it is prepared and waits for its trigger.
pub const STAGED: &str = "fabric-staged";
/// The line a VyOS session prints once its key generation ran.
pub const GENERATED: &str = "fabric-generated";
/// The line a Linux router prints once it switched.
pub const SWITCHED: &str = "fabric-switched";
/// What triggers a staged Linux router.
pub const GO: &[u8] = b"go\n";

/// The directory the next key and file wait in (0700, beside the live ones).
pub fn next_dir() -> &'static str {
    "/etc/wireguard/.fabric-rotate"
}

fn key_path(iface: &str) -> String {
    format!("/etc/wireguard/{iface}.key")
}

/// Where the next wg-quick file is written before the switch (`wg-quick strip` wants a path
/// ending in `<interface>.conf`).
pub fn next_conf(iface: &str) -> String {
    format!("{}/{iface}.conf", next_dir())
}

fn next_key(iface: &str) -> String {
    format!("{}/{iface}.key", next_dir())
}

/// The saved key the self-revert puts back (removed once the rotation is confirmed).
pub fn prev_key(iface: &str) -> String {
    format!("{}.fabric-prev", key_path(iface))
}

/// Linux: makes the next private key on the router (0600 in a 0700 directory) and prints its
/// public key.
pub fn linux_next_key(iface: &str) -> Sh {
    let (dir, key) = (next_dir(), next_key(iface));
    sh!("umask 077 && mkdir -p -- {} && wg genkey > {} && wg pubkey < {}", dir, key.clone(), key)
}

/// Linux: removes whatever a rotation that did not happen left (the next key and file).
pub fn linux_discard() -> Sh {
    sh!("rm -rf -- {}", next_dir())
}

/// What puts a Linux router back: the saved file and key in place, the interface restarted
/// from them (`wg-quick`'s PostUp reads the key file).
pub fn linux_restore(iface: &str) -> Sh {
    let (conf, key) = (wg_conf_path(iface), key_path(iface));
    let (pconf, pkey) = (format!("{conf}.fabric-prev"), prev_key(iface));
    sh!(
        "if [ -e {} ]; then mv -f -- {} {}; fi; if [ -e {} ]; then mv -f -- {} {}; fi; {}",
        pconf.clone(),
        pconf,
        conf,
        pkey.clone(),
        pkey,
        key,
        wg_restart(iface)
    )
}

/// Linux: the staged switch. Prepares (strips the next file for `wg syncconf`), prints
/// [`STAGED`], then waits for one line on stdin. `go`: saves the live file and key, arms the
/// self-revert (`canary`, `seconds`), moves the next key (when `own_key`) and file in, switches
/// the running interface, prints [`SWITCHED`], and pings each peer's tunnel address once so
/// that the handshake starts now. Anything else (stdin ended: fabric is gone) removes what was
/// prepared and changes nothing.
pub fn linux_stage(iface: &str, canary: &str, seconds: u32, own_key: bool, peers: &[Ipv4Addr]) -> Sh {
    let (dir, conf, key) = (next_dir(), wg_conf_path(iface), key_path(iface));
    let strip = format!("{dir}/{iface}.strip");
    let save = sh!(
        "cp -p -- {} {} && cp -p -- {} {}",
        conf.clone(),
        format!("{conf}.fabric-prev"),
        key.clone(),
        prev_key(iface)
    );
    let arm = shell::schedule_revert(canary, seconds, &linux_restore(iface));
    // `wg syncconf` sets the interface as the stripped file says, and that file holds no key
    // (wg-quick's PostUp sets it from the key file): it clears the key, so the key comes after.
    let move_key = if own_key { sh!("mv -f -- {} {} && ", next_key(iface), key.clone()) } else { Sh::lit("") };
    let switch = sh!(
        "{}mv -f -- {} {} && wg syncconf {} {} && wg set {} private-key {}",
        move_key,
        next_conf(iface),
        conf,
        iface,
        strip.clone(),
        iface,
        key
    );
    let mut handshake = Sh::lit("");
    for a in peers {
        handshake = sh!("{}( ping -c 1 -W 1 {} >/dev/null 2>&1 </dev/null & ); ", handshake, *a);
    }
    let check_key = if own_key {
        sh!("[ -s {} ] || { echo 'the next key is missing' >&2; exit 1; }; ", next_key(iface))
    } else {
        Sh::lit("")
    };
    sh!(
        "umask 077; {}wg-quick strip {} > {} || exit 1; echo {}; IFS= read -r go || go=; \
         if [ \"$go\" != go ]; then rm -rf -- {}; echo 'not triggered: nothing changed' >&2; exit 1; fi; \
         {} && {} && {} && rm -rf -- {} && echo {} || { echo 'the switch failed' >&2; exit 1; }; {}",
        check_key,
        next_conf(iface),
        strip,
        STAGED,
        dir,
        save,
        arm,
        switch,
        dir,
        SWITCHED,
        handshake
    )
}

/// VyOS, first part: configure mode, and a new key pair generated into the session's candidate.
///
/// Over an existing key VyOS does not ask today: `install_into_config` asks only when
/// `conf.exists(path) and not conf.is_multi(path)`, and `path` is
/// `interfaces wireguard wgN private-key '<new key>'`, whose last word (quotes included) is never
/// among the leaf's values (`python/vyos/config.py` `Config.exists`); were it reached, its
/// question's f-string names an undefined `node` (a NameError before anything is read). The
/// here-string still answers `y`, so a VyOS that does ask gets its answer on that command's
/// stdin, never a script line (the trap of commit-confirm's question, `commit_confirm_line`).
pub fn vyos_generate(iface: &str) -> String {
    format!(
        "source /opt/vyatta/etc/functions/script-template\nconfigure\nrun generate pki wireguard key-pair install interface {} <<< y\necho {GENERATED}\n",
        crate::desired::vyos::word(iface)
    )
}

/// VyOS: opens configure mode (a router that only learns its peers' keys).
pub fn vyos_configure() -> String {
    "source /opt/vyatta/etc/functions/script-template\nconfigure\n".into()
}

/// VyOS, second part: the peers' new public keys (`set` replaces a single-value leaf), then
/// [`STAGED`].
pub fn vyos_stage(set_lines: &[String]) -> String {
    let mut s = String::new();
    for l in set_lines {
        s.push_str(l);
        s.push('\n');
    }
    s.push_str(&format!("echo {STAGED}\n"));
    s
}

/// VyOS, the trigger: the commit under the router's own timer, as B.1 commits.
pub fn vyos_trigger(minutes: u32, form: ConfirmForm) -> String {
    format!("{}\nexit\n", commit_confirm_line(minutes.max(1), form))
}

/// The public key VyOS's generate printed (`Corresponding public-key to use on peer system is:
/// '<key>'`, `src/op_mode/pki.py` `install_wireguard_key`); parsed as a key, nothing else taken.
pub fn generated_key(stdout: &str) -> Option<WgKey> {
    const SAID: &str = "Corresponding public-key to use on peer system is: ";
    let line = stdout.lines().map(str::trim).find_map(|l| l.strip_prefix(SAID))?;
    line.trim_matches('\'').parse::<WgKey>().ok()
}

/// A Linux router's next public key, as `wg pubkey` printed it.
pub fn printed_key(stdout: &str) -> Option<WgKey> {
    wgkey::from_output(stdout).ok().flatten()
}

/// A router's answer made fit for a message: every line that names a private key is dropped
/// (VyOS prints the key it could not install, `install_into_config`'s `Failed to install`).
pub fn scrub(text: &str) -> String {
    text.lines().filter(|l| !l.contains("private-key") && !l.contains("PrivateKey")).collect::<Vec<_>>().join("\n")
}

/// What the pings across the tunnel saw while the keys changed. The window is the longest run
/// of lost pings times the interval ping kept: its resolution is one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Loss {
    pub sent: u32,
    pub lost: u32,
    /// The longest run of lost pings, times the interval.
    pub window_ms: u64,
    pub interval_ms: u64,
}

impl Loss {
    pub fn line(&self) -> String {
        format!(
            "tunnel down for ~{} ms ({} of {} pings lost, one every ~{} ms)",
            self.window_ms, self.lost, self.sent, self.interval_ms
        )
    }
}

/// Pings `addr` from where it runs until its stdin ends: every 10 ms where ping allows it (root),
/// else every 200 ms (iputils ping(8): the shortest interval for other users), printing the
/// interval first, then [`PROBING`]. Ends with ping's summary: SIGALRM makes iputils ping print it and exit (its
/// `sigexit` handler, set for SIGINT and SIGALRM); SIGINT would not do, a background command of
/// a non-interactive shell ignores it (POSIX, Shell Command Language 2.11).
pub fn loss_probe(addr: Ipv4Addr) -> Sh {
    sh!(
        "i=0.01; ping -n -c 1 -i $i -W 1 127.0.0.1 >/dev/null 2>&1 || i=0.2; echo \"fabric-interval $i\"; \
         ping -n -i \"$i\" {} & p=$!; echo {}; IFS= read -r _; kill -ALRM \"$p\"; wait \"$p\"; exit 0",
        addr,
        PROBING
    )
}

/// What [`loss_probe`] prints once ping runs. Not ping's own first line: ping's output to a pipe
/// is block-buffered, so it arrives only when a block fills (never, while no reply comes) or at
/// its end; the shell's `echo` is written at once.
pub const PROBING: &str = "fabric-probing";

/// What [`loss_probe`] printed, as a [`Loss`]: the replies' sequence numbers against what was
/// sent; None when the output is not ping's.
pub fn loss_of(out: &str) -> Option<Loss> {
    let interval: f64 = out.lines().find_map(|l| l.strip_prefix("fabric-interval "))?.trim().parse().ok()?;
    let sent: u32 = out
        .lines()
        .find_map(|l| l.split(" packets transmitted").next().filter(|_| l.contains(" packets transmitted")))?
        .trim()
        .parse()
        .ok()?;
    let mut got = vec![false; sent as usize + 1];
    for l in out.lines().filter(|l| l.contains(" bytes from ")) {
        let seq = l.split_whitespace().find_map(|w| w.strip_prefix("icmp_seq=")).and_then(|s| s.parse::<usize>().ok());
        if let Some(s) = seq.filter(|s| *s >= 1 && *s <= sent as usize) {
            got[s] = true;
        }
    }
    let (mut lost, mut run, mut longest) = (0u32, 0u64, 0u64);
    for g in &got[1..] {
        if *g {
            run = 0;
        } else {
            lost += 1;
            run += 1;
            longest = longest.max(run);
        }
    }
    // The interval ping kept, from its summary (`..., time 1180ms`): a busy host sends more
    // slowly than asked, and the window is counted in pings.
    let summary = out.lines().find(|l| l.contains(" packets transmitted"))?;
    let took: Option<f64> =
        summary.rsplit("time ").next().and_then(|t| t.trim().strip_suffix("ms")).and_then(|t| t.parse().ok());
    let kept = match took {
        Some(ms) if sent > 1 => ms / f64::from(sent - 1),
        _ => interval * 1000.0,
    };
    let interval_ms = kept.round() as u64;
    Some(Loss { sent, lost, window_ms: (longest as f64 * kept).round() as u64, interval_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";

    #[test]
    fn the_staged_linux_switch_is_valid_shell_and_changes_nothing_without_go() {
        let cmd = linux_stage("wg0", "/run/fabric-confirm-wg0-r1", 30, true, &["10.0.0.2".parse().unwrap()]);
        let o = std::process::Command::new("sh").arg("-n").arg("-c").arg(cmd.as_str()).output().unwrap();
        assert!(o.status.success(), "{cmd}\n{}", String::from_utf8_lossy(&o.stderr));
        // The order: saved, armed, switched; the trigger is read before any of it.
        let (read, save, arm, set) = (
            cmd.find("IFS= read -r go").unwrap(),
            cmd.find("cp -p -- /etc/wireguard/wg0.conf").unwrap(),
            cmd.find("touch -- /run/fabric-confirm-wg0-r1").unwrap(),
            cmd.find("wg syncconf wg0 /etc/wireguard/.fabric-rotate/wg0.strip && wg set wg0 private-key /etc/wireguard/wg0.key").unwrap(),
        );
        assert!(read < save && save < arm && arm < set, "{cmd}");
        assert!(cmd.contains("( ping -c 1 -W 1 10.0.0.2 >/dev/null 2>&1 </dev/null & );"), "{cmd}");
        // Only the peers change where the own key does not.
        let peer_only = linux_stage("wg0", "/run/c", 30, false, &[]);
        assert!(!peer_only.contains("fabric-rotate/wg0.key"), "{peer_only}");
    }

    #[test]
    fn the_restore_puts_key_and_file_back_then_restarts() {
        let r = linux_restore("wg0");
        assert!(r.starts_with("if [ -e /etc/wireguard/wg0.conf.fabric-prev ]; then mv -f -- /etc/wireguard/wg0.conf.fabric-prev /etc/wireguard/wg0.conf; fi; if [ -e /etc/wireguard/wg0.key.fabric-prev ]; then mv -f -- /etc/wireguard/wg0.key.fabric-prev /etc/wireguard/wg0.key; fi; wg-quick down wg0"), "{r}");
        assert_eq!(
            linux_next_key("wg0"),
            "umask 077 && mkdir -p -- /etc/wireguard/.fabric-rotate && wg genkey > /etc/wireguard/.fabric-rotate/wg0.key && wg pubkey < /etc/wireguard/.fabric-rotate/wg0.key"
        );
    }

    #[test]
    fn vyos_parts_answer_on_their_own_stdin() {
        assert_eq!(
            vyos_generate("wg0"),
            "source /opt/vyatta/etc/functions/script-template\nconfigure\nrun generate pki wireguard key-pair install interface wg0 <<< y\necho fabric-generated\n"
        );
        assert_eq!(
            vyos_stage(&["set interfaces wireguard wg0 peer sp public-key 'K='".into()]),
            "set interfaces wireguard wg0 peer sp public-key 'K='\necho fabric-staged\n"
        );
        assert_eq!(vyos_trigger(1, ConfirmForm::Prompts), "commit-confirm 1 <<< y\nexit\n");
    }

    #[test]
    fn only_the_public_key_is_taken_from_an_answer() {
        let out = format!(
            "1 value(s) installed. Use \"compare\" to see the pending changes, and \"commit\" to apply.\nCorresponding public-key to use on peer system is: '{K}'\n"
        );
        assert_eq!(generated_key(&out).map(|k| k.to_string()).as_deref(), Some(K));
        assert_eq!(generated_key("Corresponding public-key to use on peer system is: 'x; reboot'\n"), None);
        let failed = format!(
            "Failed to install 1 value(s). Commands to manually install:\nset interfaces wireguard wg0 private-key '{K}'\n"
        );
        assert!(!scrub(&failed).contains(K), "{}", scrub(&failed));
        assert_eq!(printed_key(&format!("{K}\n")).map(|k| k.to_string()).as_deref(), Some(K));
    }

    #[test]
    fn the_loss_window_is_the_longest_run_of_lost_pings() {
        let out = "fabric-interval 0.05\nPING 172.30.2.10 (172.30.2.10) 56(84) bytes of data.\n\
                   64 bytes from 172.30.2.10: icmp_seq=1 ttl=62 time=0.4 ms\n\
                   64 bytes from 172.30.2.10: icmp_seq=2 ttl=62 time=0.4 ms\n\
                   64 bytes from 172.30.2.10: icmp_seq=6 ttl=62 time=0.4 ms\n\
                   64 bytes from 172.30.2.10: icmp_seq=8 ttl=62 time=0.4 ms\n\n\
                   --- 172.30.2.10 ping statistics ---\n8 packets transmitted, 4 received, 50% packet loss, time 700ms\n";
        let l = loss_of(out).unwrap();
        // Asked every 50 ms, kept every 100 ms (700 ms for 8): three in a row lost is ~300 ms.
        assert_eq!(l, Loss { sent: 8, lost: 4, window_ms: 300, interval_ms: 100 });
        assert_eq!(l.line(), "tunnel down for ~300 ms (4 of 8 pings lost, one every ~100 ms)");
        let no_time = out.replace(", time 700ms", "");
        assert_eq!(loss_of(&no_time).unwrap().interval_ms, 50, "without its time, the interval asked");
        assert_eq!(loss_of("not ping"), None);
        let probe = loss_probe("172.30.2.10".parse().unwrap());
        let o = std::process::Command::new("sh").arg("-n").arg("-c").arg(probe.as_str()).output().unwrap();
        assert!(o.status.success(), "{probe}");
    }
}
