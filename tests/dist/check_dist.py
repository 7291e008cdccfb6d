#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks of the release artifacts (tests/dist/run.sh). Prints what is wrong, exits 1.

check_dist.py same-install INSTALL HELM   `helm template` output HELM equals INSTALL
                                          after normalising (see same_install)
check_dist.py images INSTALL REGISTRY VERSION   every image is REGISTRY/...:VERSION
check_dist.py krew MANIFEST VERSION URL TARBALL...   the krew plugin manifest
check_dist.py sbom SBOM DIST              SPDX fields; every artifact with its sha256;
                                          binaries with versioned Debian dependencies
check_dist.py oci ARCHIVE ARCH...         OCI layout whose index holds exactly ARCHs,
                                          each manifest's config of that architecture
check_dist.py wheel-top WHEEL             prints the wheel's top-level package
"""

import difflib
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile

import yaml

# Flags the chart spells out that install.yaml leaves at the binaries' defaults, with
# the default value (src/controller/options.c, src/router/main.c; charts/.../values.yaml).
CHART_DEFAULT_FLAGS = {
    "agent-sandbox-controller": {
        "--cluster-domain": "cluster.local",
        "--log-level": "info",
        "--kube-api-qps": "-1",
        "--kube-api-burst": "10",
        "--kube-api-connections": "2",
        "--worker-idle-exit": "30s",
        "--cache-label-selectors": "false",
        "--sandbox-concurrent-workers": "100",
        "--dependent-deletion-delay": "5s",
        "--sandbox-claim-concurrent-workers": "300",
        "--sandbox-warm-pool-concurrent-workers": "1",
        "--sandbox-template-concurrent-workers": "1",
        "--max-pool-replicas": "1000",
        "--sandbox-warm-pool-max-batch-size": "300",
        "--sandbox-warm-pool-max-refill-rate": "0",
        "--sandbox-warm-pool-readiness-grace-period": "5m",
        "--sandbox-warm-pool-coalesce-window": "100ms",
        "--claim-timeout": "10m",
        "--enable-warm-pool-eviction": "true",
        "--disable-claim-events": "false",
        "--disable-claim-observability-annotations": "false",
        "--side-write-hold": "5s",
        "--pod-metadata-hold": "5s",
        "--claim-adoption-concurrency": "16",
    },
    "sandbox-router": {
        "--authz-verb": "get",
        "--authz-cache-ttl": "30",
        "--idle-timeout": "60",
        "--start-hold": "30",
        "--log-level": "info",
    },
}
# What Helm adds to every object's metadata.
HELM_LABELS = (
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
)
HELM_ANNOTATIONS = ("helm.sh/resource-policy",)


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def flags(args):
    out = {}
    for a in args:
        k, _, v = a.partition("=")
        out[k] = v
    return out


def normalise(doc, errs, helm):
    """doc without Helm's metadata; a Deployment's args as a flag map (chart defaults
    dropped after checking them) and its pod labels reduced to the selector's."""
    meta = doc["metadata"]
    for key, drop in (("labels", HELM_LABELS), ("annotations", HELM_ANNOTATIONS)):
        m = {k: v for k, v in (meta.get(key) or {}).items() if k not in drop}
        meta.pop(key, None)
        if m:
            meta[key] = m
    if doc["kind"] != "Deployment":
        return doc
    tmpl = doc["spec"]["template"]
    sel = doc["spec"]["selector"]["matchLabels"]
    labels = tmpl["metadata"].get("labels", {})
    if any(labels.get(k) != v for k, v in sel.items()):
        errs.append("{}: pod labels do not match the selector".format(meta["name"]))
    tmpl["metadata"]["labels"] = dict(sel)
    for c in tmpl["spec"]["containers"]:
        f = flags(c.get("args", []))
        if helm:
            for k, v in CHART_DEFAULT_FLAGS.get(meta["name"], {}).items():
                if k in f and f[k] == v:
                    del f[k]
        c["args"] = f
    return doc


