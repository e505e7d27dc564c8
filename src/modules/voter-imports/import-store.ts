import { createReadStream, createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { chmod, readdir, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Kysely } from 'kysely';
import type { Db } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';

/** Bytes written in order under a key, then read back as a stream. */
export interface FileWriter {
  write(chunk: Buffer): Promise<void>;
  end(): Promise<void>;
}

/**
 * Where import jobs keep their files (the upload until the job is done, and its errors.csv). Keys are made
 * by the service (a UUID and a suffix), never by a client.
 */
export interface ImportFileStore {
  writer(key: string): Promise<FileWriter>;
  read(key: string): AsyncIterable<Buffer>;
  remove(key: string): Promise<void>;
  /** Up to `limit` stored keys after `after`, in order (the pruning walks them a batch at a time). */
  keys(after: string, limit: number): Promise<string[]>;
}

/**
 * SQLite: plain files in `imports/` next to the database file (the same disk, and the only process that can
 * run a SQLite job is one on this machine); an in-memory database uses a temporary folder of this process.
 */
export class DirectoryFileStore implements ImportFileStore {
  private dir: string | undefined;
  readonly memory: boolean;

  constructor(private readonly databasePath: string) {
    this.memory = databasePath === ':memory:' || databasePath === '';
  }

  private folder(): string {
    if (!this.dir) {
      this.dir = this.memory
        ? mkdtempSync(join(tmpdir(), 'ces-imports-'))
        : join(dirname(resolve(this.databasePath)), 'imports');
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    }
    return this.dir;
  }

  /** The folder, once a file has been stored (tests). */
  get location(): string | undefined {
    return this.dir;
  }

  private path(key: string): string {
    if (!/^[A-Za-z0-9._-]+$/.test(key)) throw new Error('bad import file key');
    return join(this.folder(), key);
  }

  async writer(key: string): Promise<FileWriter> {
    // Uploads and errors.csv hold voters' personal data: the service's user alone reads them, whatever the umask.
    const out = createWriteStream(this.path(key), { mode: 0o600 });
    await once(out, 'open');
    await chmod(this.path(key), 0o600);
    return {
      write: async (chunk) => {
        if (!out.write(chunk)) await once(out, 'drain');
      },
      end: () =>
        new Promise<void>((done, fail) => out.end((error?: Error | null) => (error ? fail(error) : done()))),
    };
  }

  async *read(key: string): AsyncIterable<Buffer> {
    for await (const chunk of createReadStream(this.path(key))) yield chunk as Buffer;
  }

  async remove(key: string): Promise<void> {
    await rm(this.path(key), { force: true });
  }

  async keys(after: string, limit: number): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.folder());
    } catch (error) {
      if ((error as { code?: string }).code === 'ENOENT') return [];
      throw error;
    }
    return names
      .filter((name) => name > after && /^[A-Za-z0-9._-]+$/.test(name))
      .sort()
      .slice(0, limit);
  }

  /** Removes an in-memory database's temporary folder (its files die with the database). */
  dispose(): void {
    if (this.memory && this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }
}

/** A stored file's chunks on PostgreSQL are about this large. */
const CHUNK_BYTES = 1 << 20;

/**
 * PostgreSQL: chunks of about 1 MiB in `voter_import_files`, so a worker process on another machine reads
 * the upload from the database it already shares (no shared disk to set up). Read one chunk at a time.
 */
export class DatabaseFileStore implements ImportFileStore {
  constructor(private readonly db: Kysely<Database>) {}

  async writer(key: string): Promise<FileWriter> {
    let seq = 0;
    let pending: Buffer[] = [];
    let size = 0;
    const flush = async () => {
      if (size === 0) return;
      const data = Buffer.concat(pending, size);
      pending = [];
      size = 0;
      await this.db.insertInto('voter_import_files').values({ file_key: key, seq: seq++, data }).execute();
    };
    return {
      write: async (chunk) => {
        pending.push(chunk);
        size += chunk.length;
        if (size >= CHUNK_BYTES) await flush();
      },
      end: flush,
    };
  }

  async *read(key: string): AsyncIterable<Buffer> {
    for (let seq = 0; ; seq += 1) {
      const row = await this.db
        .selectFrom('voter_import_files')
        .select('data')
        .where('file_key', '=', key)
        .where('seq', '=', seq)
        .executeTakeFirst();
      if (!row) return;
      yield row.data;
    }
  }

  async remove(key: string): Promise<void> {
    await this.db.deleteFrom('voter_import_files').where('file_key', '=', key).execute();
  }

  async keys(after: string, limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom('voter_import_files')
      .select('file_key')
      .where('seq', '=', 0)
      .where('file_key', '>', after)
      .orderBy('file_key')
      .limit(limit)
      .execute();
    return rows.map((row) => row.file_key);
  }
}

const stores = new WeakMap<Db, ImportFileStore>();

/**
 * The store of a database, one per connection. An in-memory SQLite database's folder is the process's own:
 * it is removed when the database is closed.
 */
export function importFileStore(db: Db): ImportFileStore {
  let store = stores.get(db);
  if (!store) {
    if (db.raw.dialect === 'sqlite') {
      const directory = new DirectoryFileStore(db.raw.sqlite.name);
      if (directory.memory) {
        const close = db.close.bind(db);
        db.close = async () => {
          try {
            await close();
          } finally {
            directory.dispose();
          }
        };
      }
      store = directory;
    } else {
      store = new DatabaseFileStore(db.kysely);
    }
    stores.set(db, store);
  }
  return store;
}
