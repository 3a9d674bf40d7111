"""Reads the text an `ergon-worker verify` run printed and prints its largest relative error of a
replayed update, its smallest cosine and its verdict: `REL COS VERDICT` (`n/a` where it replayed
nothing).

Usage: replay_error.py VERIFY_OUTPUT.txt
"""
import re
import sys

text = open(sys.argv[1]).read()
rel = [float(x) for x in re.findall(r"relative error ([0-9.e+-]+)", text)]
cos = [float(x) for x in re.findall(r"cosine ([0-9.e+-]+)", text)]
verdict = re.search(r"verdict (\w+)", text)
print(f"{max(rel):.3e}" if rel else "n/a", f"{min(cos):.9f}" if cos else "n/a",
      verdict.group(1) if verdict else "n/a")
