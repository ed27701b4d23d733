#!/usr/bin/env bash
# The long fuzz run (issue 12: >= 10 M executions per target, no crash) on a many-core machine,
# from the kit tests/fuzz/stage.sh put in .carry/fuzz (no compiler needed there; README of tests/fuzz).
#   tools/device/fuzz_long.sh start -t SECONDS -c CORES [-o OUTDIR] [-d WORKDIR] [-b BINDIR]
#                                  [-g CORPUS.tar.xz] [-r TARGET=RATE,...] [TARGET...]
#   tools/device/fuzz_long.sh status [-d WORKDIR] [-o OUTDIR]     the table so far (nothing stops)
#   tools/device/fuzz_long.sh report [-d WORKDIR] [-o OUTDIR] [-w MAXWAIT]
#   tools/device/fuzz_long.sh stop   [-d WORKDIR]
# start replays every target's crash corpus (tests/fuzz/corpus/<t>/crashes, each input once), then
# returns at once and leaves CORES workers running (setsid: they outlive the command), one
# libFuzzer process per core at a time, for SECONDS: each target gets core-seconds in proportion
# to 1/RATE (its executions per second and core, the table below, -r overrides), so every target
# reaches about the same number of executions; the targets are laid end to end over the cores'
# timelines (a target may run on several cores at once, sharing one corpus folder, which
# libFuzzer re-reads every second). Each process: the target's grown corpus (WORKDIR/corpus/<t>,
# first filled from CORPUS.tar.xz, default BINDIR/corpus.tar.xz (or .tar.gz), the tarball an earlier report
# wrote) and the committed seeds, the dictionary run.sh uses, -rss_limit_mb=2048 -timeout=20
# -print_final_stats=1. A process that stops on a finding (crash, timeout, oom) is started again
# until its time is up (3 findings per target at most). report waits for the workers (at most
# MAXWAIT seconds, default 480; then stops them: SIGTERM, libFuzzer still prints its stats),
# prints per target the core-seconds, executions (the sum of every process's
# stat::number_of_executed_units), executions per core-second, cov, ft and the result, and writes
# into OUTDIR (default $OUT, else WORKDIR/out): fuzz_long_report.txt, fuzz_corpus.tar.xz (the
# grown corpora after -merge=1: copy it to .carry/fuzz/corpus.tar.xz so the next run continues
# from it), and each finding as findings/<target>-<artifact> (the first 5) plus findings.tar.gz
# (every artifact, and the logs of the runs that found them).
# WORKDIR (default build-fuzz-long in the repo) holds the state between the calls.
set -uo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
all=(safetensors safetensors_index model_config draft_config plan_reader tokenizer_files tokenizer_codec chat_template ir_parser)

# Executions per second and core, of the staged build (tests/fuzz/run.sh --fast: -O2, ASan + UBSan,
# ASAN_OPTIONS below; measured on the 2-core dev machine, 20 s per target from the seeds alone,
# executions per CPU-second of the process, the mean of two runs). Only their ratios matter.
# ubsan: the UBSan-only build (--ubsan-only), for a target whose MANIFEST line has no "address".
rate_of() {
  local t=$1 flavor=$2
  case "$flavor:$t" in
    asan:safetensors) echo 1096 ;;  asan:safetensors_index) echo 1992 ;;  asan:model_config) echo 1185 ;;
    asan:draft_config) echo 4238 ;;  asan:plan_reader) echo 829 ;;  asan:tokenizer_files) echo 1512 ;;
    asan:tokenizer_codec) echo 11143 ;;  asan:chat_template) echo 597 ;;  asan:ir_parser) echo 1670 ;;
    ubsan:safetensors) echo 1765 ;;  ubsan:safetensors_index) echo 3310 ;;  ubsan:model_config) echo 1061 ;;
    ubsan:draft_config) echo 5930 ;;  ubsan:plan_reader) echo 1251 ;;  ubsan:tokenizer_files) echo 2417 ;;
    ubsan:tokenizer_codec) echo 14011 ;;  ubsan:chat_template) echo 783 ;;  ubsan:ir_parser) echo 2888 ;;
    *) echo 2000 ;;
  esac
}
dict_of() {
  case "$1" in
    ir_parser) echo "$repo/tests/fuzz/ir.dict" ;;
    chat_template) echo "$repo/tests/fuzz/jinja.dict" ;;
    safetensors|safetensors_index|model_config|draft_config|tokenizer_files) echo "$repo/tests/fuzz/json.dict" ;;
    *) echo "" ;;
  esac
}

