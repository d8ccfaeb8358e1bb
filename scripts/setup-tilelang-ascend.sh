#!/usr/bin/env bash
# Provide tilelang-ascend 0.1.4 (the A2/A3 = 910B TileLang stack) on this machine, so that
# `tilescope lint` can lower tilelang-ascend kernels through their own compiler.
#
# Its only wheel is aarch64. On an aarch64 host it is installed into a venv directly; on x86_64 it
# goes into an arm64 Debian root run by qemu-user (../shared/docs/tilelang-notes.md §6.1 has the
# steps and why each is needed). This costs about 10 minutes and ~6.5 GB, which is why it is not
# part of scripts/setup.sh; the tests that need it skip when it is absent.
#
#   bash scripts/setup-tilelang-ascend.sh            # root in $TILESCOPE_ASCEND_ROOT
#                                                    # (default ~/.cache/tilescope/tilelang-ascend)
#
# Needs root (debootstrap, binfmt_misc) on x86_64. Idempotent: each step is skipped when done.
set -euo pipefail

ROOT="${TILESCOPE_ASCEND_ROOT:-$HOME/.cache/tilescope/tilelang-ascend}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
WHEEL_SPEC="tilelang-ascend==0.1.4"
TORCH_SPEC="torch==2.13.0"

say() { printf 'setup-tilelang-ascend: %s\n' "$*" >&2; }

if [ "$(uname -m)" = "aarch64" ]; then
    # Native: a venv is enough (the package shares the import name `tilelang` with 0.1.15, so it
    # never goes into the project's own .venv).
    mkdir -p "$ROOT"
    [ -x "$ROOT/venv/bin/python" ] || python3 -m venv "$ROOT/venv"
    "$ROOT/venv/bin/pip" install -q "$TORCH_SPEC"
    "$ROOT/venv/bin/pip" install -q "$WHEEL_SPEC"
    echo native > "$ROOT/.tilescope-kind"
    say "ready: $ROOT/venv (native)"
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    say "needs root on $(uname -m) (debootstrap and binfmt_misc); run it with sudo"
    exit 3
fi

need_pkgs=()
command -v qemu-aarch64-static >/dev/null || need_pkgs+=(qemu-user-static)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    say "installing ${need_pkgs[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# binfmt_misc: without it the arm64 binaries of the root cannot be executed.
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    # The conf line is :name:type:offset:magic:mask:interpreter:flags; use the static
    # interpreter with flag F so that it works inside the chroot.
    line=$(grep -v '^#' "$conf" | head -n1)
    IFS=':' read -r _ name type offset magic mask _interp _flags <<<"$line"
    printf ':%s:%s:%s:%s:%s:%s:%s' "$name" "$type" "$offset" "$magic" "$mask" \
        /usr/bin/qemu-aarch64-static F > /proc/sys/fs/binfmt_misc/register
fi

if [ ! -x "$ROOT/usr/bin/python3" ]; then
    say "debootstrap arm64 bookworm into $ROOT (about 2 minutes)"
    mkdir -p "$ROOT"
    debootstrap --arch=arm64 --variant=minbase \
        --include=python3,python3-venv,python3-pip,ca-certificates bookworm "$ROOT" "$MIRROR" >/dev/null
fi

mkdir -p "$ROOT/host"  # tilescope binds the kernel's folder and its own package here, read-only

# The host's CA bundle (it may hold a proxy's CA) and resolver, so pip and apt work inside.
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"

mounted=()
cleanup() {
    for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done
}
trap cleanup EXIT
for m in proc dev; do
    if ! mountpoint -q "$ROOT/$m"; then
        if [ "$m" = proc ]; then mount -t proc proc "$ROOT/proc"; else mount --bind /dev "$ROOT/dev"; fi
        mounted+=("$ROOT/$m")
    fi
done

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_DEFAULT_TIMEOUT=180 DEBIAN_FRONTEND=noninteractive "$@"; }

# libtvm.so needs GLIBCXX_3.4.32 (trixie's libstdc++); g++ and the headers build tilelang's
# cython adapter at first import; git is called by tilelang's version module.
if ! in_root sh -c 'strings /usr/lib/aarch64-linux-gnu/libstdc++.so.6 2>/dev/null | grep -q GLIBCXX_3.4.32' \
   && ! grep -q 'GLIBCXX_3.4.32' "$ROOT/usr/lib/aarch64-linux-gnu/libstdc++.so.6" 2>/dev/null; then
    say "libstdc++ from trixie, g++, python3.11-dev, git"
    echo "deb $MIRROR trixie main" > "$ROOT/etc/apt/sources.list.d/trixie.list"
    printf 'Package: *\nPin: release n=trixie\nPin-Priority: 100\n' > "$ROOT/etc/apt/preferences.d/trixie"
    in_root apt-get update -qq
    in_root apt-get install -y -qq -t trixie libstdc++6 g++ >/dev/null
    in_root apt-get install -y -qq python3.11-dev git >/dev/null
fi

if [ ! -x "$ROOT/opt/tla/bin/python" ]; then
    in_root python3 -m venv /opt/tla
fi
if ! in_root /opt/tla/bin/python -c 'import importlib.metadata as m; m.version("tilelang-ascend")' >/dev/null 2>&1; then
    say "pip install $TORCH_SPEC and $WHEEL_SPEC inside the root (about 6.5 minutes)"
    in_root /opt/tla/bin/pip install -q "$TORCH_SPEC"
    in_root /opt/tla/bin/pip install -q "$WHEEL_SPEC"
fi

echo emulated > "$ROOT/.tilescope-kind"
say "checking: import tilelang (about 20 s under emulation)"
in_root /usr/bin/env TORCH_DEVICE_BACKEND_AUTOLOAD=0 /opt/tla/bin/python -c \
    'import tilelang, tilelang.language as T; print("tilelang-ascend", tilelang.__version__, "alloc_L1" in dir(T))'
say "ready: $ROOT (emulated arm64)"
