#!/usr/bin/env bash
# Runs the Python SDK's checks and tests: creates a venv under .cache/, installs the
# package with its test extras, then ruff, mypy --strict and pytest (unit + integration;
# integration tests skip with a reason when sandboxd or the stack is not available).
# Usage: sdk/python/run-tests.sh [pytest args...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${AGENT_SANDBOX_VENV:-$repo/.cache/pysdk-venv}
py=${PYTHON:-python3}

if [[ ! -x $venv/bin/python ]]; then
    "$py" -m venv "$(realpath -m "$venv")" # .cache/pysdk-venv may be a link (hack/lib.sh)
fi
"$venv/bin/pip" install -q --disable-pip-version-check -e "$here[test,mcp]"

# Point the integration tests at the stack when `make up` has brought it up.
if [[ -z ${AGENT_SANDBOX_KUBECONFIG:-} ]]; then
    kc=$(make -s -C "$repo" kubeconfig 2>/dev/null || true)
    [[ -n $kc && -f $kc ]] && export AGENT_SANDBOX_KUBECONFIG=$kc
fi
if [[ -z ${AGENT_SANDBOX_ROUTER_URL:-} ]]; then
    url=$(make -s -C "$repo" router-url 2>/dev/null || true)
    [[ $url == http* ]] && export AGENT_SANDBOX_ROUTER_URL=$url
fi
if [[ -z ${AGENT_SANDBOX_ROUTER_TOKEN:-} && -n ${AGENT_SANDBOX_ROUTER_URL:-} ]]; then
    tok=$(make -s -C "$repo" router-token 2>/dev/null || true)
    [[ -n $tok ]] && export AGENT_SANDBOX_ROUTER_TOKEN=$tok
fi

cd "$here"
"$venv/bin/ruff" check src tests
"$venv/bin/ruff" format --check src tests
"$venv/bin/mypy"
# the benchmark's SDK-side tools are held to the same standard
bench_py=("$repo/bench/sdk_probe.py" "$repo/bench/timeline.py")
"$venv/bin/ruff" check --line-length 120 "${bench_py[@]}"
"$venv/bin/ruff" format --check --line-length 120 "${bench_py[@]}"
"$venv/bin/mypy" --strict "${bench_py[@]}"
"$venv/bin/python" -m pytest -ra "$@"
