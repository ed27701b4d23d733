#!/usr/bin/env python3
"""Which SASS scoreboards a kernel's global loads set, and where its instructions wait on them.

    tools/device/sass_scoreboards.py KERNEL.cubin [CUOBJDUMP]

For each loop of the cubin (a backward branch) that loads from global memory or runs MMAs: its
loads (LDG, LDGSTS), DEPBARs and the instructions whose wait mask names a load's write scoreboard.
Why: a register ring of loads is only as deep as its scoreboards allow -- ptxas may give every load
of a loop one scoreboard, and then the first use of the oldest step waits for all loads in flight
(the INT4 MoE kernels, bench/RESULTS.md 2026-12-06 session 38). The control bits are sm_70+'s: in
the instruction's high 64 bits from bit 41, stall (4), yield (1), write scoreboard (3), read
scoreboard (3), wait mask (6). A cubin: tail -c +41 of a kernel-cache entry (kernel_cache.cc's
40-byte header). CUOBJDUMP: the CUDA toolkit's (the GPU machine has it; default: on PATH)."""
import collections, re, shutil, subprocess, sys
if len(sys.argv) < 2:
    sys.exit(__doc__)
cub = sys.argv[1]
tool = sys.argv[2] if len(sys.argv) > 2 else shutil.which('cuobjdump')
if not tool:
    sys.exit('sass_scoreboards: no cuobjdump on PATH (give its path as the second argument)')
out = subprocess.run([tool, '-sass', cub], capture_output=True, text=True).stdout
lines = out.split('\n'); ins = []; i = 0
while i < len(lines):
    m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*/\* (0x[0-9a-f]+) \*/', lines[i])
    if m:
        hi = int(re.match(r'\s*/\* (0x[0-9a-f]+) \*/', lines[i + 1]).group(1), 16); c = hi >> 41
        ins.append((int(m.group(1), 16), m.group(2).rstrip(' ;'), c & 0xf, (c >> 5) & 7, (c >> 8) & 7, (c >> 11) & 0x3f)); i += 2
    else: i += 1
ops = collections.Counter()
for off, t, st, wb, rb, wm in ins:
    op = re.sub(r'^@!?U?P\w+\s+', '', t).split()[0].split('.')[0]; ops[op] += 1
print(f"{len(ins)} instructions; LDG {ops['LDG']} LDGSTS {ops['LDGSTS']} LDS {ops['LDS']} HMMA {ops['HMMA']} DEPBAR {ops['DEPBAR']}")
# backward branches: loops
for k, (off, t, st, wb, rb, wm) in enumerate(ins):
    m = re.search(r'BRA (0x[0-9a-f]+)', t)
    if m and int(m.group(1), 16) < off:
        tgt = int(m.group(1), 16); a = next(j for j, x in enumerate(ins) if x[0] == tgt)
        body = ins[a:k + 1]
        nl = sum('LDG' in x[1] or 'LDGSTS' in x[1] for x in body)
        if nl == 0 and sum('HMMA' in x[1] for x in body) == 0: continue
        print(f"loop {a}..{k}: {k - a + 1} instrs, loads {nl}, HMMA {sum('HMMA' in x[1] for x in body)}")
        for j in range(a, k + 1):
            off, t, st, wb, rb, wm = ins[j]
            if 'LDG' in t or 'DEPBAR' in t or (wm and any(('LDG' in x[1] and x[3] != 7 and (wm >> x[3]) & 1) for x in body)):
                print(f"   {j} {t[:58]:58s} wb{wb if wb != 7 else '-'} wait{wm:06b}")
