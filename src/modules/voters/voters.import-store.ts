import { createReadStream, createWriteStream, mkdirSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
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
}

/**
 * SQLite: plain files in `imports/` next to the database file (the same disk, and the only process that can
 * run a SQLite job is one on this machine); an in-memory database uses a temporary folder of this process.
 */
export class DirectoryFileStore implements ImportFileStore {
  private dir: string | undefined;

  constructor(private readonly databasePath: string) {}

  private folder(): string {
    if (!this.dir) {
      const memory = this.databasePath === ':memory:' || this.databasePath === '';
      this.dir = memory
        ? mkdtempSync(join(tmpdir(), 'ces-imports-'))
        : join(dirname(resolve(this.databasePath)), 'imports');
      mkdirSync(this.dir, { recursive: true });
    }
    return this.dir;
  }

  private path(key: string): string {
    if (!/^[A-Za-z0-9._-]+$/.test(key)) throw new Error('bad import file key');
    return join(this.folder(), key);
  }

  async writer(key: string): Promise<FileWriter> {
    const out = createWriteStream(this.path(key));
    await once(out, 'open');
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
}

const stores = new WeakMap<Db, ImportFileStore>();

/** The store of a database, one per connection (an in-memory SQLite database's folder is the process's own). */
export function importFileStore(db: Db): ImportFileStore {
  let store = stores.get(db);
  if (!store) {
    store =
      db.raw.dialect === 'sqlite'
        ? new DirectoryFileStore(db.raw.sqlite.name)
        : new DatabaseFileStore(db.kysely);
    stores.set(db, store);
  }
  return store;
}
