#!/usr/bin/env bash
# sandboxd's gRPC conformance tests (tests/sandboxd/test_grpc.py, with grpcio; the stubs
# are generated from api/proto at test time) and upstream's Python SDK against the binary
# without a cluster (tests/sandboxd/test_upstream_sdk.py), from the venv of
# hack/grpc-venv.sh, against SANDBOXD_BIN.
#
#   SANDBOXD_BIN=build/release/sandboxd hack/grpc-tests.sh [unittest args...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=$("$repo/hack/grpc-venv.sh")
cd "$repo"
export SANDBOXD_BIN=${SANDBOXD_BIN:-build/release/sandboxd}
exec "$py" -m unittest -v tests/sandboxd/test_grpc.py tests/sandboxd/test_upstream_sdk.py "$@"
