"""ctest install_examples_c: the READMEs' commands for your own program, run as
they are written (CI, no GPU needed).

    python3 readme_commands.py --src SRC --build BUILD --out OUT --nvcc NVCC --cc CC

What runs: every ```sh block of README.md's "Your own program" section, then of
examples/c/README.md's "Build and run" section, each file's lines in one bash
(so an `export` holds for the lines after it, as in a user's shell), in a
scratch folder OUT where `build`, `examples` and `scripts` are links into the
tree under test and HOME is OUT/home (so `$HOME/symm` is a scratch prefix).
The commands are read from the READMEs, never copied here: edit a command and
this runs the new text. A line already run from README.md is not run again
for examples/c/README.md (`export` lines always are).

Three commands are stood in for, by their exact text, because a test must not
install system packages nor rebuild the tree that ctest is running:
  bash scripts/install-deps.sh ...  runs with --dry-run (says what it would install)
  cmake -S . -B build               the build folder under test, configured already,
  cmake --build build -j            and built (ctest runs after the build)
Any other configure or build of `build` stops the test and says so, so a change
to those README commands cannot pass unnoticed. Building symm a second time
from the literal text would double CI's build time (11 minutes on 2 cores).

Lines that start programs on PEs (`symmrun`, and a `# or: torchrun ...`
alternative where torchrun is installed) must do what README.md says: with no
GPU, stop at symm_init with "no GPU found" on every PE (symmrun stops the
others once one has exited, so a slow PE may be stopped before it says so);
with GPUs, print ok on every PE.

Beside the READMEs' text: the examples are compiled with warnings as errors
(through CUDAFLAGS, CMake's default for CMAKE_CUDA_FLAGS; the text is
unchanged), every example must be built, the installed symm-info must run, a
host program built through pkg-config must find libsymm through the .pc file's
rpath and run, and README.md must show examples/c/ring_shift.cu verbatim.
"""
import argparse
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys

SECTIONS = (("README.md", "Your own program"), ("examples/c/README.md", "Build and run"))
EXAMPLES = ("ring_shift", "ping_pong", "all_reduce_kernel", "put_signal_pipeline")
WARNINGS = "-Werror all-warnings -Xcompiler=-Wall,-Wextra,-Werror"
LAUNCHERS = ("symmrun", "torchrun")

# Stand-ins for the three commands above (bash functions shadow the commands
# for the README's lines only; `command` reaches the real ones).
PRELUDE = r'''
cmake() {
  case "$*" in
    "-S . -B build"|"--build build -j")
      echo "(cmake $*: the build under test stands in)"; return 0 ;;
  esac
  case " $* " in
    *" -B build "*|*" --build build "*)
      echo "README changed a command that configures or builds 'build': cmake $*" >&2
      echo "tests/install/readme_commands.py stands in only for 'cmake -S . -B build' and" >&2
      echo "'cmake --build build -j' (the build ctest runs in): update it with the README" >&2
      return 97 ;;
  esac
  command cmake "$@"
}
bash() {
  if [ "${1-}" = scripts/install-deps.sh ]; then command bash "$@" --dry-run; else command bash "$@"; fi
}
'''


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def section_blocks(path, heading):
    """The ```sh blocks of the section `## heading` of a Markdown file:
    [(line number, [lines])]."""
    lines = open(path).read().split("\n")
    try:
        start = lines.index("## " + heading)
    except ValueError:
        fail("%s has no section '## %s'" % (path, heading))
    blocks, fence, cur = [], None, None
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if fence is None and re.match(r"#{1,2} ", line):
            break
        if line.lstrip().startswith("```"):
            if fence is None:
                fence = line.strip()[3:]
                cur = (i + 2, [])
            else:
                if fence in ("sh", "bash"):
                    blocks.append(cur)
                fence = None
        elif fence is not None:
            cur[1].append(line)
    if not blocks:
        fail("%s, section '%s': no ```sh block" % (path, heading))
    return blocks


def alternative(line):
    """The command of a `# or: CMD` comment (also `# or, where ...: CMD`)."""
    m = re.search(r"(?:^|\s)#\s*or\b[^:]*:\s*(.+)$", line)
    return m.group(1).strip() if m else None


def launcher(cmd):
    """symmrun / torchrun when the command starts programs on PEs, else None."""
    try:
        words = shlex.split(cmd, comments=True)
    except ValueError:
        return None
    words = [w for w in words if not re.match(r"^\w+=", w)][:1]
    name = os.path.basename(words[0]) if words else ""
    return name if name in LAUNCHERS else None


