import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, Database, SurveyRunRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { pageResult } from '../../domain.ts';
import { AppError, type FieldErrors, notFound, validationError } from '../../errors.ts';
import { adapterNamed, adapterOf } from '../../providers/registry.ts';
import { sendsTemplatesOnly } from '../../providers/adapter.ts';
import { accountRef, parseRef, runRef, surveyRef } from '../../refs.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { countSegmentAddresses, voterIdLimit } from '../campaigns/campaigns.repository.ts';
import { accountForSend } from '../channel-accounts/channel-accounts.service.ts';
import { balances, refundCredits, reserveCredits } from '../credits/credits.repository.ts';
import {
  addressProblem,
  creditChannel,
  insufficientCredits,
  recipientAddress,
  unitCost,
} from '../messages/messages.rules.ts';
import { cancelQueued } from '../sending/outbox.repository.ts';
import { emitMessageEvents, refund } from '../sending/lifecycle.ts';
import { segmentFilters } from '../segments/segments.service.ts';
import { findTemplate } from '../templates/templates.repository.ts';
import { providerIdsOf } from '../templates/templates.service.ts';
import { checkVoterFilters, type VoterFilters } from '../voters/voters.search.ts';
import { definitionOf, questionMessage } from './survey-sessions.ts';
import {
  cancelRunRow,
  findRun,
  insertRun,
  runPage,
  runStatusCounts,
  updateRun,
  updateSurvey,
} from './surveys.repository.ts';
import { smsTemplateOf, type SurveyChannel, surveyChannels, type SurveyDefinition } from './surveys.rules.ts';
import { endOpen, type SurveysService } from './surveys.service.ts';
import { type RunCounts, runView } from './surveys.view.ts';

export interface RunBody {
  channel: string;
  segment_id?: string | number | undefined;
  recipients?: string[] | undefined;
  filters?: Record<string, unknown> | undefined;
  channel_account_id?: string | undefined;
  scheduled_at?: string | undefined;
}

const RUN_RECIPIENTS_MAX = 10_000;

/**
 * A survey's runs: starting one (refused where the gateway would refuse it), reading and cancelling them. The
 * worker's side of a run (opening its sessions, ending it) is survey-runs.ts.
 */
