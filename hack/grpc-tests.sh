#!/usr/bin/env bash
# sandboxd's gRPC conformance tests (tests/sandboxd/test_grpc.py) with grpcio: makes a
# venv under .cache/grpc-venv with grpcio and grpcio-tools (the stubs are generated from
# api/proto at test time) and runs the suite against SANDBOXD_BIN.
#
#   SANDBOXD_BIN=build/release/sandboxd hack/grpc-tests.sh [unittest args...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${AGENT_SANDBOX_GRPC_VENV:-$repo/.cache/grpc-venv}
if [[ ! -x $venv/bin/python ]]; then
	"${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check 'grpcio>=1.60' 'grpcio-tools>=1.60'
cd "$repo"
export SANDBOXD_BIN=${SANDBOXD_BIN:-build/release/sandboxd}
exec "$venv/bin/python" -m unittest -v tests/sandboxd/test_grpc.py "$@"
