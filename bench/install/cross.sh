#!/usr/bin/env bash
# Builds oomkit for macOS and Windows from this Linux machine, to check that
# the code compiles and links there (the release workflow builds the real
# wheels on macOS and Windows runners):
#
#   bash bench/install/cross.sh                    # aarch64-apple-darwin x86_64-pc-windows-gnu
#   TARGETS=x86_64-apple-darwin bash bench/install/cross.sh
#   RUN_WINE=1 bash bench/install/cross.sh         # also runs the Windows binary under wine
#
# The linker and C compiler for those targets is zig (PyPI's ziglang, through
# cargo-zigbuild). The targets' standard library: `rustup target add` where
# rustup can download it; where it cannot (this project's machines reach
# crates.io, PyPI and Debian only), std is built from source
# (`-Zbuild-std`, with RUSTC_BOOTSTRAP=1) from the `rust-src` package of the
# same rustc version, taken from Debian (trixie-backports carries 1.95.0) and
# put where `rustup component add rust-src` would put it (the toolchain's
# lib/rustlib/src/rust), once.
# Needs PyPI and Debian's mirror the first time; a debug build per target.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
targets=${TARGETS:-"aarch64-apple-darwin x86_64-pc-windows-gnu"}
tools=${ZIG_VENV:-/tmp/oomkit-zig-venv}
target_dir=${CROSS_TARGET_DIR:-/tmp/oomkit-cross-target}

if [ ! -x "$tools/bin/cargo-zigbuild" ]; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q ziglang cargo-zigbuild
fi
export PATH="$tools/bin:$PATH"

sysroot=$(rustc --print sysroot)
version=$(rustc --version | awk '{print $2}')
build_std=()
for t in $targets; do
  if ! rustup target list --installed 2>/dev/null | grep -qx "$t" &&
     ! rustup target add "$t" >/dev/null 2>&1; then
    build_std=(-Zbuild-std=std,panic_abort)
  fi
done
if [ ${#build_std[@]} -gt 0 ] && [ ! -d "$sysroot/lib/rustlib/src/rust/library" ]; then
  # rust-src for exactly this rustc, from Debian's pool.
  deb="rust-src_${version}+dfsg1-2~bpo13+1_all.deb"
  work=$(mktemp -d)
  curl -fsS -o "$work/rust-src.deb" "http://deb.debian.org/debian/pool/main/r/rustc/$deb"
  dpkg -x "$work/rust-src.deb" "$work/x"
  mkdir -p "$sysroot/lib/rustlib/src"
  cp -r "$work/x/usr/src/rustc-$version" "$sysroot/lib/rustlib/src/rust"
  rm -rf "$work"
fi

status=0
for t in $targets; do
  start=$(date +%s)
  if (cd "$repo" && RUSTC_BOOTSTRAP=1 cargo zigbuild "${build_std[@]}" --target "$t" \
        -p oomkit --locked --target-dir "$target_dir" -q); then
    bin=$target_dir/$t/debug/oomkit
    [ -f "$bin.exe" ] && bin=$bin.exe
    echo "$t: built in $(( $(date +%s) - start )) s: $(file -b "$bin" | cut -d, -f1)"
  else
    echo "$t: FAILED"; status=1
  fi
done

wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
if [ "${RUN_WINE:-0}" = 1 ] && [ -x "$wine" ]; then
  exe=$target_dir/x86_64-pc-windows-gnu/debug/oomkit.exe
  export WINEDEBUG=-all
  # Rust's std (>= 1.78) draws random numbers with ProcessPrng from
  # bcryptprimitives.dll, which Windows 10+ has and wine 8 lacks: for wine
  # only, a stand-in DLL next to the binary forwards it to RtlGenRandom.
  shim=$(mktemp -d)
  cat > "$shim/prng.c" <<'C'
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG len);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
C
  python-zig cc -target x86_64-windows-gnu -shared "$shim/prng.c" -ladvapi32 \
      -o "$(dirname "$exe")/bcryptprimitives.dll"
  rm -rf "$shim"
  set +e +o pipefail
  "$wine" "$exe" --version
  "$wine" "$exe" explain "$repo/examples/train_oom.log" | head -5
  "$wine" "$exe" estimate llama-3.1-8b --gpu a100-80gb | head -5
  "$wine" "$exe" lint "$repo/examples/" | tail -2
  "$wine" "$exe" monitor --once; echo "monitor exit status: $? (2 expected without nvml.dll)"
  "$wine" "$exe" run -- cmd /c echo hi; echo "run exit status: $? (125 expected: needs Linux or macOS)"
fi
exit $status
