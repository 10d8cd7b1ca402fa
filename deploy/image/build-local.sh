#!/usr/bin/env bash
# Build the schedctl image from this checkout where no image registry is reachable: the base is Debian
# bookworm bootstrapped here with debootstrap from Debian's mirror (python3, its venv module, CA
# certificates), imported as a local image; the Containerfile then installs the wheel built from the
# checkout, with pip reaching PyPI. Needs root, debootstrap, and buildah or podman.
#
#   deploy/image/build-local.sh [IMAGE]        IMAGE defaults to $SCHEDCTL_IMAGE, else localhost/schedctl:VERSION
#
# The base is cached, keyed by a hash of the function below that bootstraps it (all that decides what it
# holds): as an image in the container storage and as a tarball under $SCHEDCTL_IMAGE_CACHE
# (/var/tmp/schedctl-image-base), so only the first build on a machine bootstraps, and editing the rest of
# this script does not bootstrap again. The image's name is the last line printed.
#
# Environment: SCHEDCTL_IMAGE_MIRROR (a Debian mirror; default: the host's apt source, else debootstrap's),
# SCHEDCTL_IMAGE_CA (a CA bundle for pip inside the build, where a proxy re-signs TLS; default: the host's
# bundle), SCHEDCTL_IMAGE_CACHE.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/schedctl/__init__.py")
image=${1:-${SCHEDCTL_IMAGE:-localhost/schedctl:$version}}
cache=${SCHEDCTL_IMAGE_CACHE:-/var/tmp/schedctl-image-base}
suite=bookworm

if command -v buildah >/dev/null; then
    builder=buildah
elif command -v podman >/dev/null; then
    builder=podman
else
    echo "build-local.sh: neither buildah nor podman is installed" >&2
    exit 1
fi

say() { echo "build-local.sh: $*" >&2; }

base_exists() {
    if [ "$builder" = buildah ]; then buildah inspect --type image "$base" >/dev/null 2>&1
    else podman image exists "$base"; fi
}

mirror() {
    if [ -n "${SCHEDCTL_IMAGE_MIRROR:-}" ]; then
        echo "$SCHEDCTL_IMAGE_MIRROR"
        return
    fi
    # The first Debian main archive the host's apt uses (deb822 or one-line form); none: debootstrap's own.
    cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | sed -n -e 's|^URIs:[[:space:]]*\([^[:space:]]*/debian\)/\{0,1\}$|\1|p' \
            -e 's|^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*/debian\)/\{0,1\}[[:space:]].*|\2|p' \
        | head -n 1
}

bootstrap() {
    command -v debootstrap >/dev/null || { say "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
    local root=$cache/rootfs.$$
    rm -rf "$root"
    say "bootstrapping Debian $suite into $root"
    # shellcheck disable=SC2046  # no mirror: debootstrap's default
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$suite" "$root" $(mirror) >"$cache/debootstrap.log" 2>&1 \
        || { tail -n 20 "$cache/debootstrap.log" >&2; rm -rf "$root"; exit 1; }
    # What an image never uses: the package downloads and lists, documentation, translations.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
        "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* "$root"/var/log/*.log
    rm -f "$cache"/"$suite"-*.tar
    tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
}

import_base() {
    say "importing $tarball as $base"
    if [ "$builder" = podman ]; then
        podman import --change 'CMD ["/bin/bash"]' "$tarball" "$base" >/dev/null
    else
        local ctr mnt
        ctr=$(buildah from scratch)
        mnt=$(buildah mount "$ctr")
        tar --numeric-owner -C "$mnt" -xf "$tarball"
        buildah umount "$ctr" >/dev/null
        buildah config --cmd /bin/bash "$ctr"
        buildah commit --quiet --rm "$ctr" "$base" >/dev/null
    fi
    # Bases of earlier versions of bootstrap(): nothing builds on them any more.
    local old
    for old in $("$builder" images --noheading | awk '$1 == "localhost/schedctl-base" { print $1 ":" $2 }'); do
        [ "$old" = "$base" ] || "$builder" rmi "$old" >/dev/null || true
    done
}

key=$(declare -f bootstrap | sha256sum | cut -c1-12)
base=localhost/schedctl-base:$suite-$key
tarball=$cache/$suite-$key.tar

mkdir -p "$cache"
exec 9>"$cache/lock"
flock -w 900 9 || { say "another build holds $cache/lock"; exit 1; }
if ! base_exists; then
    [ -s "$tarball" ] || bootstrap
    import_base
fi

ca=${SCHEDCTL_IMAGE_CA:-/etc/ssl/certs/ca-certificates.crt}
secret=()
[ -s "$ca" ] && secret=(--secret "id=ca,src=$ca")
say "building $image on $base"
# chroot isolation: RUN needs no OCI runtime, cgroup or rlimit changes (root here may not raise rlimits,
# and crun refuses a hybrid cgroup hierarchy); host network: the build reaches PyPI as this host does.
# The dependency stage is tagged first, so the layers that the next build reuses are named images, not
# anonymous ones that a clean-up of dangling images would take.
build() {
    if [ "$builder" = buildah ]; then set -- buildah bud "$@"; else set -- podman build "$@"; fi
    "$@" --quiet --layers --format docker --isolation chroot --network host --build-arg "BASE=$base" \
        "${secret[@]}" -f "$repo/Containerfile" "$repo" >/dev/null
}
build --target deps -t localhost/schedctl-deps:latest
build -t "$image"
echo "$image"
