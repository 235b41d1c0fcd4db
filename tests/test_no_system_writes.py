"""The kit changes no system setting: no script, CI step or module writes a kernel or VM setting
(/sys, /proc/sys, sysctl). It reads them (refimpl.lab.env.page_reporting, the THP mode) and records them."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYS = r"/(?:sys|proc/sys)/"
PY_WRITE = re.compile(r"write_text\(|write_bytes\(|open\([^)]*,\s*['\"](?:w|a|r\+)")


def system_writes(path: Path, text: str) -> list[str]:
    """Lines of ``text`` (a shell or Python file) that write a /sys or /proc/sys setting or call sysctl to set one."""
    if path.suffix == ".py":
        if not re.search(SYS, text):
            return []
        return [ln for ln in text.splitlines() if PY_WRITE.search(ln) or re.search(r"sysctl", ln)]
    sys_vars = re.findall(rf"^\s*(?:export\s+)?(\w+)=['\"]?{SYS}", text, re.M)  # PAGE_REPORTING_ORDER=/sys/...
    targets = SYS + "".join(rf"|\$\{{?{v}\b" for v in sys_vars)
    return [ln for ln in text.splitlines()
            if re.search(rf"(?:>|\btee\b[^|]*)\s*['\"]?(?:{targets})", ln) or re.search(r"\bsysctl\s+(?:-w|\S+=)", ln)]


def _kit_files() -> list[Path]:
    files = [*ROOT.glob("scripts/*"), *ROOT.glob(".ci/*"), ROOT / "Makefile", *ROOT.glob("refimpl/**/*.py"),
             *ROOT.glob("examples/**/*.py"), *ROOT.glob("examples/**/*.sh")]
    return [f for f in files if f.is_file()]


def test_no_file_of_the_kit_writes_a_system_setting():
    found = {str(f.relative_to(ROOT)): w for f in _kit_files() if (w := system_writes(f, f.read_text(errors="replace")))}
    assert not found, f"the kit records system settings and never writes them: {found}"


def test_the_check_sees_the_writes_the_removed_scripts_made():
    """The forms scripts/page_reporting.sh used (removed at issue 47) and their plain variants are caught."""
    sh = Path("x.sh")
    assert system_writes(sh, 'ORDER=/sys/module/page_reporting/parameters/page_reporting_order\necho 11 > $ORDER\n')
    assert system_writes(sh, 'echo 11 > "${ORDER}"\nORDER="/sys/module/x"\n')
    assert system_writes(sh, "echo 11 | sudo tee /sys/module/page_reporting/parameters/page_reporting_order\n")
    assert system_writes(sh, "sysctl -w vm.swappiness=1\n") and system_writes(sh, "sudo sysctl vm.swappiness=1\n")
    assert system_writes(Path("x.py"), 'P = Path("/sys/kernel/mm/x")\nP.write_text("never")\n')
    assert system_writes(Path("x.py"), 'with open("/proc/sys/vm/x", "w") as f:\n')
    assert not system_writes(sh, "cat /sys/module/page_reporting/parameters/page_reporting_order\n")
    assert not system_writes(Path("x.py"), 'P = Path("/sys/kernel/mm/x")\nprint(P.read_text())\n')
