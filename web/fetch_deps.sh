#!/usr/bin/env bash
# Fetches the Debian 12 source packages of the core's three libraries (PCRE2, utf8proc, jansson) into
# web/build/deps/, with Debian's patches applied (dpkg-source), so that the WebAssembly build compiles exactly the
# versions the native build links (bookworm: pcre2 10.42, utf8proc 2.8.0, jansson 2.14; the archive's pcre2 source is
# 10.42-1, the installed library 10.42-1+deb12u2, a security update whose source the mirror here does not serve).
# Uses a private apt state (no change to the system's sources): a deb-src line for bookworm, an index fetched from
# Debian's archive once. Idempotent: a library already unpacked is kept.
set -euo pipefail
cd "$(dirname "$0")"
out=build/deps
mkdir -p "$out/apt/lists/partial" "$out/apt/cache/archives/partial"
have_all=1
for d in pcre2 utf8proc jansson; do compgen -G "$out/$d-*/" >/dev/null || have_all=0; done
[ "$have_all" = 1 ] && exit 0
src_list="$out/apt/sources.list"
cat >"$src_list" <<'LIST'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
LIST
apt_opts=(-o "Dir::Etc::SourceList=$PWD/$src_list" -o "Dir::Etc::SourceParts=/dev/null"
          -o "Dir::State::Lists=$PWD/$out/apt/lists" -o "Dir::Cache=$PWD/$out/apt/cache"
          -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" update -qq >/dev/null
for pkg in pcre2 utf8proc jansson; do
    compgen -G "$out/$pkg-*/" >/dev/null && continue
    (cd "$out" && apt-get "${apt_opts[@]}" source -qq "$pkg" >/dev/null 2>&1) || {
        echo "fetch_deps: apt-get source $pkg failed (is Debian's archive reachable?)" >&2; exit 1; }
done
