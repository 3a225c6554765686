#!/usr/bin/env bash
# TensorZero's own config loader for tests/tensorzero_loader.rs: the `tensorzero` Python package
# (its embedded gateway parses tensorzero.toml as the gateway image does), pinned to the version
# topology.example.yaml pins (`versions.tensorzero`), in a venv of its own:
#   ${FABRIC_TENSORZERO_VENV:-$HOME/.cache/fabric/tensorzero-<version>}
# The test reads the same pin and refuses a venv holding another version.
set -euo pipefail
cd "$(dirname "$0")/.."
version="$(sed -n 's/^  tensorzero: *\([^ #]*\).*/\1/p' topology.example.yaml | head -n1)"
[[ -n "$version" ]] || { echo "tensorzero-venv.sh: no versions.tensorzero in topology.example.yaml" >&2; exit 1; }
venv="${FABRIC_TENSORZERO_VENV:-$HOME/.cache/fabric/tensorzero-$version}"
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('tensorzero') != '$version')" 2>/dev/null; then
	echo "tensorzero $version: $venv"
	exit 0
fi
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "tensorzero==$version"
echo "tensorzero $version: installed into $venv"
