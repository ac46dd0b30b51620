#!/usr/bin/perl
# man-functions.pl [--version V] OUTDIR HEADER... - writes OUTDIR/NAME.3, one man page per
# public function (ZKIT_EXTERN) that the headers declare: NAME is the function with the first
# sentence of its comment, SYNOPSIS its header and prototype, DESCRIPTION its comment, and SEE
# ALSO its header's page (zkit_lock.h(3), written by Doxygen; the constants and types are
# there).  Prints the names it wrote, one a line.
#
# A declaration's comment is the comment block just above it; declarations that follow each
# other without a blank line share the comment above the first (zkit_rwlock_read and
# zkit_rwlock_write), and a comment on the declaration's own line is added.  The headers'
# comments are plain text: paragraphs are filled, and lines that start a list item ("- ",
# "1. ") or are indented start a line of their own.
use strict;
use warnings;

my $version = '';
if (@ARGV && $ARGV[0] eq '--version') {
    shift @ARGV;
    $version = shift @ARGV;
}
my $outdir = shift @ARGV or die "usage: $0 [--version V] OUTDIR HEADER...\n";
-d $outdir or mkdir $outdir or die "$outdir: $!\n";

# groff: a backslash is an escape, and a line may not start with . or '.
sub roff {
    my ($s) = @_;
    $s =~ s/\\/\\e/g;
    $s =~ s/-/\\-/g;
    $s =~ s/^([.'])/\\&$1/mg;
    return $s;
}

sub comment_text {
    my ($c) = @_;
    $c =~ s{^/\*+\s?}{};
    $c =~ s{\s*\*+/$}{};
    my @lines = map { my $l = $_; $l =~ s/^\s*\*( |$)//; $l =~ s/\s+$//; $l } split /\n/, $c;
    shift @lines while @lines && $lines[0] eq '';
    pop @lines while @lines && $lines[-1] eq '';
    return join "\n", @lines;
}

sub description_roff {
    my ($text) = @_;
    my $out = '';
    for my $line (split /\n/, $text) {
        if ($line eq '') {
            $out .= ".PP\n";
        } elsif ($line =~ /^(\s+|[-*] |\d+\. )/) {
            $out .= ".br\n" . roff($line) . "\n";
        } else {
            $out .= roff($line) . "\n";
        }
    }
    return $out;
}

sub brief {
    my ($text, $header) = @_;
    return "a function of <$header>" if $text eq '';
    my $flat = join ' ', split /\s*\n\s*/, $text;
    # The first sentence ("e.g." and "i.e." do not end one), without a parenthesis it leaves
    # open; a long one is cut after a word.
    $flat =~ s/^((?:e\.g\.|i\.e\.|[^.])*?)\.(\s.*)?$/$1/s;
    while (($flat =~ tr/(//) > ($flat =~ tr/)//) && $flat =~ /^(.*\S)\s*\(/s) {
        $flat = $1;
    }
    if (length $flat > 110) {
        $flat = substr($flat, 0, 100);
        $flat =~ s/[\s,;:(]+\S*$//;
        $flat .= '...';
    }
    return $flat;
}

my %written;
for my $path (@ARGV) {
    open my $in, '<', $path or die "$path: $!\n";
    my @lines = <$in>;
    close $in;
    (my $header = $path) =~ s{^(.*/)?include/}{};
    $header = "zkit/$header" if $header !~ m{/} && $header ne 'zkit.h';
    (my $page = $header) =~ s{^zkit/}{zkit_};
    $page =~ s{/}{_}g;

    my $comment = '';          # the comment block that ended on the line before, if any
    my $group_comment = '';    # the comment of the run of declarations we are in
    my $in_group = 0;
    for (my $i = 0; $i < @lines; $i++) {
        my $line = $lines[$i];
        if ($line =~ m{^\s*/\*} && $line !~ m{^\s*/\* ----}) {
            my $c = $line;
            while ($c !~ m{\*/} && $i + 1 < @lines) {
                $c .= $lines[++$i];
            }
            $comment = comment_text($c);
            $in_group = 0;
            next;
        }
        if ($line =~ /^ZKIT_EXTERN\b/) {
            my $decl = $line;
            while ($decl !~ /;/ && $i + 1 < @lines) {
                $decl .= $lines[++$i];
            }
            my $trailing = $decl =~ s{;\s*(/\*.*?\*/)}{;}s ? comment_text($1) : '';
            $decl =~ s/^ZKIT_EXTERN\s+//;
            $decl =~ s/\s+/ /g;
            $decl =~ s/\s*;.*$/;/;
            my ($name) = $decl =~ /\(?\s*(zkit_\w+)\s*\)?\s*\(/ or next;
            $group_comment = $comment unless $in_group;
            $in_group = 1;
            $comment = '';
            my $text = $group_comment;
            $text .= ($text eq '' ? '' : "\n\n") . $trailing if $trailing ne '';
            $decl =~ s/\(\s*(zkit_\w+)\s*\)\s*\(/$1(/;
            open my $out, '>', "$outdir/$name.3" or die "$outdir/$name.3: $!\n";
            print $out ".TH \"$name\" 3 \"\" \"zkit $version\" \"zkit\"\n";
            print $out ".SH NAME\n$name \\- " . roff(brief($text, $header)) . "\n";
            print $out ".SH SYNOPSIS\n.nf\n.B #include <" . roff($header) . ">\n.PP\n"
                . roff($decl) . "\n.fi\n";
            print $out ".SH DESCRIPTION\n"
                . ($text eq '' ? "See \\fB" . roff($page) . "\\fP(3).\n" : description_roff($text));
            print $out ".SH SEE ALSO\n.BR " . roff($page) . " (3)\n";
            close $out;
            print "$name\n" unless $written{$name}++;
            next;
        }
        # Anything else (a blank line, a type, a macro) ends a run of declarations; a blank
        # line also parts a comment from what follows it.
        $in_group = 0;
        $comment = '' if $line =~ /^\s*$/ || $line !~ /^\s*(\*|$)/;
    }
}
