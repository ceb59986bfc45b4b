#!/bin/sh
# kernels.sh — the fp32 GEMM backend choice and the OpenBLAS core end to end, on any machine:
# a run stores what served it; a backend made to crash in its check is skipped with a note
# and the run finishes; a bad train.gemm names FILE:LINE; compare says when runs ran on
# different kernels; a set OPENBLAS_CORETYPE is respected, an unset one chosen (forced here
# with NNBENCH_OPENBLAS_SELECT=force and the core already loaded as the only candidate, so
# no untested core is ever loaded); the cache is written once and read back.
. "$(dirname "$0")/lib/check.sh"
export NNBENCH_CACHE_DIR="$tmp/cache"
db="$tmp/k.db"
sys() { sqlite3 "$db" "SELECT value FROM system_info WHERE run = $1 AND key = '$2'"; }
run() { "$NNBENCH" run "$TOP/samples/spirals-mlp.ini" --db "$db" --variant adam --set train.epochs=2 "$@"; }

if run --set train.gemm=openblas >"$tmp/o1" 2>"$tmp/e1"; then ok "a run with train.gemm = openblas"; else bad "openblas run failed: $(cat "$tmp/e1")"; fi
case "$(sys 1 gemm)" in
    "openblas "*"/"*" shape classes; openblas forced, "*) ok "the run stores its GEMM choice ($(sys 1 gemm))" ;;
    *) bad "gemm record of run 1: '$(sys 1 gemm)'" ;;
esac
case "$(sys 1 gemm_classes)" in *" openblas "*" GF/s"*) ok "per-class rates stored" ;; *) bad "gemm_classes: '$(sys 1 gemm_classes)'" ;; esac
[ -n "$(sys 1 blas_core_choice)" ] && ok "the core choice is stored" || bad "no blas_core_choice"
[ -s "$NNBENCH_CACHE_DIR/gemm-choices" ] && ok "the choice is cached" || bad "no cache file"
before=$(cksum <"$NNBENCH_CACHE_DIR/gemm-choices")
run --set train.gemm=openblas >/dev/null 2>&1
[ "$(cksum <"$NNBENCH_CACHE_DIR/gemm-choices")" = "$before" ] && ok "a second run measures nothing again" \
    || bad "the cache changed on a second identical run"

# oneDNN forced, but made to crash in its check: skipped with a note, the run finishes on OpenBLAS.
if NNBENCH_GEMM_FAIL=onednn:crash NNBENCH_CACHE_DIR="$tmp/cache2" run --set train.gemm=onednn >"$tmp/o2" 2>"$tmp/e2"; then
    ok "a run whose backend crashes in its check goes on"
else bad "run with a crashing backend failed: $(cat "$tmp/e2")"; fi
grep -q 'note: onednn failed its check on [0-9]* of [0-9]* shape classes (crashed) and was skipped there' "$tmp/e2" \
    && ok "the note says so" || bad "no note on stderr: $(cat "$tmp/e2")"
case "$(sys 3 gemm)" in "openblas "*) ok "the stored choice is openblas" ;; *) bad "gemm of run 3: '$(sys 3 gemm)'" ;; esac
case "$(sys 3 gemm_notes)" in *"onednn failed its check"*) ok "the note is stored" ;; *) bad "gemm_notes: '$(sys 3 gemm_notes)'" ;; esac
[ "$(sqlite3 "$db" "SELECT status FROM runs WHERE id = 3")" = finished ] && ok "run 3 finished" || bad "run 3 status"

# Different kernels are never compared silently.
run --set train.gemm=onednn >/dev/null 2>&1 || bad "onednn run failed"
"$NNBENCH" compare 1 4 --db "$db" >"$tmp/cmp" 2>&1 || bad "compare failed"
grep -q '^kernels ' "$tmp/cmp" && ok "compare has a kernels row" || bad "no kernels row"
grep -q 'these runs ran on different kernels' "$tmp/cmp" && ok "compare says the kernels differ" || bad "no kernels note"
"$NNBENCH" compare 1 2 --db "$db" >"$tmp/cmp2" 2>&1
grep -q 'different kernels' "$tmp/cmp2" && bad "runs on the same kernels flagged" || ok "same kernels: no note"

# AVX2-only kernels, forced on any AVX2 machine: oneDNN held to AVX2 (its JIT reads
# DNNL_MAX_CPU_ISA in the probe child and in the run) and the engine's own kernels on avx2.
if grep -qw avx2 /proc/cpuinfo; then
    if DNNL_MAX_CPU_ISA=AVX2 NNBENCH_ISA=avx2 NNBENCH_CACHE_DIR="$tmp/cache3" run --set train.gemm=onednn >"$tmp/o4" 2>"$tmp/e4"; then
        case "$(sys 5 gemm)" in "onednn "*) ok "AVX2-only: oneDNN held to AVX2 passes its check and serves the run" ;;
            *) bad "AVX2-only run: gemm '$(sys 5 gemm)' $(cat "$tmp/e4")" ;; esac
    else bad "AVX2-only run failed: $(cat "$tmp/e4")"; fi
else
    ok "no AVX2 on this CPU: the AVX2-only run is not possible here"
fi

printf '[experiment]\nname = g\n[train]\ngemm = blas9\n' >"$tmp/bad.ini"
"$NNBENCH" run "$tmp/bad.ini" --no-db >"$tmp/o3" 2>"$tmp/e3"
[ $? -ne 0 ] && grep -q 'bad.ini:4' "$tmp/e3" && grep -q 'auto, openblas, onednn' "$tmp/e3" \
    && ok "a bad train.gemm names FILE:LINE and the choices" || bad "bad gemm: $(cat "$tmp/e3")"

# The OpenBLAS core: respected when set; chosen when unset (forced, on the loaded core).
"$NNBENCH" sysinfo >"$tmp/si" 2>&1 || bad "sysinfo failed"
core=$(sed -n 's/^ *core \([A-Za-z0-9]*\), .*/\1/p' "$tmp/si" | head -1)
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    grep -q "core choice: .*as set by OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (respected)" "$tmp/si" \
        && ok "a set OPENBLAS_CORETYPE is respected" || bad "core choice: $(grep 'core choice' "$tmp/si")"
else
    grep -q 'core choice: .*\(chosen by nnbench\|as loaded\)' "$tmp/si" \
        && ok "an unset OPENBLAS_CORETYPE: nnbench chose" || bad "core choice: $(grep 'core choice' "$tmp/si")"
fi
NNBENCH_OPENBLAS_SELECT=force NNBENCH_OPENBLAS_CANDIDATES="$core" OPENBLAS_CORETYPE="$core" \
    "$NNBENCH" sysinfo >"$tmp/si2" 2>&1 || bad "forced sysinfo failed"
grep -q "core choice: $core, chosen by nnbench" "$tmp/si2" \
    && ok "the chosen core is verified, then re-executed into ($core)" || bad "forced choice: $(grep 'core' "$tmp/si2")"
grep -q 'shape classes measured' "$tmp/si" && ok "sysinfo summarises the cache" || bad "sysinfo: no GEMM summary"

[ "$fails" -eq 0 ]
