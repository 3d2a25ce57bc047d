"""On-disk cache of successful query results, keyed by (endpoint, query, row cap); an entry is at most
`max_entry_bytes` of SPARQL-JSON (the endpoint passes its result cap: nothing larger ever reaches it).

Errors and timeouts are never stored: a transient failure must not become permanent.
Neither may a damaged cache: a corrupt row is dropped and read as a miss, and a corrupt
database file is set aside and started afresh (or, failing that, the cache is off)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import threading
import time
from pathlib import Path

from .results import QueryResult, parse_sparql_json


class ResultCache:
    def __init__(self, path: Path, max_entry_bytes: int = 64 * 2**20):
        self.path = Path(path)
        self.max_entry_bytes = max_entry_bytes
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            print(f"warning: result cache {self.path} is unreadable ({exc}); moved to {aside.name}", file=sys.stderr)
            try:
                self.path.replace(aside)
                self._db = self._open()
            except (OSError, sqlite3.DatabaseError):
                self._db = None

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS result(key TEXT PRIMARY KEY, value TEXT)")
            db.execute("SELECT COUNT(*) FROM result").fetchone()
            db.commit()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    @staticmethod
    def key(endpoint_id: str, query: str, row_cap: int) -> str:
        return hashlib.sha256(f"{endpoint_id}\n{row_cap}\n{query}".encode()).hexdigest()

    def get(self, key: str) -> QueryResult | None:
        if self._db is None:
            return None
        with self._lock:
            try:
                row = self._db.execute("SELECT value FROM result WHERE key=?", (key,)).fetchone()
            except sqlite3.DatabaseError:
                return None
        if not row:
            return None
        try:
            return parse_sparql_json(json.loads(row[0]))
        except (TypeError, ValueError):  # a damaged row: forget it, run the query again
            with self._lock:
                try:
                    self._db.execute("DELETE FROM result WHERE key=?", (key,))
                    self._db.commit()
                except sqlite3.DatabaseError:
                    pass
            return None

    def put(self, key: str, result: QueryResult) -> None:
        """Store a result, unless its entry would pass `max_entry_bytes` (then it is simply not cached)."""
        if self._db is None:
            return
        value = json.dumps(result.to_json())
        if len(value) > self.max_entry_bytes:
            return
        with self._lock:
            try:
                self._db.execute("INSERT OR REPLACE INTO result VALUES (?,?)", (key, value))
                self._db.commit()
            except sqlite3.DatabaseError:
                pass

    def __len__(self) -> int:
        if self._db is None:
            return 0
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM result").fetchone()[0]
