#!/bin/sh
# Test credential plugin: counts its runs in $AS_EXEC_COUNT, records its environment,
# and prints an ExecCredential whose token is "<prefix>-<run number>".
set -e
[ "$1" = "--prefix" ] || { echo "usage: exec-plugin.sh --prefix P" >&2; exit 2; }
echo run >> "$AS_EXEC_COUNT"
n=$(wc -l < "$AS_EXEC_COUNT" | tr -d ' ')
printf '%s\n%s\n' "$KUBERNETES_EXEC_INFO" "$PLUGIN_GREETING" > "$AS_EXEC_COUNT.env"
if [ -n "$AS_EXEC_FAIL" ]; then
    echo "boom: $AS_EXEC_FAIL" >&2
    exit 3
fi
api=$(printf '%s' "$KUBERNETES_EXEC_INFO" | sed 's/.*"apiVersion":"\([^"]*\)".*/\1/')
exp=""
[ -n "$AS_EXEC_EXPIRY" ] && exp=",\"expirationTimestamp\":\"$AS_EXEC_EXPIRY\""
# AS_EXEC_CERT=1: a client certificate of this run too (another one each run)
[ -n "$AS_EXEC_CERT" ] && exp="$exp,\"clientCertificateData\":\"cert-$n\",\"clientKeyData\":\"key-$n\""
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s-%s"%s}}\n' \
    "$api" "$2" "$n" "$exp"
# AS_EXEC_LINGER=S: close the output, then run on for S seconds (a plugin that does not
# exit once it has answered)
if [ -n "$AS_EXEC_LINGER" ]; then
    exec >&- 2>&-
    exec sleep "$AS_EXEC_LINGER"
fi
