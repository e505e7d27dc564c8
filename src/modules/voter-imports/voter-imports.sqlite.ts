import { resolve } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { startThread } from '../../lib/threads.ts';
import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type { WriteTurns } from '../../db/sqlite-turns.ts';
import type { FairGate } from '../../lib/fair-gate.ts';
import { reloadStatistics } from '../../db/sqlite-statistics.ts';
import { ChunkPacer, yieldToOthers } from '../../lib/pacing.ts';
import { type AuditEntry, recordAudit } from '../audit/audit.repository.ts';
import type { ImportAnswer, ImportCall, ImportStatements, ImportThreadData } from './import-statements.ts';
import { ImportStatements as LocalStatements } from './import-statements.ts';
import {
  type StagedVoter,
  type VoterImport,
  type ImportProblem,
  settleRollNumbers,
  StagedKinds,
  ANALYZE_AFTER_ROWS,
  newIdentities,
} from './voter-imports.sql.ts';

/**
 * An import on SQLite: staged into a TEMP table, applied chunk by chunk (import-statements.ts). On a database
 * file the statements run in a thread of the import's own with its own connection; on an in-memory database
 * (the tests'), which no other connection can open, on the app's connection in its turn.
 */

let stagingSeq = 0;
/** Lines applied by the first transaction; the next ones are sized by time (ChunkPacer). */
const SQLITE_APPLY_FIRST_CHUNK = 1_000;
/**
 * A chunk's time and most lines. On the app's connection a chunk holds the whole process (every request waits
 * for it), so it is short, and the import pays for it: each commit writes again the pages of every index the
 * chunk touched, and 200,000 voters took 23.7 s in chunks of 70 ms against 6.5 s in chunks of 5 s. In the
 * import's thread a chunk holds only the write lock: the app goes on serving reads, and a write of the app's
 * waits for the chunk to end (at most its time; db/sqlite-turns.ts), without holding up anything else.
 * 500 ms: the apply took 15.3 s at 250 ms, 8.6 s at 500 and 7.0 s at 1 s (bench/results/record-2026-12-08.md).
 */
const CHUNKS = {
  app: { ms: 70, max: 20_000 },
  thread: { ms: 500, max: 200_000 },
};
const statementsModule = new URL('./import-statements', import.meta.url);

type Methods = {
  [K in keyof ImportStatements]: ImportStatements[K] extends (...args: infer A) => infer R
    ? (...args: A) => R
    : never;
};
/** A method of ImportStatements called where the import's statements run. */
type Call = <K extends keyof Methods>(
  method: K,
  ...args: Parameters<Methods[K]>
) => Promise<ReturnType<Methods[K]>>;

const threadCounts = { started: 0, running: 0 };

/** Import threads started, and still running, in this process (tests). */
export function importThreadCounts(): { started: number; running: number } {
  return { ...threadCounts };
}

export async function startSqliteImport(
  kysely: Kysely<Database>,
  raw: { sqlite: SQLite.Database; turns: WriteTurns; importThreads: FairGate },
  workspaceId: number,
): Promise<VoterImport> {
  const { sqlite, turns } = raw;
  const table = `temp.voters_import_${++stagingSeq}`;
  const locked = <T>(fn: () => T): Promise<T> => kysely.connection().execute(async () => fn());
  // A thread, its connection and its page cache are held for as long as the file takes: at most
  // DB_BULK_POOL_SIZE of them at once, shared by workspace (Db.raw.importThreads).
  const connection = sqlite.memory
    ? new AppConnection(new LocalStatements(sqlite, table, workspaceId), locked)
    : new ImportThread(
        { file: resolve(sqlite.name), table, workspaceId },
        turns,
        await raw.importThreads.acquire(workspaceId),
      );
  const staging = new SqliteImport(kysely, sqlite, locked, connection, table, workspaceId);
  try {
    await connection.call('create');
  } catch (error) {
    await connection.end();
    throw error;
  }
  return staging;
}

/** Where an import's statements run. */
interface ImportConnection {
  readonly call: Call;
  /** A call that writes the database (not only the staging table): in the import's turn (db/sqlite-turns.ts). */
  readonly write: Call;
  readonly chunks: { ms: number; max: number };
  /** Ends the thread (once its calls are answered); nothing on the app's connection. */
  end(): Promise<void>;
}

/** The app's own connection, in its turn (Kysely's connection lock). */
class AppConnection implements ImportConnection {
  readonly chunks = CHUNKS.app;
  constructor(
    private readonly statements: LocalStatements,
    private readonly locked: <T>(fn: () => T) => Promise<T>,
  ) {}

  call: Call = (method, ...args) =>
    this.locked(() => (this.statements[method] as (...a: unknown[]) => never).apply(this.statements, args));

  /** The app's own connection writes in its turn already. */
  write: Call = this.call;

  async end(): Promise<void> {}
}

