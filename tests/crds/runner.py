#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Minimal test runner for the CRD tests (no pytest needed).

    tests/crds/runner.py [-k SUBSTRING] [--no-server]

Runs every test_* function of test_openapi.py (pure converter tests) and
test_crds.py (against a throwaway kube-apiserver with the CRDs applied).
A test that takes a parameter named `api` gets the shared server, whose CRDs are
applied and Established before the first such test runs. Prints one line per
test and a final "N passed, N failed" line; exits 1 when any test failed.
"""

import argparse
import inspect
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "hack", "gen-crds"))

import localapi  # noqa: E402
import support  # noqa: E402
import test_crds  # noqa: E402
import test_openapi  # noqa: E402


def collect(modules, pattern):
    tests = []
    for mod in modules:
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if name.startswith("test_") and fn.__module__ == mod.__name__:
                if pattern is None or pattern in name:
                    line = inspect.getsourcelines(fn)[1]
                    tests.append((mod.__name__, line, name, fn))
    tests.sort(key=lambda t: (t[0] != "test_openapi", t[1]))
    return tests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", dest="pattern", help="run tests whose name contains this")
    ap.add_argument("--no-server", action="store_true", help="skip tests that need the API server")
    args = ap.parse_args()

    tests = collect([test_openapi, test_crds], args.pattern)
    api = None
    api_error = None
    passed = failed = skipped = 0
    try:
        for mod, _, name, fn in tests:
            params = inspect.signature(fn).parameters
            kwargs = {}
            if "api" in params:
                if args.no_server:
                    skipped += 1
                    continue
                if api is None and api_error is None:
                    api, api_error = start_server()
                if api_error is not None:
                    failed += 1
                    print(f"FAIL {mod}.{name}: no API server: {api_error}")
                    continue
                kwargs["api"] = api
            t0 = time.monotonic()
            try:
                fn(**kwargs)
            except support.Skip as e:
                skipped += 1
                print(f"skip {mod}.{name}: {e}")
            except Exception:  # noqa: BLE001 - report every failure
                failed += 1
                print(f"FAIL {mod}.{name}")
                traceback.print_exc(file=sys.stdout)
            else:
                passed += 1
                print(f"ok   {mod}.{name} ({time.monotonic() - t0:.2f}s)")
            sys.stdout.flush()
    finally:
        if api is not None:
            api.stop()
    extra = f", {skipped} skipped" if skipped else ""
    print(f"{passed} passed, {failed} failed{extra}")
    return 1 if failed or not (passed or skipped) else 0


def start_server():
    bindir = os.environ.get("AS_K8S_BINDIR", os.path.join(ROOT, ".cache", "bin"))
    """Return (server with the CRDs installed, None) or (None, error text)."""
    api = localapi.LocalAPIServer(bindir, log=lambda m: print(f"# {m}", flush=True))
    try:
        api.start()
        support.install_crds(api)
    except Exception as e:  # noqa: BLE001 - reported as failures of the api tests
        api.stop()
        return None, str(e)
    return api, None


if __name__ == "__main__":
    sys.exit(main())
