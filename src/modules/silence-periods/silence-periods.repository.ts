import { pageOf } from '../../db/paginate.ts';
import type { SilencePeriodRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { withPlaceAliases } from '../places/places.repository.ts';

export async function insertSilencePeriod(
  db: Executor,
  workspaceId: number,
  values: {
    constituency: string;
    constituency_key: string;
    starts_at: string;
    ends_at: string;
    reason: string | null;
    created_at: string;
  },
): Promise<SilencePeriodRow> {
  return db
    .insertInto('silence_periods')
    .values({ workspace_id: workspaceId, ...values })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findSilencePeriod(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<SilencePeriodRow | undefined> {
  return db
    .selectFrom('silence_periods')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function deleteSilencePeriod(db: Executor, workspaceId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('silence_periods')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

export async function listSilencePeriods(
  db: Executor,
  workspaceId: number,
  filters: { constituencyKey?: string | undefined },
  page: number,
  perPage: number,
): Promise<{ rows: SilencePeriodRow[]; total: number }> {
  const base = db
    .selectFrom('silence_periods')
    .where('workspace_id', '=', workspaceId)
    .$if(filters.constituencyKey !== undefined, (q) =>
      q.where('constituency_key', '=', filters.constituencyKey as string),
    );
  return pageOf(base, (q) => q.selectAll().orderBy('starts_at', 'desc').orderBy('id', 'desc'), page, perPage);
}

/**
 * The constituency keys of a workspace with a silence period in force at `at`, each with the other names of
 * its place (a period for "Varanasi" holds for voters of "वाराणसी" where the place has that alias).
 */
export async function silencedConstituencies(
  db: Executor,
  workspaceId: number,
  at: string,
): Promise<string[]> {
  const rows = await db
    .selectFrom('silence_periods')
    .select('constituency_key')
    .distinct()
    .where('workspace_id', '=', workspaceId)
    .where('starts_at', '<=', at)
    .where('ends_at', '>', at)
    .execute();
  return withPlaceAliases(
    db,
    workspaceId,
    'constituency',
    rows.map((r) => r.constituency_key),
  );
}

/** When the last silence period of the workspace in force at `at` ends; undefined when none is. */
export async function silenceInForceUntil(
  db: Executor,
  workspaceId: number,
  at: string,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('silence_periods')
    .select((eb) => eb.fn.max('ends_at').as('until'))
    .where('workspace_id', '=', workspaceId)
    .where('starts_at', '<=', at)
    .where('ends_at', '>', at)
    .executeTakeFirst();
  return row?.until ? new Date(row.until).toISOString() : undefined;
}

/** Of `phones`, those of a voter of the workspace in one of `constituencyKeys`. */
export async function phonesInConstituencies(
  db: Executor,
  workspaceId: number,
  phones: readonly string[],
  constituencyKeys: readonly string[],
): Promise<Set<string>> {
  if (phones.length === 0 || constituencyKeys.length === 0) return new Set();
  const rows = await db
    .selectFrom('voters')
    .select('phone')
    .where('workspace_id', '=', workspaceId)
    .where('phone', 'in', [...new Set(phones)])
    .where('constituency_key', 'in', [...constituencyKeys])
    .execute();
  return new Set(rows.flatMap((r) => (r.phone ? [r.phone] : [])));
}
