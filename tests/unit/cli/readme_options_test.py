#!/usr/bin/env python3
"""The README documents every command with its defaults, and `kplan <cmd> --help` matches it (issue 11's
"done when"): for each subcommand, every option `--help` lists (under any of its names, `-o` for
`--output`) appears in the README's synopsis and text for that command (from its `kplan <cmd>` line to the
end of its paragraph), and each default `--help` shows is the README's: `[--steps 200]`, `--arch sm_90`,
`[--device auto|cpu|gpu]` (the first choice is the default), or, for a 0 that means "derived" (the plan's,
the checkpoint's), the option with its placeholder and words. A new option or a changed default with no
README line fails here. Environment (set by ctest): KPLAN_BINARY, KPLAN_SOURCE_DIR."""
import os
import re
import subprocess
import unittest

BINARY = os.environ["KPLAN_BINARY"]
README = open(os.path.join(os.environ["KPLAN_SOURCE_DIR"], "README.md")).read()
COMMANDS = ["synth", "compile", "inspect", "run", "bench", "soak", "chat", "serve", "version"]


def readme_section(cmd):
    """The README's lines about `kplan <cmd>`: each synopsis line and the indented text after it."""
    parts = re.finditer(r"^kplan %s\b.*(?:\n(?!kplan |```|\n).*)*" % cmd, README, re.M)
    return "\n".join(m.group(0) for m in parts)


def help_options(cmd):
    """(names, default or None) of each option `kplan <cmd> --help` prints."""
    text = subprocess.run([BINARY, cmd, "--help"], capture_output=True, text=True, check=True).stdout
    for m in re.finditer(r"^  (-[-\w,]+)(?: [A-Z]+(?::\{([^}]*)\})?(?:=(\S+))?)?", text, re.M):
        names = m.group(1).split(",")
        if "--help" in names:
            continue
        yield names, m.group(3)


def documented(section, name):
    return re.search(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", section) is not None


def default_shown(section, name, default):
    n, d = re.escape(name), re.escape(default)
    patterns = [n + r"[ =]" + d + r"(?![\w.]|,\w)",                   # --steps 200, --arch sm_90
                n + r" (?:[\w.]+\|)*" + d + r"(?:\|[\w.]+)*\]",      # [--budget 16|N|auto]
                n + r" " + d + r"(?:\|[\w.]+)+",                      # --device auto|cpu|gpu
                n + r"[^\n]{0,60}default[^\n]{0,20}" + d]             # --seed N (default random)
    if default == "0":  # a derived default: the option with a placeholder, explained in words
        patterns.append(n + r" [A-Z]+")
    return any(re.search(p, section) for p in patterns)


class ReadmeOptions(unittest.TestCase):
    def test_every_option_and_default_of_help_is_in_the_readme(self):
        problems = []
        for cmd in COMMANDS:
            section = readme_section(cmd)
            if not section:
                problems.append("kplan %s: no synopsis in README.md" % cmd)
                continue
            for names, default in help_options(cmd):
                shown = [n for n in names if documented(section, n)]
                if not shown:
                    problems.append("kplan %s: %s is in --help, not in README.md" % (cmd, "/".join(names)))
                elif default not in (None, "[]") and not any(default_shown(section, n, default) for n in shown):
                    problems.append("kplan %s: %s's default %s (--help) is not README.md's" % (cmd, shown[0], default))
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_the_check_sees_a_missing_option_and_a_wrong_default(self):
        self.assertFalse(documented("kplan bench model.kplan [--steps 200]", "--context"))
        self.assertFalse(default_shown("kplan bench model.kplan [--steps 100]", "--steps", "200"))
        self.assertTrue(default_shown("kplan run M [--device auto|cpu|gpu]", "--device", "auto"))
        self.assertTrue(default_shown("kplan run M [--seed N (default random)]", "--seed", "random"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
