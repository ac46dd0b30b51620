#!/bin/sh
# doxygen-man.sh MAN3DIR - trims the man3 pages Doxygen wrote to the ones zkit installs.
#
# Doxygen writes a page per header (lock.h.3) and per structure (zkit_acl_t.3); MAN_LINKS is
# off, so no page per macro or constant (they stay on their header's page), and the page per
# function comes from scripts/man-functions.pl.  Installed, generic names would clash with
# other packages' pages, so only names of zkit's own remain:
#   - zkit_* pages (structures), and
#   - the header pages, renamed zkit_<header>.3 (zkit_lock.h.3; zkit.h.3 as it is),
# with every link (.so) pointing at a kept page.  Two defects of Doxygen's man output are mended:
# a text line it starts with a quote (' is a control character to groff) is escaped, and a
# page of an undescribed structure gets a NAME line with a description, as whatis needs.
set -eu
cd "$1"
for f in *.3; do
    case $f in
    zkit.h.3 | zkit_* | ZKIT_*) ;;
    *.h.3) mv "$f" "zkit_$f" ;;
    *) rm -f "$f" ;;
    esac
done
for f in *.3; do
    target=$(sed -n 's/^\.so man3\/\(.*\)$/\1/p' "$f")
    [ -n "$target" ] || continue
    case $target in
    zkit.h.3 | zkit_* | ZKIT_*) ;;
    *.h.3) target=zkit_$target ;;
    esac
    if [ -f "$target" ]; then
        printf '.so man3/%s\n' "$target" >"$f"
    else
        rm -f "$f"
    fi
done
for f in *.3; do
    grep -q '^\.so ' "$f" && continue
    header=$(sed -n 's/^\\fC#include <\(.*\)>\\fP$/\1/p' "$f" | sed 's/\\&//g' | head -n 1)
    sed -e "s/^'/\\\\\&'/" \
        -e "/^\\.SH NAME\$/{n;/\\\\-/!s|\$| \\\\- a structure of <${header:-zkit.h}>|;}" \
        "$f" >"$f.tmp"
    mv "$f.tmp" "$f"
done