def same_install(install, helm):
    errs = []
    a = {}
    for d in load(install):
        if d["kind"] == "Namespace":
            continue  # helm install -n NS --create-namespace
        a[(d["kind"], d["metadata"]["name"])] = normalise(d, errs, False)
    b = {
        (d["kind"], d["metadata"]["name"]): normalise(d, errs, True) for d in load(helm)
    }
    for k in sorted(set(a) - set(b)):
        errs.append("only in install.yaml: {} {}".format(*k))
    for k in sorted(set(b) - set(a)):
        errs.append("only in the chart: {} {}".format(*k))
    for k in sorted(set(a) & set(b)):
        # The chart labels all of a component's objects app=NAME; config/ not every one.
        la, lb = a[k]["metadata"].get("labels", {}), b[k]["metadata"].get("labels", {})
        if "app" not in la and lb.get("app") in (
            "agent-sandbox-controller",
            "sandbox-router",
        ):
            del lb["app"]
        if a[k] != b[k]:
            x = json.dumps(a[k], sort_keys=True, indent=1).splitlines()
            y = json.dumps(b[k], sort_keys=True, indent=1).splitlines()

            diff = [
                ln
                for ln in difflib.unified_diff(x, y, lineterm="", n=0)
                if ln[:3] not in ("---", "+++")
            ]
            errs.append("%s %s differs:\n  %s" % (k + ("\n  ".join(diff[:20]),)))
    return errs


def images(install, registry, version):
    errs, seen = [], 0
    for d in load(install):
        if d["kind"] != "Deployment":
            continue
        for c in d["spec"]["template"]["spec"]["containers"]:
            seen += 1
            repo, _, tag = c["image"].rpartition(":")
            if tag != version or not repo.startswith(registry + "/"):
                errs.append(
                    "{}: image {} is not {}/...:{}".format(
                        d["metadata"]["name"], c["image"], registry, version
                    )
                )
    return errs if seen else [f"no Deployment images in {install}"]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def krew(manifest, version, url, tarballs):
    errs = []
    with open(manifest) as f:
        m = yaml.safe_load(f)
    if (
        m.get("apiVersion") != "krew.googlecontainertools.github.com/v1alpha2"
        or m.get("kind") != "Plugin"
    ):
        errs.append("not a krew Plugin")
    spec = m.get("spec", {})
    if spec.get("version") != "v" + version:
        errs.append("version {!r}, want v{}".format(spec.get("version"), version))
    for k in ("homepage", "shortDescription", "platforms"):
        if not spec.get(k):
            errs.append(f"spec.{k} missing")
    by_name = {os.path.basename(t): t for t in tarballs}
    arches = set()
    for p in spec.get("platforms", []):
        name = p["uri"].rsplit("/", 1)[-1]
        arches.add(p["selector"]["matchLabels"].get("arch"))
        if not p["uri"].startswith(url.rstrip("/") + "/"):
            errs.append("uri {} not under {}".format(p["uri"], url))
        if name not in by_name:
            errs.append("uri {} names no tarball".format(p["uri"]))
        elif sha256(by_name[name]) != p.get("sha256"):
            errs.append(f"sha256 of {name} does not match")
        if p.get("bin") != "kubectl-sandbox":
            errs.append("bin is not kubectl-sandbox")
    if arches != {"amd64", "arm64"}:
        errs.append(f"platforms {sorted(arches)}, want amd64 and arm64")
    return errs


