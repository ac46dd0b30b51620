#!/usr/bin/perl
# doxygen-filter.pl HEADER - prints HEADER with its plain C comments turned into Doxygen
# comments; Doxyfile.in runs it as INPUT_FILTER for every public header.
#
# The headers are written for C readers: a comment block above a declaration documents it, a
# comment after a member or an enumerator on its line documents that, and the first comment of
# a file ("zkit/lock.h - what it is") describes the file.  This filter says so to Doxygen:
#   /* ...  above a declaration        becomes  /** ...
#   x; /* ...  after code on its line   becomes  x; /**< ...
#   the file's first comment            becomes  /** @file plus its description
# and leaves alone comments that already are Doxygen's (/** and /*!), section rules
# (/* ---- name ---- */), comments inside function bodies (header-only adapters) and on the
# continuation lines of multi-line macros.  Lines are neither added nor removed, so Doxygen's
# line numbers stay the header's; for include/zkit.h the main page is appended at the end.
use strict;
use warnings;

my $file = shift @ARGV or die "usage: $0 HEADER\n";
open my $in, '<', $file or die "$file: $!\n";
my $text = do { local $/; <$in> };
close $in;

my $out = '';
my @braces;              # per open brace: 'code' (a function body) or 'decl' (anything else)
my $stmt = '';           # code since the last ; { or } at this level, to classify a brace
my $line_has_code = 0;   # code before the current position on this line
my $preproc = 0;         # inside a preprocessor directive (with its continuation lines)
my $preproc_multiline = 0;
my $seen_comment = 0;

sub in_body { return scalar grep { $_ eq 'code' } @braces }

pos($text) = 0;
while (pos($text) < length $text) {
    if ($text =~ /\G(\/\*.*?\*\/)/gcs) {
        my $c = $1;
        my $first = !$seen_comment;
        $seen_comment = 1;
        $out .= convert($c, $first);
    } elsif ($text =~ /\G(\/\/[^\n]*)/gc) {
        $out .= $1;
    } elsif ($text =~ /\G("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')/gc) {
        $out .= $1;
        $stmt .= $1 unless $preproc;
        $line_has_code = 1;
    } elsif ($text =~ /\G(\\\n)/gc) {
        $out .= $1;
        $preproc_multiline = 1 if $preproc;
    } elsif ($text =~ /\G\n/gc) {
        $out .= "\n";
        $line_has_code = 0;
        $preproc = 0;
        $preproc_multiline = 0;
    } elsif ($text =~ /\G([ \t]+)/gc) {
        $out .= $1;
        $stmt .= ' ' unless $preproc;
    } elsif (!$line_has_code && $text =~ /\G(#)/gc) {
        $out .= $1;
        $preproc = 1;
        $preproc_multiline = $text =~ /\G[^\n]*\\\n/ ? 1 : 0;
        $line_has_code = 1;
    } elsif ($text =~ /\G(.)/gcs) {
        my $ch = $1;
        $out .= $ch;
        $line_has_code = 1;
        next if $preproc;
        if ($ch eq '{') {
            # A function body (or a statement's block) follows a ")"; a struct, union or enum
            # body, an initializer or extern "C" does not.
            my $kind = $stmt =~ /\)\s*$/ ? 'code' : 'decl';
            push @braces, $kind;
            $stmt = '';
        } elsif ($ch eq '}') {
            pop @braces;
            $stmt = '';
        } elsif ($ch eq ';') {
            $stmt = '';
        } else {
            $stmt .= $ch;
        }
    }
}

print $out;
print mainpage() if $file =~ m{(?:^|/)include/zkit\.h$};

# One comment, as Doxygen should read it.
sub convert {
    my ($c, $first) = @_;
    return $c if $c =~ /^\/\*[*!]/ && $c !~ /^\/\*\*\//;
    return $c if in_body() || ($preproc && $preproc_multiline);
    if ($first && !$line_has_code) {
        my $body = substr $c, 2;
        # "zkit/lock.h - distributed locks: ..." -> "Distributed locks: ..."
        $body =~ s/^(\s*\*?\s*)[\w\/.]+\.h\s+-+\s+(\w)/$1\u$2/;
        return "/** \@file" . plain($body);
    }
    return $c if $c =~ /^\/\*\s*-{3,}/;
    return '/**<' . plain(substr $c, 2) if $line_has_code;
    return '/**' . plain(substr $c, 2);
}

# The comments are plain text: characters that start Doxygen commands or HTML tags are
# escaped (@daily, <path>, \n), except inside `code spans` and "quoted strings", which
# Doxygen prints as they are.
sub plain {
    my ($body) = @_;
    my @parts = split /(`[^`\n]*`|"[^"\n]*")/, $body;
    for (@parts) {
        next if /^[`"]/;
        s/([\\@<>&\$%])/\\$1/g;
    }
    return lists(join '', @parts);
}

