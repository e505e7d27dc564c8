import {
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type QueryCompiler,
  type QueryResult,
  SqliteDialect,
  type SqliteDialectConfig,
  type TransactionSettings,
} from 'kysely';

/**
 * SQLite lets one connection write at a time. A voter import writes through a thread with a connection of its own
 * (modules/voter-imports), in transactions of a quarter of a second or more; the app's connection writes in
 * between. Left to SQLite, a write of the app's that met an import's transaction would wait in SQLite's busy
 * handler, which sleeps inside the call and so stops the whole process (every request, not only the write); and
 * a transaction of the app's that read before an import's commit and wrote after it would fail (SQLITE_BUSY:
 * its snapshot is no longer the latest).
 *
 * So they take turns here, asynchronously: the app's writes (a statement that is not a read, or a whole
 * transaction) wait while an import's transaction runs, and an import's transaction waits until the app's
 * writes under way have ended; the app's writes that come while an import waits queue behind it, so that neither
 * side can starve the other. Reads never wait (WAL: a reader sees the last commit). In memory, per process:
 * SQLite serves one process (docs/deployment.md).
 */
export class WriteTurns {
  private appWriting = 0;
  private importing = false;
  private readonly appWaiting: Array<() => void> = [];
  private readonly importWaiting: Array<() => void> = [];

  /** Waits for the app's turn to write; call `appDone` once the write (or transaction) has ended. */
  appWrite(): Promise<void> {
    if (!this.importing && this.importWaiting.length === 0) {
      this.appWriting += 1;
      return Promise.resolve();
    }
    return new Promise((resolve) =>
      this.appWaiting.push(() => {
        this.appWriting += 1;
        resolve();
      }),
    );
  }

  appDone(): void {
    this.appWriting -= 1;
    if (this.appWriting === 0) this.next();
  }

  /** Runs `work` (an import's transaction, in its thread) in the import's turn. */
  async importWrite<T>(work: () => Promise<T>): Promise<T> {
    if (this.importing || this.appWriting > 0 || this.importWaiting.length > 0)
      await new Promise<void>((resolve) => {
        this.importWaiting.push(resolve);
        this.next();
      });
    else this.importing = true;
    try {
      return await work();
    } finally {
      this.importing = false;
      this.next();
    }
  }

  /** Whose turn it is now: the app's writes waiting (all at once), else the next import's transaction. */
  private next(): void {
    if (this.importing || this.appWriting > 0) return;
    if (this.appWaiting.length > 0) {
      for (const start of this.appWaiting.splice(0)) start();
      return;
    }
    const start = this.importWaiting.shift();
    if (start) {
      this.importing = true;
      start();
    }
  }
}

/** Statements that cannot write the database: a SELECT, a PRAGMA, a WITH that names no write. */
const isRead = (text: string) =>
  /^\s*(select|pragma)\b/i.test(text) ||
  (/^\s*with\b/i.test(text) && !/\b(insert|update|delete|replace)\b/i.test(text));

/** Kysely's SqliteDialect with the app's writes taking turns (WriteTurns). */
export class TurnTakingSqliteDialect extends SqliteDialect {
  constructor(
    config: SqliteDialectConfig,
    private readonly turns: WriteTurns,
  ) {
    super(config);
  }

  override createDriver(): Driver {
    return new TurnTakingDriver(super.createDriver(), this.turns);
  }
}

class TurnTakingConnection implements DatabaseConnection {
  /** In a transaction, which took its turn at its start. */
  inTransaction = false;

  constructor(
    readonly inner: DatabaseConnection,
    private readonly turns: WriteTurns,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.inTransaction || isRead(query.sql)) return this.inner.executeQuery<R>(query);
    await this.turns.appWrite();
    try {
      return await this.inner.executeQuery<R>(query);
    } finally {
      this.turns.appDone();
    }
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.inner.streamQuery<R>(query, chunkSize);
  }
}

class TurnTakingDriver implements Driver {
  private connection: TurnTakingConnection | undefined;

  constructor(
    private readonly inner: Driver,
    private readonly turns: WriteTurns,
  ) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await this.inner.acquireConnection();
    // SQLite's driver has one connection: wrapped once.
    if (this.connection?.inner !== inner) this.connection = new TurnTakingConnection(inner, this.turns);
    return this.connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const c = connection as TurnTakingConnection;
    await this.turns.appWrite();
    try {
      await this.inner.beginTransaction(c.inner, settings);
      c.inTransaction = true;
    } catch (error) {
      this.turns.appDone();
      throw error;
    }
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    const c = connection as TurnTakingConnection;
    return this.end(c, () => this.inner.commitTransaction(c.inner));
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const c = connection as TurnTakingConnection;
    return this.end(c, () => this.inner.rollbackTransaction(c.inner));
  }

  async savepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    await this.inner.savepoint!((connection as TurnTakingConnection).inner, name, compile);
  }

  async rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    await this.inner.rollbackToSavepoint!((connection as TurnTakingConnection).inner, name, compile);
  }

  async releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    await this.inner.releaseSavepoint!((connection as TurnTakingConnection).inner, name, compile);
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection((connection as TurnTakingConnection).inner);
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }

  private async end(c: TurnTakingConnection, finish: () => Promise<void>): Promise<void> {
    try {
      await finish();
    } finally {
      if (c.inTransaction) {
        c.inTransaction = false;
        this.turns.appDone();
      }
    }
  }
}
