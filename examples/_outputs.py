"""Run every example at its real size and record what it prints in examples/OUTPUTS.md, which
the site's example pages show (`python examples/_outputs.py`; minutes). One subprocess per
example, so that none sees another's imports or caches."""
import datetime
import os
import pathlib
import platform
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
TIME_LIMIT_S = 600      # an example that runs longer is left out (its page shows no output)


def main() -> None:
    sections = []
    # this checkout's xform, not an installed one (a script's own folder leads sys.path)
    environment = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    for path in sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_")):
        try:
            done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                                  cwd=HERE.parent, timeout=TIME_LIMIT_S, env=environment)
        except subprocess.TimeoutExpired:
            print(path.stem, "ran past the time limit: not recorded", flush=True)
            continue
        if done.returncode != 0:
            print(path.stem, "FAILED: not recorded\n", done.stderr, flush=True)
            continue
        sections.append(f"## {path.stem}\n\n```text\n{done.stdout.strip()}\n```\n")
        print(path.stem, "ok", flush=True)
    header = (f"# What the examples print at their real sizes\n\n"
              f"`python examples/_outputs.py`, {datetime.date.today()}, Python "
              f"{platform.python_version()}: each example's `python examples/<name>.py`.\n")
    (HERE / "OUTPUTS.md").write_text(header + "\n" + "\n".join(sections))


if __name__ == "__main__":
    main()
