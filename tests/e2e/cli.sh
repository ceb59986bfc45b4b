#!/bin/sh
# cli.sh — end to end: the command table's by-products. "Did you mean" for mistyped
# commands and options (exit 2), `nnbench solves` (table, CSV, filters, errors) on a short
# Q-Newton run, the man page and the bash completion script generated from the same help.
set -u
: "${NNBENCH:?}" "${NNBENCH_TOP:?}"
T=$(mktemp -d /tmp/nnbench-e2e-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
DB="$T/c.db"
export XDG_CACHE_HOME="$T/cache"
fail() { echo "FAIL: $*" >&2; [ -f "$T/out" ] && sed 's/^/  | /' "$T/out" | head -20 >&2; exit 1; }

# expect STATUS PATTERN CMD...: exit status and a line of stderr+stdout matching PATTERN
expect() {
    want=$1 pat=$2; shift 2
    "$@" >"$T/out" 2>&1; got=$?
    [ "$got" = "$want" ] || fail "$*: exit $got, wanted $want"
    grep -q -- "$pat" "$T/out" || fail "$*: no line matching '$pat'"
}

expect 2 "no command 'solvs'; did you mean 'solves'" "$NNBENCH" solvs 1
expect 2 "no command 'xyzzy'; see nnbench --help" "$NNBENCH" xyzzy
expect 2 "unknown option '--profil'; did you mean '--profile'" "$NNBENCH" run x.ini --profil
expect 2 "unknown option '--limt'; did you mean '--limit'" "$NNBENCH" list --limt 3
expect 2 "unknown option '--metrc=loss'; did you mean '--metric'" "$NNBENCH" compare 1 2 --metrc=loss
expect 2 "unknown option '--zzzzzz' (see nnbench show --help)" "$NNBENCH" show 1 --zzzzzz
expect 2 "unknown option '--vers'; did you mean '--version'" "$NNBENCH" --vers
expect 0 "usage: nnbench solves RUN" "$NNBENCH" help solves
echo "cli: did you mean"

# A short Q-Newton run (hybrid policy) and a first-order one.
"$NNBENCH" run "$NNBENCH_TOP/samples/newton-vs-sgd.ini" --variant qnewton-hybrid --set train.max_steps=6 \
    --db "$DB" >"$T/out" 2>&1 || fail "newton run exited $?"
"$NNBENCH" run "$NNBENCH_TOP/samples/newton-vs-sgd.ini" --variant sgd --set train.max_steps=6 \
    --db "$DB" >"$T/out" 2>&1 || fail "sgd run exited $?"
"$NNBENCH" solves 1 --db "$DB" >"$T/tab" 2>"$T/err" || fail "solves exited $?"
head -1 "$T/tab" | grep -q '^ *step  *blk  *n  *k_det  *k_lapack  *k_gersh  *k_exact  *k_used  *route ' \
    || fail "solves header: $(head -1 "$T/tab")"
# 6 steps x 6 layer blocks (354 parameters in blocks of 32, 16, 256, 16, 32, 2)
[ "$(($(wc -l <"$T/tab") - 1))" = 36 ] || fail "solves rows: $(($(wc -l <"$T/tab") - 1)), wanted 36"
"$NNBENCH" solves 1 --db "$DB" --csv >"$T/csv" || fail "solves --csv exited $?"
python3 - "$T/csv" "$DB" <<'PY' || fail "solves --csv does not match the database"
import csv, sqlite3, sys
rows = list(csv.DictReader(open(sys.argv[1])))
db = sqlite3.connect(sys.argv[2])
want = db.execute("select count(*), sum(route) from solver_events where run = 1").fetchone()
assert len(rows) == want[0], (len(rows), want)
assert sum(r["route"] == "quantum" for r in rows) == want[1], want
for r in rows:
    assert r["route"] in ("classical", "quantum"), r
    assert int(r["n"]) in (2, 16, 32, 256), r
    assert float(r["kappa_used"]) >= 1, r
    # a quantum-routed solve has a simulated time; a classical one a measured time
    assert r["simulated_quantum_ns" if r["route"] == "quantum" else "measured_classical_ns"] != "", r
PY
"$NNBENCH" solves 1 --db "$DB" --json >"$T/json" || fail "solves --json exited $?"
python3 - "$T/json" "$T/csv" <<'PY' || fail "solves --json does not match --csv"
import csv, json, sys
j = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2])))
assert j["run"] == 1 and len(j["solves"]) == len(rows), (j.get("run"), len(j["solves"]), len(rows))
for a, b in zip(j["solves"], rows):
    assert set(a) == set(b), set(a) ^ set(b)
    for k, v in a.items():
        if v is None: assert b[k] == "", (k, b[k])
        elif isinstance(v, str): assert v == b[k], (k, v, b[k])
        else: assert float(v) == float(b[k]), (k, v, b[k])
PY
expect 2 "--csv or --json, not both" "$NNBENCH" solves 1 --db "$DB" --csv --json
"$NNBENCH" solves 1 --db "$DB" --step 2:3 --csv >"$T/csv2" || fail "solves --step"
[ "$(tail -n +2 "$T/csv2" | cut -d, -f1 | sort -u | tr '\n' ' ')" = "2 3 " ] || fail "--step 2:3 rows"
"$NNBENCH" solves 1 --db "$DB" --limit 4 >"$T/tab2" || fail "solves --limit"
[ "$(wc -l <"$T/tab2")" = 5 ] || fail "--limit 4 rows"
expect 0 "run 2 has no linear solves" "$NNBENCH" solves 2 --db "$DB"
expect 2 "--route wants classical or quantum" "$NNBENCH" solves 1 --db "$DB" --route both
expect 1 "no run 9" "$NNBENCH" solves 9 --db "$DB"
echo "cli: solves"

# Man page: one section per command, each with its own usage line.
"$NNBENCH" help --man >"$T/man" || fail "help --man exited $?"
head -1 "$T/man" | grep -q '^\.TH NNBENCH 1 ' || fail "man page has no .TH"
for c in run list show compare solves report export delete sysinfo tui; do
    grep -q "^\.SS $c\$" "$T/man" || fail "man page lacks command $c"
    grep -q "^usage: nnbench $c" "$T/man" || fail "man page lacks the usage of $c"
done
if command -v groff >/dev/null 2>&1; then
    groff -man -Tutf8 -ww "$T/man" >/dev/null 2>"$T/groff" || fail "groff exited $?"
    [ ! -s "$T/groff" ] || { cat "$T/groff"; fail "groff warnings"; }
fi

# Bash completion: valid bash, completes commands and each command's options.
"$NNBENCH" help --bash-completion >"$T/comp" || fail "help --bash-completion exited $?"
bash -n "$T/comp" || fail "completion script is not valid bash"
complete_words() { # complete_words WORD... : what bash offers for the last word
    bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _nnbench; printf "%s\n" "${COMPREPLY[@]}"' \
        _ "$T/comp" "$@"
}
[ "$(complete_words nnbench sol)" = solves ] || fail "completion of 'sol': $(complete_words nnbench sol)"
complete_words nnbench run --prof | grep -qx -- --profile-rows || fail "completion of 'run --prof'"
complete_words nnbench solves 1 --r | grep -qx -- --route || fail "completion of 'solves 1 --r'"
echo "cli: man page and completion"
echo "cli: ok"
