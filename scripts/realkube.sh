#!/usr/bin/env bash
# The real Kubernetes parts of the test suite, built from pinned Go modules (tests/realkube/*/go.mod,
# go.sum checked in; no upstream source in this repository) and run on loopback.
#
#   scripts/realkube.sh build        build every part into target/realkube/ (Go's caches in their
#                                    default places, so a second build takes seconds)
#   scripts/realkube.sh up [DIR]     start one control plane per site (franca, sp) under DIR
#                                    (default target/realkube/run): kine with SQLite, kube-apiserver,
#                                    kube-controller-manager, kube-scheduler and kwok, each site with
#                                    its own CA, data folder and DIR/<site>/kubeconfig
#   scripts/realkube.sh down [DIR]   stop them (their data folders stay; `up` starts them again)
#
# Nothing is downloaded but modules from the Go module proxy. The machine's own Go is used
# (GOTOOLCHAIN=local): every go.mod here asks for go 1.24, which Go 1.26 builds.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=1
OUT=target/realkube
CHARTS=$(cd .. && pwd)/shared/specs/charts
# K3s v1.33.5+k3s1 embeds Kubernetes v1.33.5: the control plane is built at that exact patch.
KUBE_VERSION=v1.33.5
# Each part is one Go module under tests/realkube/; a part whose go.mod names a `tool` is that
# upstream main package, built as it is.
PARTS=(kube kine kwok kueue helmcontroller helm karmada)
# The binary each part builds.
binary() {
	case "$1" in
	helmcontroller) echo helm-controller ;;
	helm) echo klipper ;;
	*) echo "$1" ;;
	esac
}

ldflags() {
	case "$1" in
	kube) echo "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=33 -X k8s.io/component-base/version.gitTreeState=clean" ;;
	kueue) echo "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$(tool_version kueue)" ;;
	helmcontroller) echo "-s -w -X github.com/k3s-io/helm-controller/pkg/version.Version=$(tool_version helmcontroller)" ;;
	# As Karmada's hack/util.sh stamps it (util::version_ldflags).
	karmada) echo "-s -w -X github.com/karmada-io/karmada/pkg/version.gitVersion=$(module_version karmada github.com/karmada-io/karmada) -X github.com/karmada-io/karmada/pkg/version.gitTreeState=clean" ;;
	*) echo "-s -w" ;;
	esac
}

# The version of module $2 that part $1 pins, from its go.mod.
module_version() {
	awk -v m="$2" '$1 == m { print $2 }' "tests/realkube/$1/go.mod" | head -1
}

