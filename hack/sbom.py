#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the SPDX 2.3 JSON SBOM of a release (hack/dist.sh).

Usage: sbom.py --version V --registry R [--tag T] --dist DIR [--binary ARCH:PATH]...
               [--static NAME=PKG,PKG...] [--runtime-status ARCH:FILE]... --go-mod FILE
               --pyproject FILE
       sbom.py --check SBOM.json          validate the required SPDX 2.3 fields

Packages: one per file of DIR (with its sha256), one per binary and architecture
(agent-sandbox-controller, sandbox-router, sandboxd, kubectl-sandbox) with the Debian
packages it links (shared libraries found by the dynamic loader and mapped with dpkg -S,
or the -dev packages named by --static for a static binary; versions from dpkg-query), the
Debian packages of the runtime image of each architecture (its dpkg status), and the Go and Python SDKs with
their module and distribution requirements.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
import uuid

REQUIRED_DOC = (
    "spdxVersion",
    "dataLicense",
    "SPDXID",
    "name",
    "documentNamespace",
    "creationInfo",
)
REQUIRED_PKG = ("name", "SPDXID", "downloadLocation")


def spdx_id(*parts):
    return "SPDXRef-" + re.sub(r"[^A-Za-z0-9.-]+", "-", "-".join(parts)).strip("-")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout


def needed_libs(arch, path):
    """Absolute paths of the shared libraries PATH loads ([] for a static binary)."""
    if "dynamically linked" not in run(["file", "-L", path]):
        return []
    if arch == "arm64":
        out = run(["qemu-aarch64-static", "/lib/ld-linux-aarch64.so.1", "--list", path])
    else:
        out = run(["ldd", path])
    return sorted(set(re.findall(r"(/\S+)", out)))


def dpkg_owners(libs):
    """The Debian packages (name:arch) owning LIBS, trying the /usr-merged paths too
    (one dpkg-query call: each takes a while)."""
    cands = {}
    for lib in libs:
        for p in (lib, os.path.realpath(lib)):
            for c in (p, "/usr" + p):
                cands.setdefault(c, lib)
    out = run(["dpkg-query", "-S", *sorted(cands)])
    owners, found = set(), set()
    for line in out.splitlines():
        pkgs, _, path = line.rpartition(": ")
        if path in cands and not pkgs.startswith("diversion"):
            owners.add(pkgs.split(",")[0].strip())
            found.add(cands[path])
    missing = set(libs) - found
    if missing:
        print(
            f"sbom: no Debian package owns {', '.join(sorted(missing))}",
            file=sys.stderr,
        )
    return sorted(owners)


def dpkg_version(pkg):
    out = run(["dpkg-query", "-W", "-f", "${Version}", pkg]).strip()
    return out or None


def deb_package(name, arch, version):
    return {
        "name": name,
        "SPDXID": spdx_id("deb", name, arch),
        "versionInfo": version or "NOASSERTION",
        "supplier": "Organization: Debian",
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "externalRefs": [
            {
                "referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl",
                "referenceLocator": "pkg:deb/debian/{}@{}?arch={}".format(
                    name, (version or "").replace(":", "%3A"), arch
                ),
            }
        ],
    }


def own_package(name, version, spdx, **extra):
    pkg = {
        "name": name,
        "SPDXID": spdx,
        "versionInfo": version,
        "supplier": "Organization: Agent Sandbox",
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "Apache-2.0",
        "licenseDeclared": "Apache-2.0",
        "copyrightText": "NOASSERTION",
    }
    pkg.update(extra)
    return pkg


