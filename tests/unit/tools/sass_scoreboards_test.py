#!/usr/bin/env python3
"""tools/device/sass_scoreboards.py reads the scoreboard fields of real sm_90 encodings: a fake
cuobjdump prints three instructions of the K2.6 INT4 gate/up's register ring as the device toolkit
disassembled them (bench/RESULTS.md 2026-12-06 session 38) -- a 16-byte load that sets write
scoreboard 5, its first use waiting on scoreboard 5 only, and a backward branch closing the loop --
and the script must name the load's scoreboard and the wait. A missing cuobjdump is a clear error.
Environment (set by ctest): KPLAN_SOURCE_DIR."""
import os
import stat
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.environ["KPLAN_SOURCE_DIR"], "tools/device/sass_scoreboards.py")
PAD = " " * 84
SASS = "\n".join([
    "        code for sm_90",
    "                Function : kplan_moe_grouped_gate_up",
    "        /*0000*/                   LDG.E.EF.128 R68, desc[UR8][R68.64] ;         /* 0x0000000844447981 */",
    PAD + "/* 0x000f68000c0e1d00 */",
    "        /*0010*/                   SHF.R.U32.HI R76, RZ, 0x4, R68 ;              /* 0x00000004ff4c7819 */",
    PAD + "/* 0x020fe20000011644 */",
    "        /*0020*/               @P0 BRA 0x0 ;                                      /* 0x0000005800880947 */",
    PAD + "/* 0x000fea0003800000 */",
    ""])


class SassScoreboardsTest(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)

    def test_names_the_loads_scoreboard_and_its_wait(self):
        with tempfile.TemporaryDirectory() as d:
            tool = os.path.join(d, "cuobjdump")
            with open(os.path.join(d, "sass.txt"), "w") as f:
                f.write(SASS)
            with open(tool, "w") as f:
                f.write("#!/bin/sh\ncat '%s'\n" % os.path.join(d, "sass.txt"))
            os.chmod(tool, os.stat(tool).st_mode | stat.S_IEXEC)
            cubin = os.path.join(d, "k.cubin")
            open(cubin, "wb").close()
            r = self.run_script(cubin, tool)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3 instructions; LDG 1", r.stdout)
        self.assertIn("loop 0..2: 3 instrs, loads 1", r.stdout)
        lines = r.stdout.splitlines()
        ldg = next(l for l in lines if "LDG.E.EF.128" in l)
        use = next(l for l in lines if "SHF.R.U32.HI" in l)
        self.assertRegex(ldg, r"wb5 wait000000$")
        self.assertRegex(use, r"wb- wait100000$")

    def test_without_cuobjdump_says_so(self):
        env = dict(os.environ, PATH="/nonexistent")
        r = subprocess.run([sys.executable, SCRIPT, "k.cubin"], capture_output=True, text=True, env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no cuobjdump", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
