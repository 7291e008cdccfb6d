#!/usr/bin/env bash
# make status: what of the local environment runs.
source "$(dirname "$0")/lib.sh"
exec "$ROOT/hack/apiserver.sh" status
