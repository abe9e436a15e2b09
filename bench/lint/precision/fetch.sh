#!/usr/bin/env bash
# Downloads the pinned sdists/wheels named in files.txt from PyPI (through pip's index,
# or PyPI's JSON API) and copies the listed training/evaluation scripts into
#   $WORK/precision/<package>/<path>
# Each line of files.txt is `package==version path-inside-the-archive`.
set -euo pipefail
cd "$(dirname "$0")"
WORK=${WORK:-/tmp/oomkit-lint-bench}
mkdir -p "$WORK/archives" "$WORK/unpacked"
rm -rf "$WORK/precision"
mkdir -p "$WORK/precision"
while read -r spec path; do
    [[ -z "$spec" || "$spec" == \#* ]] && continue
    pkg=${spec%%==*}; ver=${spec##*==}
    dir="$WORK/unpacked/$pkg-$ver"
    if [[ ! -d "$dir" ]]; then
        # the sdist when there is one (it ships scripts the wheel may not), else the wheel
        meta="$WORK/archives/$pkg.json"
        curl -sSf -m 60 -o "$meta" "https://pypi.org/pypi/$pkg/json"
        url=$(python3 - "$pkg" "$ver" "$meta" <<'PY'
import json, sys, urllib.parse
pkg, ver, meta = sys.argv[1], sys.argv[2], sys.argv[3]
doc = json.load(open(meta))
files = doc.get("releases", {}).get(ver) or doc["urls"]
files = [f for f in files if f"-{ver}" in f["filename"]]
if not files:
    sys.exit(f"{pkg}=={ver} is not on the index")
pick = [f for f in files if f["packagetype"] == "sdist"] or files
print(urllib.parse.urljoin(f"https://pypi.org/pypi/{pkg}/json", pick[0]["url"]))
PY
)
        archive="$WORK/archives/$(basename "$url")"
        [[ -f "$archive" ]] || curl -sSfL -m 300 -o "$archive" "$url"
        mkdir -p "$dir"
        case "$archive" in
            *.whl) (cd "$dir" && unzip -q -o "$archive") ;;
            *) tar xzf "$archive" -C "$dir" --strip-components=1 ;;
        esac
    fi
    src="$dir/$path"
    [[ -f "$src" ]] || src=$(find "$dir" -path "*/$path" | head -1)
    mkdir -p "$WORK/precision/$pkg/$(dirname "$path")"
    cp "$src" "$WORK/precision/$pkg/$path"
done < files.txt
echo "$(find "$WORK/precision" -name '*.py' | wc -l) scripts in $WORK/precision"