cmd=${1:-}; [ $# -gt 0 ] && shift
seconds="" cores="" outdir="" wd="$repo/build-fuzz-long" bindir="" corpus_tgz="" rates="" maxwait=480 targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    -t) seconds="$2"; shift 2 ;;
    -c) cores="$2"; shift 2 ;;
    -o) outdir="$2"; shift 2 ;;
    -d) wd="$2"; shift 2 ;;
    -b) bindir="$2"; shift 2 ;;
    -g) corpus_tgz="$2"; shift 2 ;;
    -r) rates="$2"; shift 2 ;;
    -w) maxwait="$2"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$self"; exit 0 ;;
    -*) echo "fuzz_long.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case "$wd" in /*) ;; *) wd="$PWD/$wd" ;; esac
[ -n "$outdir" ] || outdir="${OUT:-$wd/out}"
now() { date +%s; }
# tar + xz (the corpora are mostly variations of a few seeds: xz's large window packs 8 MB of
# grown corpus into 0.2 MB, gzip's 32 KiB one into 8 MB); python3's tarfile where xz is missing.
pack() {  # pack FILE DIR NAME...
  local file=$1 dir=$2; shift 2
  if command -v xz > /dev/null; then tar -C "$dir" -cf - "$@" | xz -6 -T0 > "$file"
  else python3 -c 'import sys, tarfile, os
with tarfile.open(sys.argv[1], "w:xz") as t:
    for n in sys.argv[3:]: t.add(os.path.join(sys.argv[2], n), arcname=n)' "$file" "$dir" "$@"; fi
}
unpack() {  # unpack FILE DIR
  case "$1" in
    *.gz) tar -C "$2" -xzf "$1" ;;
    *) if command -v xz > /dev/null; then xz -dc "$1" | tar -C "$2" -xf -
       else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"; fi ;;
  esac
}

# The flavor of a staged binary: BINDIR/MANIFEST (stage.sh) says its sanitizers.
flavor_of() {
  local s
  s=$(awk -v t="$1" '$1 == t { print $2 }' "$(cat "$wd/bindir")/MANIFEST" 2>/dev/null)
  case "$s" in *address*) echo asan ;; "") echo asan ;; *) echo ubsan ;; esac
}
sanitizer_env() {  # the environment of one libFuzzer process of target $1, scratch folder $2
  export TMPDIR="$2" KPLAN_SOURCE_DIR="$repo"
  # libpcre2-8 from the kit only where the machine has none.
  [ ! -f "$wd/use_kit_libs" ] || export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(cat "$wd/bindir")"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  export ASAN_OPTIONS="${FUZZ_LONG_ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0}"
}
alive() {  # any worker of WORKDIR still running
  local f p
  for f in "$wd"/pids/w*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f"); kill -0 "$p" 2>/dev/null && return 0
  done
  return 1
}

