import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { DirectoryFileStore } from '../src/modules/voter-imports/import-store.ts';

const mode = (path: string) => statSync(path).mode & 0o777;

/**
 * Files that hold personal data (the SQLite database, its WAL and shared memory, stored imports and their
 * errors.csv) are readable by the service's user alone, whatever the umask: under `npm start` they were 0644.
 */
describe('files with personal data are 0600 whatever the umask', () => {
  let dir: string;
  let umask: number;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ces-modes-'));
    umask = process.umask(0);
  });
  afterAll(() => {
    process.umask(umask);
    rmSync(dir, { recursive: true, force: true });
  });

  it('the SQLite database, its -wal and -shm, and a file an older release left 0644', async () => {
    const file = join(dir, 'data', 'campaign.db');
    const db = connect(`sqlite:${file}`);
    await migrateToLatest(db);
    await sql`insert into workspaces (name, created_at) values ('w', '2026-11-25T00:00:00Z')`.execute(
      db.kysely,
    );
    for (const path of [file, `${file}-wal`, `${file}-shm`]) expect(mode(path), path).toBe(0o600);
    expect(mode(join(dir, 'data'))).toBe(0o700);
    await db.close();

    const old = join(dir, 'old.db');
    const first = connect(`sqlite:${old}`);
    await migrateToLatest(first);
    await first.close();
    const { chmodSync } = await import('node:fs');
    chmodSync(old, 0o644);
    const again = connect(`sqlite:${old}`);
    expect(mode(old)).toBe(0o600);
    await again.close();
  });

  it('a stored import and its errors.csv', async () => {
    const store = new DirectoryFileStore(join(dir, 'data', 'campaign.db'));
    for (const key of ['job-1', 'job-1.errors']) {
      const writer = await store.writer(key);
      await writer.write(Buffer.from('name,phone\n'));
      await writer.end();
      expect(mode(join(store.location!, key))).toBe(0o600);
    }
    expect(mode(store.location!)).toBe(0o700);
  });
});
