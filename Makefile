# SPDX-License-Identifier: Apache-2.0
# User-facing entry points. The build itself is CMake + Ninja (CMakePresets.json);
# the local API server and cluster are driven by scripts in hack/.
#
#   make deps         install Debian packages and build etcd/kube-apiserver (once)
#   make build        release build (build/release)
#   make test         everything: unit + integration tests (ASan/UBSan) and checks
#   make unit         unit tests only
#   make integration  integration tests against a local kube-apiserver
#   make up           the local cluster (real node + kwok, default StorageClass) with CRDs,
#                     controller and router deployed as install.yaml does, the runtime image
#                     with sandboxd and a default template + warm pool
#   make up-host      the same with the controller and router as host processes (development)
#   make down | status        stop / inspect it (make down keeps state; distclean purges)
#   make -s kubeconfig        print the local cluster's admin kubeconfig path
#   make -s router-url        the router's base URL
#   make -s router-token      a bearer token for the router (local user sandbox-user)
#   make apiserver    only a standalone etcd + kube-apiserver (what integration tests use)
#   make bench        every benchmark scenario, results in bench/results/, report rendered
#   make bench-smoke  the benchmarks at small N (part of make test)
#   make bench-upstream  ours and upstream's controller in turn on a private API server
#                     (bench/upstream.sh compare --profile; BENCH_ONLY picks scenarios,
#                     default warm300,probe,cold,sweep; ~20 min)
#   make chaos        the fault-injection suite at full size (300-claim bursts; make test
#                     runs it at 20 claims)
#   make node-loss    stop the kubelet of the local cluster's real node under a Sandbox
#                     and restore it (needs make up; disturbs every pod on the node)
#   make gvisor-check runsc (gVisor) built from the Go module proxy, run standalone: both
#                     platforms, sandboxd inside, checkpoint/restore (docs/gvisor.md; root,
#                     after make up, which builds the runtime image)
#   make fuzz         the libFuzzer targets for 60 s each (clang); corpora replay in make test
#   make soak         an hour of mixed traffic through the router into sandboxd (local
#                     processes, standalone API server), RSS and fds sampled; not in make
#                     test; SOAK_ARGS="--duration 600" for ten minutes
#   make tsan | valgrind      the unit suite under ThreadSanitizer / valgrind memcheck
#                             (make test runs both; its TSan run adds the in-process
#                             controller manager against the API server)
#   make manifests    render install.yaml (and the chart's CRDs) from config/ and api/crds/
#   make dist         release artifacts in dist/ (docs/release.md): wheel + sdist, OCI
#                     images (amd64 + arm64), install.yaml and Helm chart pinned to
#                     REGISTRY and VERSION, krew manifest, SHA256SUMS, SPDX SBOM
#   make push REGISTRY=...   copy dist/'s images to REGISTRY with skopeo (after make dist)
#   make fmt          clang-format every C file
#   make clean        remove the preset build directories (and make dist's arm64 one)
#   make distclean    also stop the local API server and remove its state

SHELL := /bin/bash
.DEFAULT_GOAL := build
.PHONY: deps build asan unit integration test up up-host down status kubeconfig router-url router-token bench-ksm \
	apiserver bench bench-smoke bench-upstream chaos node-loss fuzz gvisor-check soak tsan valgrind manifests fmt clean \
	distclean dist push

deps:
	hack/deps.sh

build:
	cmake --preset release >/dev/null
	cmake --build --preset release

asan:
	cmake --preset asan >/dev/null
	cmake --build --preset asan

unit: asan
	ctest --preset unit

integration: asan
	hack/apiserver.sh start >/dev/null
	eval "$$(hack/apiserver.sh env)" && ctest --preset integration

test:
	hack/deps.sh --cluster --cross
	hack/test.sh

up:
	hack/stack.sh up

up-host:
	hack/stack.sh up --host

down:
	hack/stack.sh down

status:
	hack/stack.sh status

kubeconfig:
	@hack/stack.sh kubeconfig

router-url:
	@hack/stack.sh router-url

router-token:
	@hack/stack.sh router-token

apiserver:
	hack/up.sh

bench:
	bench/run.sh
	bench/report bench/results/latest.json

bench-smoke:
	BENCH_TIMELINE=1 bench/run.sh --smoke

# page merging (spec.pageMerging) on the real node of make up: N=20 and 50, each mode
bench-ksm:
	bench/ksm.sh 20 50

BENCH_ONLY ?= warm300,probe,cold,sweep
bench-upstream:
	bench/upstream.sh compare --only $(BENCH_ONLY) --profile

chaos:
	tests/chaos/run.sh

node-loss:
	AS_CHAOS_NODE_LOSS=1 tests/chaos/node_loss.sh --stack-is-mine

gvisor-check:
	AS_IMAGES_CACHE=$${AS_IMAGES_CACHE:-$(CURDIR)/.cache/images} tests/gvisor/standalone.sh

fuzz:
	fuzz/run.sh -t 60

soak:
	cmake --preset release >/dev/null
	cmake --build --preset release --target sandboxd sandbox-router
	hack/build-k8s.sh etcd kube-apiserver kubectl
	hack/apiserver.sh start >/dev/null
	eval "$$(hack/apiserver.sh env)" && python3 tests/soak/soak.py $(SOAK_ARGS)

tsan:
	scripts/tsan.sh

valgrind:
	scripts/valgrind.sh

manifests:
	hack/render-install.sh

# Release artifacts (hack/dist.sh); VERSION from hack/version.sh when there is one.
VERSION ?= $(shell hack/version.sh 2>/dev/null || echo 0.1.0-dev)
REGISTRY ?= ghcr.io/agent-sandbox-dev
DIST_ARGS ?=
dist:
	VERSION=$(VERSION) REGISTRY=$(REGISTRY) hack/dist.sh $(DIST_ARGS)

PUSH_ARGS ?=
push:
	VERSION=$(VERSION) REGISTRY=$(REGISTRY) hack/push.sh $(PUSH_ARGS)

fmt:
	git ls-files -z -- '*.c' '*.h' | xargs -0 -r clang-format -i

clean:
	rm -rf build/debug build/asan build/release build/release-arm64

distclean: clean
	hack/apiserver.sh stop --purge
	hack/stack.sh down --purge
