import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import { type Database } from '../../db/schema.ts';
import {
  type ConsentSource,
  type MessageChannel,
  type OptOutChannel,
  optOutChannels,
  type OptOutSource,
} from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { AppError, notFound, validationError } from '../../errors.ts';
import type { Download } from '../../http/download.ts';
import { pageResult } from '../../domain.ts';
import { CsvError, CsvReader, csvField, unguardFormula } from '../../lib/csv.ts';
import { yieldToOthers } from '../../lib/pacing.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import {
  deleteKeywordOptOuts,
  deleteOptOut,
  findMessageAddress,
  findOptOut,
  insertOptOutsIgnoringExisting,
  listOptOuts,
  type OptOutInsert,
  optedOutAddresses,
  optOutsAfter,
  upsertOptOut,
} from './opt-outs.repository.ts';
import { erasedMark, optOutAddress, optOutAddressProblem, optOutItem } from './opt-outs.rules.ts';
import { recordConsent } from '../voters/voter-consent.ts';

export interface CreateOptOutInput {
  address: string;
  channel: OptOutChannel;
  reason?: string | undefined;
}

const MAX_IMPORT_ERRORS = 1000;
/**
 * Characters of an opt-out file parsed (and their addresses checked) at a time: about 1,500 rows, some tens
 * of milliseconds; their valid rows are then added in one statement.
 */
const PARSE_SLICE = 48 * 1024;
const EXPORT_PAGE = 2000;

/**
 * Opt-outs: addresses that must not be messaged on a channel (or on any). Kept in the form messages.to has,
 * so that `send` and the delivery worker match them exactly.
 */
export class OptOutsService {
  constructor(private readonly deps: { db: Kysely<Database>; defaultCountry: string }) {}

  async create(workspaceId: number, actor: AuditActor, input: CreateOptOutInput) {
    const address = optOutAddress(input.channel, input.address, this.deps.defaultCountry);
    if (!address) throw validationError({ address: [optOutAddressProblem(input.channel)] });
    const reason = input.reason?.trim() || null;
    return this.deps.db.transaction().execute(async (trx) => {
      const result = await addOptOut(trx, workspaceId, actor, address, input.channel, 'manual', reason);
      return { item: optOutItem(result.row), created: result.created };
    });
  }

  async list(
    workspaceId: number,
    query: {
      page: number;
      per_page: number;
      channel?: OptOutChannel | undefined;
      address?: string | undefined;
    },
  ) {
    let address: string | undefined;
    if (query.address !== undefined) {
      // Either form is accepted: an email lower-cased, anything else read as a phone.
      address = optOutAddress(query.channel ?? 'all', query.address, this.deps.defaultCountry);
      if (!address && query.channel && query.channel !== 'all') {
        address = optOutAddress('all', query.address, this.deps.defaultCountry);
      }
      if (!address) throw validationError({ address: [optOutAddressProblem('all')] });
    }
    const { rows, total } = await listOptOuts(
      this.deps.db,
      workspaceId,
      { channel: query.channel, address },
      query.page,
      query.per_page,
    );
    return pageResult(rows.map(optOutItem), total, query.page, query.per_page);
  }

  async remove(workspaceId: number, actor: AuditActor, id: number): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const row = await findOptOut(trx, workspaceId, id);
      if (!row || !(await deleteOptOut(trx, workspaceId, id))) throw notFound('Opt-out');
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'opt_out.deleted',
        target: { type: 'opt_out', id },
        details: { channel: row.channel, source: row.source },
      });
    });
  }

  /**
   * A CSV with a header naming `address` and optionally `channel` (default `all`) and `reason`; other columns
   * (an export's id, source, created_at) are ignored, so an export imports back. Invalid rows are reported by
   * line. The file is read twice: first to check that it is a CSV with an `address` column (nothing is written
   * for a file refused as a whole), then to add its valid rows (source `manual`) in chunks of a few hundred,
   * each its own short transaction, with other requests served between two: a 10 MB file no longer holds the
   * process (SQLite) or a pooled connection (PostgreSQL) for the whole file. Should the database fail part-way,
   * the chunks already added stay (an opt-out only ever stops messages) and importing the file again adds the
   * rest. One audit entry records the counts.
   */
  async import(workspaceId: number, actor: AuditActor, text: string) {
    const header = await headerOf(text);
    const column = (name: string) => header.indexOf(name);
    const [addressAt, channelAt, reasonAt] = [column('address'), column('channel'), column('reason')];

    // Pass 2: check each row and add the valid ones, a chunk at a time.
    const errors: Array<{ row: number; field: string; message: string }> = [];
    let failed = 0;
    const fail = (row: number, field: string, message: string) => {
      failed += 1;
      if (errors.length < MAX_IMPORT_ERRORS) errors.push({ row, field, message });
    };
    let rows: OptOutInsert[] = [];
    let first = true;
    const now = nowIso();
    const reader = new CsvReader((fields, line) => {
      if (first) {
        first = false;
        return;
      }
      const at = (i: number) => (i >= 0 ? (fields[i] ?? '').trim() : '');
      const channel = (at(channelAt).toLowerCase() || 'all') as OptOutChannel;
      if (!optOutChannels.includes(channel)) {
        fail(line, 'channel', `must be one of ${optOutChannels.join(', ')}.`);
        return;
      }
      const address = optOutAddress(channel, unguardFormula(at(addressAt)), this.deps.defaultCountry);
      if (!address) {
        fail(line, 'address', optOutAddressProblem(channel));
        return;
      }
      const reason = unguardFormula(at(reasonAt)).slice(0, 500) || null;
      rows.push({ workspace_id: workspaceId, address, channel, source: 'manual', reason, created_at: now });
    });
    let created = 0;
    let total = 0;
    const flush = async () => {
      if (rows.length === 0) return;
      const chunk = rows;
      rows = [];
      total += chunk.length;
      created += await insertOptOutsIgnoringExisting(this.deps.db, chunk);
      await yieldToOthers();
    };
    for (let at = 0; at < text.length; at += PARSE_SLICE) {
      reader.push(text.slice(at, at + PARSE_SLICE));
      await flush();
    }
    reader.end();
    await flush();
    const existing = total - created;
    if (created > 0) {
      await recordAudit(this.deps.db, {
        workspaceId,
        actor,
        action: 'opt_out.created',
        target: null,
        details: { imported: created, existing, failed },
      });
    }
    return { created, existing, failed, errors };
  }

  /** Every opt-out of the workspace as CSV (id, address, channel, source, reason, created_at), oldest first. */
  export(workspaceId: number): Download {
    const db = this.deps.db;
    const encoder = new TextEncoder();
    async function* lines(): AsyncGenerator<Uint8Array> {
      yield encoder.encode('id,address,channel,source,reason,created_at\r\n');
      let after = 0;
      for (;;) {
        const rows = await optOutsAfter(db, workspaceId, after, EXPORT_PAGE);
        if (rows.length === 0) return;
        after = rows[rows.length - 1]!.id;
        yield encoder.encode(
          rows
            .map(
              (r) =>
                `${[r.id, r.address, r.channel, r.source, r.reason, r.created_at].map(csvField).join(',')}\r\n`,
            )
            .join(''),
        );
      }
    }
    return {
      contentType: 'text/csv; charset=utf-8',
      filename: `opt-outs-${nowIso().slice(0, 10)}.csv`,
      body: lines(),
    };
  }
}

