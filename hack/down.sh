#!/usr/bin/env bash
# make down: stop the local environment (state is kept; `make distclean` removes it).
source "$(dirname "$0")/lib.sh"
exec "$ROOT/hack/apiserver.sh" stop
