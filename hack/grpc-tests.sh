#!/usr/bin/env bash
# sandboxd's gRPC conformance tests (tests/sandboxd/test_grpc.py) with grpcio, from the
# venv of hack/grpc-venv.sh (the stubs are generated from api/proto at test time),
# against SANDBOXD_BIN.
#
#   SANDBOXD_BIN=build/release/sandboxd hack/grpc-tests.sh [unittest args...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=$("$repo/hack/grpc-venv.sh")
cd "$repo"
export SANDBOXD_BIN=${SANDBOXD_BIN:-build/release/sandboxd}
exec "$py" -m unittest -v tests/sandboxd/test_grpc.py "$@"