# ---- one worker: runs its segments (lines "target seconds" of sched/wK) back to back ---------
worker() {
  local k=$1 t0 end t dur bin log n rc found tmp dict
  echo $$ > "$wd/pids/w$k.pid"
  t0=$(cat "$wd/t0"); end=$t0
  while read -r t dur; do
    end=$((end + dur))
    bin="$(cat "$wd/bindir")/fuzz_$t"; dict="$(dict_of "$t")"; n=0
    while [ ! -e "$wd/stop" ] && [ "$(now)" -lt "$end" ]; do
      found=$(find "$wd/artifacts/$t" -type f ! -name 'slow-unit-*' | wc -l)
      [ "$found" -lt 3 ] || break
      n=$((n + 1)); log="$wd/logs/$t.w$k.$(now).log"
      tmp="$wd/tmp/w$k"; rm -rf "$tmp"; mkdir -p "$tmp"
      local start; start=$(now)
      ( sanitizer_env "$t" "$tmp"
        exec "$bin" -max_total_time=$((end - start)) -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
          -artifact_prefix="$wd/artifacts/$t/" ${dict:+-dict="$dict"} \
          "$wd/corpus/$t" "$repo/tests/fuzz/corpus/$t/seeds" ) > "$log" 2>&1 &
      echo $! > "$wd/pids/w$k.child"
      wait $!; rc=$?
      rm -f "$wd/pids/w$k.child"
      echo "$t $start $(now) $rc $log" >> "$wd/runs"
      rm -rf "$tmp"
      [ $rc -eq 0 ] || [ -e "$wd/stop" ] || sleep 1
    done
  done < "$wd/sched/w$k"
  rm -rf "$wd/tmp/w$k"
}

