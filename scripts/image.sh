#!/usr/bin/env bash
# Builds the Sextant container image without pulling anything: a static
# binary (CGO_ENABLED=0) and a FROM scratch image that only copies it, the
# build host's CA certificates, a non-root user and the container defaults.
#
#   scripts/image.sh                    # builds sextant:dev
#   IMAGE=registry/sextant:v1.2.3 VERSION=v1.2.3 scripts/image.sh
#
# Environment: IMAGE (tag, default sextant:dev), VERSION (stamped into the
# binary, default: git describe), CA_BUNDLE (default
# /etc/ssl/certs/ca-certificates.crt), CONTEXT (build context directory,
# default a temporary one, removed afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-sextant:dev}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
DIRTY=false
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then DIRTY=true; fi
UID_GID=65532

if [ -z "${CONTEXT:-}" ]; then
	CONTEXT=$(mktemp -d)
	trap 'rm -rf "$CONTEXT"' EXIT
fi
rootfs=$CONTEXT/rootfs
mkdir -p "$rootfs/usr/bin" "$rootfs/etc/ssl/certs" "$rootfs/etc/sextant" "$CONTEXT/data"

pkg=github.com/sextantmq/sextant/internal/buildinfo
CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X $pkg.version=$VERSION -X $pkg.commit=$COMMIT -X $pkg.dirty=$DIRTY" \
	-o "$rootfs/usr/bin/sextant" ./cmd/sextant

cp "$CA_BUNDLE" "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/:/nonexistent\nsextant:x:%d:%d:sextant:/var/lib/sextant:/nonexistent\n' $UID_GID $UID_GID >"$rootfs/etc/passwd"
printf 'root:x:0:\nsextant:x:%d:\n' $UID_GID >"$rootfs/etc/group"
cp deploy/sextant-container.yaml "$rootfs/etc/sextant/sextant.yaml"
# An empty directory is not copied by every builder: keep a marker in it.
printf 'Sextant data directory (this file marks it for the image build).\n' >"$CONTEXT/data/README"
cp deploy/Dockerfile "$CONTEXT/Dockerfile"

docker build --quiet -t "$IMAGE" "$CONTEXT" >/dev/null
echo "$IMAGE ($VERSION, $(du -h "$rootfs/usr/bin/sextant" | cut -f1) binary)"
