import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import { pageOf } from '../../db/paginate.ts';
import type { BreachRow, Database, PrivacyRequestRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import {
  pageResult,
  type PrivacyRequestStatus,
  type PrivacyRequestType,
  type PrivacyRequestVia,
} from '../../domain.ts';
import { AppError, notFound, validationError } from '../../errors.ts';
import { parseRef } from '../../refs.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { recipientAddress } from '../messages/messages.rules.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';

const DAY_MS = 86_400_000;
const BOARD_REPORT_MS = 72 * 3_600_000;
/** `privacy_request.due_soon` goes this long before a request's `due_at`. */
export const DUE_SOON_MS = 7 * DAY_MS;

export const requestRef = (id: number) => `dpr_${id}`;
export const breachRef = (id: number) => `brc_${id}`;

/** A phone (E.164) or a lower-cased email, or undefined when it is neither. */
export function personAddress(raw: string, defaultCountry: string): string | undefined {
  return recipientAddress(raw.includes('@') ? 'email' : 'sms', raw, defaultCountry);
}

const closed = (status: string) => status === 'completed' || status === 'rejected';

export function requestView(row: PrivacyRequestRow, now = Date.now()) {
  return {
    id: requestRef(Number(row.id)),
    type: row.type as PrivacyRequestType,
    voter_id: row.voter_id === null ? null : Number(row.voter_id),
    address: row.address,
    status: row.status as PrivacyRequestStatus,
    received_via: row.received_via as PrivacyRequestVia,
    due_at: new Date(row.due_at).toISOString(),
    overdue: !closed(row.status) && Date.parse(row.due_at) < now,
    completed_at: row.completed_at ? new Date(row.completed_at).toISOString() : null,
    note: row.note,
    erasure: row.erasure ? (JSON.parse(row.erasure) as ErasureRecord) : null,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

export interface ErasureRecord {
  erased_at: string;
  removed: Record<string, number>;
  remaining: { import_id: string; file: string; removed_by: string }[];
}

function breachView(row: BreachRow, now = Date.now()) {
  const detected = Date.parse(row.detected_at);
  const iso = (v: string | null) => (v ? new Date(v).toISOString() : null);
  return {
    id: breachRef(Number(row.id)),
    detected_at: new Date(detected).toISOString(),
    description: row.description,
    affected_count: row.affected_count,
    board_notified_at: iso(row.board_notified_at),
    people_notified_at: iso(row.people_notified_at),
    board_report_due: new Date(detected + BOARD_REPORT_MS).toISOString(),
    overdue: row.board_notified_at === null && detected + BOARD_REPORT_MS < now,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

/** A request of the workspace by its id (`dpr_<n>` or `<n>`), or 404. */
export async function findRequest(db: Executor, workspaceId: number, ref: string) {
  const id = parseRef('dpr', ref);
  const row =
    id === undefined
      ? undefined
      : await db
          .selectFrom('privacy_requests')
          .selectAll()
          .where('workspace_id', '=', workspaceId)
          .where('id', '=', id)
          .executeTakeFirst();
  if (!row) throw notFound('Privacy request');
  return row;
}

/** The voter of the workspace with this id, or a 422 on `voter_id`. */
async function checkVoter(db: Executor, workspaceId: number, voterId: number): Promise<void> {
  const found = await db
    .selectFrom('voters')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', voterId)
    .executeTakeFirst();
  if (!found) throw validationError({ voter_id: [`is ${voterId}, not a voter of your workspace.`] });
}

/** The one voter with this phone or email, when exactly one has it. */
async function voterWithAddress(db: Executor, workspaceId: number, address: string) {
  const rows = await db
    .selectFrom('voters')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where(address.includes('@') ? 'email' : 'phone', '=', address)
    .limit(2)
    .execute();
  return rows.length === 1 ? Number(rows[0]!.id) : null;
}

/**
 * Writes a data-principal request (the office's, the public form's or a keyword's), audited as
 * `privacy_request.created`; `due_at` is its arrival plus PRIVACY_RESPONSE_DAYS.
 */
export async function insertRequest(
  trx: Executor,
  workspaceId: number,
  actor: AuditActor,
  input: {
    type: PrivacyRequestType;
    address: string;
    voterId: number | null;
    note: string | null;
    via: PrivacyRequestVia;
    status: PrivacyRequestStatus;
  },
  responseDays: number,
): Promise<PrivacyRequestRow> {
  const now = nowIso();
  const row = await trx
    .insertInto('privacy_requests')
    .values({
      workspace_id: workspaceId,
      type: input.type,
      voter_id: input.voterId ?? (await voterWithAddress(trx, workspaceId, input.address)),
      address: input.address,
      status: input.status,
      received_via: input.via,
      due_at: new Date(Date.parse(now) + responseDays * DAY_MS).toISOString(),
      note: input.note,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await recordAudit(trx, {
    workspaceId,
    actor,
    action: 'privacy_request.created',
    target: { type: 'privacy_request', id: requestRef(Number(row.id)) },
    details: { type: input.type, received_via: input.via },
  });
  return row;
}

/** The notice, the requests and the breach register (the contract's fourth part, "Personal data"). */
export class PrivacyService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      defaultCountry: string;
      /** PRIVACY_RESPONSE_DAYS. */
      responseDays: number;
    },
  ) {}

  async notice(workspaceId: number) {
    const { db } = this.deps;
    const [row, workspace] = await Promise.all([
      db.selectFrom('privacy_notices').selectAll().where('workspace_id', '=', workspaceId).executeTakeFirst(),
      db.selectFrom('workspaces').select('public_id').where('id', '=', workspaceId).executeTakeFirst(),
    ]);
    return {
      version: row ? Number(row.version) : 0,
      texts: row ? (JSON.parse(row.texts) as Record<string, string>) : {},
      contact: row?.contact ?? '',
      updated_at: row ? new Date(row.updated_at).toISOString() : null,
      public_url: `/privacy/${workspace?.public_id ?? ''}`,
    };
  }

  /** A new version of the notice (the first is 1), audited as `privacy_notice.updated`. */
  async setNotice(
    workspaceId: number,
    actor: AuditActor,
    body: { texts: Record<string, string>; contact: string },
  ) {
    const errors: Record<string, string[]> = {};
    for (const [lang, text] of Object.entries(body.texts))
      if (text.trim() === '') errors[`texts.${lang}`] = ['must not be blank.'];
    if (body.contact.trim() === '') errors.contact = ['must not be blank.'];
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const now = nowIso();
    await this.deps.db.transaction().execute(async (trx) => {
      const current = await trx
        .selectFrom('privacy_notices')
        .select('version')
        .where('workspace_id', '=', workspaceId)
        .executeTakeFirst();
      const version = current ? Number(current.version) + 1 : 1;
      const values = {
        version,
        texts: JSON.stringify(body.texts),
        contact: body.contact.trim(),
        updated_at: now,
      };
      if (current)
        await trx
          .updateTable('privacy_notices')
          .set(values)
          .where('workspace_id', '=', workspaceId)
          .execute();
      else
        await trx
          .insertInto('privacy_notices')
          .values({ workspace_id: workspaceId, ...values })
          .execute();
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'privacy_notice.updated',
        target: { type: 'privacy_notice', id: version },
        details: { version, languages: Object.keys(body.texts) },
      });
    });
    return this.notice(workspaceId);
  }

  async listRequests(
    workspaceId: number,
    query: { page: number; per_page: number; status?: string; type?: string; overdue?: boolean },
  ) {
    const now = nowIso();
    const base = this.deps.db
      .selectFrom('privacy_requests')
      .where('workspace_id', '=', workspaceId)
      .$if(query.status !== undefined, (q) => q.where('status', '=', query.status!))
      .$if(query.type !== undefined, (q) => q.where('type', '=', query.type!))
      .$if(query.overdue === true, (q) =>
        q.where('status', 'in', ['open', 'verified']).where('due_at', '<', now),
      )
      .$if(query.overdue === false, (q) =>
        q.where((eb) => eb.or([eb('status', 'in', ['completed', 'rejected']), eb('due_at', '>=', now)])),
      );
    const { rows, total } = await pageOf(
      base,
      (q) => q.selectAll().orderBy('id', 'desc'),
      query.page,
      query.per_page,
    );
    return pageResult(
      rows.map((row) => requestView(row)),
      total,
      query.page,
      query.per_page,
    );
  }

  async createRequest(
    workspaceId: number,
    actor: AuditActor,
    body: {
      type: PrivacyRequestType;
      address: string;
      voter_id?: number | null | undefined;
      note?: string | null | undefined;
      received_via?: 'office' | 'keyword' | undefined;
    },
  ) {
    const address = personAddress(body.address, this.deps.defaultCountry);
    if (!address)
      throw validationError({
        address: ['must be a phone number (e.g. +919812345678) or an email address.'],
      });
    return this.deps.db.transaction().execute(async (trx) => {
      if (body.voter_id) await checkVoter(trx, workspaceId, body.voter_id);
      const row = await insertRequest(
        trx,
        workspaceId,
        actor,
        {
          type: body.type,
          address,
          voterId: body.voter_id ?? null,
          note: body.note ?? null,
          via: body.received_via ?? 'office',
          status: 'open',
        },
        this.deps.responseDays,
      );
      return requestView(row);
    });
  }

  async request(workspaceId: number, ref: string) {
    return requestView(await findRequest(this.deps.db, workspaceId, ref));
  }

  /** A new status, voter or note; a move to `completed` is audited as `privacy_request.completed`. */
  async updateRequest(
    workspaceId: number,
    actor: AuditActor,
    ref: string,
    body: {
      status?: PrivacyRequestStatus | undefined;
      voter_id?: number | null | undefined;
      note?: string | null | undefined;
    },
  ) {
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await findRequest(trx, workspaceId, ref);
      if (body.voter_id) await checkVoter(trx, workspaceId, body.voter_id);
      if (body.status !== undefined && closed(row.status) && body.status !== row.status)
        throw new AppError(
          'conflict',
          `The request is ${row.status}: a closed request is not opened again. Record a new request instead.`,
        );
      const now = nowIso();
      const completing = body.status === 'completed' && row.status !== 'completed';
      const updated = await trx
        .updateTable('privacy_requests')
        .set({
          ...(body.status !== undefined ? { status: body.status } : {}),
          ...(body.voter_id !== undefined ? { voter_id: body.voter_id } : {}),
          ...(body.note !== undefined ? { note: body.note } : {}),
          ...(completing || body.status === 'rejected' ? { completed_at: now } : {}),
          updated_at: now,
        })
        .where('id', '=', row.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      if (completing)
        await recordAudit(trx, {
          workspaceId,
          actor,
          action: 'privacy_request.completed',
          target: { type: 'privacy_request', id: requestRef(Number(row.id)) },
          details: { type: row.type },
        });
      return requestView(updated);
    });
  }

  async listBreaches(workspaceId: number, page: number, perPage: number) {
    const base = this.deps.db.selectFrom('breaches').where('workspace_id', '=', workspaceId);
    const { rows, total } = await pageOf(base, (q) => q.selectAll().orderBy('id', 'desc'), page, perPage);
    return pageResult(
      rows.map((row) => breachView(row)),
      total,
      page,
      perPage,
    );
  }

  /** A breach entered in the register, audited as `breach.recorded`. */
  async recordBreach(
    workspaceId: number,
    actor: AuditActor,
    body: {
      detected_at: string;
      description: string;
      affected_count?: number | null | undefined;
      board_notified_at?: string | null | undefined;
      people_notified_at?: string | null | undefined;
    },
  ) {
    const times = checkTimes(body);
    const now = nowIso();
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .insertInto('breaches')
        .values({
          workspace_id: workspaceId,
          detected_at: times.detected_at!,
          description: body.description.trim(),
          affected_count: body.affected_count ?? null,
          board_notified_at: times.board_notified_at ?? null,
          people_notified_at: times.people_notified_at ?? null,
          created_at: now,
          updated_at: now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'breach.recorded',
        target: { type: 'breach', id: breachRef(Number(row.id)) },
        details: { affected_count: row.affected_count },
      });
      return breachView(row);
    });
  }

  async updateBreach(
    workspaceId: number,
    ref: string,
    body: {
      detected_at?: string | undefined;
      description?: string | undefined;
      affected_count?: number | null | undefined;
      board_notified_at?: string | null | undefined;
      people_notified_at?: string | null | undefined;
    },
  ) {
    const id = parseRef('brc', ref);
    const times = checkTimes(body);
    const { db } = this.deps;
    const row =
      id === undefined
        ? undefined
        : await db
            .updateTable('breaches')
            .set({
              ...times,
              ...(body.description !== undefined ? { description: body.description.trim() } : {}),
              ...(body.affected_count !== undefined ? { affected_count: body.affected_count } : {}),
              updated_at: nowIso(),
            })
            .where('workspace_id', '=', workspaceId)
            .where('id', '=', id)
            .returningAll()
            .executeTakeFirst();
    if (!row) throw notFound('Breach');
    return breachView(row);
  }
}

