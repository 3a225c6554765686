#!/usr/bin/env bash
# The whole test suite, as the README gives it and as CI (.ci/run) runs it.
#
# Installs what the tests need (as root: the network lab's Debian packages), then runs the
# formatter check, clippy with warnings as errors, and every test target. Exits non-zero on the
# first failure. Nothing here reaches outside this machine except the package registries.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

if [[ "$(id -u)" == 0 ]]; then
	step "system packages for the network lab (tests/lab/lab.sh deps)"
	bash tests/lab/lab.sh deps
	if ! command -v gcc >/dev/null; then
		step "gcc, for kine's SQLite driver (cgo; scripts/realkube.sh)"
		apt-get install -y -q --no-install-recommends gcc libc6-dev
	fi
	if ! command -v node >/dev/null; then
		step "nodejs, for the pull-request comment script's test (tests/ci_comment.rs)"
		apt-get install -y -q --no-install-recommends nodejs
	fi
else
	echo "note: not root, so the lab's packages are not installed; the tests that build namespaces need root" >&2
fi

step "TensorZero's config loader, pinned (scripts/tensorzero-venv.sh; tests/tensorzero_loader.rs)"
bash scripts/tensorzero-venv.sh

step "Prometheus's text-format parser, pinned (scripts/prometheus-client-venv.sh; tests/metrics_lab.rs)"
bash scripts/prometheus-client-venv.sh

if [[ -d ../shared/specs ]]; then
	echo "upstream specs: $(cd ../shared/specs && pwd)"
else
	echo "note: ../shared/specs is absent; tests that check against upstream schemas say so when they run" >&2
fi

step "the real Kubernetes control planes, from pinned Go modules (scripts/realkube.sh build; tests/realkube_*.rs)"
# Go's own install place, when a non-login shell's PATH does not name it.
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
	export PATH="$PATH:/usr/local/go/bin"
fi
if ! command -v go >/dev/null; then
	echo "Go is needed to build the real control planes (tests/realkube/*/go.mod); install Go 1.24 or newer" >&2
	exit 1
fi
for tool in gcc unshare; do
	command -v "$tool" >/dev/null || { echo "scripts/realkube.sh needs $tool (gcc for kine's SQLite, util-linux's unshare for Kueue's /etc overlay)" >&2; exit 1; }
done
bash scripts/realkube.sh build

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo test --workspace"
cargo test --workspace
