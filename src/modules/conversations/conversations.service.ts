import { type Kysely, sql } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import { pageOf } from '../../db/paginate.ts';
import type { ConversationRow, Database } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { AppError, notFound, validationError } from '../../errors.ts';
import type { AuthContext } from '../../http/guard.ts';
import { pageResult } from '../../domain.ts';
import { placeKey } from '../../lib/place.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import type { GrievancesService } from '../grievances/grievances.service.ts';
import type { MessagesService } from '../messages/messages.service.ts';
import { optedOutAddresses } from '../opt-outs/opt-outs.service.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';
import { matchesPlace } from '../places/places.repository.ts';
import { filteredVoters, volunteerScope } from '../voters/voters.search.ts';
import { votersByAddress } from '../templates/templates.repository.ts';
import { voterVariables } from '../sending/render.ts';
import { adapterNamed } from '../../providers/registry.ts';
import { conversationItem, conversationView } from './conversations.view.ts';
import { refuseFreeText, replyRules } from './conversations.reply-rules.ts';
import { accountRef, conversationRef, inboundRef, messageRef, parseRef, templateRef } from '../../refs.ts';

export interface ConversationQuery {
  page: number;
  per_page: number;
  status?: 'open' | 'closed' | undefined;
  assigned_to?: string | undefined;
  channel?: MessageChannel | undefined;
  unread?: boolean | undefined;
  ward?: string | undefined;
  booth?: string | undefined;
  constituency?: string | undefined;
  voter_id?: number | undefined;
  search?: string | undefined;
}

export interface ReplyInput {
  message?: string | undefined;
  template_id?: string | undefined;
  variables?: Record<string, string> | undefined;
}

const isVolunteer = (auth: AuthContext) => auth.role === 'volunteer';

/**
 * Conversations (contract, third part, "Conversations: replies reach a person"): the thread of a contact on a
 * channel, assigned to a member who answers it. Volunteers reach only the conversations assigned to them,
 * through every route: another's is 404, as another workspace's row is.
 */
