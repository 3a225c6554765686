#!/usr/bin/env bash
# Two-site lab for fabric, built from network namespaces on one machine.
#
# It gives the integration tests (and CI, which runs as root on a fresh
# Debian 12) real hosts to provision over SSH: two routers with a "public"
# link into a fake internet, a LAN host behind each router, optional extra
# plain hosts, and optional WAN latency. Nothing it creates can reach the
# outside world: the only link into the root namespace is a /30 management
# link per host, and the fake internet has a blackhole default route.
#
# See tests/lab/README.md for the layout (every address) and the pitfalls.
#
# Usage: lab.sh deps | up [--hosts N] [--delay-ms MS] [--vyos-routers] [--firewall] [--jumps]
#        | down | status
#        | cut SITE | restore SITE | cut-mgmt SITE|HOST | restore-mgmt SITE|HOST
#        | exec HOST CMD...
# Environment: LAB_PREFIX (default fl), LAB_DIR (default /tmp/fabric-lab, or
#              /tmp/fabric-lab-<prefix> for another prefix),
#              LAB_MGMT_NET (first two octets of the management range,
#              default 10.250), LAB_KEEP_ON_FAIL=1 (do not tear down a
#              failed `up`, for debugging), LAB_VYOS_DOUBLE (path of the
#              VyOS test double; set, or `up --vyos-routers`, makes both
#              routers play VyOS).
set -euo pipefail

LAB_PREFIX="${LAB_PREFIX:-fl}"
# Each prefix gets its own default state dir so parallel labs do not share one.
if [[ "$LAB_PREFIX" == fl ]]; then
	LAB_DIR="${LAB_DIR:-/tmp/fabric-lab}"
else
	LAB_DIR="${LAB_DIR:-/tmp/fabric-lab-$LAB_PREFIX}"
fi
LAB_MGMT_NET="${LAB_MGMT_NET:-10.250}"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The system interpreter, never a pyenv shim: root's PATH on the dev machines
# starts with pyenv, which is slow and not stdlib-clean.
PYTHON=/usr/bin/python3
# What an SSH session gets; also used by `exec` so both behave the same.
CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
SITES=(franca sp)
DEPS_PACKAGES=(openssh-server openssh-client wireguard-tools wireguard-go
	iproute2 iputils-ping python3 util-linux hostname sudo nftables iptables
	postgresql redis-server python3-venv)
# Marks a state dir as ours, so `down` only ever deletes a directory that this
# script created (LAB_DIR is user-supplied).
MARKER=.fabric-lab

P="$LAB_PREFIX"
# VyOS test double for the routers (empty: plain routers); see write_sshd_config.
VYOS_DOUBLE="${LAB_VYOS_DOUBLE:-}"

die() {
	echo "lab.sh: $*" >&2
	exit 1
}

log() {
	echo "lab.sh: $*" >&2
}

