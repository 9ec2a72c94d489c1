#!/usr/bin/env bash
# Create or refresh the project's venv (.venv) from requirements.txt; VENV and REQUIREMENTS
# name another (make docs: .venv-docs from docs/requirements.txt, kept apart so that the docs'
# tools never change the venv Caffe's pycaffe is built against).
# Uses the system Python (PYTHON, default /usr/bin/python3) because pycaffe links the
# distribution's Boost.Python, which is built for exactly that interpreter.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$root/.venv}
py=${PYTHON:-/usr/bin/python3}
requirements=${REQUIREMENTS:-$root/requirements.txt}
stamp=$venv/.requirements.sha256
want=$( { sha256sum < "$requirements"; "$py" --version; } | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
echo "Creating Python environment $venv ($("$py" --version))"
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip
"$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
echo "$want" > "$stamp"