def dpkg_status(path):
    """(package, architecture, version) of each installed package in a dpkg status file."""
    out, cur = [], {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f.read().split("\n") + [""]:
            if not line.strip():
                if "install ok installed" in cur.get("Status", ""):
                    out.append(
                        (
                            cur["Package"],
                            cur.get("Architecture", "all"),
                            cur.get("Version"),
                        )
                    )
                cur = {}
            elif not line[0].isspace() and ":" in line:
                k, v = line.split(":", 1)
                cur[k] = v.strip()
    return out


def go_requires(path):
    reqs, block = [], False
    with open(path) as f:
        for line in f:
            line = line.split("//")[0].strip()
            if line.startswith("require ("):
                block = True
            elif block and line == ")":
                block = False
            elif block and line:
                reqs.append(tuple(line.split()[:2]))
            elif line.startswith("require "):
                reqs.append(tuple(line.split()[1:3]))
    return reqs


def python_version(project, dist):
    """The pyproject's version or, when setup.py sets it (dynamic), the wheel's in DIST."""
    if "version" in project:
        return project["version"]
    norm = re.sub(r"[-_.]+", "_", project["name"]).lower()
    for name in sorted(os.listdir(dist)):
        if name.endswith(".whl") and name.lower().startswith(norm + "-"):
            return name.split("-")[1]
    return "NOASSERTION"


def build(a):
    doc_pkgs, rels = [], []
    seen = set()

    def add(pkg, parent, kind):
        if pkg["SPDXID"] not in seen:
            seen.add(pkg["SPDXID"])
            doc_pkgs.append(pkg)
        rels.append(
            {
                "spdxElementId": parent,
                "relationshipType": kind,
                "relatedSpdxElement": pkg["SPDXID"],
            }
        )

    root = spdx_id("agent-sandbox", a.version)
    add(own_package("agent-sandbox", a.version, root), "SPDXRef-DOCUMENT", "DESCRIBES")
    for name in sorted(os.listdir(a.dist)):
        for path in sorted(_files(os.path.join(a.dist, name))):
            rel = os.path.relpath(path, a.dist)
            pkg = own_package(
                os.path.basename(rel),
                a.version,
                spdx_id("artifact", rel),
                packageFileName=rel,
                checksums=[{"algorithm": "SHA256", "checksumValue": sha256(path)}],
            )
            add(pkg, root, "CONTAINS")
    static = dict(s.split("=", 1) for s in a.static)
    for spec in a.binary:
        arch, path = spec.split(":", 1)
        name = os.path.basename(path)
        bid = spdx_id("binary", name, arch)
        add(
            own_package(
                name,
                a.version,
                bid,
                primaryPackagePurpose="APPLICATION",
                checksums=[{"algorithm": "SHA256", "checksumValue": sha256(path)}],
                comment=f"linux/{arch}; image {a.registry}/{name}:{a.version}",
            ),
            root,
            "CONTAINS",
        )
        if name in static:
            debs = [f"{p}:{arch}" for p in static[name].split(",")]
            kind = "STATIC_LINK"
        else:
            debs = dpkg_owners(needed_libs(arch, path))
            kind = "DYNAMIC_LINK"
        for d in debs:
            pname, parch = d.split(":") if ":" in d else (d, arch)
            add(deb_package(pname, parch, dpkg_version(d)), bid, kind)
    for spec in a.runtime_status:
        # ARCH:FILE (a bare FILE is the amd64 image's)
        arch, path = spec.split(":", 1) if ":" in spec else ("amd64", spec)
        rid = spdx_id("image", "runtime", arch)
        add(
            own_package(
                "runtime",
                a.version,
                rid,
                primaryPackagePurpose="CONTAINER",
                comment=f"image {a.registry}/runtime:{a.version} (linux/{arch})",
            ),
            root,
            "CONTAINS",
        )
        for pname, parch, ver in dpkg_status(path):
            add(deb_package(pname, parch, ver), rid, "CONTAINS")
    go = spdx_id("sdk-go")
    add(
        own_package(
            "agent-sandbox.dev/sdk/go", a.version, go, primaryPackagePurpose="LIBRARY"
        ),
        root,
        "CONTAINS",
    )
    for mod, ver in go_requires(a.go_mod):
        pkg = {
            "name": mod,
            "SPDXID": spdx_id("go", mod),
            "versionInfo": ver,
            "downloadLocation": f"https://proxy.golang.org/{mod.lower()}/@v/{ver}.zip",
            "filesAnalyzed": False,
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": f"pkg:golang/{mod}@{ver}",
                }
            ],
        }
        add(pkg, go, "DEPENDS_ON")
    with open(a.pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    py = spdx_id("sdk-python")
    add(
        own_package(
            project["name"],
            python_version(project, a.dist),
            py,
            primaryPackagePurpose="LIBRARY",
        ),
        root,
        "CONTAINS",
    )
    for req in project.get("dependencies", []):
        m = re.match(r"[A-Za-z0-9._-]+", req)
        pkg = {
            "name": m.group(0),
            "SPDXID": spdx_id("pypi", m.group(0)),
            "versionInfo": req[m.end() :].strip() or "NOASSERTION",
            "downloadLocation": f"https://pypi.org/project/{m.group(0)}/",
            "filesAnalyzed": False,
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": f"pkg:pypi/{m.group(0).lower()}",
                }
            ],
        }
        add(pkg, py, "DEPENDS_ON")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"agent-sandbox-{a.version}",
        "documentNamespace": f"https://spdx.org/spdxdocs/agent-sandbox-{a.version}-{uuid.uuid4()}",
        "creationInfo": {
            "created": now,
            "creators": ["Tool: agent-sandbox-hack-sbom.py"],
        },
        "packages": doc_pkgs,
        "relationships": rels,
    }


