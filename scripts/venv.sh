#!/usr/bin/env bash
# Create or refresh the project's venv (.venv) from requirements.txt, then install the project
# itself into it (pyproject.toml, editable: its modules import each other by name and `imgstore`
# is a command); VENV and REQUIREMENTS name another (make docs: .venv-docs from
# docs/requirements.txt, kept apart so that the docs' tools never change the venv Caffe's pycaffe
# is built against), which gets the requirements only.
# Uses the system Python (PYTHON, default /usr/bin/python3) because pycaffe links the
# distribution's Boost.Python, which is built for exactly that interpreter.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$root/.venv}
py=${PYTHON:-/usr/bin/python3}
requirements=${REQUIREMENTS:-$root/requirements.txt}
stamp=$venv/.requirements.sha256
# what builds the project (pip install -e . without build isolation, so that a later step, the
# Dockerfile's second, fetches nothing); docker/wheelhouse.sh reads this line too
build_backend=setuptools==80.9.0
install_build_backend() {
  "$venv/bin/pip" install -q --disable-pip-version-check "$build_backend"
}
want=$( { sha256sum < "$requirements"; "$py" --version; } | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "Creating Python environment $venv ($("$py" --version))"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  [ -n "${REQUIREMENTS:-}" ] || install_build_backend
  echo "$want" > "$stamp"
fi

# The project, into its own venv only. Skipped where pyproject.toml is not there yet: the
# Dockerfile's first layer has the requirements alone and runs this again after copying the tree.
[ -z "${REQUIREMENTS:-}" ] && [ -f "$root/pyproject.toml" ] || exit 0
project_stamp=$venv/.project.sha256
project=$( { sha256sum < "$root/pyproject.toml"; echo "$root"; } | sha256sum | cut -c1-16)  # editable: from this tree
if [ -f "$project_stamp" ] && [ "$(cat "$project_stamp")" = "$project" ] &&
   [ -x "$venv/bin/imgstore" ]; then exit 0; fi
echo "Installing the project into $venv (pip install -e .)"
# its requirements are in already (--no-deps); a venv made before the project had a build backend gets it
[ "$("$venv/bin/python" -c 'import setuptools; print(setuptools.__version__)' 2>/dev/null)" = "${build_backend#*==}" ] ||
  install_build_backend
# (quiet: setuptools warns that folders of the working directory named like its packages come first;
# here they are those same folders)
PYTHONWARNINGS=ignore::UserWarning \
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e "$root"
echo "$project" > "$project_stamp"
