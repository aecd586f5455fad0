"""Run every example at its real size and record what it prints in examples/OUTPUTS.md, which
the site's example pages show (`python examples/_outputs.py`; minutes). One subprocess per
example, so that none sees another's imports or caches."""
import datetime
import pathlib
import platform
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    sections = []
    for path in sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_")):
        done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                              cwd=HERE.parent, timeout=900)
        text = (done.stdout if done.returncode == 0 else done.stderr).strip()
        sections.append(f"## {path.stem}\n\n```text\n{text}\n```\n")
        print(path.stem, "ok" if done.returncode == 0 else "FAILED", flush=True)
    header = (f"# What the examples print at their real sizes\n\n"
              f"`python examples/_outputs.py`, {datetime.date.today()}, Python "
              f"{platform.python_version()}: each example's `python examples/<name>.py`.\n")
    (HERE / "OUTPUTS.md").write_text(header + "\n" + "\n".join(sections))


if __name__ == "__main__":
    main()
