#!/bin/sh
# File circles: which .c file calls (or takes the address of) which public function or
# variable defined in another .c file, and the groups of files that reach each other that way.
# A group of two or more is a circle: none of its files can be read, tested or moved alone.
#
#   sh scripts/circles.sh [-v] [DIR...]     (default: engine tui store profiler quantum)
#
# Public names come from ctags (definitions that are not static; ctags misses `static` before
# an anonymous struct, so the line is checked too) and must appear in some header. Comments and
# string literals are stripped before looking for uses. Prints one block per circle with the
# edges inside it ("a.c -> b.c: f, g"), then "N circles". -v also prints every edge.
# Needs universal-ctags. Exit status 0 whatever is found: it is a report, not a gate.
set -eu
verbose=0
[ "${1:-}" = "-v" ] && { verbose=1; shift; }
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ $# -gt 0 ] || set -- engine tui store profiler quantum
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

find "$@" -name '*.c' | sort >"$tmp/files"
find "$@" -name '*.h' | sort >"$tmp/headers"
# Every identifier that appears in a header (a cheap superset of the declared names).
xargs cat <"$tmp/headers" | tr -c 'A-Za-z0-9_' '\n' | sort -u >"$tmp/hwords"
# name<TAB>file for every non-static function and variable definition.
xargs ctags --c-kinds=fv --fields=+fK -f - <"$tmp/files" |
    awk -F'\t' '{ st = 0; for (i = 4; i <= NF; i++) if ($i == "file:") st = 1;
                  if ($3 ~ /^\/\^static /) st = 1;
                  if (!st) print $1 "\t" $2 }' | sort -u >"$tmp/defs"
# uses: file<TAB>word for each word in a file with comments and strings stripped.
while read -r f; do
    sed -e 's://.*$::' "$f" |
        awk 'BEGIN { c = 0 } {
               s = $0; out = "";
               while (length(s)) {
                 if (c) { i = index(s, "*/"); if (!i) { s = ""; break } s = substr(s, i + 2); c = 0; continue }
                 i = index(s, "/*"); if (!i) { out = out s; break }
                 out = out substr(s, 1, i - 1); s = substr(s, i + 2); c = 1
               }
               gsub(/"([^"\\]|\\.)*"/, "\"\"", out); gsub(/'"'"'([^'"'"'\\]|\\.)*'"'"'/, "0", out);
               print out }' |
        tr -c 'A-Za-z0-9_' '\n' | sort -u | sed "s|^|$f	|"
done <"$tmp/files" >"$tmp/uses"

awk -F'\t' -v verbose="$verbose" '
FILENAME == ARGV[1] { hw[$1] = 1; next }
FILENAME == ARGV[2] { if ($1 in hw) def[$1] = $2; next }
{
    f = $1; w = $2
    if (!(w in def) || def[w] == f) next
    t = def[w]; key = f SUBSEP t
    if (!(key in via)) { via[key] = w; nf[f] = 1; nf[t] = 1 } else via[key] = via[key] ", " w
}
END {
    n = 0
    for (f in nf) { id[f] = ++n; name[n] = f }
    for (k in via) { split(k, p, SUBSEP); r[id[p[1]], id[p[2]]] = 1 }
    # Transitive closure (a few hundred files: cubic is fine).
    for (k = 1; k <= n; k++) for (i = 1; i <= n; i++) if ((i, k) in r)
        for (j = 1; j <= n; j++) if ((k, j) in r) r[i, j] = 1
    ncirc = 0
    for (i = 1; i <= n; i++) {
        if (i in seen) continue
        grp = name[i]; cnt = 1; seen[i] = 1; members[1] = i
        for (j = 1; j <= n; j++)
            if (j != i && !(j in seen) && (i, j) in r && (j, i) in r) {
                seen[j] = 1; members[++cnt] = j; grp = grp " " name[j]
            }
        if (cnt < 2) continue
        ncirc++
        print "circle " ncirc ": " grp
        for (a = 1; a <= cnt; a++) for (b = 1; b <= cnt; b++) {
            k = name[members[a]] SUBSEP name[members[b]]
            if (k in via) print "  " name[members[a]] " -> " name[members[b]] ": " via[k]
        }
    }
    if (verbose) for (k in via) { split(k, p, SUBSEP); print "edge " p[1] " -> " p[2] ": " via[k] }
    print ncirc " circles"
}' "$tmp/hwords" "$tmp/defs" "$tmp/uses"