/** A breach's times as UTC ISO strings; 422 for a time in the future or a blank description. */
function checkTimes(body: {
  detected_at?: string | undefined;
  description?: string | undefined;
  board_notified_at?: string | null | undefined;
  people_notified_at?: string | null | undefined;
}) {
  const errors: Record<string, string[]> = {};
  const out: { detected_at?: string; board_notified_at?: string | null; people_notified_at?: string | null } =
    {};
  const soon = Date.now() + 5 * 60_000;
  for (const key of ['detected_at', 'board_notified_at', 'people_notified_at'] as const) {
    const value = body[key];
    if (value === undefined) continue;
    if (value === null) {
      if (key !== 'detected_at') out[key] = null;
      continue;
    }
    const ms = Date.parse(value);
    if (Number.isNaN(ms)) errors[key] = ['must be a date-time such as 2026-12-01T10:00:00+05:30.'];
    else if (ms > soon) errors[key] = ['is in the future: record when it happened.'];
    else out[key] = new Date(ms).toISOString();
  }
  if (body.description !== undefined && body.description.trim() === '')
    errors.description = ['must not be blank.'];
  if (Object.keys(errors).length > 0) throw validationError(errors);
  return out;
}

/**
 * The privacy chore's first part: each open request within DUE_SOON_MS of its `due_at` is announced once as
 * `privacy_request.due_soon` (the claim and the event in one transaction: two workers never both send it).
 */
export async function announceDueSoon(db: Kysely<Database>, now = Date.now()): Promise<number> {
  const rows = await db
    .selectFrom('privacy_requests')
    .selectAll()
    .where('status', 'in', ['open', 'verified'])
    .where('due_at', '<=', new Date(now + DUE_SOON_MS).toISOString())
    .where('due_soon_sent_at', 'is', null)
    .orderBy('due_at')
    .limit(100)
    .execute();
  let sent = 0;
  for (const row of rows) {
    await db.transaction().execute(async (trx) => {
      const claimed = await trx
        .updateTable('privacy_requests')
        .set({ due_soon_sent_at: new Date(now).toISOString() })
        .where('id', '=', row.id)
        .where('due_soon_sent_at', 'is', null)
        .executeTakeFirst();
      if (Number(claimed.numUpdatedRows ?? 0) === 0) return;
      await emitEvent(trx, Number(row.workspace_id), 'privacy_request.due_soon', requestView(row, now));
      sent += 1;
    });
  }
  return sent;
}
