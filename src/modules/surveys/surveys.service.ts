import { cancelQueued } from '../sending/outbox.repository.ts';
import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import type { Database, SurveyResponseRow, SurveyRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { pageResult } from '../../domain.ts';
import { AppError, type FieldErrors, notFound, validationError } from '../../errors.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { countSegmentAddresses, voterIdLimit } from '../campaigns/campaigns.repository.ts';
import { accountForSend } from '../channel-accounts/channel-accounts.service.ts';
import { adapterNamed, adapterOf } from '../../providers/registry.ts';
import { sendsTemplatesOnly } from '../../providers/adapter.ts';
import { findTemplate } from '../templates/templates.repository.ts';
import { providerIdsOf } from '../templates/templates.service.ts';
import { balances, refundCredits, reserveCredits } from '../credits/credits.repository.ts';
import { emitMessageEvents, refund } from '../sending/lifecycle.ts';
import {
  addressProblem,
  creditChannel,
  insufficientCredits,
  recipientAddress,
  unitCost,
} from '../messages/messages.rules.ts';
import { failMessages } from '../sending/outbox.repository.ts';
import { segmentFilters } from '../segments/segments.service.ts';
import { fieldDefs } from '../voters/voter-fields.ts';
import { checkVoterFilters, type VoterFilters } from '../voters/voters.search.ts';
import { endOpenSessions } from './session-end.ts';
import { answersOf, definitionOf, questionMessage } from './survey-sessions.ts';
import {
  checkDefinition,
  framing,
  smsTemplateOf,
  type SurveyChannel,
  surveyChannels,
  type SurveyDefinition,
} from './surveys.rules.ts';
import { type RunCounts, responseView, runView, surveyView } from './surveys.view.ts';
import { accountRef, parseRef, runRef, surveyRef } from '../../refs.ts';

export interface SurveyBody {
  name?: string | undefined;
  status?: 'draft' | 'active' | 'closed' | undefined;
  intro?: unknown;
  outro?: unknown;
  questions?: unknown;
  retries?: unknown;
  triggers?: unknown;
}

export interface RunBody {
  channel: string;
  segment_id?: string | number | undefined;
  recipients?: string[] | undefined;
  filters?: Record<string, unknown> | undefined;
  channel_account_id?: string | undefined;
  scheduled_at?: string | undefined;
}

const RUN_RECIPIENTS_MAX = 10_000;

/** Surveys, their runs and their results (the contract's fourth part, "Surveys: ask voters on every channel"). */
export class SurveysService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      config: Pick<Config, 'defaultCountry' | 'dltEnforce' | 'providers'>;
    },
  ) {}

  async find(db: Executor, workspaceId: number, ref: string): Promise<SurveyRow> {
    const id = parseRef('svy', ref);
    const row =
      id === undefined
        ? undefined
        : await db
            .selectFrom('surveys')
            .selectAll()
            .where('workspace_id', '=', workspaceId)
            .where('id', '=', id)
            .executeTakeFirst();
    if (!row) throw notFound('Survey');
    return row;
  }

  private async checked(
    workspaceId: number,
    raw: SurveyBody,
    errors: FieldErrors,
  ): Promise<SurveyDefinition> {
    const def = checkDefinition(raw, await fieldDefs(this.deps.db, workspaceId), errors);
    // A missed-call trigger names an account of this workspace that carries IVR (its number takes the calls).
    for (const [i, t] of def.triggers.entries()) {
      if (!('missed_call' in t)) continue;
      const id = parseRef('cha', t.channel_account_id);
      const account =
        id === undefined
          ? undefined
          : await this.deps.db
              .selectFrom('channel_accounts')
              .select(['provider'])
              .where('workspace_id', '=', workspaceId)
              .where('id', '=', id)
              .executeTakeFirst();
      if (!account)
        errors[`triggers.${i}.channel_account_id`] = ['is not a channel account of this workspace.'];
      else if (!(adapterOf(account.provider)?.callbacks ?? []).includes('missed_call'))
        errors[`triggers.${i}.channel_account_id`] = [
          'must be an account whose provider reports missed calls (its callback_urls has missed_call: docs/providers.md).',
        ];
    }
    return def;
  }

  /** Keyword triggers of an active survey, kept in survey_keywords (409 when another active survey has one). */
  private async syncKeywords(trx: Executor, row: SurveyRow, def: SurveyDefinition): Promise<void> {
    await trx.deleteFrom('survey_keywords').where('survey_id', '=', row.id).execute();
    if (row.status !== 'active') return;
    const keywords = def.triggers.flatMap((t) => ('keyword' in t ? [t] : []));
    for (const t of keywords) {
      const taken = await trx
        .selectFrom('survey_keywords')
        .select('survey_id')
        .where('workspace_id', '=', row.workspace_id)
        .where('channel', '=', t.channel)
        .where('keyword', '=', t.keyword)
        .executeTakeFirst();
      if (taken)
        throw new AppError(
          'conflict',
          `The keyword "${t.keyword}" on ${t.channel} already starts the active survey ${surveyRef(taken.survey_id)}: close that survey or choose another keyword.`,
          { keyword: t.keyword, survey_id: surveyRef(taken.survey_id) },
        );
      await trx
        .insertInto('survey_keywords')
        .values({ workspace_id: row.workspace_id, channel: t.channel, keyword: t.keyword, survey_id: row.id })
        .execute();
    }
  }

  async create(workspaceId: number, actor: AuditActor, body: SurveyBody) {
    const errors: FieldErrors = {};
    const name = typeof body.name === 'string' ? body.name.trim() : '';
    if (name === '' || name.length > 200) errors.name = ['is required, at most 200 characters.'];
    const status = body.status ?? 'draft';
    if (status === 'closed') errors.status = ['a new survey is draft or active.'];
    const def = await this.checked(workspaceId, body, errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const now = nowIso();
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .insertInto('surveys')
        .values({
          workspace_id: workspaceId,
          name,
          status,
          intro: JSON.stringify(framing(def.intro, def.introTemplates)),
          outro: JSON.stringify(framing(def.outro, def.outroTemplates)),
          questions: JSON.stringify(def.questions),
          retries: def.retries,
          triggers: JSON.stringify(def.triggers),
          created_by: actor.userId,
          created_at: now,
          updated_at: now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await this.syncKeywords(trx, row, def);
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'survey.created',
        target: { type: 'survey', id: surveyRef(row.id) },
        details: { name, status, questions: def.questions.length },
      });
      return surveyView(row);
    });
  }

  async list(workspaceId: number, page: number, perPage: number) {
    const { db } = this.deps;
    const rows = await db
      .selectFrom('surveys')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .orderBy('id', 'desc')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute();
    const total = await db
      .selectFrom('surveys')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    return pageResult(rows.map(surveyView), Number(total.n), page, perPage);
  }

  async get(workspaceId: number, ref: string) {
    return surveyView(await this.find(this.deps.db, workspaceId, ref));
  }

  /**
   * Changes a survey. One that has run keeps its questions (409); any survey can be closed, which ends its open
   * sessions and stops its triggers; a closed survey stays closed.
   */
  async update(workspaceId: number, actor: AuditActor, ref: string, body: SurveyBody) {
    const current = await this.find(this.deps.db, workspaceId, ref);
    const errors: FieldErrors = {};
    if (body.name !== undefined && (body.name.trim() === '' || body.name.length > 200))
      errors.name = ['must be 1 to 200 characters.'];
    if (current.status === 'closed' && body.status !== undefined && body.status !== 'closed')
      throw new AppError(
        'conflict',
        'The survey is closed; a closed survey cannot be opened again: copy it into a new one.',
      );
    const merged: Record<string, unknown> = {
      intro: JSON.parse(current.intro),
      outro: JSON.parse(current.outro),
      questions: JSON.parse(current.questions),
      retries: current.retries,
      triggers: JSON.parse(current.triggers),
    };
    for (const key of ['intro', 'outro', 'questions', 'retries', 'triggers'] as const)
      if (body[key] !== undefined) merged[key] = body[key];
    if (
      current.has_run === 1 &&
      body.questions !== undefined &&
      JSON.stringify(body.questions) !== current.questions
    ) {
      const def = checkDefinition({ ...merged }, await fieldDefs(this.deps.db, workspaceId), {});
      if (JSON.stringify(def.questions) !== current.questions)
        throw new AppError(
          'conflict',
          'The survey has run: its questions cannot change (its results would mix two surveys). Close it and create a new one.',
        );
    }
    const def = await this.checked(workspaceId, merged, errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const now = nowIso();
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('surveys')
        .set({
          ...(body.name !== undefined ? { name: body.name.trim() } : {}),
          ...(body.status !== undefined ? { status: body.status } : {}),
          intro: JSON.stringify(framing(def.intro, def.introTemplates)),
          outro: JSON.stringify(framing(def.outro, def.outroTemplates)),
          questions: JSON.stringify(def.questions),
          retries: def.retries,
          triggers: JSON.stringify(def.triggers),
          updated_at: now,
        })
        .where('id', '=', current.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      await this.syncKeywords(trx, row, def);
      const closing = row.status === 'closed' && current.status !== 'closed';
      if (closing) await this.endOpen(trx, { survey_id: row.id }, now);
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: closing ? 'survey.closed' : 'survey.updated',
        target: { type: 'survey', id: surveyRef(row.id) },
        details: { fields: Object.keys(body), status: row.status },
      });
      return surveyView(row);
    });
  }

  /** Deletes a survey that never ran (one that ran keeps its responses: close it). */
  async remove(workspaceId: number, actor: AuditActor, ref: string) {
    const row = await this.find(this.deps.db, workspaceId, ref);
    if (row.has_run === 1)
      throw new AppError(
        'conflict',
        'The survey has run and keeps its responses: close it instead (PATCH {"status": "closed"}).',
      );
    await this.deps.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('survey_responses').where('survey_id', '=', row.id).execute();
      await trx.deleteFrom('surveys').where('id', '=', row.id).execute();
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'survey.updated',
        target: { type: 'survey', id: surveyRef(row.id) },
        details: { deleted: true },
      });
    });
  }

  /** Ends the open sessions of a survey or run: their queued questions are failed (refunded). */
  private async endOpen(trx: Executor, where: { survey_id?: number; run_id?: number }, now: string) {
    let q = trx.selectFrom('survey_responses').select('id').where('status', '=', 'open');
    if (where.survey_id !== undefined) q = q.where('survey_id', '=', where.survey_id);
    if (where.run_id !== undefined) q = q.where('run_id', '=', where.run_id);
    const ids = (await q.execute()).map((r) => r.id);
    for (let i = 0; i < ids.length; i += 500) {
      const slice = ids.slice(i, i + 500);
      await endOpenSessions(trx, slice, now);
      const queued = await trx
        .selectFrom('messages')
        .select('id')
        .where('survey_response_id', 'in', slice)
        .where('status', '=', 'queued')
        .execute();
      const moved = await failMessages(
        trx,
        queued.map((m) => m.id),
        'The survey ended before this question went out.',
        'cancelled',
        now,
      );
      await refund(trx, moved, now);
      await emitMessageEvents(trx, moved, 'message.failed', now);
    }
  }

  /**
   * Starts a run: checks the channel, account and audience, counts the recipients and reserves the first
   * question's credits for all of them (402 when short), and leaves the rest to the survey loop.
   */
  async createRun(workspaceId: number, actor: AuditActor, ref: string, body: RunBody) {
    const { db, config } = this.deps;
    const survey = await this.find(db, workspaceId, ref);
    if (survey.status === 'closed')
      throw new AppError('conflict', 'The survey is closed: it cannot run again.');
    const def = definitionOf(survey);
    const errors: FieldErrors = {};
    const channel = body.channel as SurveyChannel;
    if (!surveyChannels.includes(channel)) errors.channel = [`must be one of ${surveyChannels.join(', ')}.`];
    const given = ['segment_id', 'recipients', 'filters'].filter(
      (k) => body[k as keyof RunBody] !== undefined,
    );
    if (given.length !== 1) errors.recipients = ['give exactly one of segment_id, recipients or filters.'];
    let scheduledAt: string | undefined;
    if (body.scheduled_at !== undefined) {
      const at = new Date(body.scheduled_at);
      if (Number.isNaN(at.getTime())) errors.scheduled_at = ['must be an ISO 8601 date-time.'];
      else if (at.getTime() <= Date.now()) errors.scheduled_at = ['must be in the future.'];
      else scheduledAt = at.toISOString();
    }
    const recipients: string[] = [];
    if (body.recipients !== undefined && surveyChannels.includes(channel)) {
      if (body.recipients.length === 0 || body.recipients.length > RUN_RECIPIENTS_MAX)
        errors.recipients = [`must hold 1 to ${RUN_RECIPIENTS_MAX} addresses.`];
      else {
        const seen = new Set<string>();
        body.recipients.forEach((raw, i) => {
          const address = recipientAddress(channel, raw, config.defaultCountry);
          if (!address) errors[`recipients.${i}`] = [addressProblem(channel)];
          else if (!seen.has(address)) {
            seen.add(address);
            recipients.push(address);
          }
        });
      }
    }
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const account = await accountForSend(db, workspaceId, channel, body.channel_account_id);
    await this.refuseWhatGatewaysRefuse(workspaceId, def, channel, account?.provider);
    if (channel === 'ivr') {
      const settings = account ? (JSON.parse(account.settings) as Record<string, unknown>) : {};
      const setting = account ? adapterOf(account.provider)?.surveyFlowSetting : undefined;
      if (!account || !setting || typeof settings[setting] !== 'string')
        throw validationError({
          channel_account_id: [
            'an IVR survey goes through an account whose provider runs survey call flows, with that flow in its settings (docs/providers.md, "IVR surveys and missed calls").',
          ],
        });
    }
    let filters: VoterFilters | undefined;
    let segmentId: number | null = null;
    if (body.segment_id !== undefined) {
      segmentId = parseRef('seg', String(body.segment_id)) ?? null;
      if (segmentId === null) throw validationError({ segment_id: ['must be a segment id.'] });
      filters = await segmentFilters(db, workspaceId, segmentId);
    } else if (body.filters !== undefined)
      filters = await checkVoterFilters(db, workspaceId, body.filters, true, 'filters.');
    // The first question's cost in its longest language (an SMS's segments), reserved for every recipient.
    const languages = Object.keys(def.questions[0]!.text);
    let unit = 0;
    for (const language of languages) {
      const m = await questionMessage(
        db,
        workspaceId,
        def,
        def.questions[0]!,
        { channel, language },
        { first: true },
      );
      unit = Math.max(unit, unitCost(channel, m.body));
    }
    const now = nowIso();
    const run = await db.transaction().execute(async (trx) => {
      const limitId = filters ? await voterIdLimit(trx, workspaceId) : null;
      const total = filters
        ? await countSegmentAddresses(trx, workspaceId, channel, filters, limitId!)
        : recipients.length;
      const row = await trx
        .insertInto('survey_runs')
        .values({
          workspace_id: workspaceId,
          survey_id: survey.id,
          channel,
          channel_account_id: account?.id ?? null,
          status: scheduledAt ? 'scheduled' : 'running',
          segment_id: segmentId,
          filters: filters ? JSON.stringify(filters) : null,
          recipients: filters ? null : JSON.stringify(recipients),
          recipients_total: total,
          unit_cost: unit,
          reserved_credits: total * unit,
          voter_id_limit: limitId,
          scheduled_at: scheduledAt ?? null,
          created_by: actor.userId,
          created_at: now,
          started_at: scheduledAt ? null : now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      const credit = creditChannel(channel);
      if (credit && !(await reserveCredits(trx, workspaceId, credit, total * unit, runRef(row.id), now)))
        throw insufficientCredits(credit, total * unit, (await balances(trx, workspaceId))[credit]);
      await trx
        .updateTable('surveys')
        .set({ has_run: 1, status: 'active', updated_at: now })
        .where('id', '=', survey.id)
        .execute();
      if (survey.status !== 'active') await this.syncKeywords(trx, { ...survey, status: 'active' }, def);
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'survey.run',
        target: { type: 'survey', id: surveyRef(survey.id) },
        details: {
          run_id: runRef(row.id),
          channel,
          recipients: total,
          channel_account_id: account ? accountRef(account.id) : null,
          scheduled_at: scheduledAt ?? null,
        },
      });
      return row;
    });
    return runView(run, await runCounts(db, run.id));
  }

  /**
   * A run the channel would refuse is refused before anything is sent (contract, fifth part, "Survey
   * questions"): on a templates-only SMS channel every question (and the outro) needs its SMS template, one the
   * gateway knows (its id there, where it keeps its own; a DLT template id and sender id under DLT_ENFORCE); on
   * a templates-only WhatsApp channel the first question needs its approved WhatsApp template. 422 lists each that lacks one.
   */
  private async refuseWhatGatewaysRefuse(
    workspaceId: number,
    def: SurveyDefinition,
    channel: SurveyChannel,
    accountProvider: string | undefined,
  ): Promise<void> {
    const { db, config } = this.deps;
    const provider = accountProvider ?? config.providers[channel];
    const adapter = adapterNamed(provider);
    if (channel === 'ivr' || !sendsTemplatesOnly(adapter, channel, config.dltEnforce)) return;
    const errors: FieldErrors = {};
    const keeps = adapter.templates !== undefined;
    const check = async (field: string, ref: string | undefined, what: string) => {
      const id = ref === undefined ? undefined : parseRef('tpl', ref);
      const template = id === undefined ? undefined : await findTemplate(db, workspaceId, id);
      const problem =
        ref === undefined
          ? channel === 'sms'
            ? `is required: ${adapter.label} sends SMS only as DLT-registered templates, and ${what} has no SMS template.`
            : `is required: WhatsApp opens a conversation only with an approved template, and ${what} has no WhatsApp template.`
          : !template || template.channel !== channel
            ? `is ${ref}, which is not a ${channel} template of this workspace.`
            : keeps && providerIdsOf(template)[provider] === undefined
              ? `is ${ref}, which has no provider_template_ids.${provider}: ${adapter.label} does not know it.`
              : channel === 'sms' && config.dltEnforce && (!template.dlt_template_id || !template.sender_id)
                ? `is ${ref}, which has no dlt_template_id and sender_id: DLT_ENFORCE needs a template registered with both.`
                : undefined;
      if (problem) errors[field] = [problem];
    };
    if (channel === 'sms') {
      for (const [i, q] of def.questions.entries())
        await check(`questions.${i}.templates.sms`, smsTemplateOf(q), `question ${i + 1} (${q.key})`);
      if (Object.keys(def.outro).length > 0)
        await check('outro.templates.sms', def.outroTemplates.sms, 'the outro');
    } else await check('questions.0.templates.whatsapp', def.questions[0]!.templates?.whatsapp, 'question 1');
    if (Object.keys(errors).length > 0) throw validationError(errors);
  }

  async runs(workspaceId: number, ref: string, page: number, perPage: number) {
    const survey = await this.find(this.deps.db, workspaceId, ref);
    const rows = await this.deps.db
      .selectFrom('survey_runs')
      .selectAll()
      .where('survey_id', '=', survey.id)
      .orderBy('id', 'desc')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute();
    const total = await this.deps.db
      .selectFrom('survey_runs')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('survey_id', '=', survey.id)
      .executeTakeFirstOrThrow();
    const items = [];
    for (const row of rows) items.push(runView(row, await runCounts(this.deps.db, row.id)));
    return pageResult(items, Number(total.n), page, perPage);
  }

  private async findRun(db: Executor, workspaceId: number, ref: string) {
    const id = parseRef('srun', ref);
    const row =
      id === undefined
        ? undefined
        : await db
            .selectFrom('survey_runs')
            .selectAll()
            .where('workspace_id', '=', workspaceId)
            .where('id', '=', id)
            .executeTakeFirst();
    if (!row) throw notFound('Survey run');
    return row;
  }

  async run(workspaceId: number, ref: string) {
    const row = await this.findRun(this.deps.db, workspaceId, ref);
    return runView(row, await runCounts(this.deps.db, row.id));
  }

  /** Cancels a scheduled or running run: no one else is asked, open sessions end, unspent credits go back. */
  async cancelRun(workspaceId: number, actor: AuditActor, ref: string) {
    const { db } = this.deps;
    const current = await this.findRun(db, workspaceId, ref);
    const now = nowIso();
    let inFlight = 0;
    const row = await db.transaction().execute(async (trx) => {
      const moved = await trx
        .updateTable('survey_runs')
        .set({ status: 'cancelled', completed_at: now, lease_until: null })
        .where('id', '=', current.id)
        .where('status', 'in', ['scheduled', 'running'])
        .returningAll()
        .executeTakeFirst();
      if (!moved)
        throw new AppError(
          'conflict',
          `The run is ${current.status}: only a scheduled or running run can be cancelled.`,
        );
      // Its questions not yet handed to the provider stop (those a worker claimed included), refunded.
      const stopped = await cancelQueued(
        trx,
        workspaceId,
        { runId: moved.id },
        'The survey run was cancelled before this question went out.',
        now,
      );
      inFlight = stopped.inFlight;
      await refund(trx, stopped.stopped, now);
      await emitMessageEvents(trx, stopped.stopped, 'message.failed', now);
      await this.endOpen(trx, { run_id: moved.id }, now);
      const credit = creditChannel(moved.channel as SurveyChannel);
      if (credit && moved.reserved_credits > 0) {
        await refundCredits(trx, workspaceId, credit, moved.reserved_credits, runRef(moved.id), now);
        await trx
          .updateTable('survey_runs')
          .set({ reserved_credits: 0 })
          .where('id', '=', moved.id)
          .execute();
      }
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'survey.run',
        target: { type: 'survey', id: surveyRef(moved.survey_id) },
        details: { run_id: runRef(moved.id), cancelled: true },
      });
      return moved;
    });
    return { ...runView(row, await runCounts(db, row.id)), in_flight: inFlight };
  }

  /** A page of a survey's responses, newest first. */
  async responses(
    workspaceId: number,
    ref: string,
    query: {
      page: number;
      per_page: number;
      run_id?: string | undefined;
      status?: SurveyResponseRow['status'] | undefined;
    },
  ) {
    const { db } = this.deps;
    const survey = await this.find(db, workspaceId, ref);
    const runId = query.run_id !== undefined ? parseRef('srun', query.run_id) : undefined;
    if (query.run_id !== undefined && runId === undefined)
      throw validationError({ run_id: ['must be a run id such as srun_3.'] });
    let base = db.selectFrom('survey_responses').where('survey_id', '=', survey.id);
    if (runId !== undefined) base = base.where('run_id', '=', runId);
    if (query.status !== undefined) base = base.where('status', '=', query.status);
    const rows = await base
      .selectAll()
      .orderBy('id', 'desc')
      .limit(query.per_page)
      .offset((query.page - 1) * query.per_page)
      .execute();
    const total = await base.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    const answers = await answersOf(
      db,
      rows.map((r) => r.id),
    );
    return pageResult(
      rows.map((r) => responseView(r, answers.get(r.id) ?? {})),
      Number(total.n),
      query.page,
      query.per_page,
    );
  }
}

/** A run's sessions by status, counted from the index on (run_id, status). */
export async function runCounts(db: Executor, runId: number): Promise<RunCounts> {
  const rows = await db
    .selectFrom('survey_responses')
    .select(['status', 'opted_out', (eb) => eb.fn.countAll().as('n')])
    .where('run_id', '=', runId)
    .groupBy(['status', 'opted_out'])
    .execute();
  const counts: RunCounts = {
    started: 0,
    completed: 0,
    partial: 0,
    no_answer: 0,
    opted_out: 0,
    open: 0,
    failed: 0,
  };
  for (const r of rows) {
    const n = Number(r.n);
    counts.started += n;
    if (r.opted_out === 1) counts.opted_out += n;
    if (r.status in counts) counts[r.status as keyof RunCounts] += n;
  }
  return counts;
}
