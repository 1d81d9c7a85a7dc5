#!/usr/bin/env bash
# The user guide (docs/, an mdBook; run by scripts/test.sh):
# 1. mdbook, installed from its crate with `cargo install --locked` into target/mdbook when missing
#    (without its default features: no file watcher, web server or search index, which the check
#    needs not and which would double its build on CI's two cores);
# 2. `mdbook build docs` (the book lands in target/guide, see docs/book.toml);
# 3. every relative link and image in docs/src/*.md and README.md names a file that exists, and every
#    `#anchor` on a Markdown page names one of its headings.
# The guide's Rust examples are doctests of the examples package (examples/lib.rs), run with the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.4.52
root=target/mdbook
mdbook=$root/bin/mdbook

# 1. mdbook, at the pinned version.
if ! [ -x "$mdbook" ] || ! "$mdbook" --version | grep -qF "v$MDBOOK_VERSION"; then
    echo "guide: installing mdbook $MDBOOK_VERSION into $root" >&2
    cargo install mdbook --locked --no-default-features --version "$MDBOOK_VERSION" --root "$root" --quiet
fi

# 2. The book.
"$mdbook" build docs 2>&1 | sed 's/^/guide: /' >&2
echo "guide: mdbook build docs: built"

# 3. Links, images and anchors.
python3 - <<'EOF'
import os, re, sys, glob

pages = sorted(glob.glob("docs/src/**/*.md", recursive=True)) + ["README.md"]
link = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
fence = re.compile(r"^\s*(```|~~~)")

def slug(heading):
    """The id mdBook gives a heading: lower case, spaces to '-', only letters, digits, '-' and '_'."""
    text = re.sub(r"`|\*\*|\*", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return "".join(c if c.isalnum() or c in "-_" else ("-" if c == " " else "") for c in text)

def prose(path):
    """The page's lines outside fenced code blocks."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if fence.match(line):
                inside = not inside
                continue
            if not inside:
                yield number, line

def anchors(path):
    ids = {}
    found = set()
    for _, line in prose(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = ids.get(base, 0)
            ids[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found

broken = []
checked = 0
for page in pages:
    for number, line in prose(page):
        for target in link.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto: and the like: not checked offline
            checked += 1
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
            if not os.path.exists(dest):
                broken.append(f"{page}:{number}: {target}: no file {dest}")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append(f"{page}:{number}: {target}: no heading #{anchor} in {dest}")
for b in broken:
    print("guide: broken link", b, file=sys.stderr)
if broken:
    sys.exit(1)
print(f"guide: {checked} relative links and images in {len(pages)} pages resolve")
EOF
