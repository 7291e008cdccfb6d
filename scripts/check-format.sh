#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Checks that every tracked *.c/*.h under src/ tests/ bench/ fuzz/ is formatted with the
# repository's .clang-format. Prints the offending files and exits 1 if any.
#   --fix   format them in place instead
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
--fix) fix=1 ;;
"") ;;
*)
    echo "usage: $0 [--fix]" >&2
    exit 2
    ;;
esac

CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
dirs=()
for d in src tests bench fuzz; do
    [ -d "$d" ] && dirs+=("$d")
done

[ "${#dirs[@]}" -eq 0 ] && exit 0
files=()
while IFS= read -r f; do
    [ -f "$f" ] && files+=("$f") # skip files deleted in the working tree
done < <(git ls-files -- "${dirs[@]/%//*.c}" "${dirs[@]/%//*.h}")
[ "${#files[@]}" -eq 0 ] && exit 0

if [ "$fix" -eq 1 ]; then
    "$CLANG_FORMAT" -i -- "${files[@]}"
    exit 0
fi

bad=0
for f in "${files[@]}"; do
    if ! "$CLANG_FORMAT" --dry-run -Werror -- "$f" >/dev/null 2>&1; then
        echo "$f"
        bad=$((bad + 1))
    fi
done
if [ "$bad" -gt 0 ]; then
    echo "check-format: $bad file(s) need formatting (run $0 --fix)" >&2
    exit 1
fi
