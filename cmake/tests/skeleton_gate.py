#!/usr/bin/env python3
"""skeleton_gate.py - the CTest `skeleton_gate_installed`: docs/driver-guide.md, "The CTest gate",
followed as installed, on an installed mdc (the fixture `mdc_installed`: HOME/mdc).

  skeleton_gate.py --home DIR

1. The guide's block (read from the installed guide, HOME/mdc/share/doc/mdc/driver-guide.md) runs
   as written, in a scratch folder with HOME=DIR: copy the installed skeleton, build it against the
   installed mdc, run mdc (which says it created its results store), write a baseline, ctest.
   Its last command, ctest, must pass and run the gate.
2. The skeleton is broken as the guide says (open_device accepts an unknown configuration key),
   rebuilt, and ctest again must fail, its output naming the Fail of open_device in
   basic/config_unknown_key_rejected.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys


def sh(cmd, cwd, env):
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    home = os.path.abspath(ap.parse_args().home)
    guide_path = f"{home}/mdc/share/doc/mdc/driver-guide.md"
    guide = open(guide_path).read()
    m = re.search(r'<a id="gate"></a>.*?```sh\n(.*?)```', guide, re.S)
    if not m:
        sys.exit(f"skeleton_gate: {guide_path}: no sh block after <a id=\"gate\">")
    block = m.group(1)
    work = f"{home}/work"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, HOME=home)
    env.pop("MAKEFLAGS", None)

    # 1. as the guide says; the block's status is its last command's: ctest
    p = sh(block, work, env)
    print(f"--- the guide's block (exit {p.returncode})\n{block}--- its output (last lines)\n" +
          "\n".join(p.stdout.splitlines()[-15:]))
    if p.returncode != 0 or "driver_skeleton_gate" not in p.stdout or "100% tests passed" not in p.stdout:
        sys.exit(f"skeleton_gate: the guide's block did not end in a green gate (exit {p.returncode}):\n{p.stdout}")
    # the block's first run makes its store, and says where it is
    if not re.search(r"mdc replay: created the results store \S*first\.db", p.stdout):
        sys.exit(f"skeleton_gate: the first mdc replay did not say it created its store first.db:\n{p.stdout}")

    # 2. a broken build goes red, the regression named
    drv = f"{work}/my_driver"
    src = open(f"{drv}/driver_skeleton.c").read()
    broken, n = re.subn(r"if \(k == KEY_COUNT\)\s*\n(\s*)return fail\(",
                        r"if (k == KEY_COUNT) return MD_NONE; /* broken on purpose */\n\1if (0) return fail(", src)
    if n != 1:
        sys.exit("skeleton_gate: driver_skeleton.c has no 'if (k == KEY_COUNT) return fail(' to break any more")
    open(f"{drv}/driver_skeleton.c", "w").write(broken)
    p = sh("cmake --build build && ctest --test-dir build --output-on-failure", drv, env)
    print("--- the broken build's ctest (last lines)\n" + "\n".join(p.stdout.splitlines()[-25:]))
    if p.returncode == 0:
        sys.exit("skeleton_gate: ctest passed on a skeleton that accepts unknown config keys")
    # mdc's summary lists the unexpected first: the Fail, its call and the trace
    if not re.search(r"Fail: open_device: expected INVALID_ARGUMENT", p.stdout) or \
            "basic/config_unknown_key_rejected" not in p.stdout:
        sys.exit(f"skeleton_gate: ctest failed but its output does not name the regression "
                 f"(a Fail of open_device in basic/config_unknown_key_rejected):\n{p.stdout}")
    shutil.rmtree(work, ignore_errors=True)
    print("skeleton_gate: the guide's gate is green, and red on a broken build naming the regression")
    return 0


if __name__ == "__main__":
    sys.exit(main())