export class ConversationsService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      messages: MessagesService;
      grievances: GrievancesService;
      /** The deployment's provider of each channel (where the workspace has no account for it). */
      deployment: Record<MessageChannel, string>;
      dltEnforce: boolean;
    },
  ) {}

  async list(auth: AuthContext, query: ConversationQuery) {
    const { db } = this.deps;
    // No joins: a volunteer's page and count read their conversations through the inbox index, and the
    // voter's fields the filters and search test are on the conversation's row (migration 027).
    let q = db.selectFrom('conversations as c').where('c.workspace_id', '=', auth.workspaceId);
    if (isVolunteer(auth)) q = q.where('c.assigned_to', '=', auth.userId);
    if (query.status) q = q.where('c.status', '=', query.status);
    if (query.channel) q = q.where('c.channel', '=', query.channel);
    if (query.unread) q = q.where('c.unread_count', '>', 0);
    if (query.assigned_to !== undefined) {
      const who = query.assigned_to;
      if (who === 'me') q = q.where('c.assigned_to', '=', auth.userId);
      else if (who === 'none') q = q.where('c.assigned_to', 'is', null);
      else {
        const id = /^\d{1,15}$/.test(who) ? Number(who) : undefined;
        if (id === undefined) throw validationError({ assigned_to: ['must be me, none or a user id.'] });
        q = q.where('c.assigned_to', '=', id);
      }
    }
    // A place given matches any of its names (places.repository.ts), case-folded.
    const { ward, booth, constituency } = query;
    const workspaceId = auth.workspaceId;
    if (ward !== undefined)
      q = q.where((eb) => matchesPlace(eb, sql`lower(c.voter_ward)`, workspaceId, 'ward', [placeKey(ward)]));
    if (booth !== undefined)
      q = q.where((eb) =>
        matchesPlace(eb, sql`lower(c.voter_booth)`, workspaceId, 'booth', [placeKey(booth)]),
      );
    if (constituency !== undefined)
      q = q.where((eb) =>
        matchesPlace(eb, 'c.voter_constituency_key', workspaceId, 'constituency', [placeKey(constituency)]),
      );
    if (query.voter_id !== undefined) q = q.where('c.voter_id', '=', query.voter_id);
    if (query.search !== undefined && query.search.trim() !== '') {
      const like = `%${query.search
        .trim()
        .toLowerCase()
        .replace(/[\\%_]/g, (m) => `\\${m}`)}%`;
      q = q.where((eb) =>
        eb.or([
          eb(sql`lower(c.address)`, 'like', sql`${like} escape '\\'`),
          eb(sql`lower(c.voter_name)`, 'like', sql`${like} escape '\\'`),
        ]),
      );
    }
    const { rows, total } = await pageOf(
      q,
      (x) =>
        x
          .selectAll('c')
          .select((eb) =>
            eb
              .selectFrom('users as u')
              .select('u.name')
              .whereRef('u.id', '=', 'c.assigned_to')
              .as('assigned_to_name'),
          )
          .orderBy('c.last_message_at', 'desc')
          .orderBy('c.id', 'desc'),
      query.page,
      query.per_page,
    );
    return pageResult(rows.map(conversationItem), total, query.page, query.per_page);
  }

  async get(auth: AuthContext, ref: string) {
    const row = await this.find(this.deps.db, auth, ref);
    const rules = await replyRules(this.deps, row, await this.replyAccount(this.deps.db, row));
    const voter = (await votersByAddress(this.deps.db, auth.workspaceId, row.channel, [row.address])).get(
      row.address,
    );
    const optedOut =
      (await optedOutAddresses(this.deps.db, auth.workspaceId, row.channel, [row.address])).size > 0;
    return {
      ...conversationItem(await conversationView(this.deps.db, row)),
      opted_out: optedOut,
      reply: {
        templates_only: rules.reason !== null,
        reason: rules.reason,
        provider: rules.provider,
        provider_label: adapterNamed(rules.provider).label,
        template_ids: rules.fit.map((t) => templateRef(t.id)),
        voter_values: voterVariables(voter),
      },
    };
  }

  /** Both directions, oldest first. Read by its assignee, the conversation has nothing unread. */
  async messages(auth: AuthContext, ref: string, page: number, perPage: number) {
    const { db } = this.deps;
    const row = await this.find(db, auth, ref);
    const thread = sql<{
      kind: string;
      id: number;
      body: string;
      created_at: string;
      keyword: 'stop' | 'start' | null;
      status: string | null;
      error_code: string | null;
      sent_by: number | null;
      channel_account_id: number | null;
      withheld: number;
    }>`
      SELECT 'inbound' AS kind, id, body, created_at, keyword, NULL AS status, NULL AS error_code,
             NULL AS sent_by, NULL AS channel_account_id, withheld
        FROM inbound_messages WHERE conversation_id = ${row.id}
      UNION ALL
      SELECT 'outbound' AS kind, id, body, created_at, NULL AS keyword, status, error_code, sent_by,
             channel_account_id, 0 AS withheld
        FROM messages WHERE conversation_id = ${row.id}
      ORDER BY created_at, kind, id
      LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`;
    const [items, counts] = await Promise.all([
      thread.execute(db),
      sql<{ n: number }>`SELECT (SELECT count(*) FROM inbound_messages WHERE conversation_id = ${row.id})
        + (SELECT count(*) FROM messages WHERE conversation_id = ${row.id}) AS n`.execute(db),
    ]);
    if (row.assigned_to === auth.userId && Number(row.unread_count) > 0) {
      // Read up to the newest inbound message returned: one that arrived since stays unread.
      const seen = Math.max(0, ...items.rows.filter((m) => m.kind === 'inbound').map((m) => Number(m.id)));
      await sql`UPDATE conversations SET unread_count = (
          SELECT CASE WHEN count(*) < conversations.unread_count THEN count(*) ELSE conversations.unread_count END
            FROM inbound_messages WHERE conversation_id = ${row.id} AND id > ${seen})
        WHERE id = ${row.id}`.execute(db);
    }
    const hide = (m: { withheld: number }) => Number(m.withheld) === 1 && isVolunteer(auth);
    const data = items.rows.map((m) =>
      m.kind === 'inbound'
        ? {
            id: inboundRef(Number(m.id)),
            direction: 'inbound' as const,
            // A survey answer that saves to support_level or a sensitive field: never a volunteer's to read.
            body: hide(m) ? '' : m.body,
            keyword: m.keyword,
            ...(Number(m.withheld) === 1 ? { withheld: true } : {}),
            created_at: m.created_at,
          }
        : {
            id: messageRef(Number(m.id)),
            direction: 'outbound' as const,
            body: m.body,
            status: m.status,
            error_code: m.error_code,
            sent_by: m.sent_by === null ? null : Number(m.sent_by),
            channel_account_id:
              m.channel_account_id === null ? null : accountRef(Number(m.channel_account_id)),
            created_at: m.created_at,
          },
    );
    return pageResult(data, Number(counts.rows[0]?.n ?? 0), page, perPage);
  }

  /**
   * A reply on the conversation's channel, through the account the contact last wrote to (else the default):
   * a send (credits, opt-outs) that quiet hours and silence periods never hold, refused on WhatsApp as free
   * text more than 24 hours after the contact last wrote.
   */
  async reply(auth: AuthContext, ref: string, input: ReplyInput) {
    const { db, messages } = this.deps;
    const row = await this.find(db, auth, ref);
    if ((input.message === undefined) === (input.template_id === undefined))
      throw validationError({ message: ['give either message or template_id.'] });
    if ((await optedOutAddresses(db, auth.workspaceId, row.channel, [row.address])).size > 0)
      throw validationError({
        message: [
          `cannot be sent: ${row.address} opted out of ${row.channel} (a START reply opts them back in).`,
        ],
      });
    const account = await this.replyAccount(db, row);
    if (input.message !== undefined) await refuseFreeText(this.deps, row, account);
    return messages.send(
      auth.workspaceId,
      {
        channel: row.channel,
        to: row.address,
        ...(input.message !== undefined ? { message: input.message } : { template_id: input.template_id }),
        ...(account !== undefined ? { channel_account_id: accountRef(account) } : {}),
      },
      { sentBy: auth.userId, variables: input.variables, conversationId: row.id },
    );
  }

  async update(
    auth: AuthContext,
    actor: AuditActor,
    ref: string,
    input: { status?: 'open' | 'closed' | undefined; assigned_to?: number | null | undefined },
  ) {
    const { db } = this.deps;
    return db.transaction().execute(async (trx) => {
      const row = await this.find(trx, auth, ref);
      if (input.assigned_to !== undefined && isVolunteer(auth))
        throw new AppError('forbidden', 'Only a manager or politician assigns conversations.');
      if (input.assigned_to !== undefined && input.assigned_to !== null) {
        const user = await trx
          .selectFrom('users')
          .select(['id', 'deactivated_at'])
          .where('workspace_id', '=', auth.workspaceId)
          .where('id', '=', input.assigned_to)
          .executeTakeFirst();
        if (!user || user.deactivated_at !== null)
          throw validationError({ assigned_to: ['is not an active member of this workspace.'] });
      }
      const now = nowIso();
      const updated = await trx
        .updateTable('conversations')
        .set({
          ...(input.status !== undefined ? { status: input.status } : {}),
          ...(input.assigned_to !== undefined ? { assigned_to: input.assigned_to } : {}),
          updated_at: now,
        })
        .where('id', '=', row.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      const item = conversationItem(await conversationView(trx, updated));
      const target = { type: 'conversation', id: conversationRef(row.id) };
      if (input.assigned_to !== undefined && input.assigned_to !== row.assigned_to) {
        await recordAudit(trx, {
          workspaceId: auth.workspaceId,
          actor,
          action: 'conversation.assigned',
          target,
          details: { from: row.assigned_to, to: input.assigned_to },
        });
        if (input.assigned_to !== null)
          await emitEvent(trx, auth.workspaceId, 'conversation.assigned', item, now, {
            assignedTo: input.assigned_to,
          });
      }
      if (input.status === 'closed' && row.status !== 'closed')
        await recordAudit(trx, {
          workspaceId: auth.workspaceId,
          actor,
          action: 'conversation.closed',
          target,
        });
      return item;
    });
  }

  /**
   * Links the conversation to a voter of the roll (contract, fifth part): a complaint from a number that is not on
   * the roll belongs to the voter the office knows by EPIC. The voter's empty phone or email takes the contact's
   * address. A politician or manager links any voter; the assignee, a voter of their part of the roll. Audited.
   */
  async linkVoter(auth: AuthContext, actor: AuditActor, ref: string, voterId: number) {
    const { db } = this.deps;
    return db.transaction().execute(async (trx) => {
      // A volunteer finds only the conversations assigned to them (404 for the others): only the assignee links.
      const row = await this.find(trx, auth, ref);
      const scope = await volunteerScope(trx, auth);
      const voter = await filteredVoters(trx, auth.workspaceId, scope ? { scope } : {})
        .where('voters.id', '=', voterId)
        .select(['voters.id', 'voters.name', 'voters.phone', 'voters.email', 'voters.ward', 'voters.booth'])
        .select(['voters.constituency_key'])
        .executeTakeFirst();
      if (!voter) throw validationError({ voter_id: ['is not a voter of this workspace you may reach.'] });
      const column = row.channel === 'email' ? 'email' : 'phone';
      const now = nowIso();
      const fills = voter[column] === null;
      if (fills)
        await trx
          .updateTable('voters')
          .set({ [column]: row.address, updated_at: now })
          .where('workspace_id', '=', auth.workspaceId)
          .where('id', '=', voter.id)
          .execute();
      const updated = await trx
        .updateTable('conversations')
        .set({
          voter_id: voter.id,
          voter_name: voter.name,
          voter_ward: voter.ward,
          voter_booth: voter.booth,
          voter_constituency_key: voter.constituency_key,
          updated_at: now,
        })
        .where('id', '=', row.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      await recordAudit(trx, {
        workspaceId: auth.workspaceId,
        actor,
        action: 'conversation.linked',
        target: { type: 'conversation', id: conversationRef(row.id) },
        details: { voter_id: voter.id, ...(fills ? { [`voter_${column}_set`]: true } : {}) },
      });
      return conversationItem(await conversationView(trx, updated));
    });
  }

  /** A grievance for the contact's voter, described by their last message, linked to the conversation. */
  async grievance(
    auth: AuthContext,
    ref: string,
    input: {
      title?: string | undefined;
      category?: string | undefined;
      priority?: 'low' | 'normal' | 'high' | 'urgent' | undefined;
    },
  ) {
    const { db, grievances } = this.deps;
    const row = await this.find(db, auth, ref);
    if (row.voter_id === null)
      throw validationError({
        conversation: [`${row.address} is not a voter of this workspace: add them first.`],
      });
    const conflict = (id?: number) =>
      new AppError(
        'conflict',
        `This conversation already has an open grievance${id === undefined ? '' : ` (${id})`}.`,
        id === undefined ? undefined : { grievance_id: id },
      );
    if (row.grievance_id !== null) {
      const open = await db
        .selectFrom('grievances')
        .select(['id', 'status'])
        .where('id', '=', row.grievance_id)
        .where('status', 'in', ['open', 'in_progress'])
        .executeTakeFirst();
      if (open) throw conflict(Number(open.id));
    }
    const last = await db
      .selectFrom('inbound_messages')
      .select('body')
      .where('conversation_id', '=', row.id)
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    const description = last?.body ?? row.last_message_preview;
    // One winner: the link moves only from the grievance this request saw (none, or a closed one), in the new
    // grievance's transaction; a concurrent request's link makes this one's update match nothing, and its
    // grievance is undone (PostgreSQL re-checks the condition once the other transaction commits).
    return grievances.create(
      auth.workspaceId,
      {
        title: input.title ?? `Reply on ${row.channel}: ${description.replace(/\s+/g, ' ').slice(0, 80)}`,
        description,
        ...(input.category !== undefined ? { category: input.category } : {}),
        ...(input.priority !== undefined ? { priority: input.priority } : {}),
        voter_id: Number(row.voter_id),
        // The voter is its reporter, with their ward and booth; the conversation's assignee takes it on.
        ...(await this.reporterOf(row)),
        assigned_to: row.assigned_to === null ? null : Number(row.assigned_to),
      },
      async (trx, created) => {
        const moved = await trx
          .updateTable('conversations')
          .set({ grievance_id: created.id, updated_at: nowIso() })
          .where('id', '=', row.id)
          .where((eb) =>
            row.grievance_id === null
              ? eb('grievance_id', 'is', null)
              : eb('grievance_id', '=', row.grievance_id),
          )
          .executeTakeFirst();
        if (Number(moved.numUpdatedRows) === 0) {
          const now = await trx
            .selectFrom('conversations')
            .select('grievance_id')
            .where('id', '=', row.id)
            .executeTakeFirst();
          throw conflict(
            now?.grievance_id === null || now === undefined ? undefined : Number(now.grievance_id),
          );
        }
      },
    );
  }

  /** A conversation's voter as a grievance's reporter: name, phone (the address on a phone channel), place. */
  private async reporterOf(row: ConversationRow) {
    const voter = await this.deps.db
      .selectFrom('voters')
      .select(['name', 'phone', 'ward', 'booth', 'constituency'])
      .where('workspace_id', '=', row.workspace_id)
      .where('id', '=', Number(row.voter_id))
      .executeTakeFirst();
    return {
      reporter_name: voter?.name ?? row.voter_name,
      reporter_phone: voter?.phone ?? (row.channel === 'email' ? null : row.address),
      ward: voter?.ward ?? row.voter_ward,
      booth: voter?.booth ?? row.voter_booth,
      ...(voter?.constituency ? { constituency: voter.constituency } : {}),
    };
  }

  private async replyAccount(db: Executor, row: ConversationRow): Promise<number | undefined> {
    if (row.channel_account_id === null) return undefined;
    const account = await db
      .selectFrom('channel_accounts')
      .select(['id', 'disabled_at'])
      .where('id', '=', row.channel_account_id)
      .where('workspace_id', '=', row.workspace_id)
      .executeTakeFirst();
    return account && account.disabled_at === null ? Number(account.id) : undefined;
  }

  private async find(db: Executor, auth: AuthContext, ref: string): Promise<ConversationRow> {
    const id = parseRef('conv', ref);
    const row =
      id === undefined
        ? undefined
        : await db
            .selectFrom('conversations')
            .selectAll()
            .where('workspace_id', '=', auth.workspaceId)
            .where('id', '=', id)
            .$if(isVolunteer(auth), (q) => q.where('assigned_to', '=', auth.userId))
            .executeTakeFirst();
    if (!row) throw notFound('Conversation');
    return row;
  }
}
