#!/bin/sh
# docs-check.sh - the reference pages and the documentation's C code, checked without a server:
#
#  1. every function the public headers (include/zkit/*.h) declare has a man3 page of its own,
#     whose NAME is the function and whose SYNOPSIS is its prototype
#     (scripts/man-functions.pl, which `make doc` runs after Doxygen), and no page is written
#     for anything else (a macro, a constant).  The functions are listed by the compiler
#     (-aux-info), not by the generator's own reading of the headers.  When the build tree
#     holds the API reference (doc/man/man3, --enable-api-doc), its pages are checked too: a
#     page per function, and none per macro or constant (ZKIT_*.3).
#  2. every ```c block of README.md and docs/*.md compiles (-fsyntax-only, C99, against
#     include/, implicit declarations an error).  A block fenced ```c is a translation unit
#     of its own: declarations, definitions, a program.  A block fenced ```c fragment is a
#     sequence of statements, compiled as the body of a function that has
#     `zkit_client_t *client` in scope; its #include lines are moved above the function, a
#     line "..." stands for code left out, and a function it calls that is neither zkit's nor
#     declared (the application's own: do_the_work()) is declared as `int name()`.  Both get
#     <zkit.h> and the usual C headers first.
#
# Run by `make check` (srcdir set by automake), or by hand from a build tree:
#   srcdir=.. sh ../tests/docs-check.sh
set -u
srcdir=${srcdir:-.}
CC=${CC:-cc}
LC_ALL=C
export LC_ALL
tmp=$(mktemp -d "${TMPDIR:-/tmp}/docs-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
    echo "docs-check: $*" >&2
    failures=$((failures + 1))
}

# ---- 1. a man page per function -----------------------------------------------------------
for h in "$srcdir"/include/zkit/*.h; do
    echo "#include <zkit/${h##*/}>"
done >"$tmp/headers.c"
if ! $CC -std=c99 -I"$srcdir/include" -fsyntax-only -aux-info "$tmp/aux.txt" "$tmp/headers.c"; then
    fail "the public headers do not compile"
fi
sed -n 's|^/\* [^ ]*include/zkit/[a-z_]*\.h:[0-9]*:[A-Z]* \*/ .*[ *]\(zkit_[a-z0-9_]*\) (.*|\1|p' \
    "$tmp/aux.txt" | sort -u >"$tmp/functions"
