"""Runs a command with its stdout and stderr on a new pseudo-terminal (stdin from /dev/null) and
writes everything the terminal received to our stdout; exits with the command's exit code.
purra's CLI tests use it to see what a user's terminal would get (standard library only)."""

import os
import pty
import subprocess
import sys

master, slave = pty.openpty()
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
os.close(slave)
seen = bytearray()
while True:
    try:
        data = os.read(master, 65536)
    except OSError:  # EIO: every writer of the terminal is gone
        break
    if not data:
        break
    seen += data
code = child.wait()
sys.stdout.buffer.write(seen)
sys.exit(code)
