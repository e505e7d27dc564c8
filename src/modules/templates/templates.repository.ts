import type { VoterFields } from '../sending/render.ts';
import { pageOf } from '../../db/paginate.ts';
import type { TemplateRow, TemplateTable } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import type { Insertable, Updateable } from 'kysely';

export async function insertTemplate(db: Executor, values: Insertable<TemplateTable>): Promise<TemplateRow> {
  return db.insertInto('templates').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function findTemplate(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<TemplateRow | undefined> {
  return db
    .selectFrom('templates')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findTemplates(
  db: Executor,
  workspaceId: number,
  ids: readonly number[],
): Promise<TemplateRow[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('templates')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', 'in', [...new Set(ids)])
    .execute();
}

export async function updateTemplate(
  db: Executor,
  workspaceId: number,
  id: number,
  values: Updateable<TemplateTable>,
): Promise<TemplateRow | undefined> {
  return db
    .updateTable('templates')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteTemplate(db: Executor, workspaceId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('templates')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

export async function listTemplates(
  db: Executor,
  workspaceId: number,
  filters: { channel?: MessageChannel | undefined },
  page: number,
  perPage: number,
): Promise<{ rows: TemplateRow[]; total: number }> {
  const base = db
    .selectFrom('templates')
    .where('workspace_id', '=', workspaceId)
    .$if(filters.channel !== undefined, (q) => q.where('channel', '=', filters.channel as MessageChannel));
  return pageOf(base, (q) => q.selectAll().orderBy('id', 'desc'), page, perPage);
}

/**
 * The voters of a workspace by phone (or email, for the email channel), for rendering: their name, own-script
 * name, and places by the workspace's name for them (a roll's `WARD 12` renders as the ward's own name, "Ward 12
 * Lanka", when a place of the workspace holds that spelling), else as the roll spells them.
 */
export async function votersByAddress(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  addresses: readonly string[],
): Promise<Map<string, VoterFields>> {
  if (addresses.length === 0) return new Map();
  const column = channel === 'email' ? 'email' : 'phone';
  const rows = await db
    .selectFrom('voters')
    .leftJoin('place_names as nc', (join) =>
      join
        .onRef('nc.workspace_id', '=', 'voters.workspace_id')
        .on('nc.kind', '=', 'constituency')
        .onRef('nc.key', '=', 'voters.constituency_key'),
    )
    .leftJoin('places as pc', 'pc.id', 'nc.place_id')
    .leftJoin('place_names as nb', (join) =>
      join
        .onRef('nb.workspace_id', '=', 'voters.workspace_id')
        .on('nb.kind', '=', 'booth')
        .onRef('nb.key', '=', 'voters.booth_key'),
    )
    .leftJoin('places as pb', 'pb.id', 'nb.place_id')
    .leftJoin('place_names as nw', (join) =>
      join
        .onRef('nw.workspace_id', '=', 'voters.workspace_id')
        .on('nw.kind', '=', 'ward')
        .onRef('nw.key', '=', 'voters.ward_key'),
    )
    .leftJoin('places as pw', 'pw.id', 'nw.place_id')
    .where('voters.workspace_id', '=', workspaceId)
    .where(`voters.${column}`, 'in', [...new Set(addresses)])
    .select((eb) => [
      'voters.phone',
      'voters.email',
      'voters.name',
      'voters.name_local',
      'voters.id',
      eb.fn.coalesce('pc.name', 'voters.constituency').as('constituency'),
      eb.fn.coalesce('pb.name', 'voters.booth').as('booth'),
      eb.fn.coalesce('pw.name', 'voters.ward').as('ward'),
    ])
    .orderBy('voters.id')
    .execute();
  const byAddress = new Map<string, VoterFields>();
  for (const r of rows) {
    const key = column === 'email' ? r.email : r.phone;
    // Several voters may share a phone: the first (oldest) one's record is used.
    if (key && !byAddress.has(key))
      byAddress.set(key, {
        name: r.name,
        name_local: r.name_local,
        constituency: r.constituency,
        booth: r.booth,
        ward: r.ward,
      });
  }
  return byAddress;
}

/** A queued message's rendered text and its cost. */
export async function setRendered(
  db: Executor,
  id: number,
  body: string,
  cost: number,
  now: string,
): Promise<void> {
  await db
    .updateTable('messages')
    .set({ body, cost, updated_at: now })
    .where('id', '=', id)
    .where('status', '=', 'queued')
    .execute();
}
