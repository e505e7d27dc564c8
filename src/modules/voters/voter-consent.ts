import { sql } from 'kysely';
import type { VoterRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { nowIso } from '../../db/connect.ts';
import type { ConsentSource, ConsentStatus } from '../../domain.ts';

/** Which voters a consent change is for: some by id, or every voter of the roll with an address (phone or email). */
export type ConsentTarget = { voterIds: readonly number[] } | { address: string };

/** The version of the workspace's privacy notice now (null: it has written none). */
export async function noticeVersion(db: Executor, workspaceId: number): Promise<number | null> {
  const row = await db
    .selectFrom('privacy_notices')
    .select('version')
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  return row ? Number(row.version) : null;
}

/**
 * Records consent given or withdrawn (the contract's fourth part): on the voters named, or on every voter with
 * the address (a STOP from a phone withdraws for each voter with that phone), with the notice version in force.
 * Returns how many voters changed.
 */
export async function recordConsent(
  db: Executor,
  workspaceId: number,
  target: ConsentTarget,
  status: Exclude<ConsentStatus, 'unknown'>,
  source: ConsentSource,
  options: {
    at?: string;
    /** Left as it is on a voter whose consent was recorded after `at` (a visit made offline, synced late). */
    unlessNewer?: boolean;
  } = {},
): Promise<number> {
  const at = options.at ?? nowIso();
  if ('voterIds' in target && target.voterIds.length === 0) return 0;
  const version = await noticeVersion(db, workspaceId);
  const result = await db
    .updateTable('voters')
    .set({ consent_status: status, consent_notice_version: version, consent_source: source, consent_at: at })
    .where('workspace_id', '=', workspaceId)
    .where((eb) =>
      'voterIds' in target
        ? eb('id', 'in', [...target.voterIds])
        : eb(target.address.includes('@') ? 'email' : 'phone', '=', target.address),
    )
    .$if(options.unlessNewer === true, (q) =>
      q.where((eb) => eb.or([eb('consent_at', 'is', null), eb('consent_at', '<=', at)])),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows ?? 0);
}

/** The voter's consent as the API shows it. */
export function consentView(
  row: Pick<VoterRow, 'consent_status' | 'consent_notice_version' | 'consent_source' | 'consent_at'>,
) {
  return {
    status: row.consent_status as ConsentStatus,
    notice_version: row.consent_notice_version,
    source: row.consent_source as ConsentSource | null,
    at: row.consent_at,
  };
}

/**
 * An import's consent column, once its rows are applied (source `import`): each row's voter found as the import
 * knows it, by phone and name or by EPIC number, 300 rows a statement.
 */
export async function recordImportedConsent(
  db: Executor,
  workspaceId: number,
  rows: readonly {
    status: 'given' | 'withdrawn';
    phone: string | null;
    name_key: string;
    epic_number: string | null;
  }[],
): Promise<void> {
  if (rows.length === 0) return;
  const version = await noticeVersion(db, workspaceId);
  const at = nowIso();
  for (const status of ['given', 'withdrawn'] as const) {
    const some = rows.filter((r) => r.status === status);
    for (let i = 0; i < some.length; i += 300) {
      const chunk = some.slice(i, i + 300);
      const byPhone = chunk.filter((r) => r.phone !== null);
      const epics = chunk
        .filter((r) => r.phone === null && r.epic_number !== null)
        .map((r) => r.epic_number!);
      await db
        .updateTable('voters')
        .set({
          consent_status: status,
          consent_notice_version: version,
          consent_source: 'import',
          consent_at: at,
        })
        .where('workspace_id', '=', workspaceId)
        .where((eb) =>
          eb.or([
            ...byPhone.map((r) => eb.and([eb('phone', '=', r.phone), eb('name_key', '=', r.name_key)])),
            ...(epics.length > 0 ? [eb('epic_number', 'in', epics)] : []),
            sql<boolean>`1 = 0`,
          ]),
        )
        .execute();
    }
  }
}
