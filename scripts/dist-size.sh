#!/usr/bin/env bash
# Builds the binary operators download (`[profile.dist]` in Cargo.toml: release code, no debug
# info, symbols stripped) and checks it where it is built (issue #25): at most 25 MB, and no
# debug or symbol sections left. Prints the size. `--no-build` checks a binary built already.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMIT_BYTES=$((25 * 1000 * 1000))
BIN=target/dist/fabric

if [[ "${1:-}" != "--no-build" ]]; then
	cargo build --locked --profile dist --bin fabric
fi
if [[ ! -f "$BIN" ]]; then
	echo "dist-size: $BIN is missing; build it with \`cargo build --profile dist --bin fabric\`" >&2
	exit 1
fi

size=$(stat -c %s "$BIN")
awk -v b="$BIN" -v s="$size" -v l="$LIMIT_BYTES" \
	'BEGIN { printf "dist-size: %s is %d bytes (%.1f MB), limit %.1f MB, ratio %.2f\n", b, s, s / 1e6, l / 1e6, s / l }'
if ((size > LIMIT_BYTES)); then
	echo "dist-size: over the limit: look for a new dependency (cargo bloat --profile dist) before raising it" >&2
	exit 1
fi
if command -v readelf >/dev/null; then
	left=$(readelf -S -W "$BIN" | grep -E '\.(debug_[a-z_]+|symtab)' || true)
	if [[ -n "$left" ]]; then
		echo "dist-size: $BIN still has debug or symbol sections (is \`strip = true\` gone from [profile.dist]?):" >&2
		echo "$left" >&2
		exit 1
	fi
else
	echo "dist-size: readelf is missing, so the sections were not checked" >&2
fi
