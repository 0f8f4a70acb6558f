"""Export the development corpus (bench/realworld/manifest) into a scratch folder.

Each manifest line is ``owner/name <40-hex commit>``. The git data comes from a bare mirror
``<mirror root>/<owner>+<name>/repo``: the snapshot that the search tool's ``fetch`` (source
``github:owner/name``) brings onto this machine. This script never downloads anything; when a
mirror (or the pinned commit in it) is missing it says so and moves on. Third-party code is only
ever written under the scratch folder (default ``/tmp/realworld/<name>/``), never into the project.

    python bench/realworld/materialise.py [--manifest M] [--mirror-root /work/.mirror]
                                          [--dest /tmp/realworld] [--force] [names...]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def read_manifest(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        repo, commit = line.split()
        rows.append((repo, commit))
    return rows


def export_tree(mirror: Path, commit: str, dest: Path) -> list[str]:
    """Write the tree of ``commit`` under ``dest``; returns the paths whose blobs the mirror lacks.

    ``git archive`` stops at the first absent blob, and fetch's snapshots may omit their largest
    files, so blobs are read one by one through ``git cat-file --batch``.
    """
    listing = subprocess.run(["git", "--git-dir", str(mirror), "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    entries = []
    for item in listing.split("\0"):
        if not item:
            continue
        meta, path = item.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob":
            entries.append((mode, sha, path))
    batch = subprocess.Popen(["git", "--git-dir", str(mirror), "cat-file", "--batch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    missing = []
    for mode, sha, path in entries:
        batch.stdin.write(sha.encode() + b"\n")
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            missing.append(path)
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)  # the newline after the contents
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            target.symlink_to(data.decode("utf-8", "surrogateescape"))
        else:
            target.write_bytes(data)
            if mode == "100755":
                target.chmod(0o755)
    batch.stdin.close()
    batch.wait()
    return missing


def materialise(repo: str, commit: str, mirror_root: Path, dest_root: Path, force: bool) -> bool:
    name = repo.split("/", 1)[1]
    mirror = mirror_root / repo.replace("/", "+") / "repo"
    dest = dest_root / name
    if not mirror.is_dir():
        print(f"{repo}: no mirror at {mirror} -- fetch it first with the search tool's "
              f"fetch (source github:{repo}), then run this again", file=sys.stderr)
        return False
    have = subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True)
    if have.returncode != 0:
        print(f"{repo}: commit {commit} is not in {mirror} (the mirror holds another snapshot; "
              f"re-fetch or update the manifest)", file=sys.stderr)
        return False
    stamp = dest / ".realworld-commit"
    if dest.exists():
        if not force and stamp.is_file() and stamp.read_text().strip() == commit:
            print(f"{repo}: {dest} already at {commit[:12]}")
            return True
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    missing = export_tree(mirror, commit, dest)
    if missing:
        # fetch leaves a snapshot's largest files out (images, data); they are listed, never analysed.
        (dest / ".realworld-missing").write_text("".join(p + "\n" for p in missing))
        print(f"{repo}: {len(missing)} file(s) absent from the mirror (listed in "
              f"{dest / '.realworld-missing'})", file=sys.stderr)
    stamp.write_text(commit + "\n")
    print(f"{repo}: {commit[:12]} -> {dest}")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", type=Path, default=HERE / "manifest")
    ap.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--dest", type=Path, default=Path("/tmp/realworld"))
    ap.add_argument("--force", action="store_true", help="re-export even when the folder is at the commit")
    ap.add_argument("names", nargs="*", help="only these repositories (name or owner/name)")
    args = ap.parse_args(argv)
    ok = True
    for repo, commit in read_manifest(args.manifest):
        if args.names and repo not in args.names and repo.split("/", 1)[1] not in args.names:
            continue
        ok &= materialise(repo, commit, args.mirror_root, args.dest, args.force)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
