# Sourced by the *-venv.sh scripts: pinned_venv PACKAGE VERSION VENV makes VENV hold exactly
# PACKAGE==VERSION from PyPI (kept when it already does), and says which.
pinned_venv() {
	local package=$1 version=$2 venv=$3
	if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$package') != '$version')" 2>/dev/null; then
		echo "$package $version: $venv"
	else
		/usr/bin/python3 -m venv "$venv"
		"$venv/bin/pip" install --quiet --disable-pip-version-check "$package==$version"
		echo "$package $version: installed into $venv"
	fi
}
