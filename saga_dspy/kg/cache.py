"""On-disk cache of successful query results, keyed by (endpoint, query, row cap).

Errors and timeouts are never stored: a transient failure must not become permanent."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from .results import QueryResult, parse_sparql_json


class ResultCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS result(key TEXT PRIMARY KEY, value TEXT)")
        self._db.commit()

    @staticmethod
    def key(endpoint_id: str, query: str, row_cap: int) -> str:
        return hashlib.sha256(f"{endpoint_id}\n{row_cap}\n{query}".encode()).hexdigest()

    def get(self, key: str) -> QueryResult | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM result WHERE key=?", (key,)).fetchone()
        return parse_sparql_json(json.loads(row[0])) if row else None

    def put(self, key: str, result: QueryResult) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO result VALUES (?,?)", (key, json.dumps(result.to_json())))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM result").fetchone()[0]