# Lists written as indented lines become HTML lists (in place, so no line is added):
#   " *   TERM    what it means"           two or more such lines, indented, a term each;
#   " * NAME: what it means, continued"    a capitalised name and a colon, its continuation
#   " *   on lines indented further."      lines indented.
sub lists {
    my ($body) = @_;
    my @lines = split /(?<=\n)/, $body;
    my (@indent, @text);
    for (@lines) {
        if (/^(\s*\*)( *)(.*?)(\n?)$/s) {
            push @indent, length($2) - 1;
            push @text, $3;
        } else {
            push @indent, -1;
            push @text, '';
        }
    }
    my $term = qr/^(\S+) {2,}\S/;
    my @item;  # per line: 'A' (term item), 'B' (named item), 'c' (continuation), '' (neither)
    for my $i (0 .. $#lines) {
        $item[$i] = '';
        if ($indent[$i] >= 2 && $text[$i] =~ $term) {
            $item[$i] = 'A';
        } elsif ($indent[$i] == 0 && $text[$i] =~ /^[A-Z][A-Z0-9_]+: \S/ && $i < $#lines
                 && $indent[$i + 1] >= 2 && $text[$i + 1] !~ $term) {
            $item[$i] = 'B';
        } elsif ($i > 0 && $indent[$i] >= 2 && ($item[$i - 1] eq 'B' || $item[$i - 1] eq 'c')) {
            $item[$i] = 'c';
        }
    }
    my $i = 0;
    while ($i <= $#lines) {
        if ($item[$i] eq '') { $i++; next; }
        my $start = $i;
        my $items = 0;
        while ($i <= $#lines && $item[$i] ne '') {
            $items++ if $item[$i] ne 'c';
            $i++;
        }
        my $end = $i - 1;
        next if $items < 2 && $item[$start] eq 'A';
        for my $k ($start .. $end) {
            next if $item[$k] eq 'c';
            my $open = $k == $start ? '<ul><li>' : '</li><li>';
            $lines[$k] =~ s/^(\s*\* *)(\S+)( {2,})/$1$open`$2`$3/ if $item[$k] eq 'A';
            $lines[$k] =~ s/^(\s*\* *)/$1$open/ if $item[$k] eq 'B';
        }
        $lines[$end] =~ s/(\s*(?:\*\/)?\n?)$/<\/li><\/ul>$1/;
    }
    return join '', @lines;
}

# The main page: what zkit is, and the headers <zkit.h> includes, in its order.
sub mainpage {
    pos($text) = 0;
    my @headers = $text =~ /^#include\s+"([^"]+)"/mg;
    my $list = join '', map { " * - \@ref $_\n" } @headers;
    return <<"EOF";
/** \@mainpage zkit API reference
 *
 * Distributed locks for C daemons, on Apache ZooKeeper: a reentrant mutex, a semaphore mutex
 * and counting semaphore, a read-write lock and a multi-lock on one lock engine, correct under
 * connection loss and session expiry and interoperable with Apache Curator's locks, plus
 * single-instance timer jobs.  A program includes \@ref zkit.h and links with
 * `pkg-config --cflags --libs zkit`; every call returns 0 or a negative `ZKIT_E*` code
 * (zkit_strerror()).
 *
 * The headers \@ref zkit.h includes:
$list *
 * The guides (framework, recipes, jobs, design, the zkit-lock command) are installed next to
 * this reference, in the package's documentation directory (e.g. /usr/share/doc/zkit).
 */
EOF
}