# The version a tool part pins, from its go.mod.
tool_version() {
	local mod
	mod=$(sed -n 's/^tool //p' "tests/realkube/$1/go.mod" | head -1)
	mod=${mod%/cmd/*}
	awk -v m="$mod" '$1 == m { print $2 }' "tests/realkube/$1/go.mod" | head -1
}

build() {
	mkdir -p "$OUT"
	local part bin start tool flags
	for part in "${PARTS[@]}"; do
		bin=$(binary "$part")
		start=$(date +%s)
		# A part is built again only when its module changed (Go's cache would make the build
		# quick anyway, but linking the Kubernetes binary alone takes half a minute).
		if [[ -x "$OUT/$bin" && -z "$(find "tests/realkube/$part" -newer "$OUT/$bin" -type f | head -1)" ]]; then
			echo "realkube: $bin is up to date"
			continue
		fi
		tool=$(sed -n 's/^tool //p' "tests/realkube/$part/go.mod" | head -1)
		flags=$(ldflags "$part")
		(cd "tests/realkube/$part" && go build -trimpath -ldflags "$flags" -o "../../../$OUT/$bin.new" "${tool:-.}")
		mv "$OUT/$bin.new" "$OUT/$bin"
		echo "realkube: built $bin in $(($(date +%s) - start)) s"
	done
	# What K3s applies at start (helm-controller's CRDs, from the module it pins) and the chart
	# archives helm-controller's Jobs install (../shared/specs/charts, the example's pins).
	local hc
	hc=$(cd tests/realkube/helmcontroller && go list -m -f '{{.Dir}}' github.com/k3s-io/helm-controller)
	mkdir -p "$OUT/crds"
	cp "$hc"/pkg/crds/yaml/generated/*.yaml "$OUT/crds/"
	karmada_assets
	chart_deps
}

# What `kube karmada` applies to karmada-apiserver, from the Karmada module the karmada part pins
# (v1.16.0): its chart's CRDs with their conversion-webhook patches (charts/karmada/_crds), the
# aggregated API's APIService and Service and the webhook configurations (artifacts/deploy).
karmada_assets() {
	local km
	km=$(cd tests/realkube/karmada && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada)
	rm -rf "$OUT/karmada-assets"
	mkdir -p "$OUT/karmada-assets"
	cp -r "$km/charts/karmada/_crds" "$OUT/karmada-assets/crds"
	cp "$km/artifacts/deploy/karmada-aggregated-apiserver-apiservice.yaml" "$km/artifacts/deploy/webhook-configuration.yaml" \
		"$OUT/karmada-assets/"
	chmod -R u+w "$OUT/karmada-assets"
}

# Karmada's chart declares Bitnami's `common` 2.x, which its published release packs in and the
# repository folder in ../shared/specs/charts does not carry. The Go module proxy serves
# bitnami/charts as a module; this commit (common 2.31.10) is pinned with its go.sum hash, which
# `go mod download` checks against the checksum database.
BITNAMI=github.com/bitnami/charts@v0.0.0-20260907150927-c0703daaf78e
BITNAMI_SUM=h1:68EPXIo1ixa5DpWiY+3J97oIktp4QFXjACbpR/4saBQ=
chart_deps() {
	local json dir sum
	json=$(cd tests/realkube/helm && go mod download -json "$BITNAMI")
	dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$json")
	sum=$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$json")
	if [[ "$sum" != "$BITNAMI_SUM" ]]; then
		echo "realkube: $BITNAMI has hash $sum, not the pinned $BITNAMI_SUM" >&2
		return 1
	fi
	rm -rf "$OUT/chart-deps"
	mkdir -p "$OUT/chart-deps"
	cp -r "$dir/bitnami/common" "$OUT/chart-deps/common"
	chmod -R u+w "$OUT/chart-deps"
}

up() {
	local dir=${1:-$OUT/run} site
	build >/dev/null
	for site in franca sp; do
		mkdir -p "$dir/$site"
		if [[ -f "$dir/$site/pid" ]] && kill -0 "$(cat "$dir/$site/pid")" 2>/dev/null; then
			echo "realkube: $site is running already ($dir/$site/kubeconfig)"
			continue
		fi
		: >"$dir/$site/site.log"
		setsid "$OUT/kube" site --dir "$dir/$site" --name "$site" --crds "$OUT/crds" --charts "$CHARTS" \
			>"$dir/$site/site.log" 2>&1 </dev/null &
		echo $! >"$dir/$site/pid"
	done
	for site in franca sp; do
		for _ in $(seq 1 1200); do
			grep -q '^ready ' "$dir/$site/site.log" && break
			if ! kill -0 "$(cat "$dir/$site/pid")" 2>/dev/null; then
				echo "realkube: $site did not start:" >&2
				tail -5 "$dir/$site/site.log" >&2
				return 1
			fi
			sleep 0.1
		done
		grep -q '^ready ' "$dir/$site/site.log" || { echo "realkube: $site not ready in 120 s" >&2; return 1; }
		echo "realkube: $site ready: KUBECONFIG=$dir/$site/kubeconfig ($OUT/kube kubectl --kubeconfig ...)"
	done
}

down() {
	local dir=${1:-$OUT/run} site pid
	for site in franca sp; do
		[[ -f "$dir/$site/pid" ]] || continue
		pid=$(cat "$dir/$site/pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid"
			for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$dir/$site/pid"
		echo "realkube: $site stopped"
	done
}

case "${1:-}" in
build) build ;;
up) up "${2:-}" ;;
down) down "${2:-}" ;;
*)
	sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
	exit 1
	;;
esac
