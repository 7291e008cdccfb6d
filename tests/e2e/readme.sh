#!/usr/bin/env bash
# The README's quick start, verbatim, on the stack of `make up`: every ```sh block and the
# ```python block of README.md run as written (from the repository root, in a fresh venv
# for `pip install`), except a block right after a line "<!-- not run by make test -->"
# (the block that runs make test itself). Checks the shell blocks exit 0 and the Python
# snippet prints 42. Prints "N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
WORK=$(mktemp -d)
stack_kubeconfig || { echo "the stack is not up (make up)" >&2; exit 1; }
cleanup() {
	k delete sandboxclaim my-claim --ignore-not-found --wait=false >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
k delete sandboxclaim my-claim --ignore-not-found --wait=true >/dev/null 2>&1

# Split README.md into $WORK/block-N.{sh,python}, in order.
python3 - "$ROOT/README.md" "$WORK" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read().splitlines()
n, i, skip = 0, 0, False
while i < len(text):
    line = text[i]
    if line.strip() == "<!-- not run by make test -->":
        skip = True
    m = re.match(r"^```(sh|python)\s*$", line)
    if m:
        j = i + 1
        while not text[j].startswith("```"):
            j += 1
        if not skip:
            n += 1
            with open(f"{sys.argv[2]}/block-{n}.{m.group(1)}", "w", encoding="utf-8") as f:
                f.write("\n".join(text[i + 1:j]) + "\n")
        skip = False
        i = j
    i += 1
PY
blocks=$(find "$WORK" -name 'block-*' | sort -V)
check "README.md has quick-start blocks to run (sh and python)" \
	eval "grep -q 'block-.*\.sh' <<<'$blocks' && grep -q 'block-.*\.python' <<<'$blocks'"

python3 -m venv "$WORK/venv" # the reader's `pip install` goes into a fresh environment
for b in $blocks; do
	name=README.md:${b##*/}
	case $b in
	*.sh)
		if (cd "$ROOT" && source "$WORK/venv/bin/activate" && timeout 600 bash -euo pipefail "$b") >"$b.out" 2>&1; then
			ok "$name runs verbatim"
		else
			not_ok "$name runs verbatim" "$(tail -5 "$b.out")"
		fi
		sed 's/^/    /' "$b.out" | tail -20
		;;
	*.python)
		out=$(cd "$ROOT" && KUBECONFIG=$KUBECONFIG timeout 300 "$WORK/venv/bin/python" "$b" 2>&1)
		sed 's/^/    /' <<<"$out" | tail -20
		check "$name runs verbatim and prints 42" test "$(tail -n 1 <<<"$out")" = 42
		;;
	esac
done

summary readme
