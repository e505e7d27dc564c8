import type { Db } from '../../db/connect.ts';
import { startSqliteImport } from './voter-imports.sqlite.ts';
import { startPostgresImport } from './voter-imports.postgres.ts';
import type { VoterImport } from './voter-imports.sql.ts';

export type { ImportProblem, StagedVoter, VoterImport } from './voter-imports.sql.ts';

/** Starts an import's writes on the workspace's database (voter-imports.sql.ts says what they are). */
export async function startVoterImport(db: Db, workspaceId: number): Promise<VoterImport> {
  return db.raw.dialect === 'sqlite'
    ? startSqliteImport(db.kysely, db.raw, workspaceId)
    : startPostgresImport(db.kysely, db.raw.bulkFor, workspaceId);
}
