#!/bin/sh
# cli_terms.sh — what issue 27 asked of the CLI's words: the run summary has a test metric
# for regression runs and samples/s, in 80 columns; usage errors exit 2 ('show abc', a
# misspelt option value, with "did you mean"); "1 run", not "1 runs"; --profile-sort gflops
# sorts on the GFLOP/s column that is shown.
. "$(dirname "$0")/lib/check.sh"
cd "$TOP" || exit 1

cat >"$tmp/reg.ini" <<'INI'
[experiment]
name = a-rather-long-regression-name
seed = 3
[data]
source = polyreg
n = 400
features = 1
degree = 2
noise = 0.05
[model]
layers = dense:8:tanh, dense:1
loss = mse
[train]
optimizer = adam
lr = 0.01
batch = 32
epochs = 3
INI

# ---- the summary ----------------------------------------------------------------------
COLUMNS=80 "$NNBENCH" run "$tmp/reg.ini" --no-db >"$tmp/out" 2>"$tmp/err"
head=$(head -1 "$tmp/out")
row=$(sed -n 2p "$tmp/out")
case $head in *"test loss"*"samples/s"*) ok "summary names test loss and samples/s";;
    *) bad "summary header lacks test loss or samples/s: $head";; esac
# status steps loss test-loss test-acc samples/s wall: the test loss and samples/s are numbers
if echo "$row" | awk '{ exit !(NF == 9 && $5 ~ /^[0-9.e+-]+$/ && $5 > 0 && $6 == "-" && $7 ~ /^[0-9]+$/ && $7 > 0) }'; then
    ok "a regression run prints its test loss, no accuracy, and samples/s"
else bad "regression row: $row"; fi
# characters, not bytes (a cut name holds "…")
long=$(python3 -c 'import sys; print(sum(len(l.rstrip("\n")) > 80 for l in open(sys.argv[1], encoding="utf-8")))' "$tmp/out")
[ "$long" -eq 0 ] && ok "summary fits 80 columns" || bad "summary has $long lines over 80 columns"

# ---- usage errors exit 2, with the nearest value ----------------------------------------
"$NNBENCH" run "$tmp/reg.ini" --no-db --profile-by opp >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "did you mean 'op'" "$tmp/err" && ok "--profile-by opp: exit 2, did you mean 'op'" \
    || { bad "--profile-by opp: exit $rc"; cat "$tmp/err"; }
"$NNBENCH" run "$tmp/reg.ini" --no-db --profile-sort gflop >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "did you mean 'gflops'" "$tmp/err" && ok "--profile-sort gflop: did you mean 'gflops'" \
    || { bad "--profile-sort gflop: exit $rc"; cat "$tmp/err"; }
db="$tmp/t.db"
"$NNBENCH" run "$tmp/reg.ini" --db "$db" >/dev/null 2>&1 || bad "run into $db"
"$NNBENCH" list --db "$db" --sort durration >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "did you mean 'duration'" "$tmp/err" && ok "list --sort durration: exit 2, did you mean 'duration'" \
    || { bad "list --sort durration: exit $rc"; cat "$tmp/err"; }
