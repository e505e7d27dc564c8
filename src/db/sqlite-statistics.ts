import type SQLite from 'better-sqlite3';

/**
 * SQLite's planner statistics, taken by `analysis` (`PRAGMA optimize = 0x10002`, `ANALYZE <index>`), kept without
 * ANALYZE's sampled index keys. better-sqlite3's SQLite is built with STAT4: where `sqlite_stat4` holds samples
 * for an index, every statement comparing a bound value with that index's columns is compiled again each time it
 * runs (SQLite re-plans for the value), and nearly every statement binds `workspace_id`. That cost the hot path
 * (`GET /api/voters/{id}`) a fifth of its time; the samples also held voters' names, phones and EPICs, which an
 * erasure had to find. stat1's counts (rows per key of each index) stay, and are what the planner uses.
 */
export function analyze(sqlite: SQLite.Database, analysis: string): void {
  sqlite.exec(analysis);
  dropSamples(sqlite);
}

/** Empties `sqlite_stat4` (when there is one) and has the connection's planner read the statistics again. */
export function dropSamples(sqlite: SQLite.Database): void {
  const samples = sqlite
    .prepare(`SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat4'`)
    .pluck()
    .get();
  if (Number(samples) > 0) sqlite.exec('DELETE FROM sqlite_stat4; ANALYZE sqlite_schema');
}

/** Has the connection's planner read the statistics again (another connection took them). */
export function reloadStatistics(sqlite: SQLite.Database): void {
  sqlite.exec('ANALYZE sqlite_schema');
}
