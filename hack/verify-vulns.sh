#!/usr/bin/env bash
# Fails when Tailor's code calls a function with a known vulnerability, in a dependency or in
# the Go standard library of the toolchain that builds it: govulncheck against the Go
# vulnerability database pinned in lib.sh (VULNDB_VERSION), built locally, so it runs offline.
# Vulnerabilities in modules we require but whose affected code we never reach are counted,
# not failed on. A reachable one fails unless hack/vulns-accepted.txt accepts it for the
# exact module version (or Go toolchain) it was found in, with the reason: once that version
# moves, the acceptance lapses and the finding is judged again.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_command python3 python3
cd "$TAILOR_ROOT"
govulncheck=$(go_tool govulncheck golang.org/x/vuln/cmd/govulncheck "$GOVULNCHECK_VERSION")
db=$(vulndb_dir)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
log "govulncheck $GOVULNCHECK_VERSION, database $VULNDB_VERSION: scanning ./... (several minutes)"
"$govulncheck" -db "file://$db" -format json ./... > "$out"

python3 - "$out" hack/vulns-accepted.txt <<'PY'
import json, sys

def stream(path):
    dec, text, i = json.JSONDecoder(), open(path).read(), 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return
        obj, i = dec.raw_decode(text, i)
        yield obj

accepted = {}
for line in open(sys.argv[2]):
    line = line.strip()
    if line and not line.startswith("#"):
        vuln, scope, reason = line.split(None, 2)
        accepted[(vuln, scope)] = reason

modules, summaries, levels = 0, {}, {}
reachable = {}  # (id, module@version) -> first trace line
for obj in stream(sys.argv[1]):
    if "SBOM" in obj:
        modules = len(obj["SBOM"].get("modules", []))
    elif "osv" in obj:
        summaries[obj["osv"]["id"]] = obj["osv"].get("summary", "")
    elif "finding" in obj:
        f = obj["finding"]
        top = f["trace"][0]
        level = "symbol" if top.get("function") else "package" if top.get("package") else "module"
        levels.setdefault(f["osv"], set()).add(level)
        if level != "symbol":
            continue
        module = top.get("module", "")
        version = top.get("version", "")
        scope = "go" + version.lstrip("v") if module == "stdlib" else module + "@" + version
        where = f["trace"][-1]
        pos = where.get("position", {})
        reachable.setdefault((f["osv"], scope), "%s:%s %s" % (pos.get("filename", "?"), pos.get("line", "?"), where.get("function", "")))

failed = 0
for (vuln, scope), site in sorted(reachable.items()):
    reason = accepted.get((vuln, scope))
    if reason is None:
        failed += 1
        print("VULNERABLE %s in %s (%s), reached from %s" % (vuln, scope, summaries.get(vuln, ""), site))
    else:
        print("accepted   %s in %s: %s" % (vuln, scope, reason))
unreached = [v for v, l in levels.items() if "symbol" not in l]
print("%d modules scanned; %d vulnerabilities reachable from Tailor's code (%d accepted, %d failing); %d more in imported packages or required modules but not reached"
      % (modules, len({v for v, _ in reachable}), len(reachable) - failed, failed, len(unreached)))
stale = sorted(k for k in accepted if k not in reachable)
for vuln, scope in stale:
    print("hack/vulns-accepted.txt: %s in %s is no longer found; remove it" % (vuln, scope))
sys.exit(1 if failed or stale else 0)
PY
