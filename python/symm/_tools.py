"""The console commands `symmrun` and `symm-info` that `pip install` puts on
PATH: each runs the program of the same name built with libsymm (symm/bin
in an installed package, build*/tools in a source checkout)."""
import os
import sys

from ._lib import LibraryNotFoundError, tool_path


def _exec(name):
    try:
        path = tool_path(name)
    except LibraryNotFoundError as e:
        sys.stderr.write("%s: %s\n" % (name, e))
        sys.exit(127)
    os.execv(path, [path] + sys.argv[1:])


def symmrun():
    _exec("symmrun")


def symm_info():
    _exec("symm-info")