def npes(cmd):
    m = re.search(r"(?:-n|--nproc-per-node|--nproc_per_node)[ =](\d+)", cmd)
    return int(m.group(1)) if m else 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Runner:
    def __init__(self, out, env):
        self.out, self.env = out, env
        self.done = set()
        self.runs = []  # (where, command, log, rc file)

    def script(self, path, blocks):
        """The bash script of one README's blocks: each line as written, its
        status checked; launcher lines' output and status kept for check_runs."""
        body = ["set -u", "cd %s" % shlex.quote(self.out), PRELUDE]
        for first, lines in blocks:
            for k, line in enumerate(lines):
                where = "%s:%d" % (path, first + k)
                alt = alternative(line)
                cmds = ([] if not line.strip() or line.lstrip().startswith("#") else [line]) + \
                    ([alt] if alt else [])
                for cmd in cmds:
                    if cmd in self.done and not cmd.startswith("export "):
                        body.append("echo %s" % shlex.quote("%s: (run above) %s" % (where, cmd)))
                        continue
                    self.done.add(cmd)
                    body.append("echo %s" % shlex.quote("%s: %s" % (where, cmd)))
                    if launcher(cmd):
                        body += self.launch_lines(where, cmd)
                    else:
                        body += [cmd, "rc=$?; if [ $rc -ne 0 ]; then echo %s \"($rc)\" >&2; exit 1; fi"
                                 % shlex.quote("FAILED: %s: %s" % (where, cmd))]
        return "\n".join(body) + "\n"

    def launch_lines(self, where, cmd):
        n = len(self.runs)
        log, rc = os.path.join(self.out, "run%d.log" % n), os.path.join(self.out, "run%d.rc" % n)
        if launcher(cmd) == "torchrun" and not shutil.which("torchrun", path=self.env["PATH"]):
            return ["echo %s" % shlex.quote("  not run: torchrun is not installed here")]
        self.runs.append((where, cmd, log, rc))
        # the command on a line of its own: a trailing comment must not swallow the ')'
        return ["(", cmd, ") > %s 2>&1; echo $? > %s" % (shlex.quote(log), shlex.quote(rc))]

    def run(self, path, blocks):
        text = self.script(path, blocks)
        name = os.path.join(self.out, "readme_%s.sh" % re.sub(r"\W", "_", path))
        with open(name, "w") as f:
            f.write(text)
        r = subprocess.run(["bash", name], env=self.env, cwd=self.out, timeout=480)
        if r.returncode != 0:
            fail("%s: a command failed (the script: %s)" % (path, name))

    def check_runs(self, gpus_absent):
        if not self.runs:
            fail("README.md's section starts no program on PEs (symmrun / torchrun)")
        for where, cmd, log, rc in self.runs:
            out, code = open(log).read(), int(open(rc).read())
            n = npes(cmd)
            if gpus_absent:
                # every PE says so, unless symmrun stopped the others after the first one's exit
                said = out.count("no GPU found")
                if code == 0 or said == 0 or (said < n and "stopping the other ranks" not in out):
                    fail("%s: %s: with no GPU, README.md says every PE stops at symm_init with "
                         "'no GPU found'; exit %d, output:\n%s" % (where, cmd, code, out))
            else:
                oks = re.findall(r"PE \d+ of %d: .* ok$" % n, out, re.M)
                if code != 0 or len(oks) < n:
                    fail("%s: %s: exit %d, %d of %d PEs ok:\n%s" % (where, cmd, code, len(oks), n, out))
            print("%s: %s: as README.md says (%s)" % (where, cmd, "no GPU" if gpus_absent else "ok"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for a in ("--src", "--build", "--out", "--nvcc", "--cc", "--cmake"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    src, out = os.path.abspath(args.src), os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "home"))
    os.symlink(os.path.abspath(args.build), os.path.join(out, "build"))
    for d in ("examples", "scripts"):
        os.symlink(os.path.join(src, d), os.path.join(out, d))

    # the build's own cmake and nvcc first on PATH; a fresh HOME; warnings as errors
    path = os.pathsep.join([os.path.dirname(args.cmake), os.path.dirname(args.nvcc), os.environ.get("PATH", "")])
    # what the READMEs set must come from their text (PKG_CONFIG_PATH), and the
    # no-GPU message from the native backend (SYMM_BACKEND)
    drop = ("PKG_CONFIG_PATH", "SYMM_BACKEND", "CUDAFLAGS", "CUDACXX", "CUDAARCHS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PATH=path, HOME=os.path.join(out, "home"), CUDACXX=args.nvcc, CUDAFLAGS=WARNINGS,
               PET_MASTER_PORT=str(free_port()))  # torchrun's port: ctest runs tests side by side

    runner = Runner(out, env)
    for rel, heading in SECTIONS:
        runner.run(rel, section_blocks(os.path.join(src, rel), heading))

    prefix = os.path.join(out, "home", "symm")
    info = subprocess.run([os.path.join(prefix, "bin", "symm-info")], env=env, capture_output=True, text=True)
    if info.returncode != 0 or "GPUs: " not in info.stdout:
        fail("the installed symm-info: exit %d\n%s%s" % (info.returncode, info.stdout, info.stderr))
    runner.check_runs("GPUs: no GPU found" in info.stdout)

    missing = [e for e in EXAMPLES if not os.path.isfile(os.path.join(out, "build-examples", e))]
    if missing:
        fail("examples/c built no %s in build-examples/" % ", ".join(missing))
    if not os.path.isfile(os.path.join(out, "ring_shift")):
        fail("the pkg-config build wrote no ring_shift")

    # a host program through pkg-config runs: the .pc file's rpath finds libsymm
    pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "symm"], env=pc_env, capture_output=True,
                           text=True, check=True).stdout.split()
    host_c = os.path.join(out, "host.c")
    with open(host_c, "w") as f:
        f.write("#include <stdio.h>\n#include <symm/symm.h>\n"
                "int main(void) { printf(\"%s\\n\", symm_strerror(SYMM_ERR_NO_DEVICE)); "
                "return symm_initialized(); }\n")
    subprocess.run([args.cc, host_c] + flags + ["-o", os.path.join(out, "host")], check=True)
    r = subprocess.run([os.path.join(out, "host")], capture_output=True, text=True)
    if r.returncode != 0 or "SYMM_ERR_NO_DEVICE" not in r.stdout:
        fail("the pkg-config-built host program: exit %d, %s%s" % (r.returncode, r.stdout, r.stderr))

    readme = open(os.path.join(src, "README.md")).read()
    if open(os.path.join(src, "examples", "c", "ring_shift.cu")).read() not in readme:
        fail("README.md's C example is not examples/c/ring_shift.cu: copy the file into it")
    print("the READMEs' commands for your own program, the installed package, pkg-config: ok")


if __name__ == "__main__":
    main()