# ---- the table ------------------------------------------------------------------------------
table() {
  local t runs_t core_s execs rate cov ft corp result arts replay
  printf '%-18s %5s %7s %11s %7s %6s %7s %6s  %s\n' target cores core_s executions exec/s cov ft corpus result
  for t in $(cat "$wd/targets"); do
    core_s=0 execs=0 cov=0 ft=0
    while read -r tt s e rc log; do
      [ "$tt" = "$t" ] || continue
      [ "$e" = "-" ] && e=$(now)
      core_s=$((core_s + e - s))
      local x
      x=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$' | tail -n 1)
      [ -n "$x" ] || x=$(grep -oE '^#[0-9]+' "$log" 2>/dev/null | tail -n 1 | tr -d '#')
      execs=$((execs + ${x:-0}))
      x=$(grep -oE 'cov: [0-9]+' "$log" 2>/dev/null | tail -n 1 | grep -o '[0-9]*'); [ "${x:-0}" -le $cov ] || cov=$x
      x=$(grep -oE 'ft: [0-9]+' "$log" 2>/dev/null | tail -n 1 | grep -o '[0-9]*'); [ "${x:-0}" -le $ft ] || ft=$x
    done < <(cat "$wd/runs" 2>/dev/null; running_runs)
    rate=0; [ $core_s -eq 0 ] || rate=$((execs / core_s))
    corp=$(find "$wd/corpus/$t" -type f 2>/dev/null | wc -l)
    arts=$(find "$wd/artifacts/$t" -type f ! -name 'slow-unit-*' -printf '%f\n' 2>/dev/null | sed 's/-.*//' | sort | uniq -c | awk '{printf "%s%s x%d", (NR > 1 ? ", " : ""), $2, $1}')
    replay=$(cat "$wd/replay/$t" 2>/dev/null)
    result="no crash"
    [ -z "$arts" ] || result="FINDINGS: $arts"
    [ "$replay" = clean ] || result="$result; crash corpus replay: ${replay:-?}"
    local wall; wall=$(cat "$wd/seconds")
    printf '%-18s %5s %7d %11d %7d %6d %7d %6d  %s\n' "$t" "$(awk -v a=$core_s -v b="$wall" 'BEGIN{printf "%.1f", (b > 0 ? a / b : 0)}')" \
      $core_s $execs $rate $cov $ft $corp "$result"
  done
}
running_runs() {  # the processes still running, as "target start - - log"
  local f
  for f in "$wd"/pids/w*.child; do
    [ -f "$f" ] || continue
    local k; k=$(basename "$f" .child); k=${k#w}
    local log; log=$(ls -t "$wd"/logs/*.w"$k".*.log 2>/dev/null | head -n 1)
    [ -n "$log" ] || continue
    local base; base=$(basename "$log" .log)
    echo "${base%%.w*} ${base##*.} - - $log"
  done
}

stop_workers() {
  touch "$wd/stop"
  local f p
  for f in "$wd"/pids/w*.child; do
    [ -f "$f" ] && p=$(cat "$f") && kill -TERM "$p" 2>/dev/null
  done
  for _ in $(seq 30); do alive || return 0; sleep 1; done
  for f in "$wd"/pids/w*.child "$wd"/pids/w*.pid; do
    [ -f "$f" ] && p=$(cat "$f") && kill -KILL "$p" 2>/dev/null
  done
  sleep 1
}

case "$cmd" in
  _worker) worker "${targets[0]}"; exit 0 ;;

  start)
    [ -n "$seconds" ] && [ -n "$cores" ] || { echo "fuzz_long.sh start: -t SECONDS and -c CORES are needed" >&2; exit 2; }
    if [ -d "$wd/pids" ] && alive; then echo "fuzz_long.sh: a run is still going in $wd (report or stop it)" >&2; exit 1; fi
    [ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
    if [ -z "$bindir" ]; then
      if [ -f "$repo/.carry/fuzz/fuzz_${targets[0]}.gz" ] || [ -x "$repo/.carry/fuzz/fuzz_${targets[0]}" ]; then
        bindir="$repo/.carry/fuzz"; else bindir="$repo/build-fuzz-fast/fuzz"; fi
    fi
    bindir="$(cd "$bindir" && pwd)" || exit 1
    if [ -z "$corpus_tgz" ]; then
      for f in "$bindir/corpus.tar.xz" "$bindir/corpus.tar.gz"; do [ -f "$f" ] && { corpus_tgz=$f; break; }; done
    fi
    for t in "${targets[@]}"; do
      [ -x "$bindir/fuzz_$t" ] || [ -f "$bindir/fuzz_$t.gz" ] || { echo "fuzz_long.sh: no $bindir/fuzz_$t(.gz)" >&2; exit 1; }
    done
    if [ -d "$wd" ] && [ -n "$(ls -A "$wd")" ] && [ ! -f "$wd/targets" ]; then
      echo "fuzz_long.sh: $wd is not a fuzz_long folder; name another with -d" >&2; exit 1
    fi
    rm -rf "$wd"; mkdir -p "$wd"/{pids,sched,logs,tmp,replay,corpus,bin} "$outdir"
    # The binaries, unpacked (stage.sh gzips them) into WORKDIR/bin.
    for t in "${targets[@]}"; do
      if [ -f "$bindir/fuzz_$t.gz" ]; then gzip -dc "$bindir/fuzz_$t.gz" > "$wd/bin/fuzz_$t"; else cp "$bindir/fuzz_$t" "$wd/bin/"; fi
      chmod +x "$wd/bin/fuzz_$t"
    done
    cp "$bindir/MANIFEST" "$bindir"/libpcre2-8.so* "$wd/bin/" 2>/dev/null
    echo "$wd/bin" > "$wd/bindir"; echo "${targets[*]}" > "$wd/targets"; echo "$seconds" > "$wd/seconds"
    : > "$wd/runs"
    for t in "${targets[@]}"; do mkdir -p "$wd/corpus/$t" "$wd/artifacts/$t"; done
    if [ -n "$corpus_tgz" ]; then
      unpack "$corpus_tgz" "$wd/corpus" || { echo "fuzz_long.sh: cannot unpack $corpus_tgz" >&2; exit 1; }
    fi
    # /dev/shm when it has room (the targets write scratch files), else the disk.
    shm=$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')
    if [ "${shm:-0}" -gt 4194304 ]; then tmpbase=/dev/shm/kplan-fuzz-long.$$; else tmpbase="$wd/tmp"; fi
    ldconfig -p 2>/dev/null | grep -q 'libpcre2-8\.so\.0 ' || touch "$wd/use_kit_libs"
    mkdir -p "$tmpbase"; [ "$tmpbase" = "$wd/tmp" ] || { rm -rf "$wd/tmp"; ln -s "$tmpbase" "$wd/tmp"; }
    # 1. The crash corpus, every target at once: each input once, all must run clean.
    for t in "${targets[@]}"; do
      (
        mapfile -t crashes < <(find "$repo/tests/fuzz/corpus/$t/crashes" -type f ! -name README.md 2>/dev/null | sort)
        if [ ${#crashes[@]} -eq 0 ]; then echo clean > "$wd/replay/$t"; exit 0; fi
        mkdir -p "$wd/tmp/replay-$t"; sanitizer_env "$t" "$wd/tmp/replay-$t"
        if "$wd/bin/fuzz_$t" -rss_limit_mb=2048 -timeout=20 "${crashes[@]}" > "$wd/logs/replay_$t.log" 2>&1; then
          echo clean > "$wd/replay/$t"
        else echo "FAILED (log $wd/logs/replay_$t.log)" > "$wd/replay/$t"; fi
        rm -rf "$wd/tmp/replay-$t"
      ) &
    done
    wait
    # 2. Core-seconds per target in proportion to 1/rate, laid end to end over the cores' timelines.
    weights=$(for t in "${targets[@]}"; do
      r=$(printf '%s\n' "${rates//,/$'\n'}" | awk -F= -v t="$t" '$1 == t { print $2 }')
      [ -n "$r" ] || r=$(rate_of "$t" "$(flavor_of "$t")")
      echo "$t $r"
    done)
    echo "$weights" | awk -v C="$cores" -v T="$seconds" -v dir="$wd/sched" '
      BEGIN { n = 0 }
      { name[n] = $1; rate[n] = $2; w[n] = 1 / $2; sw += w[n]; n++ }
      END {
        tot = C * T; minb = (tot / n >= 120) ? 60 : 1; used = 0; big = 0
        for (i = 0; i < n; i++) { b[i] = int(tot * w[i] / sw); if (b[i] < minb) b[i] = minb; used += b[i]; if (b[i] > b[big]) big = i }
        b[big] += tot - used
        k = 0; s = 0; m = 0
        for (i = 0; i < n; i++) {
          r = b[i]
          while (r > 0 && k < C) { d = r; if (d > T - s) d = T - s; sk[m] = k; st[m] = name[i]; sd[m] = d; m++; r -= d; s += d; if (s >= T) { k++; s = 0 } }
          printf "plan %-18s rate %6d/s  %7d core-s  ~%d executions\n", name[i], rate[i], b[i], b[i] * rate[i] > "/dev/stderr"
        }
        # A piece shorter than 30 s (of a long run) joins the piece beside it on its core.
        for (j = 0; j < m; j++) if (T >= 300 && sd[j] < 30) {
          if (j > 0 && sk[j - 1] == sk[j]) { sd[j - 1] += sd[j]; sd[j] = 0 }
          else if (j + 1 < m && sk[j + 1] == sk[j]) { sd[j + 1] += sd[j]; sd[j] = 0 }
        }
        for (k = 0; k < C; k++) printf "" > (dir "/w" k)
        for (j = 0; j < m; j++) if (sd[j] > 0) print st[j], sd[j] >> (dir "/w" sk[j])
      }' 2> "$wd/plan.txt"
    now > "$wd/t0"
    for ((k = 0; k < cores; k++)); do
      setsid nohup bash "$self" _worker -d "$wd" "$k" < /dev/null > "$wd/logs/worker$k.log" 2>&1 &
    done
    {
      echo "fuzz_long: $cores workers for ${seconds}s from $(date -u +%FT%TZ), binaries $bindir, corpus ${corpus_tgz:-none}, state $wd"
      cat "$wd/plan.txt"
      for t in "${targets[@]}"; do
      echo "replay $t: $(cat "$wd/replay/$t")"
      [ "$(cat "$wd/replay/$t")" = clean ] || tail -n 15 "$wd/logs/replay_$t.log"
    done
      for ((k = 0; k < cores; k++)); do echo "core $k: $(tr '\n' ' ' < "$wd/sched/w$k")"; done
    } | tee "$outdir/fuzz_long_start.txt"
    ;;

  status)
    [ -f "$wd/t0" ] || { echo "fuzz_long.sh: no run in $wd" >&2; exit 1; }
    left=$(( $(cat "$wd/t0") + $(cat "$wd/seconds") - $(now) ))
    mkdir -p "$outdir"
    { echo "fuzz_long: $(alive && echo running || echo finished), $left s of $(cat "$wd/seconds") left"; table; } | tee "$outdir/fuzz_long_status.txt"
    ;;

  stop)
    stop_workers ;;

  report)
    [ -f "$wd/t0" ] || { echo "fuzz_long.sh: no run in $wd" >&2; exit 1; }
    deadline=$(( $(now) + maxwait ))
    while alive && [ "$(now)" -lt $deadline ]; do sleep 5; done
    stopped=""
    if alive; then stop_workers; stopped=" (stopped at the report's deadline)"; fi
    mkdir -p "$outdir"
    elapsed=$(( $(now) - $(cat "$wd/t0") ))
    { echo "fuzz_long: ${elapsed}s of $(cat "$wd/seconds") planned$stopped; binaries $(cat "$wd/bindir")"; table; } > "$wd/report.txt"
    # The grown corpora, merged (-merge=1 keeps the inputs that add features), every target at once.
    rm -rf "$wd/merged"; mkdir -p "$wd/merged"
    for t in $(cat "$wd/targets"); do
      ( mkdir -p "$wd/merged/$t" "$wd/tmp/merge-$t"; sanitizer_env "$t" "$wd/tmp/merge-$t"
        "$(cat "$wd/bindir")/fuzz_$t" -merge=1 -rss_limit_mb=2048 -timeout=20 "$wd/merged/$t" "$wd/corpus/$t" \
          > "$wd/logs/merge_$t.log" 2>&1 || cp -r "$wd/corpus/$t/." "$wd/merged/$t/"
        rm -rf "$wd/tmp/merge-$t" ) &
    done
    wait
    # The carried corpora of the targets this run left out travel on as they came.
    for d in "$wd"/corpus/*/; do
      d=$(basename "$d"); [ -d "$wd/merged/$d" ] || cp -r "$wd/corpus/$d" "$wd/merged/$d"
    done
    pack "$outdir/fuzz_corpus.tar.xz" "$wd/merged" $(cd "$wd/merged" && ls)
    size=$(stat -c %s "$outdir/fuzz_corpus.tar.xz")
    echo "corpus: $(find "$wd/merged" -type f | wc -l) inputs after merging ($(find "$wd/corpus" -type f | wc -l) before), fuzz_corpus.tar.xz $((size / 1024)) KiB$([ "$size" -lt 16000000 ] || echo ' (OVER 16 MB: it will not come back from $OUT)')" >> "$wd/report.txt"
    # Findings: each artifact as OUTDIR/findings/<target>-<artifact>, and a tarball with the logs.
    mapfile -t arts < <(cd "$wd/artifacts" && find . -type f ! -name 'slow-unit-*' | sed 's|^\./||' | sort)
    if [ ${#arts[@]} -gt 0 ]; then
      mkdir -p "$outdir/findings" "$wd/findings"
      i=0
      for a in "${arts[@]}"; do
        # At most 5 loose files ($OUT brings back 8 files): all of them are in findings.tar.gz.
        i=$((i + 1)); [ $i -gt 5 ] || cp "$wd/artifacts/$a" "$outdir/findings/${a%%/*}-${a#*/}"
        cp "$wd/artifacts/$a" "$wd/findings/${a%%/*}-${a#*/}"
        echo "finding: ${a%%/*} ${a#*/}" >> "$wd/report.txt"
      done
      for log in $(grep -l -E 'ERROR: |FINDING|runtime error|SUMMARY' "$wd"/logs/*.log 2>/dev/null); do
        tail -n 200 "$log" > "$wd/findings/$(basename "$log")"
      done
      tar -C "$wd" -czf "$outdir/findings.tar.gz" findings
    fi
    [ ! -L "$wd/tmp" ] || rm -rf "$(readlink "$wd/tmp")"
    cp "$wd/report.txt" "$outdir/fuzz_long_report.txt"
    cat "$wd/report.txt"
    ;;

  *) sed -n '2,8p' "$self"; exit 2 ;;
esac
