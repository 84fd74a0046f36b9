#!/usr/bin/env bash
# Create (or bring up to date) a controller venv with the given pip requirements file and print its path.
#   usage: controller-venv.sh VENV_DIR REQUIREMENTS_FILE
#
# The interpreter: LLMOPS_CONTROLLER_PYTHON if set, else the newest Python >= 3.12 on PATH or in pyenv (ansible-core
# 2.20+ needs it), else the system's python3 if it is >= 3.11 (Debian 12 ships 3.11; the requirements files pin
# ansible-core 2.19 for it with an environment marker). Debian's python3 has no venv module until python3-venv is
# installed: it is installed with apt-get when missing (root only).
set -euo pipefail
venv=$1
req=$2

version_ok() { "$1" -c "import sys; sys.exit(sys.version_info < ($2))" 2>/dev/null; }

find_python() {
  local c
  if [ -n "${LLMOPS_CONTROLLER_PYTHON:-}" ]; then
    command -v "$LLMOPS_CONTROLLER_PYTHON"; return
  fi
  for c in python3.14 python3.13 python3.12; do
    if command -v "$c" >/dev/null 2>&1 && version_ok "$c" '3, 12'; then
      command -v "$c"; return 0
    fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    for c in "$(pyenv root)"/versions/3.1[2-4]*/bin/python3; do
      if [ -x "$c" ] && version_ok "$c" '3, 12'; then
        echo "$c"; return 0
      fi
    done
  fi
  for c in /usr/bin/python3 python3; do
    if command -v "$c" >/dev/null 2>&1 && version_ok "$c" '3, 11'; then
      command -v "$c"; return 0
    fi
  done
  return 1
}

py=$(find_python) || {
  echo "controller-venv.sh: no Python >= 3.11 found; install python3 (Debian 12: apt-get install python3 python3-venv)" >&2
  exit 1
}
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "controller-venv.sh: $py has no venv module; installing python3-venv (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "python$pyver-venv" python3-venv >/dev/null
  else
    echo "controller-venv.sh: $py has no venv module; install python3-venv" >&2
    exit 1
  fi
fi

stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1) $py"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv"
  exit 0
fi
# Another interpreter (or no venv yet): a new venv. Only the requirements changed: install on top of the venv
# instead of removing it under whoever is using it.
real_base='import os, sys; print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))'
if [ ! -x "$venv/bin/python" ] || [ "$("$venv/bin/python" -c "$real_base" 2>/dev/null)" != "$("$py" -c "$real_base")" ]; then
  rm -rf "$venv"
  "$py" -m venv "$venv" >&2
fi
if [ "${pyver#3.}" -lt 12 ]; then
  echo "controller-venv.sh: using $py (Python $pyver): ansible-core 2.19, the newest that runs on it" >&2
fi
# pip's output only matters when it fails (some machines' pip configs add a warning per index)
if ! out=$("$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" 2>&1); then
  printf '%s\n' "$out" >&2
  echo "controller-venv.sh: pip install -r $req into $venv failed (output above); check that PyPI is reachable" >&2
  exit 1
fi
echo "$want" > "$stamp"
echo "$venv"
