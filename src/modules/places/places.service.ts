import type { Kysely, Transaction } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Database, PlaceRow } from '../../db/schema.ts';
import { pageResult } from '../../domain.ts';
import { AppError, type FieldErrors, notFound, validationError } from '../../errors.ts';
import { placeKey, type PlaceKind, placeKinds, placeText } from '../../lib/place.ts';
import type { Executor } from '../../db/types.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import {
  deletePlace,
  findPlace,
  insertPlace,
  kindsWithPlaces,
  listPlaces,
  placesHolding,
  setPlaceNames,
  updatePlace,
} from './places.repository.ts';
import { placeNameLimits } from './places.schemas.ts';

export function placeItem(row: PlaceRow) {
  return {
    id: Number(row.id),
    kind: row.kind as PlaceKind,
    name: row.name,
    aliases: JSON.parse(row.aliases) as string[],
    code: row.code,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/**
 * A workspace's constituencies, wards and booths with their aliases (the contract's fourth part, "Places").
 * Each name and alias is kept under its key in `place_names`: one place per key and kind, so "a name used by
 * another place" is the table's own refusal (409), whoever writes at the same moment.
 */
export class PlacesService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  async list(workspaceId: number, query: { page: number; per_page: number; kind?: PlaceKind | undefined }) {
    const { rows, total } = await listPlaces(this.deps.db, workspaceId, query);
    return pageResult(rows.map(placeItem), total, query.page, query.per_page);
  }

  async get(workspaceId: number, id: number) {
    const row = await findPlace(this.deps.db, workspaceId, id);
    if (!row) throw notFound('Place');
    return placeItem(row);
  }

  async create(
    workspaceId: number,
    actor: AuditActor,
    input: {
      kind: PlaceKind;
      name: string;
      aliases?: string[] | undefined;
      code?: string | null | undefined;
    },
  ) {
    const { name, aliases, keys } = checkNames(input.kind, input.name, input.aliases ?? []);
    const now = nowIso();
    return this.write(workspaceId, input.kind, keys, async (trx) => {
      const row = await insertPlace(trx, {
        workspace_id: workspaceId,
        kind: input.kind,
        name,
        aliases: JSON.stringify(aliases),
        code: input.code?.trim() || null,
        created_at: now,
        updated_at: now,
      });
      await setPlaceNames(trx, row, keys);
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'place.created',
        target: { type: 'place', id: row.id },
        details: { kind: row.kind, name, aliases },
      });
      return placeItem(row);
    });
  }

  async update(
    workspaceId: number,
    actor: AuditActor,
    id: number,
    input: { name?: string | undefined; aliases?: string[] | undefined; code?: string | null | undefined },
  ) {
    const current = await findPlace(this.deps.db, workspaceId, id);
    if (!current) throw notFound('Place');
    const kind = current.kind as PlaceKind;
    const { name, aliases, keys } = checkNames(
      kind,
      input.name ?? current.name,
      input.aliases ?? (JSON.parse(current.aliases) as string[]),
    );
    return this.write(
      workspaceId,
      kind,
      keys,
      async (trx) => {
        const row = await updatePlace(trx, workspaceId, id, {
          name,
          aliases: JSON.stringify(aliases),
          ...(input.code !== undefined ? { code: input.code?.trim() || null } : {}),
          updated_at: nowIso(),
        });
        if (!row) throw notFound('Place');
        await setPlaceNames(trx, row, keys);
        await recordAudit(trx, {
          workspaceId,
          actor,
          action: 'place.updated',
          target: { type: 'place', id },
          details: { changed: Object.keys(input), name, aliases },
        });
        return placeItem(row);
      },
      id,
    );
  }

  async remove(workspaceId: number, actor: AuditActor, id: number) {
    await this.deps.db.transaction().execute(async (trx) => {
      const row = await findPlace(trx, workspaceId, id);
      if (!row || !(await deletePlace(trx, workspaceId, id))) throw notFound('Place');
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'place.deleted',
        target: { type: 'place', id },
        details: { kind: row.kind, name: row.name },
      });
    });
  }

  /**
   * Runs a write of a place's names; a key another place of the kind holds is 409, naming that place (read
   * first for the message, and refused by the table's key whatever the read saw).
   */
  private async write<T>(
    workspaceId: number,
    kind: PlaceKind,
    keys: string[],
    work: (trx: Transaction<Database>) => Promise<T>,
    self?: number,
  ): Promise<T> {
    const { db } = this.deps;
    const taken = async () => {
      const holders = await placesHolding(db, workspaceId, kind, keys);
      for (const [key, holder] of holders)
        if (holder.id !== self)
          return new AppError(
            'conflict',
            `"${key}" is already a name of the ${kind} "${holder.name}" (place ${holder.id}).`,
            {
              place_id: holder.id,
            },
          );
      return undefined;
    };
    const before = await taken();
    if (before) throw before;
    try {
      return await db.transaction().execute(work);
    } catch (error) {
      if (isUniqueViolation(error))
        throw (await taken()) ?? new AppError('conflict', `A name of this ${kind} is already another's.`);
      throw error;
    }
  }
}

