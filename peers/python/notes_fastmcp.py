# A notes server written with FastMCP 4.1.6 (its own venv, .peers/venv-fastmcp): the gateway's
# real-upstream tests bind tools whose schemas FastMCP generates from these type hints.
"""Notes server `notes-fastmcp`.

Usage: notes_fastmcp.py --dir DIR

Tools (schemas as FastMCP generates them):
  list_notes {}                 {notes: [string]}            (a read)
  add_note {text}               {added, count}               (a write: appends to DIR/notes.txt, fsynced)
  search_notes {query, limit=10} {notes: [string]}           (`default` in its schema: outside the strict profile)
  count_notes {}                int                          (FastMCP wraps it: `x-fastmcp-wrap-result`)
"""

from __future__ import annotations

import argparse
import os

from typing_extensions import TypedDict
from fastmcp import FastMCP

DIR = "."
mcp = FastMCP("notes-fastmcp")


class Notes(TypedDict):
    notes: list[str]


class Added(TypedDict):
    added: str
    count: int


def notes_path() -> str:
    return os.path.join(DIR, "notes.txt")


def read_notes() -> list[str]:
    try:
        with open(notes_path(), encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


@mcp.tool
def list_notes() -> Notes:
    """Lists the notes."""
    return {"notes": read_notes()}


@mcp.tool
def add_note(text: str) -> Added:
    """Adds a note."""
    with open(notes_path(), "a", encoding="utf-8") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())
    return {"added": text, "count": len(read_notes())}


@mcp.tool
def search_notes(query: str, limit: int = 10) -> Notes:
    """Searches the notes."""
    return {"notes": [n for n in read_notes() if query in n][:limit]}


@mcp.tool
def count_notes() -> int:
    """Counts the notes."""
    return len(read_notes())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    DIR = parser.parse_args().dir
    mcp.run(show_banner=False, log_level="WARNING")
