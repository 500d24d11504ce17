#!/usr/bin/env python3
"""Compiles every source that includes LibTorch against another LibTorch's headers.

The build uses the LibTorch CMake found (Debian bookworm's 1.13, CPU only); GPU nodes bring a
PyTorch 2.x whose LibTorch has CUDA. This check takes the headers of Debian's newer libtorch-dev
(trixie: 2.6) from Debian's archive, and compiles each translation unit that reaches LibTorch
with its own compile command from the build's compile_commands.json, with those headers first
and -fsyntax-only: an API that 2.x removed or changed fails here rather than on the GPU node.

It also checks, from the compiler's -H list, that no LibTorch header came from the build's own
LibTorch, so a header missing from the newer set cannot pass unnoticed.

  python3 scripts/check-libtorch-api.py build                   # Debian trixie's libtorch-dev
  python3 scripts/check-libtorch-api.py build --headers DIR     # an unpacked LibTorch (DIR/include)

Exit 0: every file compiled; 1: a file failed (its errors are printed); 2: bad usage or the
package could not be fetched.
"""
import argparse
import concurrent.futures
import hashlib
import json
import lzma
import os
import re
import shlex
import subprocess
import sys
import urllib.request

LIBTORCH_DIRS = ("ATen/", "c10/", "torch/", "caffe2/")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def fail_usage(msg):
    print(f"check-libtorch-api: {msg}", file=sys.stderr)
    sys.exit(2)


def debian_mirror():
    """The archive apt uses here (deb822 or one-line sources), so the check needs no other host."""
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        try:
            text = open(path).read()
        except OSError:
            continue
        m = re.search(r"^URIs:\s*(\S+)", text, re.M) or re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M)
        if m:
            return m.group(1).rstrip("/")
    return "http://deb.debian.org/debian"


def package_entry(mirror, suite, package):
    """Filename, SHA256 and Version of `package` in the suite's main/binary-amd64 index."""
    url = f"{mirror}/dists/{suite}/main/binary-amd64/Packages.xz"
    with urllib.request.urlopen(url, timeout=120) as r:
        index = lzma.decompress(r.read()).decode("utf-8", "replace")
    for stanza in index.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z0-9-]+): (.*)$", stanza, re.M))
        if fields.get("Package") == package:
            return fields
    fail_usage(f"{package} is not in {url}")


def fetch_headers(cache, mirror, suite):
    """Unpacks libtorch-dev of `suite` under `cache` once per version; returns the include dir."""
    entry = package_entry(mirror, suite, "libtorch-dev")
    root = os.path.join(cache, f"libtorch-dev_{entry['Version']}")
    include = os.path.join(root, "usr", "include")
    if os.path.isdir(include):
        return include, entry["Version"]
    os.makedirs(cache, exist_ok=True)
    deb = root + ".deb"
    with urllib.request.urlopen(f"{mirror}/{entry['Filename']}", timeout=600) as r:
        data = r.read()
    if hashlib.sha256(data).hexdigest() != entry["SHA256"]:
        fail_usage(f"{entry['Filename']}: SHA-256 differs from the archive's index")
    with open(deb, "wb") as f:
        f.write(data)
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    return include, entry["Version"]