/** Adds an opt-out (or finds the existing one) and records it in the audit log, in the caller's transaction. */
export async function addOptOut(
  trx: Executor,
  workspaceId: number,
  actor: AuditActor,
  address: string,
  channel: OptOutChannel,
  source: OptOutSource,
  reason: string | null,
) {
  const result = await upsertOptOut(trx, workspaceId, {
    address,
    channel,
    source,
    reason,
    created_at: nowIso(),
  });
  // STOP on any channel, the unsubscribe link and the public page's form withdraw the voter's consent.
  const withdrawnBy = WITHDRAWING[source];
  if (withdrawnBy) await recordConsent(trx, workspaceId, { address }, 'withdrawn', withdrawnBy);
  if (result.created) {
    await recordAudit(trx, {
      workspaceId,
      actor,
      action: 'opt_out.created',
      target: { type: 'opt_out', id: result.row.id },
      details: { channel, source },
    });
  }
  return result;
}

/** The opt-outs that are a person's own withdrawal of consent, and the consent source each records. */
const WITHDRAWING: Partial<Record<OptOutSource, ConsentSource>> = {
  keyword: 'keyword',
  unsubscribe_link: 'form',
  privacy_form: 'form',
};

/**
 * START / UNSTOP: removes the keyword opt-outs of an address on a channel (never a manual one), and records the
 * consent of the voters with that address as given (source `keyword`): the person asked to hear from the office.
 */
export async function removeKeywordOptOuts(
  trx: Executor,
  workspaceId: number,
  actor: AuditActor,
  address: string,
  channel: MessageChannel,
): Promise<number> {
  const removed = await deleteKeywordOptOuts(trx, workspaceId, address, channel);
  await recordConsent(trx, workspaceId, { address }, 'given', 'keyword');
  for (const row of removed) {
    await recordAudit(trx, {
      workspaceId,
      actor,
      action: 'opt_out.deleted',
      target: { type: 'opt_out', id: row.id },
      details: { channel: row.channel, source: row.source },
    });
  }
  return removed.length;
}

/** For `send`: a 422 on `to` when the address is opted out of the channel. */
export async function refuseOptedOut(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  to: string,
  /** APP_KEY: an erased person's address is opted out as its keyed hash. */
  addressKey: Buffer,
): Promise<void> {
  if ((await optedOutAddresses(db, workspaceId, channel, [to, erasedMark(addressKey, to)])).size > 0) {
    throw new AppError('validation_error', 'The recipient has opted out of this channel.', {
      to: [`has opted out of ${channel} messages; nothing was sent.`],
    });
  }
}

/**
 * A provider reported that the recipient of a message has opted out at its end: the address is opted out of
 * that channel in the message's workspace (`source: "provider"`).
 */
export async function optOutByProvider(db: Kysely<Database>, messageId: number): Promise<void> {
  const message = await findMessageAddress(db, messageId);
  if (!message) return;
  await db.transaction().execute(async (trx) => {
    await addOptOut(
      trx,
      message.workspace_id,
      { userId: null, ip: null },
      message.to,
      message.channel,
      'provider',
      'The provider reported the recipient as unsubscribed.',
    );
  });
}

export { optedOutAddresses };

/**
 * Pass 1 of an import: the file's shape alone (its header, lower-cased), so that a file refused as a whole writes
 * nothing. 422 unless it is CSV with an `address` column.
 */
async function headerOf(text: string): Promise<string[]> {
  let header: string[] | undefined;
  try {
    const shape = new CsvReader((fields) => {
      header ??= fields.map((f) =>
        f
          .trim()
          .toLowerCase()
          .replace(/^\uFEFF/, ''),
      );
    });
    for (let at = 0; at < text.length; at += PARSE_SLICE) {
      shape.push(text.slice(at, at + PARSE_SLICE));
      await yieldToOthers();
    }
    shape.end();
  } catch (error) {
    if (error instanceof CsvError) throw validationError({ file: [error.message] });
    throw error;
  }
  if (!header || !header.includes('address'))
    throw validationError({ file: ['must be a CSV whose header names an `address` column.'] });
  return header;
}
