#!/usr/bin/env bash
# Makes (once) the venv with grpcio and grpcio-tools that sandboxd's gRPC tests and
# benchmark use, under .cache/grpc-venv (or $AGENT_SANDBOX_GRPC_VENV), and prints the
# path of its python.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${AGENT_SANDBOX_GRPC_VENV:-$repo/.cache/grpc-venv}
if [[ ! -x $venv/bin/python ]]; then
	"${PYTHON:-python3}" -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c 'import grpc, grpc_tools' 2>/dev/null; then
	"$venv/bin/pip" install -q --disable-pip-version-check 'grpcio>=1.60' 'grpcio-tools>=1.60' >&2
fi
echo "$venv/bin/python"