def header_version(include):
    # Newer LibTorch (2.14) keeps the numbers in torch/headeronly/version.h, which version.h includes.
    text = ""
    for name in ("torch/csrc/api/include/torch/version.h", "torch/headeronly/version.h"):
        path = os.path.join(include, name)
        if os.path.exists(path):
            text += open(path).read()
    parts = [re.search(rf"#define TORCH_VERSION_{k} (\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(p.group(1) for p in parts if p)


def sources_reaching_libtorch(repo, commands):
    """The compiled files whose own or project-header includes lead to a LibTorch header."""
    roots = [os.path.join(repo, d) for d in ("include", "src", "")]
    direct, edges = {}, {}

    def scan(path):
        if path in edges:
            return
        try:
            text = open(path, errors="replace").read()
        except OSError:
            edges[path] = []
            direct[path] = False
            return
        hits = INCLUDE_RE.findall(text)
        direct[path] = any(name.startswith(LIBTORCH_DIRS) for _, name in hits)
        local = []
        for _, name in hits:
            for base in [os.path.dirname(path)] + roots:
                cand = os.path.normpath(os.path.join(base, name))
                if cand.startswith(repo + os.sep) and os.path.isfile(cand):
                    local.append(cand)
                    break
        edges[path] = local
        for child in local:
            scan(child)

    def reaches(path, seen):
        if direct[path]:
            return True
        seen.add(path)
        return any(reaches(c, seen) for c in edges[path] if c not in seen)

    picked = []
    for entry in commands:
        path = os.path.normpath(entry["file"])
        if not path.startswith(repo):
            continue
        scan(path)
        if reaches(path, set()):
            picked.append(entry)
    return picked


def syntax_command(entry, include):
    """The file's own command with the other headers first, no PCH and no object written."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-include", "-o"):
            skip = True  # the precompiled header was made from the build's own LibTorch
            continue
        if a in ("-c", "-Winvalid-pch"):
            continue
        out.append(a)
    first = ["-isystem", include, "-isystem", os.path.join(include, "torch/csrc/api/include")]
    return [args[0]] + first + out + ["-fsyntax-only", "-H"]


def check_one(entry, include, repo):
    cmd = syntax_command(entry, include)
    p = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
    lines = p.stderr.splitlines()
    used = [l.split(" ", 1)[1] for l in lines if re.match(r"^\.+ ", l)]
    foreign = [h for h in map(os.path.realpath, used)
               if any(f"/{d}" in h for d in LIBTORCH_DIRS) and not h.startswith(include + os.sep)
               and not h.startswith(repo + os.sep)]
    # -H also lists headers without include guards, one bare path per line, after this heading
    diagnostics = [l for l in lines if not re.match(r"^\.+ ", l) and not re.fullmatch(r"/\S+", l)
                   and not l.startswith("Multiple include guards")]
    return entry["file"], p.returncode, foreign, diagnostics


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", help="a configured build directory (its compile_commands.json)")
    ap.add_argument("--headers", help="an include directory of an unpacked LibTorch, instead of Debian's")
    ap.add_argument("--suite", default="trixie", help="the Debian suite whose libtorch-dev to take")
    ap.add_argument("--mirror", default=None, help="the Debian archive (default: apt's)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only", default="", help="check only the files whose path matches this regex")
    args = ap.parse_args()

    repo = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    ccjson = os.path.join(args.build, "compile_commands.json")
    if not os.path.isfile(ccjson):
        fail_usage(f"{ccjson} missing: configure the build first (CMAKE_EXPORT_COMPILE_COMMANDS is on)")
    commands = json.load(open(ccjson))
    if not any("/src/backends/torch/" in e["file"] for e in commands):
        fail_usage("this build has no torch backend (D5_WITH_TORCH is off): nothing to check")

    if args.headers:
        include = os.path.realpath(args.headers)
        source = include
    else:
        mirror = args.mirror or debian_mirror()
        try:
            include, version = fetch_headers(os.path.join(args.build, "libtorch-api"), mirror, args.suite)
        except OSError as e:
            fail_usage(f"could not fetch libtorch-dev from {mirror} ({args.suite}): {e}")
        source = f"Debian {args.suite} libtorch-dev {version}"
        include = os.path.realpath(include)
    if not os.path.isfile(os.path.join(include, "ATen/ATen.h")):
        fail_usage(f"{include} holds no ATen/ATen.h")

    picked = [e for e in sources_reaching_libtorch(repo, commands) if re.search(args.only, e["file"])]
    print(f"check-libtorch-api: {len(picked)} files against LibTorch {header_version(include)} ({source})")
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for path, rc, foreign, diagnostics in pool.map(lambda e: check_one(e, include, repo), picked):
            rel = os.path.relpath(path, repo)
            if rc == 0 and not foreign:
                print(f"  ok    {rel}")
                continue
            failed += 1
            print(f"  FAIL  {rel}")
            for h in foreign[:5]:
                print(f"        header from the build's own LibTorch: {h}")
            for l in diagnostics[:40]:
                print(f"        {l}")
    print(f"check-libtorch-api: {len(picked) - failed} of {len(picked)} files compile")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