def sbom(path, dist):
    with open(path) as f:
        doc = json.load(f)
    errs = subprocess.run(
        [
            sys.executable,
            os.path.join(os.path.dirname(__file__), "../../hack/sbom.py"),
            "--check",
            path,
        ],
        capture_output=True,
        check=False,
        text=True,
    ).stderr.splitlines()
    sums = {
        p.get("packageFileName"): p["checksums"][0]["checksumValue"]
        for p in doc["packages"]
        if p.get("packageFileName")
    }
    for d, _, names in os.walk(dist):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), dist)
            if rel in ("SHA256SUMS", os.path.basename(path)):
                continue
            if rel not in sums:
                errs.append(f"artifact {rel} not in the SBOM")
            elif sums[rel] != sha256(os.path.join(d, n)):
                errs.append(f"sha256 of {rel} differs from the SBOM's")
    ids = {p["SPDXID"]: p for p in doc["packages"]}
    for arch in ("amd64", "arm64"):
        bid = f"SPDXRef-binary-agent-sandbox-controller-{arch}"
        deps = [
            ids[r["relatedSpdxElement"]]
            for r in doc["relationships"]
            if r["spdxElementId"] == bid and r["relationshipType"] == "DYNAMIC_LINK"
        ]
        names = {p["name"] for p in deps}
        if "libcurl4" not in names or any(
            p["versionInfo"] in ("", "NOASSERTION") for p in deps
        ):
            errs.append(
                f"controller ({arch}): Debian dependencies without libcurl4 or versions: {sorted(names)}"
            )
        if deps and not all(
            (f"arch={arch}") in p["externalRefs"][0]["referenceLocator"] for p in deps
        ):
            errs.append(f"controller ({arch}): a dependency of another architecture")
    kinds = {r["relationshipType"] for r in doc["relationships"]}
    if "STATIC_LINK" not in kinds:
        errs.append("no STATIC_LINK (sandboxd's static libraries)")
    purls = [
        p["externalRefs"][0]["referenceLocator"]
        for p in doc["packages"]
        if p.get("externalRefs")
    ]
    want = ["pkg:golang/k8s.io/client-go@", "pkg:pypi/httpx"]
    for kind in want:
        if not any(u.startswith(kind) for u in purls):
            errs.append(f"no {kind} package")
    if any(f.startswith("images/runtime-") for f in sums):
        for arch in ("amd64", "arm64"):  # the runtime images' packages
            rid = f"SPDXRef-image-runtime-{arch}"
            debs = [
                ids[r["relatedSpdxElement"]]["externalRefs"][0]["referenceLocator"]
                for r in doc["relationships"]
                if r["spdxElementId"] == rid and r["relationshipType"] == "CONTAINS"
            ]
            if not any(
                u.startswith("pkg:deb/debian/python3@") and u.endswith(f"?arch={arch}")
                for u in debs
            ):
                errs.append(f"runtime ({arch}): no pkg:deb/debian/python3 of {arch}")
    return errs


def oci(archive, ref, arches):
    errs = []
    with tarfile.open(archive) as t:
        names = set(t.getnames())
        for n in ("oci-layout", "index.json"):
            if n not in names:
                errs.append(f"{archive}: no {n}")
        if errs:
            return errs

        def blob(digest):
            return json.load(t.extractfile("blobs/sha256/" + digest.split(":", 1)[1]))

        index = json.load(t.extractfile("index.json"))
        # One image (skopeo and containerd pick it by name): a manifest, or an image
        # index of one manifest per platform.
        if len(index["manifests"]) != 1:
            return [
                f"{archive}: index.json lists {len(index['manifests'])} images, want 1"
            ]
        top = index["manifests"][0]
        name = top.get("annotations", {}).get("io.containerd.image.name")
        if name != ref:
            errs.append(f"{archive}: named {name}, want {ref}")
        manifests = [top]
        if top["mediaType"] == "application/vnd.oci.image.index.v1+json":
            manifests = blob(top["digest"])["manifests"]
        got = []
        for m in manifests:
            plat = m.get("platform", {}).get("architecture")
            got.append(plat)
            man = blob(m["digest"])
            cfg = blob(man["config"]["digest"])
            if cfg.get("architecture") != plat or cfg.get("os") != "linux":
                errs.append(
                    f"{archive}: manifest for {plat} has a config of "
                    f"{cfg.get('os')}/{cfg.get('architecture')}"
                )
            for layer in man["layers"]:
                member = "blobs/sha256/" + layer["digest"].split(":")[1]
                if member not in names:
                    errs.append(f"{archive}: layer {layer['digest']} missing")
                elif t.getmember(member).size != layer["size"]:
                    errs.append(f"{archive}: layer {layer['digest']} size differs")
    if sorted(got) != sorted(arches):
        errs.append(f"{archive}: architectures {got}, want {arches}")
    return errs


def wheel_top(path):
    with zipfile.ZipFile(path) as z:
        tops = {
            n.split("/")[0]
            for n in z.namelist()
            if "/" in n and not n.split("/")[0].endswith(".dist-info")
        }
    if len(tops) != 1:
        sys.exit(f"wheel {path}: top-level packages {sorted(tops)}")
    print(tops.pop())
    return []


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    fn = {
        "same-install": lambda: same_install(*args),
        "images": lambda: images(*args),
        "krew": lambda: krew(args[0], args[1], args[2], args[3:]),
        "sbom": lambda: sbom(*args),
        "oci": lambda: oci(args[0], args[1], args[2:]),
        "wheel-top": lambda: wheel_top(*args),
    }.get(cmd)
    if fn is None:
        sys.exit(__doc__)
    errs = fn()
    for e in errs:
        print(e, file=sys.stderr)
    sys.exit(1 if errs else 0)


if __name__ == "__main__":
    main()
