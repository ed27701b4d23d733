# Golden IR tests in the LLVM style: each *.kir file carries `// RUN:` lines and FileCheck
# `CHECK` lines. ctest passes the tools as lit parameters (tests/CMakeLists.txt):
#   kplan, filecheck, test_data, build_dir.
# Substitutions: %kplan, %FileCheck, %test_data (and lit's own %s, %t).
import os

import lit.formats

config.name = "kplan-golden"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".kir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)


def param(name):
    value = lit_config.params.get(name)
    if not value:
        lit_config.fatal("missing lit parameter --param %s=..." % name)
    return value


config.test_exec_root = os.path.join(param("build_dir"), "golden")
config.substitutions.append(("%kplan", param("kplan")))
config.substitutions.append(("%FileCheck", param("filecheck")))
config.substitutions.append(("%test_data", param("test_data")))
