#!/bin/sh
# doc_examples.sh — every example output in README.md and docs/*.md is what nnbench prints
# today, in shape (scripts/doc_examples.py: the same lines and words, numbers free). First
# the checker itself: a page whose shown output lost a column, or has a line too many,
# must fail; one that differs only in numbers (and their units, and how much of a cut word
# is left) must pass.
. "$(dirname "$0")/lib/check.sh"
cd "$TOP" || exit 1
py=scripts/doc_examples.py

printf '```\n$ printf "a  1.5 ms\\nb  2\\n"\na  3 ms\nb  7\n```\n' >"$tmp/same.md"
printf '```\n$ printf "a  1.5 ms\\nb  2\\n"\na  3 ms  x\nb  7\n```\n' >"$tmp/word.md"
printf '```\n$ printf "a  1.5 ms\\nb  2\\n"\na  3 ms\nb  7\nc\n```\n' >"$tmp/line.md"
printf '```\n$ printf "a  1.5 ms\\nb  2\\nc\\n"\na  3 ms\n...\n```\n' >"$tmp/dots.md"
printf '<!-- unchecked: shown only -->\n```\n$ false\nnot this\n```\n' >"$tmp/skip.md"
# a duration in another unit, a word cut shorter to fit: the same shape on a slower machine
printf '```\n$ printf "DATAS…  2.18 s\\n"\nDATA…  52 ms\n```\n' >"$tmp/unit.md"
# but a unit is not a word: "52 ms done" is not "52 ms"
printf '```\n$ printf "52 ms\\n"\n52 ms done\n```\n' >"$tmp/unitword.md"
for f in same dots skip unit; do
    if python3 $py --nnbench "$NNBENCH" "$tmp/$f.md" >"$tmp/out" 2>&1; then ok "checker passes $f.md"
    else bad "checker fails $f.md"; sed 's/^/  | /' "$tmp/out"; fi
done
for f in word line unitword; do
    if python3 $py --nnbench "$NNBENCH" "$tmp/$f.md" >"$tmp/out" 2>&1; then bad "checker passes $f.md"
    else ok "checker fails $f.md"; fi
done

if [ -n "${NNBENCH_SANITIZED:-}" ]; then
    echo "ok: the docs' examples are not rerun under sanitizers (their output does not depend on them)"
elif python3 $py --nnbench "$NNBENCH" >"$tmp/out" 2>&1; then
    ok "docs' examples match nnbench's output"
else
    bad "docs' examples differ from nnbench's output (python3 $py --update rewrites them)"
    sed 's/^/  | /' "$tmp/out"
fi
[ "$fails" -eq 0 ]
