#!/usr/bin/env bash
# Builds the Debian package from BINARY (scripts/build_deb.sh), installs it
# with dpkg -i, checks what a user gets (`sluice --version` from /usr/bin, the
# man pages by `man -w`, bash completion of `sluice ex` to `export`), and
# removes it again. Needs root; CI runs it.
#
#   bash scripts/check_deb.sh BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:?usage: check_deb.sh BINARY}
[[ $(id -u) -eq 0 ]] || { echo "check_deb: installing a package needs root" >&2; exit 1; }
if ! command -v man >/dev/null || ! [[ -f /usr/share/bash-completion/bash_completion ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends man-db bash-completion >/dev/null
fi
work=$(mktemp -d)
trap 'dpkg -r sluice >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

deb=$(bash scripts/build_deb.sh "$binary" "$work")
echo "check_deb: built $(basename "$deb") ($(du -m "$deb" | cut -f1) MB)"
dpkg -i "$deb" >/dev/null
version=$(/usr/bin/sluice --version)
[[ $version == "sluice "* ]] || { echo "check_deb: sluice --version said: $version" >&2; exit 1; }
for page in sluice sluice-export sluice-serve; do
  man -w "$page" >/dev/null || { echo "check_deb: man -w $page found no page" >&2; exit 1; }
done
completed=$(bash -c '
  source /usr/share/bash-completion/bash_completion
  source /usr/share/bash-completion/completions/sluice
  COMP_WORDS=(sluice ex); COMP_CWORD=1; COMP_LINE="sluice ex"; COMP_POINT=${#COMP_LINE}
  _sluice sluice ex sluice
  echo "${COMPREPLY[*]}"')
[[ $completed == export ]] || { echo "check_deb: bash completed \"sluice ex\" to \"$completed\"" >&2; exit 1; }
echo "check_deb: installed $version; man pages and bash completion work"