/** The name and aliases in the place-name normal form, checked; their keys, each once (the name's first). */
function checkNames(kind: PlaceKind, rawName: string, rawAliases: string[]) {
  const errors: FieldErrors = {};
  const max = placeNameLimits[kind];
  const name = placeText(rawName);
  if (name === '') errors.name = ['must not be empty.'];
  else if ([...name].length > max) errors.name = [`must be at most ${max} characters for a ${kind}.`];
  const aliases: string[] = [];
  const keys = name ? [placeKey(name)] : [];
  rawAliases.forEach((raw, i) => {
    const alias = placeText(raw);
    if (alias === '') errors[`aliases.${i}`] = ['must not be empty.'];
    else if ([...alias].length > max)
      errors[`aliases.${i}`] = [`must be at most ${max} characters for a ${kind}.`];
    else if (!keys.includes(placeKey(alias))) {
      keys.push(placeKey(alias));
      aliases.push(alias);
    }
  });
  if (Object.keys(errors).length > 0) throw validationError(errors);
  return { name, aliases, keys };
}

/** An import's values that match no place: kind -> the values, as the file had them (in normal form). */
export type UnknownPlaces = Partial<Record<PlaceKind, string[]>>;

/** The most unknown values an import lists per kind (the contract), and the most distinct values it keeps. */
const UNKNOWN_LISTED = 100;
const DISTINCT_KEPT = 20_000;

/**
 * The distinct places of an import's rows, for its `unknown_places`: each kind's values by key (the first
 * spelling seen), at most DISTINCT_KEPT of each, so a file of millions of rows keeps a bounded set.
 */
export class PlacesSeen {
  private readonly seen: Record<PlaceKind, Map<string, string>> = {
    constituency: new Map(),
    ward: new Map(),
    booth: new Map(),
  };

  add(values: Partial<Record<PlaceKind, string | null | undefined>>): void {
    for (const kind of placeKinds) {
      const value = values[kind];
      const map = this.seen[kind];
      if (!value || map.size >= DISTINCT_KEPT) continue;
      const key = placeKey(value);
      if (!map.has(key)) map.set(key, value);
    }
  }

  /** For each kind the workspace keeps places of, the values seen that no place holds (sorted, first 100). */
  async unknown(db: Executor, workspaceId: number): Promise<UnknownPlaces> {
    const out: UnknownPlaces = {};
    const kinds = await kindsWithPlaces(db, workspaceId);
    for (const kind of placeKinds) {
      if (!kinds.has(kind)) continue;
      const map = this.seen[kind];
      const held = new Set<string>();
      const keys = [...map.keys()];
      for (let i = 0; i < keys.length; i += 500)
        for (const key of (await placesHolding(db, workspaceId, kind, keys.slice(i, i + 500))).keys())
          held.add(key);
      out[kind] = [...map]
        .filter(([key]) => !held.has(key))
        .map(([, value]) => value)
        .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))
        .slice(0, UNKNOWN_LISTED);
    }
    return out;
  }
}