[ -s "$tmp/functions" ] || fail "no function found in the headers"
perl "$srcdir/scripts/man-functions.pl" "$tmp/man3" "$srcdir"/include/zkit/*.h |
    sort >"$tmp/pages" || fail "scripts/man-functions.pl failed"
missing=$(comm -23 "$tmp/functions" "$tmp/pages")
extra=$(comm -13 "$tmp/functions" "$tmp/pages")
[ -z "$missing" ] || fail "functions without a man page: $(echo $missing)"
[ -z "$extra" ] || fail "man pages of no declared function: $(echo $extra)"
while read -r f; do
    page="$tmp/man3/$f.3"
    [ -f "$page" ] || continue
    sed -n '/^\.SH NAME$/{n;p;}' "$page" | grep -q "^$f \\\\- ." ||
        fail "$f.3: NAME is not '$f \\- ...'"
    sed -n '/^\.SH SYNOPSIS$/,/^\.SH DESCRIPTION$/p' "$page" | grep -q "[ *]$f(" ||
        fail "$f.3: SYNOPSIS has no prototype of $f"
done <"$tmp/functions"
if [ -d doc/man/man3 ]; then
    while read -r f; do
        [ -f "doc/man/man3/$f.3" ] || fail "doc/man/man3/$f.3 missing (make doc)"
    done <"$tmp/functions"
    constants=$(cd doc/man/man3 && ls | grep '^ZKIT_' | head -n 5)
    [ -z "$constants" ] || fail "doc/man/man3 has pages of constants: $(echo $constants) ..."
fi
echo "docs-check: $(wc -l <"$tmp/functions") functions and their man pages checked"

# ---- 2. the documentation's C blocks compile ------------------------------------------------
perl -e '
    # Each block into BLOCK.where (file:line), BLOCK.top (file scope) and, for a fragment,
    # BLOCK.body (the statements).
    my $out = shift;
    my $n = 0;
    sub put { my ($f, $t) = @_; open my $o, ">", $f or die "$f: $!\n"; print $o $t; close $o }
    for my $file (@ARGV) {
        open my $in, "<", $file or die "$file: $!\n";
        my ($kind, $start, $body);
        while (my $line = <$in>) {
            if (!defined $kind && $line =~ /^```c(?:\s+(fragment))?\s*$/) {
                ($kind, $start, $body) = ($1 // "unit", $. + 1, "");
            } elsif (defined $kind && $line =~ /^```\s*$/) {
                (my $where = $file) =~ s{^.*/(docs/|)([^/]*)$}{$1$2};
                my $b = sprintf("%s/block%03d", $out, ++$n);
                put("$b.where", "$where:$start\n");
                if ($kind eq "unit") {
                    put("$b.top", "#line $start \"$where\"\n$body");
                } else {
                    # #include lines, and the definitions (struct, function) it starts with,
                    # go to file scope; a line "..." is code left out.
                    my $top = join "", grep { /^#include/ } split /^/, $body;
                    $body =~ s/^#include.*$//mg;
                    my $skip = qr{(?:\s+|/\*.*?\*/)*}s;
                    while ($body =~ /\A($skip)((?:struct\s+\w+\s*|(?:static\s+)?[\w \t]+[\s*]\w+\s*\([^;{]*\)\s*)\{)/) {
                        my $pos = length($1) + length($2);
                        my $depth = 1;
                        while ($depth > 0 && $pos < length $body) {
                            my $ch = substr($body, $pos++, 1);
                            $depth++ if $ch eq "{";
                            $depth-- if $ch eq "}";
                        }
                        $pos++ if substr($body, $pos, 1) eq ";";
                        my $def = substr($body, 0, $pos, "");
                        $def =~ s/[^\n]//g if 0;
                        $top .= $def . "\n";
                        $body = ("\n" x (($def =~ tr/\n//))) . $body;
                    }
                    $body =~ s/^([ \t]*)\.\.\.;?/$1;/mg;
                    put("$b.top", "#line $start \"$where\"\n$top");
                    put("$b.body", "#line $start \"$where\"\n$body");
                }
                undef $kind;
            } elsif (defined $kind) {
                $body .= $line;
            }
        }
    }
' "$tmp" "$srcdir/README.md" "$srcdir"/docs/*.md || fail "cannot read the documentation"
prelude='#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zkit.h>'
blocks=0
for b in "$tmp"/block*.where; do
    [ -f "$b" ] || continue
    b=${b%.where}
    blocks=$((blocks + 1))
    where=$(cat "$b.where")
    c="$tmp/unit.c"
    decls="$tmp/decls.h"
    : >"$decls"
    for attempt in 1 2 3 4 5 6 7 8; do
        {
            echo "$prelude"
            cat "$decls"
            if [ -f "$b.body" ]; then
                echo "static zkit_client_t *client;"
                cat "$b.top"
                echo "void doc_fragment(void);"
                echo "void doc_fragment(void)"
                echo "{"
                cat "$b.body"
                echo ";}"
            else
                cat "$b.top"
            fi
        } >"$c"
        if $CC -std=c99 -D_POSIX_C_SOURCE=200809L -I"$srcdir/include" -fsyntax-only \
            -Werror=implicit-function-declaration "$c" >"$tmp/out" 2>&1; then
            break
        fi
        # The application's own functions that a fragment calls: declared, and compiled again.
        new=$(sed -n "s/.*implicit declaration of function '\([A-Za-z_][A-Za-z0-9_]*\)'.*/\1/p" \
                  "$tmp/out" | grep -v '^zkit_' | sort -u)
        if [ ! -f "$b.body" ] || [ -z "$new" ]; then
            fail "a C block at $where does not compile:"
            grep -v '^In file included\|^ *from \|note: \|^ *[0-9]* |\|^ *|' "$tmp/out" |
                sed 's/^/    /' >&2
            break
        fi
        for f in $new; do
            echo "int $f();" >>"$decls"
        done
    done
done
echo "docs-check: $blocks C blocks of README.md and docs/*.md checked"
[ "$failures" -eq 0 ]
