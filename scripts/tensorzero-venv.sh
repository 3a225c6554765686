#!/usr/bin/env bash
# TensorZero's own config loader for tests/tensorzero_loader.rs: the `tensorzero` Python package
# (its embedded gateway parses tensorzero.toml as the gateway image does), pinned to the version
# topology.example.yaml pins (`versions.tensorzero`), in a venv of its own:
#   ${FABRIC_TENSORZERO_VENV:-$HOME/.cache/fabric/tensorzero-<version>}
# The test reads the same pin and refuses a venv holding another version.
#
# Beside it, in $venv/share/tensorzero-src, the Postgres migrations of the same version: what the
# gateway image's `--run-postgres-migrations` applies (crates/gateway/src/main.rs;
# tensorzero-core/src/db/postgres/mod.rs `manual_run_postgres_migrations_with_url`), which the
# Python package embeds but cannot run. They come from the package's own source release on PyPI:
# pip fetches and unpacks it, then stops at building its metadata (its Rust build needs a git
# dependency, `durable`, that is on no registry); --no-clean keeps the unpacked tree, of which
# only each crate's sqlx.toml, postgres/migrations/*.sql and pgcron_setup.sql are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/pinned-venv.sh
source scripts/pinned-venv.sh
version="$(sed -n 's/^  tensorzero: *\([^ #]*\).*/\1/p' topology.example.yaml | head -n1)"
[[ -n "$version" ]] || { echo "tensorzero-venv.sh: no versions.tensorzero in topology.example.yaml" >&2; exit 1; }
venv="${FABRIC_TENSORZERO_VENV:-$HOME/.cache/fabric/tensorzero-$version}"
src="$venv/share/tensorzero-src"

migrations() {
	local tmp tree
	tmp="$(mktemp -d)"
	# Expected to fail once the tree is unpacked (see above); the checks below decide.
	TMPDIR="$tmp" "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
		--no-binary :all: --no-build-isolation --no-clean -d "$tmp/dl" "tensorzero==$version" >/dev/null 2>&1 || true
	tree="$(find "$tmp" -mindepth 3 -maxdepth 3 -name PKG-INFO -path '*/pip-download-*' -printf '%h\n' | head -n1)"
	if [[ -z "$tree" ]] || ! grep -qx "Version: $version" "$tree/PKG-INFO"; then
		rm -rf "$tmp"
		echo "tensorzero-venv.sh: could not unpack tensorzero $version's source release from PyPI" >&2
		exit 1
	fi
	rm -rf "$src" && mkdir -p "$src"
	(cd "$tree" && find . \( -path '*/postgres/migrations/*.sql' -o -path '*/db/postgres/pgcron_setup.sql' \
		-o -path './tensorzero-*/sqlx.toml' \) -print0 | tar --null -T - -cf -) | tar -xf - -C "$src"
	cp "$tree/PKG-INFO" "$src/"
	rm -rf "$tmp"
	[[ -n "$(ls "$src"/tensorzero-core/src/db/postgres/migrations/*.sql 2>/dev/null)" ]] || {
		echo "tensorzero-venv.sh: no Postgres migrations in tensorzero $version's source release" >&2
		exit 1
	}
	echo "tensorzero $version: Postgres migrations in $src"
}

pinned_venv tensorzero "$version" "$venv"
grep -qx "Version: $version" "$src/PKG-INFO" 2>/dev/null || migrations