export class SurveyRunsService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      config: Pick<Config, 'defaultCountry' | 'dltEnforce' | 'providers'>;
      surveys: SurveysService;
    },
  ) {}

  /**
   * Starts a run: checks the channel, account and audience, counts the recipients and reserves the first
   * question's credits for all of them (402 when short), and leaves the rest to the survey loop.
   */
  async createRun(workspaceId: number, actor: AuditActor, ref: string, body: RunBody) {
    const { db, config } = this.deps;
    const survey = await this.deps.surveys.find(db, workspaceId, ref);
    if (survey.status === 'closed')
      throw new AppError('conflict', 'The survey is closed: it cannot run again.');
    const def = definitionOf(survey);
    const { channel, recipients, scheduledAt } = checkRunBody(body, config.defaultCountry);
    const account = await accountForSend(db, workspaceId, channel, body.channel_account_id);
    await this.refuseWhatGatewaysRefuse(workspaceId, def, channel, account?.provider);
    if (channel === 'ivr') refuseWithoutFlow(account);
    const { filters, segmentId } = await this.audience(workspaceId, body);
    // The first question's cost in its longest language (an SMS's segments), reserved for every recipient.
    let unit = 0;
    for (const language of Object.keys(def.questions[0]!.text)) {
      const q = def.questions[0]!;
      const m = await questionMessage(db, workspaceId, def, q, { channel, language }, { first: true });
      unit = Math.max(unit, unitCost(channel, m.body));
    }
    const now = nowIso();
    const run = await db.transaction().execute(async (trx) => {
      const limitId = filters ? await voterIdLimit(trx, workspaceId) : null;
      const total = filters
        ? await countSegmentAddresses(trx, workspaceId, channel, filters, limitId!)
        : recipients.length;
      const row = await insertRun(trx, {
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
      });
      const credit = creditChannel(channel);
      if (credit && !(await reserveCredits(trx, workspaceId, credit, total * unit, runRef(row.id), now)))
        throw insufficientCredits(credit, total * unit, (await balances(trx, workspaceId))[credit]);
      await updateSurvey(trx, workspaceId, survey.id, { has_run: 1, status: 'active', updated_at: now });
      if (survey.status !== 'active')
        await this.deps.surveys.syncKeywords(trx, { ...survey, status: 'active' }, def);
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
    return runView(run, await runCounts(db, run));
  }

  /** A run's audience given as a segment or as filters (recipients are checkRunBody's). */
  private async audience(
    workspaceId: number,
    body: RunBody,
  ): Promise<{ filters: VoterFilters | undefined; segmentId: number | null }> {
    const { db } = this.deps;
    if (body.segment_id !== undefined) {
      const segmentId = parseRef('seg', String(body.segment_id));
      if (segmentId === undefined) throw validationError({ segment_id: ['must be a segment id.'] });
      return { filters: await segmentFilters(db, workspaceId, segmentId), segmentId };
    }
    if (body.filters !== undefined)
      return {
        filters: await checkVoterFilters(db, workspaceId, body.filters, true, 'filters.'),
        segmentId: null,
      };
    return { filters: undefined, segmentId: null };
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
    const survey = await this.deps.surveys.find(this.deps.db, workspaceId, ref);
    const { rows, total } = await runPage(this.deps.db, workspaceId, survey.id, page, perPage);
    const items = [];
    for (const row of rows) items.push(runView(row, await runCounts(this.deps.db, row)));
    return pageResult(items, total, page, perPage);
  }

  private async findRun(db: Executor, workspaceId: number, ref: string) {
    const id = parseRef('srun', ref);
    const row = id === undefined ? undefined : await findRun(db, workspaceId, id);
    if (!row) throw notFound('Survey run');
    return row;
  }

  async run(workspaceId: number, ref: string) {
    const row = await this.findRun(this.deps.db, workspaceId, ref);
    return runView(row, await runCounts(this.deps.db, row));
  }

  /** Cancels a scheduled or running run: no one else is asked, open sessions end, unspent credits go back. */
  async cancelRun(workspaceId: number, actor: AuditActor, ref: string) {
    const { db } = this.deps;
    const current = await this.findRun(db, workspaceId, ref);
    const now = nowIso();
    let inFlight = 0;
    const row = await db.transaction().execute(async (trx) => {
      const moved = await cancelRunRow(trx, workspaceId, current.id, now);
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
      await endOpen(trx, workspaceId, { runId: moved.id }, now);
      const credit = creditChannel(moved.channel as SurveyChannel);
      if (credit && moved.reserved_credits > 0) {
        await refundCredits(trx, workspaceId, credit, moved.reserved_credits, runRef(moved.id), now);
        await updateRun(trx, workspaceId, moved.id, { reserved_credits: 0 });
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
    return { ...runView(row, await runCounts(db, row)), in_flight: inFlight };
  }
}

/** A run's sessions by status, counted from the index on (run_id, status). */
export async function runCounts(
  db: Executor,
  run: Pick<SurveyRunRow, 'id' | 'workspace_id'>,
): Promise<RunCounts> {
  const rows = await runStatusCounts(db, run.workspace_id, run.id);
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

/**
 * A run's body checked (422 with every problem): the channel, exactly one audience, a future scheduled_at, and
 * the recipients given read as addresses of the channel (repeats dropped).
 */
function checkRunBody(
  body: RunBody,
  defaultCountry: string,
): { channel: SurveyChannel; recipients: string[]; scheduledAt: string | undefined } {
  const errors: FieldErrors = {};
  const channel = body.channel as SurveyChannel;
  if (!surveyChannels.includes(channel)) errors.channel = [`must be one of ${surveyChannels.join(', ')}.`];
  const given = ['segment_id', 'recipients', 'filters'].filter((k) => body[k as keyof RunBody] !== undefined);
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
        const address = recipientAddress(channel, raw, defaultCountry);
        if (!address) errors[`recipients.${i}`] = [addressProblem(channel)];
        else if (!seen.has(address)) {
          seen.add(address);
          recipients.push(address);
        }
      });
    }
  }
  if (Object.keys(errors).length > 0) throw validationError(errors);
  return { channel, recipients, scheduledAt };
}

/** An IVR run goes through an account whose provider runs survey call flows, with that flow in its settings. */
function refuseWithoutFlow(account: ChannelAccountRow | undefined): void {
  const settings = account ? (JSON.parse(account.settings) as Record<string, unknown>) : {};
  const setting = account ? adapterOf(account.provider)?.surveyFlowSetting : undefined;
  if (!account || !setting || typeof settings[setting] !== 'string')
    throw validationError({
      channel_account_id: [
        'an IVR survey goes through an account whose provider runs survey call flows, with that flow in its settings (docs/providers.md, "IVR surveys and missed calls").',
      ],
    });
}
