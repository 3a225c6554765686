#!/usr/bin/env bash
# The Prometheus text-format parser tests/metrics_lab.rs checks `fabric plan --metrics` with: the
# `prometheus-client` Python package (prometheus_client.parser.text_string_to_metric_families),
# pinned, in a venv of its own:
#   ${FABRIC_PROMETHEUS_VENV:-$HOME/.cache/fabric/prometheus-client-<version>}
# The version is the one the test names (PROMETHEUS_CLIENT in tests/metrics_lab.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/pinned-venv.sh
source scripts/pinned-venv.sh
version="$(sed -n 's/^const PROMETHEUS_CLIENT: &str = "\([^"]*\)";/\1/p' tests/metrics_lab.rs)"
[[ -n "$version" ]] || { echo "prometheus-client-venv.sh: no PROMETHEUS_CLIENT in tests/metrics_lab.rs" >&2; exit 1; }
venv="${FABRIC_PROMETHEUS_VENV:-$HOME/.cache/fabric/prometheus-client-$version}"
pinned_venv prometheus-client "$version" "$venv"
