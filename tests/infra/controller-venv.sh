#!/usr/bin/env bash
# Create (once) a controller venv on Python >= 3.12 with the given pip requirements file and
# print its path. ansible-core 2.20+ needs Python 3.12 or newer; the default python3 here is 3.11,
# so look for a newer one on PATH and in pyenv.
#   usage: controller-venv.sh VENV_DIR REQUIREMENTS_FILE
set -euo pipefail
venv=$1
req=$2

find_python() {
  local c
  for c in python3.14 python3.13 python3.12; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$c"; return 0
    fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    for c in "$(pyenv root)"/versions/3.1[2-4]*/bin/python3; do
      if [ -x "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        echo "$c"; return 0
      fi
    done
  fi
  return 1
}

stamp="$venv/.requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv"
  exit 0
fi
py=$(find_python) || {
  echo "controller-venv.sh: no Python >= 3.12 found (ansible-core 2.20+ needs it); install python3.12 or newer" >&2
  exit 1
}
rm -rf "$venv"
"$py" -m venv "$venv" >&2
# pip's output only matters when it fails (some machines' pip configs add a warning per index)
if ! out=$("$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" 2>&1); then
  printf '%s\n' "$out" >&2
  echo "controller-venv.sh: pip install -r $req into $venv failed (output above); check that PyPI is reachable" >&2
  exit 1
fi
echo "$want" > "$stamp"
echo "$venv"
