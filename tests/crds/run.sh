#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run the CRD tests: converter unit tests, generated-file freshness (--check), and
# the CRDs against a throwaway etcd + kube-apiserver on 127.0.0.1 (from .cache/bin,
# or $AS_K8S_BINDIR). Arguments go to runner.py (-k SUBSTRING, --no-server).
# Prints one line per test and "N passed, N failed"; exits 1 on any failure.
# Needs: python3 (3.9+), PyYAML, openssl.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$0")/runner.py" "$@"
