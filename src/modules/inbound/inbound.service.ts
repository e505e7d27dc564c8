import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, InboundMessageRow } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import type { AuditActor } from '../audit/audit.repository.ts';
import { addressProblem, recipientAddress } from '../messages/messages.rules.ts';
import { addOptOut, removeKeywordOptOuts } from '../opt-outs/opt-outs.service.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';
import { consentKeyword, privacyKeyword } from './inbound.keywords.ts';
import { threadInbound } from '../conversations/conversations.thread.ts';
import { surveyInbound } from '../surveys/survey-sessions.ts';
import {
  insertInbound,
  lastSenderThroughDeployment,
  listInbound,
  workspacesThatMessaged,
} from './inbound.repository.ts';
import { inboundRef } from '../../refs.ts';

export interface InboundInput {
  channel: MessageChannel;
  from: string;
  body: string;
  /** The provider's id of the message, when a provider delivered it: a replay is stored once. */
  providerMessageId?: string | undefined;
  /** The channel account it came to (replies go back through it). */
  channelAccountId?: number | undefined;
}

/** An inbound message as the API and its events show it; a withheld answer's text only where `reveal`. */
export function inboundItem(row: InboundMessageRow, reveal = false) {
  const withheld = Number(row.withheld) === 1;
  return {
    id: inboundRef(row.id),
    channel: row.channel,
    from: row.from,
    body: withheld && !reveal ? '' : row.body,
    keyword: row.keyword,
    withheld,
    created_at: row.created_at,
  };
}

/** Records a data principal's request made by reply (given by the app: the privacy module's insertRequest). */
export type PrivacyRequestByReply = (
  trx: Executor,
  workspaceId: number,
  actor: AuditActor,
  request: { type: 'erasure' | 'access'; from: string; channel: MessageChannel; body: string },
) => Promise<void>;

/**
 * Replies: kept, emitted as `message.received`, and read for consent keywords (STOP opts the sender out of
 * that channel with source `keyword`; START removes a keyword opt-out), all in one transaction.
 */
export class InboundService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      defaultCountry: string;
      /** A data principal's request by reply (ERASE, MYDATA), in the reply's transaction (the privacy module's). */
      privacyRequest: PrivacyRequestByReply;
    },
  ) {}

  /** A reply a workspace reports itself (POST /api/inbound; the sandbox provider's replies). */
  async receive(workspaceId: number, actor: AuditActor, input: InboundInput, provider = 'api') {
    const from = recipientAddress(input.channel, input.from, this.deps.defaultCountry);
    if (!from) throw validationError({ from: [addressProblem(input.channel)] });
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await record(
        trx,
        workspaceId,
        actor,
        { ...input, from },
        provider,
        this.deps.privacyRequest,
      );
      // The API's own inbound route carries no provider id, so its rows are never replays.
      return inboundItem(row!, true);
    });
  }

  /**
   * A reply that came to the deployment's shared number (its provider's inbound callback): it belongs to the one workspace
   * that last sent to its sender on that channel through the deployment's provider (a rival office that also
   * messaged them never sees it); one that no workspace messaged is dropped. A STOP in it still opts the sender
   * out in every workspace that messaged them on the channel. Returns how many workspaces it reached.
   */
  async receiveFromProvider(input: InboundInput, provider: string, ip: string | null): Promise<number> {
    const { db } = this.deps;
    const from = recipientAddress(input.channel, input.from, this.deps.defaultCountry);
    if (!from) return 0;
    const owner = await lastSenderThroughDeployment(db, input.channel, from);
    if (owner === undefined) return 0;
    const actor = { userId: null, ip };
    return db.transaction().execute(async (trx) => {
      const row = await record(trx, owner, actor, { ...input, from }, provider, this.deps.privacyRequest);
      if (row?.keyword === 'stop') {
        const reason = 'Replied with an opt-out keyword to the shared number.';
        for (const workspaceId of await workspacesThatMessaged(trx, input.channel, from))
          if (workspaceId !== owner)
            await addOptOut(trx, workspaceId, actor, from, input.channel, 'keyword', reason);
      }
      return row ? 1 : 0;
    });
  }

  /** A reply to a workspace's own channel account (its callback URL): it is that workspace's. */
  async receiveForAccount(
    workspaceId: number,
    input: InboundInput,
    provider: string,
    ip: string | null,
  ): Promise<boolean> {
    const from = recipientAddress(input.channel, input.from, this.deps.defaultCountry);
    if (!from) return false;
    const row = await this.deps.db
      .transaction()
      .execute((trx) =>
        record(
          trx,
          workspaceId,
          { userId: null, ip },
          { ...input, from },
          provider,
          this.deps.privacyRequest,
        ),
      );
    return row !== undefined;
  }

  async list(
    workspaceId: number,
    query: { page: number; per_page: number; channel?: MessageChannel | undefined },
  ) {
    const { rows, total } = await listInbound(
      this.deps.db,
      workspaceId,
      { channel: query.channel },
      query.page,
      query.per_page,
    );
    // GET /api/inbound is for managers and politicians (messages:read): they read a withheld answer.
    return pageResult(
      rows.map((r) => inboundItem(r, true)),
      total,
      query.page,
      query.per_page,
    );
  }
}

async function record(
  trx: Executor,
  workspaceId: number,
  actor: AuditActor,
  input: InboundInput,
  provider: string,
  privacyRequest: PrivacyRequestByReply,
): Promise<InboundMessageRow | undefined> {
  const now = nowIso();
  const keyword = consentKeyword(input.body);
  const row = await insertInbound(trx, workspaceId, {
    channel: input.channel,
    from: input.from,
    body: input.body,
    keyword,
    provider,
    provider_message_id: input.providerMessageId ?? null,
    created_at: now,
  });
  // A replay of a message already received (same provider id): nothing is stored, opted out or emitted again.
  if (!row) return undefined;
  if (keyword === 'stop') {
    const reason = 'Replied with an opt-out keyword.';
    await addOptOut(trx, workspaceId, actor, input.from, input.channel, 'keyword', reason);
  } else if (keyword === 'start') {
    await removeKeywordOptOuts(trx, workspaceId, actor, input.from, input.channel);
  }
  // ERASE or MYDATA: a data principal's request, from the address the message came from (the office verifies).
  const ask = privacyKeyword(input.body);
  if (ask)
    await privacyRequest(trx, workspaceId, actor, {
      type: ask,
      from: input.from,
      channel: input.channel,
      body: input.body,
    });
  // An open survey session takes it as an answer, or its whole text starts a survey (it still joins the thread).
  const survey = await surveyInbound(
    trx,
    workspaceId,
    {
      channel: input.channel,
      from: input.from,
      body: input.body,
      keyword,
      channelAccountId: input.channelAccountId ?? null,
    },
    now,
  );
  // An answer that saves to support_level or a sensitive field is a sensitive value: withheld from volunteers,
  // webhooks and the live stream (its thread's preview included).
  if (survey.withheld) {
    await trx.updateTable('inbound_messages').set({ withheld: 1 }).where('id', '=', row.id).execute();
    row.withheld = 1;
  }
  const conversation = await threadInbound(trx, workspaceId, row, input.channelAccountId ?? null, now);
  await emitEvent(trx, workspaceId, 'message.received', inboundItem(row), now, {
    assignedTo: conversation.assigned_to,
  });
  return row;
}
