#!/usr/bin/env bash
# The Python client's tests: install clients/python into a fresh virtualenv made from
# Debian's python3 (--system-site-packages: httpx, numpy, pytest and setuptools come from
# python3-httpx, python3-numpy, python3-pytest, python3-pytest-asyncio, python3-setuptools, python3-wheel;
# nothing is downloaded), then pytest against the repository's built server (`npm run
# build` first). Run by .ci/run; extra arguments go to pytest (e.g. -k samples).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${TITO_PYTHON:-/usr/bin/python3}"
[ -f "$here/../../dist/server/host/cli.js" ] || { echo "no dist/: run npm run build first" >&2; exit 1; }
venv="$(mktemp -d "${TMPDIR:-/tmp}/tito-client-venv.XXXXXX")"
trap 'rm -rf "$venv" "$here/build" "$here"/src/*.egg-info' EXIT
"$python" -m venv --system-site-packages "$venv"
# --no-index: offline, the dependencies are the system's; --no-build-isolation: its setuptools.
"$venv/bin/python" -m pip install --quiet --no-index --no-build-isolation "$here"
cd "$here"
set +e
# From the tests' folder's parent, so the tests import the installed package, not src/.
TITO_CLIENT_INSTALLED=1 "$venv/bin/python" -m pytest -p no:cacheprovider -ra --durations=5 tests "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "pytest collected no tests: clients/python/tests is missing or broken" >&2
  exit 1
fi
exit "$rc"
