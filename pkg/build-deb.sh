#!/bin/sh
# Builds the Debian package: pkg/build-deb.sh [OUT_DIR]
#   SHOAL_BIN=path   package this binary (default: cargo build --release, target/release/shoal)
#   VERSION=x.y.z    the package's version (default: the workspace's, from Cargo.toml)
#   DEB_OPTS=...     more dpkg-deb options (the tests pass `-Zgzip -z1`: a debug binary is
#                    large, and xz takes minutes over it)
# Writes OUT_DIR/shoal_VERSION_amd64.deb (OUT_DIR defaults to target/debian) and prints its path.
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-target/debian}
VERSION=${VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)}
if [ -z "${SHOAL_BIN:-}" ]; then
    cargo build --release >&2
    SHOAL_BIN=${CARGO_TARGET_DIR:-target}/release/shoal
fi
STAGE=$(mktemp -d)
chmod 755 "$STAGE"
trap 'rm -rf "$STAGE"' EXIT
install -D -m 755 "$SHOAL_BIN" "$STAGE/usr/sbin/shoal"
install -D -m 755 pkg/upgrade "$STAGE/usr/share/shoal/upgrade"
install -D -m 644 pkg/shoal.service "$STAGE/lib/systemd/system/shoal.service"
install -D -m 644 pkg/logrotate "$STAGE/etc/logrotate.d/shoal"
install -D -m 644 pkg/etc/shoal.conf "$STAGE/etc/shoal/shoal.conf"
install -D -m 644 pkg/etc/sites-available/default "$STAGE/etc/shoal/sites-available/default"
for f in mime.types fastcgi_params fastcgi.conf uwsgi_params scgi_params koi-utf koi-win win-utf; do
    install -D -m 644 "conf/$f" "$STAGE/etc/shoal/$f"
done
install -D -m 644 conf/snippets/fastcgi-php.conf "$STAGE/etc/shoal/snippets/fastcgi-php.conf"
install -D -m 644 html/index.html "$STAGE/usr/share/shoal/html/index.html"
install -D -m 644 html/50x.html "$STAGE/usr/share/shoal/html/50x.html"
# The compiled-in defaults (`logs/access.log`, `logs/error.log` under the prefix) land in
# /var/log/shoal, as Debian's nginx writes to /var/log/nginx: a configuration without an
# `access_log` line still starts.
ln -s /var/log/shoal "$STAGE/usr/share/shoal/logs"
install -D -m 644 README.md "$STAGE/usr/share/doc/shoal/README.md"
mkdir -p "$STAGE/DEBIAN"
sed "s/@VERSION@/$VERSION/" pkg/debian/control > "$STAGE/DEBIAN/control"
cp pkg/debian/conffiles "$STAGE/DEBIAN/conffiles"
install -m 755 pkg/debian/postinst pkg/debian/prerm pkg/debian/postrm "$STAGE/DEBIAN/"
mkdir -p "$OUT"
DEB="$OUT/shoal_${VERSION}_amd64.deb"
# shellcheck disable=SC2086
dpkg-deb --root-owner-group ${DEB_OPTS:-} --build "$STAGE" "$DEB" >&2
echo "$DEB"
