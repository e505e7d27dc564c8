import { sql } from 'kysely';
import type { MessageChannel } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { filteredVoters, type VoterFilters, withPlaces } from '../voters/voters.search.ts';

export interface SegmentCounts {
  total: number;
  optedOut: number;
  /** Not opted out, and a voter of a silenced constituency (phone channels only). */
  silenced: number;
  /** Segment voters with no address for the channel (a voter from the roll has no phone). */
  noAddress: number;
}

/**
 * A segment's distinct addresses for the channel (leaving out `exclude`, counted apart), and how many of them
 * are opted out, or in one of `silencedKeys` (constituencies in a silence period). Counted in the database.
 */
export async function segmentConsentCounts(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  filters: VoterFilters,
  exclude: readonly string[],
  silencedKeys: readonly string[],
): Promise<SegmentCounts> {
  const column = channel === 'email' ? ('voters.email' as const) : ('voters.phone' as const);
  const placed = await withPlaces(db, workspaceId, filters);
  const missing = await filteredVoters(db, workspaceId, placed)
    .where(column, 'is', null)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirst();
  const base = filteredVoters(db, workspaceId, placed)
    .where(column, 'is not', null)
    .$if(exclude.length > 0, (q) => q.where(column, 'not in', [...exclude]));
  const optedOut = sql<boolean>`exists (select 1 from opt_outs o where o.workspace_id = ${workspaceId}
    and o.address = ${sql.ref(column)} and o.channel in (${channel}, 'all'))`;
  const count = async (query: typeof base) => {
    const row = await query
      .select(sql<number>`count(distinct ${sql.ref(column)})`.as('n'))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  };
  const total = await count(base);
  const opted = await count(base.where(optedOut));
  let silenced = 0;
  if (channel !== 'email' && silencedKeys.length > 0) {
    const inSilence = sql<boolean>`exists (select 1 from voters v where v.workspace_id = ${workspaceId}
      and v.phone = ${sql.ref(column)} and v.constituency_key in (${sql.join([...silencedKeys])}))`;
    silenced = await count(base.where(sql<boolean>`not ${optedOut}`).where(inSilence));
  }
  return { total, optedOut: opted, silenced, noAddress: Number(missing?.n ?? 0) };
}