/** A thread of the import's own (lib/threads.ts), with its own connection to the database file. */
class ImportThread implements ImportConnection {
  readonly chunks = CHUNKS.thread;
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve: (v: never) => void; reject: (e: unknown) => void }>();
  private nextId = 0;
  private failure: Error | undefined;
  private readonly exited: Promise<void>;

  constructor(
    data: ImportThreadData,
    private readonly turns: WriteTurns,
    leave: () => void,
  ) {
    try {
      this.worker = startThread(statementsModule, 'runImportThread', data);
    } catch (error) {
      leave();
      throw error;
    }
    threadCounts.started += 1;
    threadCounts.running += 1;
    this.worker.on('message', (answer: ImportAnswer) => {
      const waiter = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      if (!answer.error) waiter?.resolve(answer.result as never);
      else waiter?.reject(Object.assign(new Error(answer.error.message), answer.error));
    });
    this.worker.on('error', (error) => this.fail(error));
    this.exited = new Promise((resolve) =>
      this.worker.once('exit', (code) => {
        threadCounts.running -= 1;
        leave();
        this.fail(new Error(`the import's thread stopped (exit code ${code})`));
        resolve();
      }),
    );
  }

  call: Call = (method, ...args) => {
    if (this.failure) return Promise.reject(this.failure);
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: never) => void, reject });
      this.worker.postMessage({ id, method, args } satisfies ImportCall);
    });
  };

  write: Call = (method, ...args) => this.turns.importWrite(() => this.call(method, ...args));

  async end(): Promise<void> {
    if (!this.failure) this.worker.postMessage({ id: 0, method: null, args: [] } satisfies ImportCall);
    await this.exited;
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const waiter of this.waiting.values()) waiter.reject(this.failure);
    this.waiting.clear();
  }
}

class SqliteImport implements VoterImport {
  private readonly ws: string;
  private readonly seen = new StagedKinds();
  private lastLine = 0;
  private problems: ImportProblem[] = [];
  private ended = false;

  constructor(
    private readonly kysely: Kysely<Database>,
    private readonly sqlite: SQLite.Database,
    private readonly locked: <T>(fn: () => T) => Promise<T>,
    private readonly connection: ImportConnection,
    private readonly table: string,
    workspaceId: number,
  ) {
    this.ws = String(Math.trunc(workspaceId));
  }

  skipped(): ImportProblem[] {
    return this.problems;
  }

  async stage(rows: readonly StagedVoter[]): Promise<void> {
    if (rows.length === 0) return;
    this.seen.add(rows);
    await this.connection.call('stage', rows);
    this.lastLine = rows[rows.length - 1]!.line;
  }

  async apply(now: string, audit?: (imported: number) => AuditEntry): Promise<{ imported: number }> {
    const { call, write } = this.connection;
    try {
      await this.settle();
      let imported: number;
      await write(
        'beginApply',
        { roll: this.seen.roll, side: this.seen.side },
        now,
        this.lastLine >= SQLITE_APPLY_FIRST_CHUNK,
      );
      try {
        imported = await this.applyChunks();
      } finally {
        await write('endApply');
        await call('drop');
      }
      // An import changes the shape of the tables (the voters, their tags and custom field values): fresh
      // statistics keep the planner on the right indexes.
      // A large one is analyzed in full, one index at a time with other requests served between two (ANALYZE
      // of the whole table held the process for about a second at a million voters); after any other,
      // `optimize` analyzes the tables whose size changed much or that have no statistics yet (the first
      // import into a new database: without them every search took 1.3-2.6 s until a restart).
      if (audit) await recordAudit(this.kysely, audit(imported));
      if (this.lastLine >= ANALYZE_AFTER_ROWS) {
        for (const table of ['voters', 'voter_tags', 'voter_field_values'])
          for (const index of await call('indexes', table)) {
            await write('exec', `ANALYZE "${index.replace(/"/g, '""')}"`);
            await yieldToOthers();
          }
        await write('dropSamples');
      } else await write('analyze', 'PRAGMA optimize = 0x10002');
      // Statistics another connection took are read again by this one's planner.
      if (this.connection instanceof ImportThread) await this.locked(() => reloadStatistics(this.sqlite));
      return { imported };
    } finally {
      await this.end();
    }
  }

  async preview(): Promise<{ imported: number }> {
    try {
      await this.settle();
      return { imported: await this.connection.call('value', newIdentities(this.table, this.ws)) };
    } finally {
      await this.abort();
    }
  }

  /** Drops the staging table and ends the import's thread (also once the rows are applied). */
  async abort(): Promise<void> {
    if (this.ended) return;
    try {
      await this.connection.call('drop');
    } finally {
      await this.end();
    }
  }

  private async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    await this.connection.end();
  }

  /**
   * The staged rows into the voters, chunk by chunk by line, each chunk sized to the connection's time (CHUNKS),
   * other requests running between two. The number of voters created.
   */
  private async applyChunks(): Promise<number> {
    let imported = 0;
    const { ms, max } = this.connection.chunks;
    const pacer = new ChunkPacer(SQLITE_APPLY_FIRST_CHUNK, 100, max, ms);
    for (let from = 0; from <= this.lastLine;) {
      const size = pacer.size;
      const { result, ms: took } = await this.connection.write('applyChunk', from, from + size);
      imported += result;
      from += size;
      if (from <= this.lastLine) await pacer.pause(size, took);
    }
    return imported;
  }

  /** The roll numbers settled before anything is applied (see settleRollNumbers). */
  private async settle(): Promise<void> {
    const { table } = this;
    const { call } = this.connection;
    if (this.seen.side)
      await call('exec', `CREATE INDEX ${table}_identity ON ${table.slice(5)} (phone, name_key, line)`);
    if (!this.seen.roll) return;
    await call(
      'exec',
      `CREATE INDEX ${table}_epic ON ${table.slice(5)} (epic_number);
       CREATE INDEX ${table}_serial ON ${table.slice(5)} (part_number, serial_number)`,
    );
    this.problems = await settleRollNumbers((text) => call('statement', text), table, this.ws, []);
  }
}