for c in "list --status finshed:'finished'" "compare 1 --x tme:'time'" "compare 1 --x-scale lg:'log'" \
         "compare 1 --metric tset_loss:'test_loss'"; do
    args=${c%%:*}; want=${c#*:}
    # shellcheck disable=SC2086
    "$NNBENCH" $args --db "$db" >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "did you mean $want" "$tmp/err" && ok "$args: exit 2, did you mean $want" \
        || { bad "$args: exit $rc"; cat "$tmp/err"; }
done
"$NNBENCH" show abc --db "$db" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && ok "show abc exits 2" || bad "show abc exits $rc"
"$NNBENCH" show 99 --db "$db" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && ok "show 99 (no such run) exits 1" || bad "show 99 exits $rc"

# ---- one run is "1 run" -------------------------------------------------------------------
"$NNBENCH" compare --last-batch --db "$db" >"$tmp/out" 2>&1
if grep -q "1 runs" "$tmp/out"; then bad "compare of one run says '1 runs'"
elif grep -q ": 1 run$" "$tmp/out"; then ok "compare of one run says '1 run'"
else bad "compare of one run: no run count"; head -3 "$tmp/out"; fi

"$NNBENCH" list --db "$tmp/one.db" >/dev/null 2>&1
"$NNBENCH" run "$tmp/reg.ini" --db "$tmp/one.db" >/dev/null 2>&1
"$NNBENCH" list --db "$tmp/one.db" --grep nomatch >"$tmp/out" 2>&1
grep -q "(1 run in " "$tmp/out" && ok "list with no match of one run says '1 run'" || bad "list no match: $(cat "$tmp/out")"

# ---- --profile-sort gflops: the GFLOP/s column, descending ------------------------------
"$NNBENCH" run "$tmp/reg.ini" --no-db --profile --profile-sort gflops --profile-rows 0 >"$tmp/out" 2>&1; rc=$?
[ $rc -eq 0 ] && ok "--profile-sort gflops accepted" || { bad "--profile-sort gflops: exit $rc"; cat "$tmp/out"; }
# the column's cells end where its header ends (headers hold blanks: "self %")
col=$(awk '/^-+$/ { r++; next }
           !e && (i = index($0, "GFLOP/s")) { e = i + 6; next }
           r == 1 { v = substr($0, e - 6, 7); gsub(/ /, "", v); print v }' "$tmp/out")
if [ -n "$col" ] && echo "$col" | awk 'NR > 1 && $1 > p + 0 { bad = 1 } { p = $1 } END { exit bad }'; then
    ok "gflops sorts the GFLOP/s column, largest first"
else bad "GFLOP/s column not descending: $(echo $col)"; sed -n 1,20p "$tmp/out"; fi

# ---- the man page's ENVIRONMENT names every NNBENCH_* / OPENBLAS_* variable read ------
"$NNBENCH" help --man >"$tmp/man" 2>&1
sed -n '/^\.SH ENVIRONMENT/,/^\.SH EXIT/p' "$tmp/man" | grep -A0 '^\.B ' | sed 's/^\.B //; s/\\//g' >"$tmp/envs"
missing=
for v in $(grep -rhoE 'getenv\("(NNBENCH|OPENBLAS)_[A-Z0-9_]*"\)' engine profiler quantum store tui |
           sed 's/getenv("//; s/")//' | sort -u); do
    grep -qx "$v" "$tmp/envs" || missing="$missing $v"
done
[ -z "$missing" ] && ok "man page ENVIRONMENT lists every NNBENCH_/OPENBLAS_ variable read" \
    || bad "man page ENVIRONMENT lacks:$missing"

# ---- bash completion: --set keys and run ids ------------------------------------------
"$NNBENCH" help --bash-completion >"$tmp/comp"
mkdir -p "$tmp/bin" && ln -sf "$NNBENCH" "$tmp/bin/nnbench"
complete_words() { # what bash offers for the last word, nnbench on PATH
    PATH="$tmp/bin:$PATH" bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _nnbench
                                  printf "%s\n" "${COMPREPLY[@]}"' _ "$tmp/comp" "$@"
}
complete_words nnbench run x.ini --set train.l | grep -qx "train.lr=" && ok "completion of '--set train.l' offers train.lr=" \
    || bad "completion of '--set train.l': $(complete_words nnbench run x.ini --set train.l)"
got=$(complete_words nnbench show --db "$db" "" | sort | tr '\n' ' ')
[ "$got" = "1 last " ] && ok "completion of 'show --db DB' offers its run ids and last" \
    || bad "completion of 'show --db DB': '$got'"

# ---- a data-parallel summary says on how many ranks it ran -----------------------------
if command -v mpirun >/dev/null 2>&1; then
    "$NNBENCH" run "$tmp/reg.ini" --no-db --ranks 2 >"$tmp/out" 2>&1
    grep -q "^ran data-parallel on 2 MPI ranks" "$tmp/out" && ok "a --ranks 2 summary says it ran on 2 ranks" \
        || { bad "--ranks 2 summary does not name its ranks"; tail -4 "$tmp/out"; }
else
    echo "ok: no mpirun here: the --ranks summary is not checked"
fi

# ---- show and a one-run compare: keys not at their default first -------------------------
"$NNBENCH" run "$tmp/reg.ini" --db "$db" --set train.momentum=0.5 >/dev/null 2>&1 || bad "run 2 into $db"
"$NNBENCH" show last --db "$db" >"$tmp/out" 2>&1
sed -n '/^config/,/^$/p' "$tmp/out" >"$tmp/cfg"
first_default=$(grep -n '^  ' "$tmp/cfg" | head -1 | cut -d: -f1)
last_set=$(grep -n '^\* ' "$tmp/cfg" | tail -1 | cut -d: -f1)
if grep -q '^config (\* set by the file, its variant or --set: [0-9]* of [0-9]* keys' "$tmp/cfg" &&
   grep -q '^\* model.layers ' "$tmp/cfg" && grep -q '^\* train.momentum ' "$tmp/cfg" &&
   grep -q '^  data.augment ' "$tmp/cfg" && [ "$last_set" -lt "$first_default" ]; then
    ok "show marks the keys the file or --set gave (*) and lists them before the defaults"
else bad "show's config does not mark set keys first"; head -8 "$tmp/cfg"; fi
"$NNBENCH" compare --last-batch --db "$db" >"$tmp/out" 2>&1
sed -n '/^Config/,/^$/p' "$tmp/out" >"$tmp/cfg"
if grep -q '^Config (keys not at their default)' "$tmp/cfg" && grep -q '^train.momentum ' "$tmp/cfg" &&
   grep -q '^model.layers ' "$tmp/cfg" && ! grep -q '^data.augment ' "$tmp/cfg"; then
    ok "a one-run compare shows only the keys not at their default"
else bad "one-run compare's config: $(wc -l <"$tmp/cfg") lines"; head -5 "$tmp/cfg"; fi

# ---- one name, one meaning: list's accuracy is the best one and says so -----------------
COLUMNS=80 "$NNBENCH" list --db "$db" >"$tmp/out" 2>&1
head -1 "$tmp/out" | grep -q "BEST ACC  DURATION" && ok "list names its best test accuracy BEST ACC, duration still in 80 columns" \
    || bad "list header: $(head -1 "$tmp/out")"

# ---- headless: --json on list, show, compare and run --profile; report --last-batch ----
jcheck() { # jcheck WHAT PYTHON-EXPR < json
    if python3 -c 'import json, sys; j = json.load(sys.stdin); sys.exit(0 if eval(sys.argv[1]) else 1)' "$2" 2>"$tmp/jerr"
    then ok "$1"; else bad "$1"; head -3 "$tmp/jerr"; fi
}
"$NNBENCH" list --db "$db" --json | jcheck "list --json: every run with its fields" \
    "[r['id'] for r in j['runs']] == [1, 2] and all('best_test_acc' in r and 'wall_s' in r for r in j['runs'])"
"$NNBENCH" show 2 --db "$db" --json | jcheck "show --json: the run with its config and metrics" \
    "len(j['runs']) == 1 and j['runs'][0]['params']['train.momentum'] == '0.5' and 'train_loss' in j['runs'][0]['metrics']"
"$NNBENCH" compare 1 2 --db "$db" --json | jcheck "compare --json: both runs and their diff" \
    "[r['id'] for r in j['runs']] == [1, 2] and 'diff' in j"
"$NNBENCH" run "$tmp/reg.ini" --no-db --json --profile 2>/dev/null | jcheck "run --json --profile: the op table in the JSON" \
    "len(j['variants'][0]['ops']) > 0 and all(o['calls'] > 0 and o['name'] for o in j['variants'][0]['ops'])"
if "$NNBENCH" report --last-batch --db "$db" -o "$tmp/r.md" 2>"$tmp/err" && grep -q "#2" "$tmp/r.md"; then
    ok "report --last-batch reports the newest batch"
else bad "report --last-batch: $(cat "$tmp/err")"; fi
"$NNBENCH" report 1 --last-batch --db "$db" -o "$tmp/r.md" 2>/dev/null; rc=$?
[ $rc -eq 2 ] && ok "report RUN --last-batch: exit 2" || bad "report RUN --last-batch: exit $rc"

# ---- compare's top ops name the layer (one op name splits into a row per layer) ---------
"$NNBENCH" run "$tmp/reg.ini" --db "$db" --profile >/dev/null 2>&1 || bad "profiled run into $db"
"$NNBENCH" compare last last --db "$db" --no-color >"$tmp/out" 2>&1
n_top=$(grep -c '^top op' "$tmp/out")
n_layer=$(grep '^top op' "$tmp/out" | grep -c '[a-z]\.[a-z_]* ([a-z0-9_]*) [0-9.]*%')
[ "$n_top" -gt 0 ] && [ "$n_layer" -eq "$n_top" ] && ok "compare's top ops name their layer" \
    || { bad "compare's top ops without layer"; grep '^top op' "$tmp/out"; }
[ "$fails" -eq 0 ]