validate_env() {
	# Root-side interface names are "<prefix>-<tag>" and must fit in 15
	# characters (IFNAMSIZ); keeping the prefix short and simple also makes
	# the namespace-name matching in `down` unambiguous.
	[[ "$P" =~ ^[a-z0-9]{1,5}$ ]] || die "LAB_PREFIX must be 1-5 chars of [a-z0-9], got '$P'"
	[[ "$LAB_MGMT_NET" =~ ^[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
		die "LAB_MGMT_NET must be two octets like 10.250, got '$LAB_MGMT_NET'"
	[[ "$LAB_DIR" == /* && "$LAB_DIR" != / ]] || die "LAB_DIR must be an absolute path, got '$LAB_DIR'"
}

# ---------------------------------------------------------------------------
# Naming and addressing. A "host" is any namespace with an sshd:
# franca-router, franca-lan, sp-router, sp-lan, host1..hostN.

site_index() {
	case "$1" in
	franca) echo 1 ;;
	sp) echo 2 ;;
	*) die "unknown site '$1' (expected franca or sp)" ;;
	esac
}

ns_of() { echo "$P-$1"; }
wan_ns() { echo "$P-wan"; }

# Root-namespace end of a host's management veth (<= 15 chars).
mgmt_if_of() {
	case "$1" in
	franca-router) echo "$P-fr-r" ;;
	franca-lan) echo "$P-fr-l" ;;
	sp-router) echo "$P-sp-r" ;;
	sp-lan) echo "$P-sp-l" ;;
	host[0-9]*) echo "$P-h${1#host}" ;;
	jump1) echo "$P-j1" ;;
	# jump2 has no management link (reached through jump1 only).
	jump2) echo "" ;;
	*) die "unknown host '$1'" ;;
	esac
}

# Prints "<root-side address> <host-side address>" of the host's /30.
# Sites use $NET.<site>.0/30 (router) and $NET.<site>.4/30 (LAN host); extra
# hosts are packed from $NET.10.0 upwards, 64 per /24.
mgmt_addrs_of() {
	local host="$1" third fourth off
	case "$host" in
	franca-router) third=1 fourth=0 ;;
	franca-lan) third=1 fourth=4 ;;
	sp-router) third=2 fourth=0 ;;
	sp-lan) third=2 fourth=4 ;;
	host[0-9]*)
		off=$(((${host#host} - 1) * 4))
		third=$((10 + off / 256))
		fourth=$((off % 256))
		;;
	# jump1's management /30; jump2's "root side" is jump1's end of their link.
	jump1) third=20 fourth=0 ;;
	jump2) third=21 fourth=0 ;;
	*) die "unknown host '$host'" ;;
	esac
	echo "$LAB_MGMT_NET.$third.$((fourth + 1)) $LAB_MGMT_NET.$third.$((fourth + 2))"
}

mgmt_ip_of() {
	local a
	read -r _ a <<<"$(mgmt_addrs_of "$1")"
	echo "$a"
}

host_dir() { echo "$LAB_DIR/hosts/$1"; }

# Hosts of the running lab, from the state the `up` run recorded.
lab_hosts() {
	local n=0 i s jumps=0
	if [[ -f "$LAB_DIR/lab.env" ]]; then
		n=$(sed -n 's/^LAB_HOSTS=//p' "$LAB_DIR/lab.env")
		jumps=$(sed -n 's/^LAB_JUMPS=//p' "$LAB_DIR/lab.env")
	fi
	for s in "${SITES[@]}"; do
		echo "$s-router"
		echo "$s-lan"
	done
	for ((i = 1; i <= n; i++)); do echo "host$i"; done
	if [[ "$jumps" == 1 ]]; then
		echo jump1
		echo jump2
	fi
}

lab_namespaces() {
	ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$P-" | sort || true
}

sshd_pid() {
	local f
	f="$(host_dir "$1")/sshd.pid"
	[[ -s "$f" ]] || return 1
	local pid
	pid=$(<"$f")
	kill -0 "$pid" 2>/dev/null || return 1
	echo "$pid"
}

ssh_lab() {
	ssh -F "$LAB_DIR/ssh_config" "$@"
}

# ---------------------------------------------------------------------------
# deps

cmd_deps() {
	local missing=() pkg
	for pkg in "${DEPS_PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$pkg")
		fi
	done
	if ((${#missing[@]} == 0)); then
		log "deps: all present (${DEPS_PACKAGES[*]})"
		return 0
	fi
	log "deps: installing ${missing[*]}"
	# Without systemd, a package's postinst starts its service through
	# invoke-rc.d: openssh-server would then start a system sshd on *:22 of
	# the root namespace. A policy-rc.d that answers 101 forbids that; only
	# add one (and remove it again) if the machine has none of its own.
	local policy=/usr/sbin/policy-rc.d added_policy=0
	if [[ ! -e "$policy" ]]; then
		printf '#!/bin/sh\n# temporary, from fabric tests/lab/lab.sh deps\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		added_policy=1
	fi
	local rc=0
	{
		DEBIAN_FRONTEND=noninteractive apt-get update -q &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
	} || rc=$?
	if ((added_policy)); then rm -f "$policy"; fi
	((rc == 0)) || die "deps: apt-get failed (exit $rc)"
	log "deps: installed ${missing[*]}"
}

check_deps() {
	local c
	for c in sshd ssh ssh-keygen wg wireguard-go ip ping unshare nsenter hostname; do
		PATH="$CLEAN_PATH" command -v "$c" >/dev/null || die "missing '$c': run 'lab.sh deps' first"
	done
	[[ -x "$PYTHON" ]] || die "missing $PYTHON: run 'lab.sh deps' first"
	[[ -c /dev/net/tun ]] || die "/dev/net/tun is missing (wireguard-go and the delay relay need it)"
	((EUID == 0)) || die "must run as root"
}

# ---------------------------------------------------------------------------
# up

# Namespace with loopback up and no IPv6 (the lab is IPv4-only; this keeps
# router solicitations and DAD chatter off every link).
new_ns() {
	local ns="$1"
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# Point-to-point management link from the root namespace to a host: the only
# way in or out of the lab.
add_mgmt_link() {
	local host="$1" ns rif rip hip
	ns=$(ns_of "$host")
	rif=$(mgmt_if_of "$host")
	read -r rip hip <<<"$(mgmt_addrs_of "$host")"
	ip link add "$rif" type veth peer name mgmt0 netns "$ns"
	if [[ -e "/proc/sys/net/ipv6/conf/$rif/disable_ipv6" ]]; then
		echo 1 >"/proc/sys/net/ipv6/conf/$rif/disable_ipv6"
	fi
	ip addr add "$rip/30" dev "$rif"
	ip link set "$rif" up
	ip -n "$ns" addr add "$hip/30" dev mgmt0
	ip -n "$ns" link set mgmt0 up
}

setup_wan() {
	local w
	w=$(wan_ns)
	new_ns "$w"
	# wan routes between the sites like the internet would. Its default route
	# is a blackhole so nothing addressed outside the lab goes anywhere.
	ip netns exec "$w" sysctl -qw net.ipv4.ip_forward=1 \
		net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
	ip -n "$w" route add blackhole default
}

setup_site() {
	local site="$1" i w r l
	i=$(site_index "$site")
	w=$(wan_ns)
	r=$(ns_of "$site-router")
	l=$(ns_of "$site-lan")
	new_ns "$r"
	new_ns "$l"
	ip netns exec "$r" sysctl -qw net.ipv4.ip_forward=1

	# Public link: router wan0 198.18.<i>.2/24 <-> wan <site>0 198.18.<i>.1/24.
	ip -n "$r" link add wan0 type veth peer name "${site}0" netns "$w"
	ip -n "$w" addr add "198.18.$i.1/24" dev "${site}0"
	ip -n "$w" link set "${site}0" up
	ip -n "$r" addr add "198.18.$i.2/24" dev wan0
	ip -n "$r" link set wan0 up
	ip -n "$r" route add default via "198.18.$i.1"

	# Site LAN: router lan0 172.30.<i>.1/24 <-> LAN host eth0 172.30.<i>.10/24.
	ip -n "$r" link add lan0 type veth peer name eth0 netns "$l"
	ip -n "$r" addr add "172.30.$i.1/24" dev lan0
	ip -n "$r" link set lan0 up
	ip -n "$l" addr add "172.30.$i.10/24" dev eth0
	ip -n "$l" link set eth0 up
	ip -n "$l" route add default via "172.30.$i.1"

	add_mgmt_link "$site-router"
	add_mgmt_link "$site-lan"
}

# Two jump hosts in a row (up --jumps): jump1 has a management link; jump2 is
# linked to jump1 only ($NET.21.0/30, inside the blackholed management range,
# and jump1 does not forward) and to the fake internet (198.18.3.2/24), from
# where it reaches the routers' public addresses. So a router's public address
# is reachable from the root namespace only by SSH through jump1 then jump2.
setup_jumps() {
	local w j1 j2 a b
	w=$(wan_ns)
	j1=$(ns_of jump1)
	j2=$(ns_of jump2)
	new_ns "$j1"
	new_ns "$j2"
	add_mgmt_link jump1
	read -r a b <<<"$(mgmt_addrs_of jump2)"
	ip -n "$j1" link add inner0 type veth peer name outer0 netns "$j2"
	ip -n "$j1" addr add "$a/30" dev inner0
	ip -n "$j1" link set inner0 up
	ip -n "$j2" addr add "$b/30" dev outer0
	ip -n "$j2" link set outer0 up
	ip -n "$j2" link add wan0 type veth peer name jump0 netns "$w"
	ip -n "$w" addr add 198.18.3.1/24 dev jump0
	ip -n "$w" link set jump0 up
	ip -n "$j2" addr add 198.18.3.2/24 dev wan0
	ip -n "$j2" link set wan0 up
	ip -n "$j2" route add default via 198.18.3.1
}

# A hardened router (up --firewall): the operator's own nftables table `inet
# lab` drops by default what comes in or is forwarded, except the management
# link, loopback and replies. B.1 must open what the tunnel needs (WireGuard's
# port, LAN-to-LAN forwarding) without touching this table's rules.
setup_firewall() {
	local r
	r=$(ns_of "$1-router")
	PATH="$CLEAN_PATH" command -v nft >/dev/null || die "missing 'nft': run 'lab.sh deps' first"
	ip netns exec "$r" nft -f - <<-'EOF'
		table inet lab {
			chain input {
				type filter hook input priority filter; policy drop;
				iif "lo" accept
				iifname "mgmt0" accept
				ct state established,related accept
			}
			chain forward {
				type filter hook forward priority filter; policy drop;
				ct state established,related accept
			}
		}
	EOF
}

# WAN latency without netem: traffic arriving from either router is policy-
# routed into a TUN device whose reader (delay_relay.py) writes each packet
# back after the delay; written-back packets arrive with iif=dly0 and take the
# main table to the other site. So each direction is delayed once.
setup_delay() {
	local ms="$1" w pidfile s
	w=$(wan_ns)
	pidfile="$LAB_DIR/relay.pid"
	ip -n "$w" tuntap add dev dly0 mode tun
	ip netns exec "$w" sysctl -qw net.ipv4.conf.dly0.rp_filter=0
	ip -n "$w" link set dly0 up
	# setsid + closed stdio: the relay must not hold the caller's terminal or
	# pipes open (CI captures our output and would wait forever).
	ip netns exec "$w" setsid "$PYTHON" -I "$SCRIPT_DIR/delay_relay.py" dly0 "$ms" "$pidfile" \
		>"$LAB_DIR/relay.log" 2>&1 </dev/null &
	local t
	for ((t = 0; t < 100; t++)); do
		[[ -s "$pidfile" ]] && break
		sleep 0.05
	done
	[[ -s "$pidfile" ]] || die "delay relay did not start: $(cat "$LAB_DIR/relay.log")"
	ip -n "$w" route add default dev dly0 table 100
	for s in "${SITES[@]}"; do
		ip -n "$w" rule add iif "${s}0" lookup 100 pref 100
	done
}

write_sshd_config() {
	local host="$1" d
	d=$(host_dir "$host")
	cat >"$d/sshd_config" <<EOF
# Generated by tests/lab/lab.sh for lab host $host. Not the system config.
# Every address of the host: the LAN hosts are also reached through their
# router (ProxyJump) at their LAN address.
ListenAddress 0.0.0.0:22
HostKey $d/ssh_host_ed25519_key
PidFile $d/sshd.pid
# PAM would need a login session setup the lab does not have.
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $LAB_DIR/authorized_keys
# LAB_DIR usually lives under world-writable /tmp, which StrictModes rejects.
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
# fabric and the benchmarks open many sessions at once.
MaxSessions 100
MaxStartups 200:30:400
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
# fabric's host locks live as long as the session holding them (src/live/locks.rs): a client
# that vanished without closing its connection (a partition, a suspended laptop) is dropped
# at its 4th unanswered keepalive 5 s apart (nominally 20 s; 38 s measured with OpenSSH 9.2)
# (sshd_config(5); the default ClientAliveInterval 0 would keep it until TCP gives up, hours).
ClientAliveInterval 5
ClientAliveCountMax 3
EOF
	# --- VyOS test double (up --vyos-routers / LAB_VYOS_DOUBLE) -------------
	# Owned by the vyos_double work (examples/vyos_double.rs,
	# crates/testkit/src/vyos_double.md): every SSH session to a router runs the
	# double, which plays a VyOS 1.4 router with its state in $d/vyos.
	# commit-confirm N counts seconds there (tests), not minutes; LAB_VYOS_MINUTE=S
	# makes one "minute" last S seconds instead.
	if [[ -n "$VYOS_DOUBLE" && "$host" == *-router ]]; then
		mkdir -m 0700 "$d/vyos"
		cat >>"$d/sshd_config" <<EOF
ForceCommand $VYOS_DOUBLE
SetEnv VYOS_DOUBLE_STATE=$d/vyos VYOS_DOUBLE_CONFIRM_UNIT=${LAB_VYOS_MINUTE:-seconds}
EOF
	fi
	# --- end VyOS test double -----------------------------------------------
}

# Starts the host's sshd in its own mount and UTS namespaces (inside the
# network namespace) so that:
#  - /run is a private tmpfs: wireguard-go and wg use /run/wireguard/<if>.sock,
#    which would otherwise be shared by every namespace and collide between
#    the two routers; /run/sshd (sshd's privsep dir) is created there;
#  - root's ~/.bashrc and ~/.profile are hidden by an empty file: on the dev
#    machines they start pyenv, which costs ~70 ms per SSH command and puts a
#    pyenv python3 first in PATH;
#  - `hostname` answers the lab host name;
#  - /etc/wireguard, /etc/rancher and /var/lib/rancher are per host (bind
#    mounts of directories under the host's state dir), so files fabric writes
#    stay on that host; /usr/local/bin, /etc/systemd/system and /var/lib are
#    per-host overlays over the machine's (a K3s install writes there).
# Every SSH session and `lab.sh exec` (nsenter into sshd's namespaces) sees
# this view.
start_sshd() {
	local host="$1" ns d
	ns=$(ns_of "$host")
	d=$(host_dir "$host")
	# shellcheck disable=SC2016 # expanded by the inner sh, not here
	ip netns exec "$ns" unshare --mount --uts --propagation private -- /bin/sh -c '
		set -e
		mount -t tmpfs -o mode=0755,size=64m lab-run /run
		mkdir -m 0755 /run/sshd /run/lock
		mkdir -m 0700 /run/wireguard
		for f in /root/.bashrc /root/.profile; do
			if [ -e "$f" ]; then mount --bind "$3" "$f"; fi
		done
		# Per-host configuration directories: what fabric writes on one lab host
		# must not appear on another (they share the root file system).
		for e in wireguard rancher; do
			mkdir -p "$2/etc-$e" "/etc/$e"
			mount --bind "$2/etc-$e" "/etc/$e"
		done
		# What a K3s install writes outside those (the binary, its service, the
		# staging directory of fabric under /var/lib/fabric) lands in a per-host
		# overlay: the files of the machine stay visible and untouched.
		for e in usr/local/bin etc/systemd/system var/lib; do
			[ -d "/$e" ] || continue
			o="$2/overlay-$(echo "$e" | tr / -)"
			mkdir -p "$o/up" "$o/work"
			mount -t overlay lab-overlay -o "lowerdir=/$e,upperdir=$o/up,workdir=$o/work" "/$e"
		done
		# K3s servers keep their state (the node token agents join with) here.
		mkdir -p "$2/var-lib-rancher" /var/lib/rancher
		mount --bind "$2/var-lib-rancher" /var/lib/rancher
		# Operator accounts, as production hosts often have them: `fabricop` may
		# become root with sudo (no password), `guest` may not. Per-host copies
		# of the account files, so those of the machine stay untouched; /etc/hosts
		# names the host, so sudo can resolve it.
		for f in passwd group shadow hosts; do cp "/etc/$f" "$2/etc-$f"; done
		printf "fabricop:x:4242:4242:fabric operator:%s/home-fabricop:/bin/sh\nguest:x:4243:4243:guest:%s/home-guest:/bin/sh\n" "$2" "$2" >>"$2/etc-passwd"
		printf "fabricop:x:4242:\nguest:x:4243:\n" >>"$2/etc-group"
		printf "fabricop:*:19000:0:99999:7:::\nguest:*:19000:0:99999:7:::\n" >>"$2/etc-shadow"
		printf "127.0.1.1 %s\n" "$1" >>"$2/etc-hosts"
		for f in passwd group shadow hosts; do mount --bind "$2/etc-$f" "/etc/$f"; done
		mkdir -p "$2/home-fabricop" "$2/home-guest" "$2/sudoers.d" /etc/sudoers.d
		chown 4242:4242 "$2/home-fabricop"
		chown 4243:4243 "$2/home-guest"
		printf "fabricop ALL=(root) NOPASSWD: ALL\n" >"$2/sudoers.d/fabricop"
		chmod 0440 "$2/sudoers.d/fabricop"
		mount --bind "$2/sudoers.d" /etc/sudoers.d
		hostname "$1"
		exec /usr/sbin/sshd -f "$2/sshd_config" -E "$2/sshd.log"
	' lab-sshd "$host" "$d" "$LAB_DIR/empty"
}

write_ssh_files() {
	local host d ip
	: >"$LAB_DIR/known_hosts"
	{
		echo "# Generated by tests/lab/lab.sh. Use: ssh -F $LAB_DIR/ssh_config <host>"
		for host in "$@"; do
			ip=$(mgmt_ip_of "$host")
			printf 'Host %s\n    HostName %s\n' "$host" "$ip"
			# jump2 is reached through jump1 only.
			if [[ "$host" == jump2 ]]; then printf '    ProxyJump jump1\n'; fi
		done
		echo
		echo "Host $*"
		cat <<EOF
    Port 22
    User root
    IdentityFile $LAB_DIR/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $LAB_DIR/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    CheckHostIP no
    BatchMode yes
    ConnectTimeout 5
    LogLevel ERROR
EOF
	} >"$LAB_DIR/ssh_config"
	for host in "$@"; do
		d=$(host_dir "$host")
		ip=$(mgmt_ip_of "$host")
		# Both the alias and the address, so that clients that connect by IP
		# (and do not read ssh_config) also check strictly.
		echo "$host,$ip $(cut -d' ' -f1,2 "$d/ssh_host_ed25519_key.pub")" >>"$LAB_DIR/known_hosts"
	done
}

wait_ssh() {
	local host t
	for host in "$@"; do
		for ((t = 0; t < 50; t++)); do
			if ssh_lab -o ConnectTimeout=2 "$host" true 2>/dev/null; then
				continue 2
			fi
			sleep 0.1
		done
		die "sshd of $host does not answer: $(tail -n 5 "$(host_dir "$host")/sshd.log" 2>/dev/null)"
	done
}

UP_DONE=0
on_up_exit() {
	if ((UP_DONE == 0)); then
		if [[ "${LAB_KEEP_ON_FAIL:-0}" == 1 ]]; then
			log "up failed; leaving the partial lab for debugging (LAB_KEEP_ON_FAIL=1); run 'lab.sh down' after"
		else
			log "up failed; tearing the partial lab down (set LAB_KEEP_ON_FAIL=1 to keep it)"
			cmd_down >/dev/null 2>&1 || true
		fi
	fi
}

cmd_up() {
	local nhosts=0 delay=0 firewall=0 jumps=0
	while (($#)); do
		case "$1" in
		--hosts)
			nhosts="${2:-}"
			shift 2 || die "--hosts needs a value"
			;;
		--delay-ms)
			delay="${2:-}"
			shift 2 || die "--delay-ms needs a value"
			;;
		--vyos-routers) # VyOS test double, see write_sshd_config
			VYOS_DOUBLE="${LAB_VYOS_DOUBLE:-$SCRIPT_DIR/../../target/debug/examples/vyos_double}"
			shift
			;;
		--firewall) # hardened Linux routers, see setup_firewall
			firewall=1
			shift
			;;
		--jumps) # two jump hosts in a row, see setup_jumps
			jumps=1
			shift
			;;
		*) die "up: unknown option '$1'" ;;
		esac
	done
	if ! [[ "$nhosts" =~ ^[0-9]+$ ]] || ((nhosts > 500)); then die "--hosts must be an integer 0..500"; fi
	if ! [[ "$delay" =~ ^[0-9]+$ ]] || ((delay > 10000)); then die "--delay-ms must be an integer 0..10000"; fi
	if [[ -n "$VYOS_DOUBLE" ]]; then # VyOS test double, see write_sshd_config
		[[ -x "$VYOS_DOUBLE" ]] || die "VyOS test double $VYOS_DOUBLE is missing: cargo build --example vyos_double"
		VYOS_DOUBLE=$(realpath "$VYOS_DOUBLE")
	fi
	check_deps

	# `up` on a lab that is already up fails instead of guessing: tests must
	# start from a known state, and `down && up` is cheap.
	local existing
	existing=$(lab_namespaces | paste -sd' ' -)
	[[ -z "$existing" ]] || die "lab '$P' is already up (namespaces: $existing); run 'lab.sh down' first"
	if ip -4 -o addr show | awk '{print $4}' | grep -q "^${LAB_MGMT_NET//./\\.}\." ||
		[[ -n "$(ip -4 route show "$LAB_MGMT_NET.0.0/16")" ]]; then
		die "management range $LAB_MGMT_NET.0.0/16 is already in use in the root namespace (another lab?); set LAB_MGMT_NET"
	fi
	if [[ -e "$LAB_DIR" ]]; then
		# A state dir of ours without namespaces is left over from a crash.
		[[ -e "$LAB_DIR/$MARKER" ]] || die "LAB_DIR $LAB_DIR exists and was not created by lab.sh; refusing to use it"
		rm -rf -- "$LAB_DIR"
	fi

	trap on_up_exit EXIT
	mkdir -p "$LAB_DIR/hosts"
	chmod 0755 "$LAB_DIR"
	: >"$LAB_DIR/$MARKER"
	: >"$LAB_DIR/empty"
	printf 'LAB_PREFIX=%s\nLAB_HOSTS=%s\nLAB_DELAY_MS=%s\nLAB_MGMT_NET=%s\nLAB_JUMPS=%s\n' \
		"$P" "$nhosts" "$delay" "$LAB_MGMT_NET" "$jumps" >"$LAB_DIR/lab.env"
	ssh-keygen -q -t ed25519 -N '' -C "fabric-lab-client" -f "$LAB_DIR/id_ed25519"
	cp "$LAB_DIR/id_ed25519.pub" "$LAB_DIR/authorized_keys"

	local hosts=() host s i
	mapfile -t hosts < <(lab_hosts)

	# Safety net for the hard rule that lab traffic never leaves the machine:
	# if a management link is missing or down, packets for its address hit
	# this blackhole instead of the root namespace's default route.
	ip route add blackhole "$LAB_MGMT_NET.0.0/16"
	# The same for the lab's fake internet and LANs: they exist only inside
	# namespaces, so from the root namespace they must never route outwards.
	# Every lab shares them: each lab registers itself, and the last one to go
	# removes them, only if a lab added them (a route that was there before any
	# lab is never touched).
	shared_blackholes_up

	setup_wan
	for s in "${SITES[@]}"; do setup_site "$s"; done
	for ((i = 1; i <= nhosts; i++)); do
		new_ns "$(ns_of "host$i")"
		add_mgmt_link "host$i"
	done
	if ((jumps)); then setup_jumps; fi
	if ((delay > 0)); then setup_delay "$delay"; fi
	if ((firewall)); then
		[[ -z "$VYOS_DOUBLE" ]] || die "--firewall is for Linux routers (the VyOS double does not realize firewall rules)"
		for s in "${SITES[@]}"; do setup_firewall "$s"; done
	fi

	for host in "${hosts[@]}"; do
		mkdir -p "$(host_dir "$host")"
		ssh-keygen -q -t ed25519 -N '' -C "$host" -f "$(host_dir "$host")/ssh_host_ed25519_key"
		write_sshd_config "$host"
	done
	write_ssh_files "${hosts[@]}"
	for host in "${hosts[@]}"; do start_sshd "$host"; done
	wait_ssh "${hosts[@]}"

	UP_DONE=1
	trap - EXIT
	log "lab '$P' up: ${#hosts[@]} hosts, WAN delay ${delay} ms one-way"
	log "ssh: ssh -F $LAB_DIR/ssh_config franca-router"
}

# ---------------------------------------------------------------------------
# down

# Ends every process whose network namespace is one of the lab's: the sshds,
# sessions still open, wireguard-go daemons the tests started, the relay.
kill_ns_processes() {
	local ns="$1" pids t
	for t in TERM TERM TERM TERM TERM TERM TERM TERM TERM TERM KILL; do
		pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
		[[ -n "${pids// /}" ]] || return 0
		# shellcheck disable=SC2086 # word splitting of the pid list is intended
		kill -s "$t" $pids 2>/dev/null || true
		sleep 0.1
	done
}

# The shared blackholes (198.18.0.0/15, 172.30.0.0/16) and who needs them:
# one file per running lab under $SHARED/users, and $SHARED/added-<net> when a
# lab added that route (rather than finding it there).
SHARED=/run/fabric-lab-shared
SHARED_NETS=(198.18.0.0/15 172.30.0.0/16)

shared_blackholes_up() {
	local net key
	mkdir -p "$SHARED/users"
	(
		flock 9
		for net in "${SHARED_NETS[@]}"; do
			key=${net//\//_}
			if ! ip route show type blackhole "$net" | grep -q .; then
				ip route add blackhole "$net"
				touch "$SHARED/added-$key"
			fi
		done
		touch "$SHARED/users/$P"
	) 9>"$SHARED/lock"
}

shared_blackholes_down() {
	local net key
	[[ -d "$SHARED" ]] || return 0
	(
		flock 9
		rm -f "$SHARED/users/$P"
		# Another lab still up keeps them; a lab that died without `down` is
		# one whose namespaces are gone.
		local u live=0
		for u in "$SHARED"/users/*; do
			[[ -e "$u" ]] || continue
			if ip netns list 2>/dev/null | awk '{print $1}' | grep -q "^$(basename "$u")-"; then live=1; else rm -f "$u"; fi
		done
		if ((live == 0)); then
			for net in "${SHARED_NETS[@]}"; do
				key=${net//\//_}
				if [[ -e "$SHARED/added-$key" ]]; then
					ip route del blackhole "$net" 2>/dev/null || true
					rm -f "$SHARED/added-$key"
				fi
			done
		fi
	) 9>"$SHARED/lock"
}

cmd_down() {
	validate_env
	local ns l
	for ns in $(lab_namespaces); do kill_ns_processes "$ns"; done
	if [[ -s "$LAB_DIR/relay.pid" ]]; then
		kill "$(<"$LAB_DIR/relay.pid")" 2>/dev/null || true
	fi
	for ns in $(lab_namespaces); do ip netns del "$ns" 2>/dev/null || true; done
	# Deleting a namespace deletes both ends of its veths; this catches a root
	# end whose peer never made it into a namespace (crash mid-up).
	for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^$P-" || true); do
		ip link del "$l" 2>/dev/null || true
	done
	# Last, so the management range stays blackholed until every link is gone.
	# Only the range this lab recorded: another lab may own LAB_MGMT_NET's.
	local net
	if [[ -f "$LAB_DIR/lab.env" ]]; then
		net=$(sed -n 's/^LAB_MGMT_NET=//p' "$LAB_DIR/lab.env")
		ip route del blackhole "$net.0.0/16" 2>/dev/null || true
	fi
	shared_blackholes_down
	if [[ -e "$LAB_DIR/$MARKER" ]]; then rm -rf -- "$LAB_DIR"; fi
	log "lab '$P' down"
}

# ---------------------------------------------------------------------------
# partitions

require_up() {
	[[ -n "$(lab_namespaces)" ]] || die "lab '$P' is not up"
}

cmd_cut_wan() {
	local action="$1" site="${2:-}"
	[[ -n "$site" ]] || die "usage: lab.sh cut|restore SITE"
	site_index "$site" >/dev/null
	require_up
	# The wan side is taken down, not the router's wan0: the router keeps its
	# addresses and routes as with a real upstream outage (it just loses
	# carrier), and `restore` needs nothing but the link back up.
	ip -n "$(wan_ns)" link set "${site}0" "$action"
	log "WAN link of $site $action"
}

cmd_cut_mgmt() {
	local action="$1" what="${2:-}" hosts=() h
	[[ -n "$what" ]] || die "usage: lab.sh cut-mgmt|restore-mgmt SITE|HOST"
	require_up
	case "$what" in
	franca | sp) hosts=("$what-router" "$what-lan") ;;
	*)
		mgmt_if_of "$what" >/dev/null
		hosts=("$what")
		;;
	esac
	for h in "${hosts[@]}"; do
		# The host's end is taken down, not the root end: the root namespace
		# keeps its connected /30 route (now "linkdown") and drops the
		# packets, like a dead cable. Downing the root end would remove that
		# route and send lab-bound packets to the machine's default gateway.
		ip -n "$(ns_of "$h")" link set mgmt0 "$action"
		log "management link of $h $action"
	done
}

# ---------------------------------------------------------------------------
# status / exec

cmd_status() {
	validate_env
	local nss host pid answers ns
	nss=$(lab_namespaces)
	if [[ -z "$nss" ]]; then
		echo "lab '$P': down"
		return 0
	fi
	echo "lab '$P': up (LAB_DIR=$LAB_DIR)"
	[[ -f "$LAB_DIR/lab.env" ]] && sed 's/^/  /' "$LAB_DIR/lab.env"
	echo "namespaces:"
	for ns in $nss; do
		echo "  $ns"
		ip -n "$ns" -br -4 addr show | grep -v '^lo ' | sed 's/^/      /' || true
	done
	echo "management links (root side):"
	ip -br -4 addr show | grep -E "^$P-" | sed 's/^/  /' || true
	if [[ -s "$LAB_DIR/relay.pid" ]] && kill -0 "$(<"$LAB_DIR/relay.pid")" 2>/dev/null; then
		echo "delay relay: running (pid $(<"$LAB_DIR/relay.pid"))"
	fi
	echo "sshd:"
	while read -r host; do
		pid=$(sshd_pid "$host") || pid="-"
		answers=no
		# -n: ssh must not eat the host list this loop reads from stdin.
		if ssh_lab -n -o ConnectTimeout=2 "$host" true 2>/dev/null; then answers=yes; fi
		printf '  %-14s %-15s sshd pid %-7s answers: %s\n' "$host" "$(mgmt_ip_of "$host")" "$pid" "$answers"
	done < <(lab_hosts)
}

cmd_exec() {
	local host="${1:-}" ns pid
	[[ -n "$host" && $# -ge 2 ]] || die "usage: lab.sh exec HOST CMD..."
	shift
	if [[ "$host" == wan ]]; then
		ns=$(wan_ns)
	else
		mgmt_if_of "$host" >/dev/null
		ns=$(ns_of "$host")
	fi
	ip netns list | awk '{print $1}' | grep -qx "$ns" || die "no namespace $ns (is the lab up?)"
	# Join sshd's mount and UTS namespaces too when it runs, so the command
	# sees the host's private /run (wireguard sockets) like an SSH session.
	if [[ "$host" != wan ]] && pid=$(sshd_pid "$host"); then
		exec env PATH="$CLEAN_PATH" nsenter -t "$pid" -n -m -u -- "$@"
	fi
	exec env PATH="$CLEAN_PATH" ip netns exec "$ns" "$@"
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

# Commands on a running lab use the management range it was built with, so
# they need not be given the same LAB_MGMT_NET as `up` was.
load_state() {
	local net=""
	if [[ -f "$LAB_DIR/lab.env" ]]; then
		net=$(sed -n 's/^LAB_MGMT_NET=//p' "$LAB_DIR/lab.env")
	fi
	if [[ -n "$net" ]]; then LAB_MGMT_NET="$net"; fi
}

main() {
	validate_env
	local cmd="${1:-}"
	[[ $# -gt 0 ]] && shift
	case "$cmd" in
	deps | up) ;;
	*) load_state ;;
	esac
	case "$cmd" in
	deps) cmd_deps ;;
	up) cmd_up "$@" ;;
	down) cmd_down ;;
	status) cmd_status ;;
	cut) cmd_cut_wan down "$@" ;;
	restore) cmd_cut_wan up "$@" ;;
	cut-mgmt) cmd_cut_mgmt down "$@" ;;
	restore-mgmt) cmd_cut_mgmt up "$@" ;;
	exec) cmd_exec "$@" ;;
	-h | --help | help) usage ;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