def _files(path):
    if os.path.isdir(path):
        for d, _, names in os.walk(path):
            for n in names:
                yield os.path.join(d, n)
    elif not path.endswith(("SHA256SUMS", ".spdx.json")):
        yield path


def check(doc):
    """The problems of an SPDX 2.3 JSON document (required fields, references)."""
    errs = [f"missing {k}" for k in REQUIRED_DOC if k not in doc]
    if doc.get("spdxVersion") != "SPDX-2.3":
        errs.append("spdxVersion is not SPDX-2.3")
    if doc.get("dataLicense") != "CC0-1.0":
        errs.append("dataLicense is not CC0-1.0")
    ci = doc.get("creationInfo", {})
    if not ci.get("created") or not ci.get("creators"):
        errs.append("creationInfo needs created and creators")
    ids = {"SPDXRef-DOCUMENT"}
    for p in doc.get("packages", []):
        errs += [
            "package {}: missing {}".format(p.get("name"), k)
            for k in REQUIRED_PKG
            if k not in p
        ]
        if not re.fullmatch(r"SPDXRef-[A-Za-z0-9.-]+", p.get("SPDXID", "")):
            errs.append(
                "package {}: bad SPDXID {!r}".format(p.get("name"), p.get("SPDXID"))
            )
        if p.get("SPDXID") in ids:
            errs.append("duplicate SPDXID {}".format(p.get("SPDXID")))
        ids.add(p.get("SPDXID"))
    for r in doc.get("relationships", []):
        for k in ("spdxElementId", "relatedSpdxElement"):
            if r.get(k) not in ids:
                errs.append(f"relationship to unknown {r.get(k)}")
    if not any(
        r.get("relationshipType") == "DESCRIBES" for r in doc.get("relationships", [])
    ):
        errs.append("no DESCRIBES relationship")
    return errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check")
    ap.add_argument("--version")
    ap.add_argument("--registry", default="")
    ap.add_argument("--tag", help="the images' tag (default VERSION)")
    ap.add_argument("--dist")
    ap.add_argument("--binary", action="append", default=[])
    ap.add_argument("--static", action="append", default=[])
    ap.add_argument(
        "--runtime-status",
        action="append",
        default=[],
        metavar="ARCH:FILE",
        help="the dpkg status of the runtime image for ARCH (repeatable)",
    )
    ap.add_argument("--go-mod")
    ap.add_argument("--pyproject")
    a = ap.parse_args()
    if a.check:
        with open(a.check) as f:
            errs = check(json.load(f))
        for e in errs:
            print(f"sbom: {e}", file=sys.stderr)
        sys.exit(1 if errs else 0)
    if not (a.version and a.dist and a.go_mod and a.pyproject):
        ap.error("--version, --dist, --go-mod and --pyproject are required")
    doc = build(a)
    errs = check(doc)
    if errs:
        sys.exit("sbom: " + "; ".join(errs[:5]))
    json.dump(doc, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
