#!/usr/bin/env bash
# Makes (once) the venv that sandboxd's gRPC tests and benchmark use, under
# .cache/grpc-venv (or $AGENT_SANDBOX_GRPC_VENV): grpcio, grpcio-tools and upstream's Python
# SDK k8s-agent-sandbox[grpc] (pinned: its internals are what the tests drive). Prints the
# path of its python.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${AGENT_SANDBOX_GRPC_VENV:-$repo/.cache/grpc-venv}
if [[ ! -x $venv/bin/python ]]; then
	"${PYTHON:-python3}" -m venv "$(realpath -m "$venv")" >&2 # (a link: hack/lib.sh)
fi
sdk=1.0.8
if ! "$venv/bin/python" -c "import grpc, grpc_tools, importlib.metadata as m, sys
sys.exit(m.version('k8s-agent-sandbox') != '$sdk')" 2>/dev/null; then
	"$venv/bin/python" -m pip install -q --disable-pip-version-check 'grpcio>=1.60' 'grpcio-tools>=1.60' \
		"k8s-agent-sandbox[grpc]==$sdk" >&2
fi
echo "$venv/bin/python"
